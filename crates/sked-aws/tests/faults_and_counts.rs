//! The request counter and the fault-injecting HTTP client on moto: every attempt of a call
//! is counted (retries included); an injected throttling error is retried by the SDK and,
//! once its attempts are used up, reaches sked as a transient error; a lost answer hides a
//! write that happened.

mod common;

use sked_aws::{AwsConfig, Faults, RequestCounter, SweepLease, connect};
use sked_core::ports::{Clock, StoreError, SystemClock};
use std::sync::Arc;

fn in_secs(secs: i64) -> sked_core::Timestamp {
    SystemClock.now() + chrono::Duration::seconds(secs)
}

/// A lease over a table that exists, reached through clients built from `config` plus
/// `faults` and a fresh counter.
async fn lease_with(config: &AwsConfig, faults: Option<Faults>) -> (SweepLease, RequestCounter, sked_aws::AwsClients) {
    let counter = RequestCounter::new();
    let config = AwsConfig {
        faults,
        request_counter: Some(counter.clone()),
        ..config.clone()
    };
    let clients = connect(&config).await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    (
        SweepLease::new(clients.dynamodb.clone(), &config, clock),
        counter,
        clients,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_counted_per_operation_with_capacity_estimates() {
    let (_, config) = common::fresh_table().await;
    let (lease, counter, clients) = lease_with(&config, None).await;
    assert!(clients.faults.is_none());

    assert!(lease.acquire(0, "a", in_secs(60)).await.unwrap());
    assert!(!lease.acquire(0, "b", in_secs(60)).await.unwrap());
    lease.release(0, "a").await.unwrap();

    assert_eq!(counter.of("DynamoDB", "PutItem"), 2);
    assert_eq!(counter.of("DynamoDB", "DeleteItem"), 1);
    assert_eq!(counter.total(), 3, "{:?}", counter.snapshot());
    let capacity = counter.dynamodb_capacity();
    assert_eq!((capacity.read_units, capacity.write_units), (0.0, 3.0));
    counter.reset();
    assert_eq!(counter.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_call_is_retried_by_the_sdk_and_then_reported_transient() {
    let (_, config) = common::fresh_table().await;
    let (lease, counter, clients) = lease_with(&config, Some(Faults::throttle(1.0, 1))).await;

    let err = lease.acquire(0, "a", in_secs(60)).await.unwrap_err();
    assert!(matches!(err, StoreError::Transient(_)), "{err:?}");
    let text = format!("{:?}", err);
    assert!(text.contains("ProvisionedThroughputExceededException"), "{text}");
    // The SDK's standard retry: three attempts, each counted, none sent.
    let injected = clients.faults.as_ref().unwrap();
    assert_eq!(counter.of("DynamoDB", "PutItem"), 3, "{:?}", counter.snapshot());
    assert_eq!(injected.throttled(), 3);
    assert_eq!(injected.passed(), 0);

    // Nothing was written: a clean client takes the lease at once.
    let (clean, _, _) = lease_with(&config, None).await;
    assert!(clean.acquire(0, "b", in_secs(60)).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_hides_a_write_that_happened() {
    let (_, config) = common::fresh_table().await;
    let faults = Faults {
        throttle: 0.0,
        lost_answer: 1.0,
        seed: 1,
        ..Faults::default()
    };
    let (lease, counter, clients) = lease_with(&config, Some(faults)).await;

    // Every attempt is sent and its answer replaced by a 500: the SDK retries (the same
    // owner renews, so every retry succeeds on the server), and the caller sees an error.
    let err = lease.acquire(0, "a", in_secs(60)).await.unwrap_err();
    assert!(matches!(err, StoreError::Transient(_)), "{err:?}");
    assert_eq!(clients.faults.as_ref().unwrap().lost_answers(), 3);
    assert_eq!(counter.of("DynamoDB", "PutItem"), 3);

    // The write happened: another owner cannot take the lease.
    let (clean, _, _) = lease_with(&config, None).await;
    assert!(!clean.acquire(0, "b", in_secs(60)).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_s_injected_throttling_parses_as_its_own_code_and_is_retried() {
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    let counter = RequestCounter::new();
    let config = AwsConfig {
        faults: Some(Faults::throttle(1.0, 1)),
        request_counter: Some(counter.clone()),
        ..common::fresh_config()
    };
    let clients = connect(&config).await;

    let sqs = clients.sqs.list_queues().send().await.unwrap_err();
    let s3 = clients.s3.list_buckets().send().await.unwrap_err();
    let logs = clients.logs.describe_log_groups().send().await.unwrap_err();
    let ecs = clients.ecs.list_clusters().send().await.unwrap_err();
    let dynamodb = clients.dynamodb.list_tables().send().await.unwrap_err();
    assert_eq!(sqs.code(), Some("RequestThrottled"), "{sqs:?}");
    assert_eq!(s3.code(), Some("SlowDown"), "{s3:?}");
    assert_eq!(logs.code(), Some("ThrottlingException"), "{logs:?}");
    assert_eq!(ecs.code(), Some("ThrottlingException"), "{ecs:?}");
    assert_eq!(
        dynamodb.code(),
        Some("ProvisionedThroughputExceededException"),
        "{dynamodb:?}"
    );
    // Each was classified as retryable: three attempts apiece, none sent.
    let counts = counter.snapshot();
    assert_eq!(counts.len(), 5, "{counts:?}");
    assert!(counts.values().all(|n| *n == 3), "{counts:?}");
    assert_eq!(clients.faults.as_ref().unwrap().throttled(), 15);
}

/// A listing reads its page's items with BatchGetItem. Keys DynamoDB leaves unprocessed are
/// asked again; keys still unprocessed after every try make the listing a transient error
/// (retried by the caller), never a page with jobs silently missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_left_unprocessed_are_asked_again_and_never_dropped_from_a_listing() {
    use sked_core::ports::{JobFilter, JobStore, PageRequest};
    let (clients, config) = common::fresh_table().await;
    let clean = sked_aws::DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
    let jobs: Vec<_> = (0..12)
        .map(|i| sked_testkit::contract::fixtures::job("t1", &format!("j{i:02}")))
        .collect();
    clean.create_jobs(&jobs, None).await.unwrap();
    let tenant = jobs[0].tenant.clone();
    let page = PageRequest {
        cursor: None,
        limit: 50,
    };
    let listed = |store: sked_aws::DynamoStore| {
        let (tenant, page) = (tenant.clone(), page.clone());
        async move { store.list_jobs(&tenant, &JobFilter::default(), &page).await }
    };
    let faulty = |unprocessed_keys: f64| {
        let config = AwsConfig {
            faults: Some(Faults {
                unprocessed_keys,
                seed: 3,
                ..Faults::default()
            }),
            ..config.clone()
        };
        async move {
            let clients = connect(&config).await;
            let counts = clients.faults.clone().expect("faults configured");
            let store = sked_aws::DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
            (store, counts)
        }
    };

    // Half the batch reads come back with every key unprocessed: asked again, all listed.
    let (store, counts) = faulty(0.5).await;
    let got = listed(store).await.unwrap();
    assert_eq!(got.items.len(), 12, "every job listed");
    assert!(counts.unprocessed() > 0, "the fault was drawn");

    // Every batch read comes back unprocessed: the listing fails, transient, naming it.
    let (store, counts) = faulty(1.0).await;
    let err = listed(store).await.unwrap_err();
    assert!(matches!(err, StoreError::Transient(_)), "{err:?}");
    assert!(format!("{err}").contains("unprocessed"), "{err}");
    assert_eq!(counts.unprocessed(), 8, "asked BATCH_GET_TRIES times");
}
