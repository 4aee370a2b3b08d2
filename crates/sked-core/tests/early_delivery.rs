//! A queue may hand a run over up to `EARLY_DELIVERY` before its `not_before` (SQS: delays are
//! whole seconds, rounded down). The worker holds such a delivery in its slot until the run's
//! time and claims it then: the run starts at its time, from that one delivery, and its
//! message is never hidden again to wait (which on SQS costs whole seconds).

use async_trait::async_trait;
use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::ports::queue::EARLY_DELIVERY;
use sked_core::ports::{Clock, Delivery, Dispatch, DispatchQueue, QueueError, Receipt};
use sked_core::run::RunState;
use sked_core::service::jobs::NewJob;
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::Timestamp;
use sked_testkit::clock::ManualClock;
use sked_testkit::eventually::eventually;
use sked_testkit::memory::{FakeExecutor, MemPorts, MemQueue};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio_util::sync::CancellationToken;

/// `clock` read `ahead` in the future: an in-memory queue timed by it delivers each message
/// up to `ahead` before its `not_before`, as SQS does with rounded-down delays.
struct Ahead {
    clock: Arc<ManualClock>,
    ahead: chrono::Duration,
}

#[async_trait]
impl Clock for Ahead {
    fn now(&self) -> Timestamp {
        self.clock.now() + self.ahead
    }

    async fn sleep_until(&self, deadline: Timestamp) {
        self.clock.sleep_until(deadline - self.ahead).await
    }
}

/// A queue that counts what the worker does with it.
struct Counting {
    inner: MemQueue,
    delivered: AtomicUsize,
    extended: AtomicUsize,
}

#[async_trait]
impl DispatchQueue for Counting {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        self.inner.enqueue(items).await
    }

    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        let got = self.inner.receive(max, visibility, wait).await?;
        self.delivered.fetch_add(got.len(), Ordering::Relaxed);
        Ok(got)
    }

    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        self.extended.fetch_add(1, Ordering::Relaxed);
        self.inner.extend(receipt, visibility).await
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        self.inner.ack(receipt).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_delivered_early_is_held_and_claimed_at_its_time_from_that_one_delivery() {
    let MemPorts {
        mut ports,
        clock,
        store,
    } = MemPorts::at("2026-12-01T10:00:00.100Z");
    let early = EARLY_DELIVERY.to_chrono() - chrono::Duration::milliseconds(100);
    let queue = Arc::new(Counting {
        inner: MemQueue::new(Arc::new(Ahead {
            clock: clock.clone(),
            ahead: early,
        })),
        delivered: AtomicUsize::new(0),
        extended: AtomicUsize::new(0),
    });
    // The worker's work goes through this queue too (the store and the queue in turn, as on
    // AWS).
    ports = Ports::new(
        ports.store.clone(),
        queue.clone(),
        ports.logs.clone(),
        ports.clock.clone(),
    );
    let tenant = TenantId::default();

    // A one-shot due 1.9 s from now, fired and enqueued by its create (as on AWS).
    let due = clock.now() + early;
    let config = SkedConfig {
        fire_within: Dur::secs(10),
        ..SkedConfig::default()
    };
    let sked = Sked::new(ports.clone(), config, SweepSignal::default());
    let spec = json!({"schedule": {"at": sked_core::timestamp::format(&due)}, "task": {"command": {"argv": ["ok"]}}});
    let new = NewJob {
        id: Some(JobId::from("soon")),
        spec: serde_json::from_value(spec).unwrap(),
    };
    sked.create_job(&tenant, new, None).await.unwrap();
    assert_eq!(store.all_runs().len(), 1);

    let mut worker_config = WorkerConfig::new(WorkerId::from("w1"));
    worker_config.fired_ahead = true;
    let executor = Arc::new(FakeExecutor::new(clock.clone()));
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    tokio::spawn(Worker::new(ports, executor.clone(), worker_config).run(shutdown));

    // Delivered now, 1.9 s early: the worker holds it. (Claimed at once, the run would be
    // refused as not due and its message hidden until then: an `extend`, and a second
    // delivery; the checks at the end would see both.)
    wait_for("the early delivery", || queue.delivered.load(Ordering::Relaxed) == 1).await;
    assert_eq!(store.all_runs()[0].state, RunState::Pending, "claimed before its time");

    // Its time comes: claimed and run from the same delivery, never hidden to wait.
    clock.set(due);
    wait_for("the run to succeed", || {
        store.all_runs()[0].state == RunState::Succeeded
    })
    .await;
    let run = store.all_runs().remove(0);
    assert_eq!(run.attempts.len(), 1);
    assert_eq!(run.attempts[0].started_at, due, "started at its time");
    assert_eq!(queue.delivered.load(Ordering::Relaxed), 1, "one delivery");
    assert_eq!(queue.extended.load(Ordering::Relaxed), 0, "never deferred");
}

/// Waits (in real time, bounded) until `done`.
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let reached = eventually(async || done().then_some(())).await;
    assert!(reached.is_some(), "never got to: {what}");
}
