//! A delivery that comes long before its run's time — its run deferred after its message was
//! sent, or a run due beyond SQS's longest delay, which the SQS adapter sends that far — is
//! handed to a new message due at the run's time, not kept hidden (`LONGEST_DEFER`): a hidden
//! message counts a receive each time it shows and keeps its age, and SQS bounds both. A
//! shorter wait keeps the message hidden until then.

use async_trait::async_trait;
use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId, WorkerId};
use sked_core::ports::JobStore;
use sked_core::ports::queue::{Delivery, Dispatch, DispatchQueue, QueueDepth, QueueError, Receipt};
use sked_core::service::Ports;
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::timestamp::{self, Timestamp};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{FakeExecutor, MemLogs, MemQueue, MemStore, fire_one_shot_now};
use std::sync::{Arc, Mutex};

/// The in-memory queue, with the calls a worker makes on it written down.
struct Watched {
    queue: MemQueue,
    /// Each `enqueue`'s dispatches' times.
    enqueued: Mutex<Vec<Timestamp>>,
    /// Each `extend`'s visibility.
    extended: Mutex<Vec<Dur>>,
}

#[async_trait]
impl DispatchQueue for Watched {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        self.enqueued.lock().unwrap().extend(items.iter().map(|d| d.not_before));
        self.queue.enqueue(items).await
    }
    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        self.queue.receive(max, visibility, wait).await
    }
    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        self.extended.lock().unwrap().push(visibility);
        self.queue.extend(receipt, visibility).await
    }
    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        self.queue.ack(receipt).await
    }
    async fn depth(&self) -> Result<Option<Vec<QueueDepth>>, QueueError> {
        self.queue.depth().await
    }
}

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    queue: Arc<Watched>,
    ports: Ports,
    tenant: TenantId,
}

impl Harness {
    /// A one-shot due now, fired: its run PENDING and its message in the queue.
    async fn with_a_fired_run() -> (Harness, RunId) {
        let clock = Arc::new(ManualClock::new(timestamp::parse("2026-12-01T10:00:00Z").unwrap()));
        let store = Arc::new(MemStore::new());
        let queue = Arc::new(Watched {
            queue: MemQueue::new(clock.clone()),
            enqueued: Mutex::default(),
            extended: Mutex::default(),
        });
        let ports = Ports::new(store.clone(), queue.clone(), Arc::new(MemLogs::new()), clock.clone());
        let h = Harness {
            clock,
            store,
            queue,
            ports,
            tenant: TenantId::default(),
        };
        let run_id = fire_one_shot_now(&h.ports, json!({})).await;
        h.queue.enqueued.lock().unwrap().clear();
        (h, run_id)
    }

    /// The run deferred `wait` past now after its message went out, then its message received.
    async fn deliver_deferred_by(&self, run_id: &RunId, wait: chrono::Duration) -> Timestamp {
        let until = self.clock.now() + wait;
        assert!(self.store.defer_pending(&self.tenant, run_id, until).await.unwrap());
        let worker = Worker::new(
            self.ports.clone(),
            Arc::new(FakeExecutor::new(self.clock.clone())),
            WorkerConfig::new(WorkerId::from("w1")),
        );
        assert!(worker.take_work(1, Dur::ZERO).await.unwrap().is_empty(), "not started");
        until
    }
}

#[tokio::test]
async fn a_delivery_hours_before_its_runs_time_is_handed_to_a_new_message_due_then() {
    let (h, run_id) = Harness::with_a_fired_run().await;
    let until = h.deliver_deferred_by(&run_id, chrono::Duration::hours(3)).await;
    assert_eq!(
        *h.queue.enqueued.lock().unwrap(),
        vec![until],
        "a new message for its time"
    );
    assert!(h.queue.extended.lock().unwrap().is_empty(), "not kept hidden");
    let run = h.store.get_run(&h.tenant, &run_id).await.unwrap().unwrap();
    assert_eq!(run.attempt_count(), 0);
}

#[tokio::test]
async fn a_delivery_minutes_before_its_runs_time_is_kept_hidden_until_then() {
    let (h, run_id) = Harness::with_a_fired_run().await;
    h.deliver_deferred_by(&run_id, chrono::Duration::minutes(5)).await;
    assert!(h.queue.enqueued.lock().unwrap().is_empty(), "no new message");
    assert_eq!(*h.queue.extended.lock().unwrap(), vec![Dur::secs(300)]);
}
