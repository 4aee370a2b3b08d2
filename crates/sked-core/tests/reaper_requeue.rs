//! The reaper's repair pass against a queue that keeps every copy (as SQS does): by default
//! a stale PENDING run is enqueued again on every pass; with doubling re-enqueue only when
//! its wait has just crossed `stale_after`, twice that, four times, … — so workers that are merely
//! behind are not buried under duplicates, and a lost message is still repaired.

use async_trait::async_trait;
use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId};
use sked_core::ports::{Delivery, Dispatch, DispatchQueue, QueueError, Receipt};
use sked_core::service::jobs::NewJob;
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp;
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemLogs, MemStore};
use std::sync::{Arc, Mutex};

/// A queue that keeps nothing and delivers nothing: it only counts what is enqueued, so every
/// message looks lost and every stale run stays stale.
#[derive(Default)]
struct CountingQueue {
    enqueued: Mutex<usize>,
}

#[async_trait]
impl DispatchQueue for CountingQueue {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        *self.enqueued.lock().unwrap() += items.len();
        Ok(())
    }

    async fn receive(&self, _max: usize, _visibility: Dur, _wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        Ok(Vec::new())
    }

    async fn extend(&self, _receipt: &Receipt, _visibility: Dur) -> Result<(), QueueError> {
        Ok(())
    }

    async fn ack(&self, _receipt: &Receipt) -> Result<(), QueueError> {
        Ok(())
    }
}

/// Enqueues of one run that is never claimed, over 100 s of passes every 2 s, stale after 10 s.
async fn enqueues_over_100s(doubling: bool) -> usize {
    let clock = Arc::new(ManualClock::new(timestamp::parse("2026-12-01T10:00:00Z").unwrap()));
    let queue = Arc::new(CountingQueue::default());
    let ports = Ports::new(
        Arc::new(MemStore::new()),
        queue.clone(),
        Arc::new(MemLogs::new()),
        clock.clone(),
    );
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let spec = json!({"schedule": {"at": timestamp::format(&clock.now())}, "task": {"command": {"argv": ["true"]}}});
    let new = NewJob {
        id: Some(JobId::from("once")),
        spec: serde_json::from_value(spec).unwrap(),
    };
    sked.create_job(&TenantId::default(), new, None).await.unwrap();
    let sweeper = Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default());
    assert_eq!(sweeper.sweep_once().await.unwrap().fired, 1);
    assert_eq!(*queue.enqueued.lock().unwrap(), 1, "the sweep enqueues the run once");

    let interval = Dur::secs(2);
    let config = ReaperConfig {
        interval,
        stale_after: Dur::secs(10),
        batch: 500,
    };
    let mut reaper = Reaper::new(ports, config);
    if doubling {
        reaper = reaper.with_doubling_requeue(interval);
    }
    for _ in 0..50 {
        clock.advance(interval);
        reaper.reap_once().await.unwrap();
    }
    *queue.enqueued.lock().unwrap()
}

#[tokio::test]
async fn by_default_a_stale_run_is_enqueued_again_on_every_pass() {
    // Passes at 2, 4, …, 100 s; stale from 10 s on (ready_before is exclusive): 46 passes.
    assert_eq!(enqueues_over_100s(false).await, 1 + 46);
}

#[tokio::test]
async fn with_doubling_requeue_a_stale_run_is_enqueued_again_only_as_its_wait_doubles() {
    // Windows of twice the 2 s interval at 10, 20, 40 and 80 s: two passes each.
    assert_eq!(enqueues_over_100s(true).await, 1 + 4 * 2);
}
