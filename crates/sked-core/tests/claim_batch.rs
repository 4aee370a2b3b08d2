//! A worker's received batch, step by step: `Worker::take_work` receives the deliveries and
//! claims them in one store call, and `Worker::run_claimed` runs each attempt — and never
//! starts a payload whose lease ended between the two.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::ports::DispatchQueue;
use sked_core::run::{AttemptOutcome, RunState};
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Sked, SkedConfig, SweepSignal};
use sked_core::timestamp;
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{FakeExecutor, MemPorts, MemStore};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    queue: Arc<dyn DispatchQueue>,
    executor: Arc<FakeExecutor>,
    worker: Worker,
}

/// `jobs` one-shot jobs due now, fired by a sweep, and a worker (lease 15 s) not yet started.
async fn harness(jobs: usize) -> Harness {
    let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let at = timestamp::format(&clock.now());
    for i in 0..jobs {
        let spec = json!({"schedule": {"at": at}, "task": {"command": {"argv": ["ok"]}}});
        let new = NewJob {
            id: Some(JobId::from(format!("j{i}").as_str())),
            spec: serde_json::from_value(spec).unwrap(),
        };
        sked.create_job(&TenantId::default(), new, None).await.unwrap();
    }
    let sweeper = Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default());
    assert_eq!(sweeper.sweep_once().await.unwrap().fired, jobs);
    let executor = Arc::new(FakeExecutor::new(clock.clone()));
    let mut config = WorkerConfig::new(WorkerId::from("w1"));
    config.lease = Dur::secs(15);
    let queue = ports.queue.clone();
    let worker = Worker::new(ports, executor.clone(), config);
    Harness {
        clock,
        store,
        queue,
        executor,
        worker,
    }
}

#[tokio::test]
async fn a_received_batch_is_claimed_together_and_each_attempt_runs_to_its_end() {
    let h = harness(3).await;
    let claimed = h.worker.take_work(10, Dur::ZERO).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let until = h.clock.now() + chrono::Duration::seconds(15);
    for attempt in &claimed {
        let run = attempt.run();
        assert_eq!(run.state, RunState::Running);
        assert_eq!(run.lease.as_ref().map(|l| l.expires_at), Some(until));
    }
    assert_eq!(h.executor.calls(), 0, "claimed, not started yet");
    for attempt in claimed {
        h.worker.run_claimed(attempt, CancellationToken::new()).await;
    }
    assert_eq!(h.executor.calls(), 3);
    assert!(h.store.all_runs().iter().all(|r| r.state == RunState::Succeeded));
    let left = h.queue.receive(10, Dur::secs(15), Dur::ZERO).await.unwrap();
    assert!(left.is_empty(), "every message acked");
}

#[tokio::test]
async fn an_attempt_whose_lease_ended_before_it_started_starts_no_payload_and_records_nothing() {
    let h = harness(1).await;
    let mut claimed = h.worker.take_work(10, Dur::ZERO).await.unwrap();
    let attempt = claimed.pop().unwrap();
    let claimed_run = attempt.run().clone();
    // The worker stalls past its lease: another worker may have the run by now.
    h.clock.advance(Dur::secs(16));
    h.worker.run_claimed(attempt, CancellationToken::new()).await;
    assert_eq!(h.executor.calls(), 0, "no payload started");
    let run = h.store.all_runs().pop().unwrap();
    assert_eq!(
        run, claimed_run,
        "nothing recorded: the reaper or the next claim closes it"
    );
    assert_eq!(run.attempts[0].outcome, None::<AttemptOutcome>);
}
