//! One-shots on a store that leaves their firings unwritten ([`MemStore::lean`], as the lean
//! DynamoDB layout will; `sked_core::unwritten_firing`), end to end through the API, the
//! sweeper and a worker: the run starts once, the job reads as written once a sweep has
//! passed its firing, and a change made in the send window — after the sweep sent the run,
//! before the next sweep — is what the worker's claim decides on.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::job::JobState;
use sked_core::ports::{JobStore, JobStoreExt};
use sked_core::run::{AttemptOutcome, Run, RunState};
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::task::Task;
use sked_testkit::clock::ManualClock;
use sked_testkit::eventually::eventually;
use sked_testkit::memory::{FakeExecutor, MemPorts, MemStore};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    executor: Arc<FakeExecutor>,
    ports: Ports,
    sked: Sked,
    tenant: TenantId,
    id: JobId,
    shutdown: CancellationToken,
}

impl Harness {
    /// A lean store holding the one-shot `once` (running `argv`) a minute from now.
    async fn with_one_shot(argv: &[&str]) -> Harness {
        let MemPorts { ports, clock, store } = MemPorts::lean_at("2026-12-01T10:00:00Z");
        let executor = Arc::new(FakeExecutor::new(clock.clone()));
        let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
        let h = Harness {
            clock,
            store,
            executor,
            ports,
            sked,
            tenant: TenantId::default(),
            id: JobId::from("once"),
            shutdown: CancellationToken::new(),
        };
        let new = NewJob {
            id: Some(h.id.clone()),
            spec: serde_json::from_value(h.spec(argv)).unwrap(),
        };
        h.sked.create_job(&h.tenant, new, None).await.unwrap();
        h
    }

    fn spec(&self, argv: &[&str]) -> serde_json::Value {
        let at = self.clock.now() + chrono::Duration::seconds(60);
        json!({"schedule": {"at": sked_core::timestamp::format(&at)}, "task": {"command": {"argv": argv}}})
    }

    /// One sweep looking ten minutes ahead, as on AWS: how many runs it sent.
    async fn sweep(&self) -> usize {
        let config = SweeperConfig {
            lookahead: Dur::secs(600),
            ..SweeperConfig::default()
        };
        let sweeper = Sweeper::new(self.ports.clone(), SweepSignal::default(), config);
        sweeper.sweep_once().await.unwrap().fired
    }

    /// A worker as on AWS (runs fired ahead), then the clock at the run's time.
    fn start_worker_and_reach_the_run(&self) {
        let mut config = WorkerConfig::new(WorkerId::from("w1"));
        config.fired_ahead = true;
        let worker = Worker::new(self.ports.clone(), self.executor.clone(), config);
        tokio::spawn(worker.run(self.shutdown.clone()));
        self.clock.advance(Dur::secs(61));
    }

    /// A worker as on AWS, driven by the test ([`Worker::take_work`]).
    fn worker(&self, id: &str) -> Worker {
        let mut config = WorkerConfig::new(WorkerId::from(id));
        config.fired_ahead = true;
        Worker::new(self.ports.clone(), self.executor.clone(), config)
    }

    /// The one-shot sent by a sweep, then claimed at its time by worker `w1` ([`Worker::take_work`]):
    /// the run as claimed.
    async fn claimed_by_w1(&self) -> Run {
        assert_eq!(self.sweep().await, 1);
        self.clock.advance(Dur::secs(61));
        let claimed = self.worker("w1").take_work(1, Dur::ZERO).await.unwrap();
        assert_eq!(claimed.len(), 1, "w1 starts it");
        claimed[0].run().clone()
    }

    /// Messages in the queue, delayed, visible or leased.
    async fn queued(&self) -> u64 {
        let depth = self.ports.queue.depth().await.unwrap().unwrap();
        depth.iter().map(|d| d.messages).sum()
    }

    async fn job_state(&self) -> JobState {
        self.store.get_job(&self.tenant, &self.id).await.unwrap().unwrap().state
    }

    /// Waits (in real time, bounded) until the job's run reaches `state`.
    async fn until_run(&self, state: RunState) -> Run {
        let run = eventually(async || self.store.all_runs().into_iter().find(|r| r.state == state)).await;
        run.unwrap_or_else(|| panic!("no run reached {state}; runs: {:?}", self.store.all_runs()))
    }

    fn argv_run(&self) -> Vec<Vec<String>> {
        self.executor
            .requests()
            .into_iter()
            .map(|r| match r.task {
                Task::Command(c) => c.argv,
                other => panic!("not a command: {other:?}"),
            })
            .collect()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_fired_unwritten_runs_once_and_reads_as_written() {
    let h = Harness::with_one_shot(&["ok"]).await;
    assert_eq!(h.sweep().await, 1, "its run is sent");
    assert_eq!(
        h.job_state().await,
        JobState::Active,
        "in the send window it reads unfired"
    );
    assert_eq!(h.sweep().await, 0, "the next sweep passes it");
    assert_eq!(h.job_state().await, JobState::Completed);
    assert_eq!(h.store.unwritten_run_count(), 1, "its run shown, not written");
    h.start_worker_and_reach_the_run();
    h.until_run(RunState::Succeeded).await;
    assert_eq!(h.store.unwritten_run_count(), 0, "written by its claim");
    assert_eq!(h.executor.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_changed_in_the_send_window_is_what_runs() {
    let h = Harness::with_one_shot(&["ok"]).await;
    assert_eq!(h.sweep().await, 1);
    let spec = serde_json::from_value(h.spec(&["print", "new"])).unwrap();
    // The same time: the one-shot's `at` is a minute from the clock, which has not moved.
    h.sked.replace_job(&h.tenant, &h.id, spec, None).await.unwrap();
    h.start_worker_and_reach_the_run();
    h.until_run(RunState::Succeeded).await;
    assert_eq!(h.argv_run(), vec![vec!["print".to_string(), "new".to_string()]]);
    assert_eq!(h.job_state().await, JobState::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_deleted_in_the_send_window_runs_nothing() {
    let h = Harness::with_one_shot(&["ok"]).await;
    assert_eq!(h.sweep().await, 1);
    h.sked.delete_job(&h.tenant, &h.id, false, false).await.unwrap();
    let queued = async || {
        let depth = h.ports.queue.depth().await.ok()??;
        Some(depth.iter().map(|d| d.messages).sum::<u64>())
    };
    assert_eq!(queued().await, Some(1), "its message is out");
    h.start_worker_and_reach_the_run();
    // The worker takes the message, finds no run to start, and acks it.
    let drained = eventually(async || (queued().await? == 0).then_some(())).await;
    assert!(drained.is_some(), "the message is dealt with");
    assert_eq!(h.executor.calls(), 0);
    assert!(h.store.all_runs().is_empty(), "no run was ever written");
}

/// A worker that dies mid-attempt on a run fired unwritten: its message shows again when the
/// lease ends, and the next claim closes the lost attempt and starts another.
#[tokio::test]
async fn a_dead_workers_run_is_taken_over_through_its_message() {
    let h = Harness::with_one_shot(&["ok"]).await;
    h.claimed_by_w1().await; // w1 then dies: no heartbeat, no end
    h.clock.advance(Dur::secs(60));
    let taken = h.worker("w2").take_work(1, Dur::ZERO).await.unwrap();
    assert_eq!(taken.len(), 1, "its message showed again and w2 took the run over");
    let outcomes: Vec<_> = taken[0].run().attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, vec![Some(AttemptOutcome::WorkerLost), None]);
}

/// A delete that leaves running runs to their workers: a message of such a run that shows
/// while its lease holds is handed on for the lease's end, not acked — the run is looked at
/// again then, should that worker die — and then its claim ends the run.
#[tokio::test]
async fn a_running_run_of_a_deleted_job_keeps_a_message_until_it_ends() {
    let h = Harness::with_one_shot(&["ok"]).await;
    let claimed = h.claimed_by_w1().await;
    let (run_id, token) = (claimed.run_id.clone(), claimed.lease.as_ref().unwrap().token);
    h.sked.delete_job(&h.tenant, &h.id, false, false).await.unwrap();
    // w1 renews its lease, but its message's hiding is not extended: it shows again.
    h.clock.advance(Dur::secs(10));
    let now = h.clock.now();
    let lease_end = now + chrono::Duration::seconds(15);
    h.store
        .heartbeat(&h.tenant, &run_id, token, now, lease_end)
        .await
        .unwrap();
    h.clock.advance(Dur::secs(8));
    assert!(h.worker("w2").take_work(1, Dur::ZERO).await.unwrap().is_empty());
    assert_eq!(h.queued().await, 1, "handed on, not acked");
    // w1 dies. At the lease's end the message shows, and its claim ends the run.
    h.clock.set(lease_end + chrono::Duration::seconds(1));
    assert!(h.worker("w2").take_work(1, Dur::ZERO).await.unwrap().is_empty());
    let run = h.store.get_run(&h.tenant, &run_id).await.unwrap().unwrap();
    assert_eq!(run.state, RunState::Cancelled);
    assert_eq!(run.attempts[0].outcome, Some(AttemptOutcome::WorkerLost));
    assert_eq!(h.queued().await, 0);
}
