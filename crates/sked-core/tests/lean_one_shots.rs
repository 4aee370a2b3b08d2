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
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::task::Task;
use sked_testkit::clock::ManualClock;
use sked_testkit::eventually::eventually;
use sked_testkit::faults::{Chaos, FaultPlan, Faulty, SimRng};
use sked_testkit::memory::{FakeExecutor, MemLogs, MemPorts, MemQueue, MemStore};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The template's redrive `maxReceiveCount`.
const RECEIVE_LIMIT: u32 = 5;

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
    /// A lean store holding the one-shot `once` (running `argv`) a minute from now, with a
    /// queue that gives a message up after [`RECEIVE_LIMIT`] receives, as SQS does.
    async fn with_one_shot(argv: &[&str]) -> Harness {
        Self::with_one_shot_and(argv, json!({})).await
    }

    /// [`Harness::with_one_shot`], its spec with the fields of `extra` too.
    async fn with_one_shot_and(argv: &[&str], extra: serde_json::Value) -> Harness {
        let MemPorts { clock, store, .. } = MemPorts::lean_at("2026-12-01T10:00:00Z");
        let queue = Arc::new(MemQueue::new(clock.clone()).with_receive_limit(RECEIVE_LIMIT));
        let ports = Ports::new(store.clone(), queue, Arc::new(MemLogs::new()), clock.clone());
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
        let mut spec = h.spec(argv);
        for (field, value) in extra.as_object().unwrap() {
            spec[field] = value.clone();
        }
        let new = NewJob {
            id: Some(h.id.clone()),
            spec: serde_json::from_value(spec).unwrap(),
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

/// A run fired unwritten is in no index the reaper reads, as on DynamoDB: a worker that dies
/// mid-attempt leaves it to its message, which shows again when the lease ends, and the next
/// claim closes the lost attempt and starts another.
#[tokio::test]
async fn a_dead_workers_run_is_taken_over_through_its_message_not_by_the_reaper() {
    let h = Harness::with_one_shot(&["ok"]).await;
    h.claimed_by_w1().await; // w1 then dies: no heartbeat, no end
    h.clock.advance(Dur::secs(60));
    let reaper = Reaper::new(h.ports.clone(), ReaperConfig::default());
    let report = reaper.reap_once().await.unwrap();
    assert_eq!((report.abandoned, report.requeued), (0, 0), "the reaper never sees it");
    let taken = h.worker("w2").take_work(1, Dur::ZERO).await.unwrap();
    assert_eq!(taken.len(), 1, "its message showed again and w2 took the run over");
    let outcomes: Vec<_> = taken[0].run().attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, vec![Some(AttemptOutcome::WorkerLost), None]);
}

/// Worker after worker dies on one run, more times than the queue delivers a message: each
/// takeover hands the run a new message, so the run is never given up while it has attempts
/// left, and the last worker's attempt ends it. (Taken over by the same message each time, it
/// was dead-lettered at its sixth receive and the run stayed RUNNING: `aws_crash`, 2026-12-05.)
#[tokio::test]
async fn a_run_taken_over_more_times_than_a_message_is_delivered_still_ends() {
    let h = Harness::with_one_shot_and(&["ok"], json!({"max_retries": 9})).await;
    h.claimed_by_w1().await; // w1 dies
    let deaths = RECEIVE_LIMIT + 2;
    for n in 2..=deaths {
        // Past the lease of the last attempt: its message shows and the next worker takes over.
        h.clock.advance(Dur::secs(61));
        let taken = h.worker(&format!("w{n}")).take_work(1, Dur::ZERO).await.unwrap();
        assert_eq!(taken.len(), 1, "worker w{n} takes the run over");
        assert_eq!(taken[0].run().attempts.len(), n as usize);
    }
    assert_eq!(h.queued().await, 1, "the run has a message");
    h.clock.advance(Dur::secs(61));
    let worker = h.worker("last");
    let taken = worker.take_work(1, Dur::ZERO).await.unwrap();
    assert_eq!(taken.len(), 1, "taken over once more");
    for attempt in taken {
        worker.run_claimed(attempt, CancellationToken::new()).await;
    }
    let run = h.until_run(RunState::Succeeded).await;
    assert_eq!(run.attempts.len(), deaths as usize + 1);
    h.clock.advance(Dur::secs(61));
    assert!(h.worker("after").take_work(1, Dur::ZERO).await.unwrap().is_empty());
    assert_eq!(h.queued().await, 0, "its message went with its end");
}

/// A worker cut off from the store (every call fails for now) keeps receiving the run's
/// message, more times than a message is delivered: each failed claim hands the run a new
/// message for when the delivered one would have shown again, so the message is never given
/// up, and once the store answers the run starts.
#[tokio::test]
async fn a_store_out_of_reach_does_not_spend_the_runs_message() {
    let h = Harness::with_one_shot(&["ok"]).await;
    assert_eq!(h.sweep().await, 1);
    let chaos = Chaos::new(SimRng::new(1), FaultPlan::none(), h.clock.clone());
    let cut_off = Arc::new(Faulty::new(h.store.clone(), chaos));
    let ports = Ports::new(
        cut_off.clone(),
        h.ports.queue.clone(),
        h.ports.logs.clone(),
        h.clock.clone(),
    );
    let mut config = WorkerConfig::new(WorkerId::from("cut-off"));
    config.fired_ahead = true;
    let worker = Worker::new(ports, h.executor.clone(), config);
    h.clock.advance(Dur::secs(61));
    cut_off.partition(h.clock.now() + chrono::Duration::hours(1));
    for _ in 0..RECEIVE_LIMIT + 2 {
        assert!(worker.take_work(1, Dur::ZERO).await.is_err(), "the claim fails");
        assert_eq!(h.queued().await, 1, "the run keeps a message");
        h.clock.advance(Dur::secs(61));
    }
    cut_off.heal();
    let taken = worker.take_work(1, Dur::ZERO).await.unwrap();
    assert_eq!(taken.len(), 1, "the store answers again: the run starts");
    assert_eq!(taken[0].run().attempts.len(), 1);
}

/// A delete that leaves running runs to their workers: a message of such a run that shows
/// while its lease holds is handed on for the lease's end, not acked — it is all that finds
/// the run should that worker die — and then its claim ends the run.
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
