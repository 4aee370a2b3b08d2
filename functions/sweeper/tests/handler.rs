//! The sweeper function driven by `events/eventbridge-scheduler.json`, against moto: a due job
//! is fired once and its run lands on the queue of its priority; overlapping invocations
//! create each run once.

use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use sked_aws::testing::fresh_resources;
use sked_aws::{SqsQueue, SweepLease};
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId};
use sked_core::ports::{Clock, DispatchQueue, PageRequest, RunFilter, SystemClock};
use sked_core::service::jobs::NewJob;
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp;
use sked_fn_sweeper::{SWEEP_LEASE, SweepOutcome, SweeperFn};
use std::sync::Arc;

const TICK: &str = include_str!("../../../events/eventbridge-scheduler.json");

struct Fixture {
    ports: Ports,
    lease: SweepLease,
    queue: SqsQueue,
    handler: Arc<SweeperFn>,
}

async fn fixture() -> Fixture {
    let (clients, aws) = fresh_resources().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ports = sked_aws::ports(&clients, &aws, clock.clone());
    let lease = SweepLease::new(clients.dynamodb.clone(), &aws, clock.clone());
    let handler = Arc::new(SweeperFn::new(ports.clone(), lease.clone(), Dur::secs(600)));
    Fixture {
        queue: SqsQueue::new(clients.sqs.clone(), &aws, clock),
        ports,
        lease,
        handler,
    }
}

impl Fixture {
    /// Creates a one-shot job of tenant `acme` due at `at`, through core (the sweeper is what
    /// is tested, so nothing fires it directly).
    async fn create(&self, id: &str, at: &str, priority: u8) {
        let sked = Sked::new(self.ports.clone(), SkedConfig::default(), SweepSignal::default());
        let spec = json!({"schedule": {"at": at}, "task": {"command": {"argv": ["true"]}}, "priority": priority});
        let new = NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(spec).unwrap(),
        };
        sked.create_job(&TenantId::from("acme"), new, None).await.unwrap();
    }

    async fn tick(&self, request_id: &str) -> SweepOutcome {
        let payload: Value = serde_json::from_str(TICK).unwrap();
        let mut context = Context::default();
        context.request_id = request_id.into();
        self.handler
            .handle(LambdaEvent::new(payload, context))
            .await
            .expect("the sweep succeeds")
    }

    async fn runs_of(&self, job: &str) -> usize {
        let filter = RunFilter {
            job_id: Some(JobId::from(job)),
            ..RunFilter::default()
        };
        let page = PageRequest {
            cursor: None,
            limit: 100,
        };
        let runs = self
            .ports
            .store
            .list_runs(&TenantId::from("acme"), &filter, &page)
            .await;
        runs.unwrap().items.len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_fires_the_due_job_onto_the_queue_of_its_priority() {
    let f = fixture().await;
    f.create("invoice-export", "2020-01-01T00:00:00Z", 8).await;
    let far = timestamp::format(&(SystemClock.now() + chrono::Duration::hours(2)));
    f.create("later", &far, 1).await;

    let outcome = f.tick("tick-1").await;
    assert_eq!(outcome.fired, 1, "{outcome:?}");
    assert!(!outcome.lease_held_elsewhere);

    let got = f.queue.receive(10, Dur::secs(30), Dur::secs(5)).await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0].dispatch.run_id.to_string(),
        "invoice-export@20200101T000000.000Z"
    );
    assert!(
        got[0].receipt.0.starts_with("high|"),
        "priority 8 goes to high: {:?}",
        got[0].receipt
    );
    assert_eq!(f.runs_of("later").await, 0, "beyond the look-ahead");

    // The next tick finds nothing new, and the lease was given back (it could sweep).
    let again = f.tick("tick-2").await;
    assert_eq!((again.lease_held_elsewhere, again.fired), (false, 0), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_while_another_invocation_holds_the_lease_does_nothing() {
    let f = fixture().await;
    f.create("invoice-export", "2020-01-01T00:00:00Z", 5).await;
    let until = SystemClock.now() + chrono::Duration::seconds(60);
    assert!(f.lease.acquire(SWEEP_LEASE, "long-sweep", until).await.unwrap());

    let outcome = f.tick("tick-1").await;
    assert!(outcome.lease_held_elsewhere, "{outcome:?}");
    assert_eq!(f.runs_of("invoice-export").await, 0);

    f.lease.release(SWEEP_LEASE, "long-sweep").await.unwrap();
    assert_eq!(f.tick("tick-2").await.fired, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_ticks_create_each_run_once() {
    let f = fixture().await;
    for n in 0..5 {
        f.create(&format!("job-{n}"), "2020-01-01T00:00:00Z", 3).await;
    }
    let (a, b) = tokio::join!(f.tick("tick-a"), f.tick("tick-b"));
    assert_eq!(a.fired + b.fired, 5, "{a:?} {b:?}");
    for n in 0..5 {
        assert_eq!(f.runs_of(&format!("job-{n}")).await, 1);
    }
}
