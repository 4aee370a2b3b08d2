//! How a table keys its jobs (`JobKeys`) is the table's, recorded by its first process and
//! checked by every process at start (`sked_aws::check_table_layout`), on a real moto server:
//! a process set otherwise is refused with both settings named, and a table used before the
//! record existed (jobs keyed per job, no record) is not taken for a sharded one. A table's
//! jobs move from per-job keys to tenant shards with `sked_aws::migrate_to_tenant_shards`.

mod common;

use serde_json::json;
use sked_aws::dynamo::codec::key;
use sked_aws::dynamo::keys::{GSI2_PK, TTL, job_item_key};
use sked_aws::{AwsClients, AwsConfig, DynamoStore, JobKeys};
use sked_core::ids::{JobId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ports::{JobFilter, JobStore, JobStoreExt, PageRequest, RunFilter, SystemClock};
use sked_core::run::{Run, Trigger};
use sked_core::timestamp::parse;
use std::sync::Arc;

fn with_keys(config: &AwsConfig, keys: JobKeys) -> AwsConfig {
    AwsConfig {
        job_keys: keys,
        ..config.clone()
    }
}

/// A one-shot of `tenant` with id `id`, ACTIVE, written by a store on `config`.
async fn create(clients: &AwsClients, config: &AwsConfig, tenant: &str, id: &str) {
    let schedule = json!({"at": "2026-03-01T01:00:00Z"});
    create_as(clients, config, (tenant, id), schedule, JobState::Active).await;
}

/// A job of `tenant` with id `id` on `schedule` in `state`, written by a store on `config`.
async fn create_as(
    clients: &AwsClients,
    config: &AwsConfig,
    (tenant, id): (&str, &str),
    schedule: serde_json::Value,
    state: JobState,
) -> Job {
    let store = DynamoStore::new(clients.dynamodb.clone(), config, Arc::new(SystemClock));
    let now = parse("2026-03-01T00:00:00Z").unwrap();
    let spec = serde_json::from_value(json!({"schedule": schedule, "task": {"command": {"argv": ["true"]}}})).unwrap();
    let job = Job {
        tenant: TenantId::from(tenant),
        id: JobId::from(id),
        spec,
        state,
        next_fire_at: Some(parse("2026-03-01T01:00:00Z").unwrap()),
        version: 1,
        created_at: now,
        updated_at: now,
    };
    store.create_jobs(std::slice::from_ref(&job), None).await.unwrap();
    job
}

#[tokio::test]
async fn the_first_process_records_the_tables_job_keys_and_a_process_set_otherwise_is_refused() {
    let (clients, config) = common::fresh_table().await;
    let sharded = with_keys(&config, JobKeys::TenantShards);
    sked_aws::check_table_layout(&clients, &sharded).await.unwrap();
    sked_aws::check_table_layout(&clients, &sharded)
        .await
        .expect("checked again: the same");
    let refused = sked_aws::check_table_layout(&clients, &with_keys(&config, JobKeys::PerJob))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("keys its jobs tenant-shards") && refused.contains("set to per-job"),
        "{refused}"
    );
    assert!(refused.contains("SKED_JOB_KEYS"), "{refused}");
}

#[tokio::test]
async fn a_table_holding_jobs_keyed_per_job_without_a_record_is_not_taken_for_sharded() {
    let (clients, config) = common::fresh_table().await;
    create(&clients, &config, "t", "old").await;
    let refused = sked_aws::check_table_layout(&clients, &with_keys(&config, JobKeys::TenantShards))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("keys its jobs per-job"), "{refused}");
    sked_aws::check_table_layout(&clients, &config)
        .await
        .expect("its own layout: recorded");
}

/// A job keyed by tenant shards whose id is `JOB` has the sort key a job item keyed per job
/// has: a table holding it and no record is still taken for what it is.
#[tokio::test]
async fn a_job_named_job_keyed_by_tenant_shards_is_not_taken_for_one_keyed_per_job() {
    let (clients, config) = common::fresh_table().await;
    let sharded = with_keys(&config, JobKeys::TenantShards);
    create(&clients, &sharded, "t", "JOB").await;
    sked_aws::check_table_layout(&clients, &sharded).await.unwrap();
}

/// Jobs keyed by tenant shards are listed by the table's own keys, in id order across the
/// shards, page by page, each tenant its own.
#[tokio::test]
async fn jobs_keyed_by_tenant_shards_are_listed_in_id_order_page_by_page() {
    let (clients, config) = common::fresh_table().await;
    let sharded = with_keys(&config, JobKeys::TenantShards);
    sked_aws::check_table_layout(&clients, &sharded).await.unwrap();
    let ids: Vec<String> = (0..40).map(|i| format!("job-{i:02}")).collect();
    for id in &ids {
        create(&clients, &sharded, "t", id).await;
    }
    create(&clients, &sharded, "other", "job-00").await;
    let store = DynamoStore::new(clients.dynamodb.clone(), &sharded, Arc::new(SystemClock));
    let (mut listed, mut cursor) = (Vec::new(), None);
    loop {
        let page = store
            .list_jobs(
                &TenantId::from("t"),
                &JobFilter::default(),
                &PageRequest {
                    limit: 7,
                    cursor: cursor.clone(),
                },
            )
            .await
            .unwrap();
        listed.extend(page.items.into_iter().map(|j| j.id.to_string()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(listed, ids);
}

/// A table made keyed per job moves to tenant shards: every job is read and listed as before
/// by a store keyed by tenant shards, its runs where they were, a one-shot's item with a TTL
/// (a paused job's and a recurring one's without); the table then refuses per-job processes,
/// and a second run moves nothing. A job whose id is `JOB` is moved once, not taken for one
/// still keyed per job.
#[tokio::test]
async fn a_table_keyed_per_job_moves_to_tenant_shards() {
    let (clients, config) = common::fresh_table().await;
    sked_aws::check_table_layout(&clients, &config).await.unwrap();
    let at = json!({"at": "2026-03-01T01:00:00Z"});
    let jobs = [
        create_as(&clients, &config, ("t", "once"), at.clone(), JobState::Active).await,
        // Keyed by tenant shards its sort key is `JOB`, as a job item's keyed per job is.
        create_as(&clients, &config, ("t", "JOB"), at.clone(), JobState::Active).await,
        create_as(&clients, &config, ("t", "paused"), at, JobState::Paused).await,
        create_as(
            &clients,
            &config,
            ("u", "hourly"),
            json!({"cron": "0 * * * *"}),
            JobState::Active,
        )
        .await,
    ];
    let per_job = DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
    let when = parse("2026-03-01T01:00:00Z").unwrap();
    let run = Run::new_pending("t".into(), "once".into(), when, Trigger::Manual, 5, when, 1, when);
    assert!(per_job.insert_run(&run).await.unwrap());

    let now = parse("2026-03-01T00:30:00Z").unwrap();
    let moved = sked_aws::migrate_to_tenant_shards(&clients.dynamodb, &config, now)
        .await
        .unwrap();
    assert_eq!(moved, 4);
    let sharded = with_keys(&config, JobKeys::TenantShards);
    sked_aws::check_table_layout(&clients, &sharded).await.unwrap();
    assert!(sked_aws::check_table_layout(&clients, &config).await.is_err());
    let store = DynamoStore::new(clients.dynamodb.clone(), &sharded, Arc::new(SystemClock));
    for job in &jobs {
        assert_eq!(store.get_job(&job.tenant, &job.id).await.unwrap().as_ref(), Some(job));
    }
    let listed = store
        .list_jobs(
            &TenantId::from("t"),
            &JobFilter::default(),
            &PageRequest {
                limit: 10,
                cursor: None,
            },
        )
        .await
        .unwrap();
    let ids: Vec<&str> = listed.items.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["JOB", "once", "paused"]);
    let runs = store
        .list_runs(
            &TenantId::from("t"),
            &RunFilter {
                job_id: Some(JobId::from("once")),
                ..RunFilter::default()
            },
            &PageRequest {
                limit: 10,
                cursor: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(runs.items, vec![run]);
    let ttl_of = async |tenant: &str, id: &str| {
        let (pk, sk) = job_item_key(JobKeys::TenantShards, tenant, id);
        let item = common::stored_item(&clients.dynamodb, &config.table, key(pk, sk))
            .await
            .unwrap();
        assert!(!item.contains_key(GSI2_PK), "no `list` entry");
        item.contains_key(TTL)
    };
    assert!(ttl_of("t", "once").await);
    assert!(!ttl_of("t", "paused").await);
    assert!(!ttl_of("u", "hourly").await);
    let again = sked_aws::migrate_to_tenant_shards(&clients.dynamodb, &config, now)
        .await
        .unwrap();
    assert_eq!(again, 0);
}
