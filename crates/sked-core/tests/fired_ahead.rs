//! Runs fired ahead of their time (a look-ahead sweeper, as on AWS) meet their overlap policy
//! when a worker with `WorkerConfig::fired_ahead` claims them: here `replace`, whose earlier
//! run must be asked to stop once the newer one is due, and not before.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::job::JobState;
use sked_core::ports::{JobStore, JobStoreExt};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::Timestamp;
use sked_testkit::clock::ManualClock;
use sked_testkit::eventually::eventually;
use sked_testkit::memory::{FakeExecutor, MemPorts, MemStore};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const LOOKAHEAD: Dur = Dur::secs(600);

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    executor: Arc<FakeExecutor>,
    ports: Ports,
    tenant: TenantId,
    shutdown: CancellationToken,
}

impl Harness {
    fn new() -> Self {
        let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
        let executor = Arc::new(FakeExecutor::new(clock.clone()));
        Harness {
            clock,
            store,
            executor,
            ports,
            tenant: TenantId::default(),
            shutdown: CancellationToken::new(),
        }
    }

    fn in_secs(&self, secs: i64) -> Timestamp {
        self.clock.now() + chrono::Duration::seconds(secs)
    }

    /// A worker as the AWS deployment configures it: runs may have been fired ahead.
    fn start_worker(&self) {
        let mut config = WorkerConfig::new(WorkerId::from("w1"));
        config.fired_ahead = true;
        // Heartbeats every 30 s: each clock step below is shorter than the lease.
        config.lease = Dur::secs(90);
        config.grace = Dur::secs(1);
        let worker = Worker::new(self.ports.clone(), self.executor.clone(), config);
        tokio::spawn(worker.run(self.shutdown.clone()));
    }

    /// The API over these ports.
    fn sked(&self) -> Sked {
        Sked::new(self.ports.clone(), SkedConfig::default(), SweepSignal::default())
    }

    /// Creates job `id` from `spec` through `sked`, then sweeps once, [`LOOKAHEAD`] ahead:
    /// how many runs the sweep fired.
    async fn create_and_fire_ahead(&self, sked: &Sked, id: &str, spec: serde_json::Value) -> usize {
        let new = NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(spec).unwrap(),
        };
        sked.create_job(&self.tenant, new, None).await.unwrap();
        let config = SweeperConfig {
            lookahead: LOOKAHEAD,
            ..SweeperConfig::default()
        };
        let sweeper = Sweeper::new(self.ports.clone(), SweepSignal::default(), config);
        sweeper.sweep_once().await.unwrap().fired
    }

    /// A spec running `ok` every `interval` from the clock's time now, with `overlap`.
    fn every(&self, interval: &str, overlap: &str) -> serde_json::Value {
        json!({
            "schedule": {"every": interval, "anchor": sked_core::timestamp::format(&self.clock.now())},
            "task": {"command": {"argv": ["ok"]}},
            "overlap": overlap,
        })
    }

    /// The job's runs, oldest nominal time first.
    async fn runs(&self) -> Vec<Run> {
        let mut runs = self.store.all_runs();
        runs.sort_by_key(|r| r.scheduled_for);
        runs
    }

    /// Waits (in real time, bounded) until `check` holds for the job's runs.
    async fn until(&self, what: &str, check: impl Fn(&[Run]) -> bool) -> Vec<Run> {
        let reached = eventually(async || Some(self.runs().await).filter(|runs| check(runs))).await;
        reached.unwrap_or_else(|| panic!("never got to: {what}; last seen {:?}", self.store.all_runs()))
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_stops_the_earlier_run_when_a_run_fired_ahead_becomes_due_and_then_starts_it() {
    let h = Harness::new();
    let spec = json!({"schedule": {"every": "60s"}, "task": {"command": {"argv": ["hang"]}}, "overlap": "replace"});
    assert_eq!(
        h.create_and_fire_ahead(&h.sked(), "hourly", spec).await,
        10,
        "ten minutes ahead, one run a minute"
    );
    h.start_worker();

    // The first run becomes due and runs (it hangs until stopped).
    let (first_at, second_at) = (h.in_secs(60), h.in_secs(120));
    h.clock.set(first_at);
    let runs = h
        .until("the first run RUNNING", |runs| runs[0].state == RunState::Running)
        .await;
    let (first, second) = (runs[0].run_id.clone(), runs[1].run_id.clone());
    assert!(!runs[0].cancel_requested, "nothing newer is due yet");

    // The second becomes due while the first still runs: the first is asked to stop, the
    // second starts.
    h.clock.set(second_at);
    let runs = h
        .until("the second run RUNNING", |runs| runs[1].state == RunState::Running)
        .await;
    assert_eq!(runs[1].run_id, second);
    assert!(runs[0].cancel_requested, "the earlier run was asked to stop");
    assert!(
        runs[2..]
            .iter()
            .all(|r| r.state == RunState::Pending && !r.cancel_requested),
        "runs not due yet are left alone"
    );

    // The first run's worker hears it at its next heartbeat and stops the payload.
    h.clock.advance(Dur::secs(30));
    let runs = h
        .until("the first run CANCELLED", |runs| runs[0].state == RunState::Cancelled)
        .await;
    assert_eq!(runs[0].run_id, first);
    assert_eq!(runs[0].attempts[0].outcome, Some(AttemptOutcome::Cancelled));
    assert_eq!(runs[1].state, RunState::Running, "the newer run goes on");
    let stored = h.store.get_run(&h.tenant, &second).await.unwrap().unwrap();
    assert!(!stored.cancel_requested);
    assert_eq!(h.executor.calls(), 2);
}

/// A job paused after its runs were fired ahead (the sweeper looks ten minutes ahead, as on
/// AWS) starts none of them while paused: each, once due, waits (PENDING, no attempt), and a
/// run its misfire policy can no longer start ends skipped (`paused`): with `fire_once` (the
/// default), of 10:01, 10:02 and 10:03 due by 10:03:01, 10:02 stands for the missed ones and
/// 10:03 is on time, so 10:01 ends. A manual run of the paused job starts. At the resume the
/// two kept start at once — as a sweep at the resume would have fired them, had the pause come
/// before they were fired — and the next starts when due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_s_runs_fired_ahead_wait_and_its_misfire_policy_decides_at_the_resume() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("minutely");
    assert_eq!(
        h.create_and_fire_ahead(&sked, "minutely", h.every("60s", "allow"))
            .await,
        10
    );
    sked.pause_job(&h.tenant, &id).await.unwrap();
    h.start_worker();
    let waits = |run: &Run, now: Timestamp| run.state == RunState::Pending && run.not_before > now;

    // The first comes due while the job is paused: it waits.
    h.clock.set(h.in_secs(61));
    let now = h.clock.now();
    h.until("the first run waits", |runs| waits(&runs[0], now)).await;
    // Two minutes on, the first is neither the latest missed nor on time.
    h.clock.advance(Dur::secs(120));
    let now = h.clock.now();
    let runs = h
        .until("10:01 skipped, 10:02 and 10:03 waiting", |runs| {
            runs[0].state == RunState::Cancelled && waits(&runs[1], now) && waits(&runs[2], now)
        })
        .await;
    assert!(runs[0].attempts.is_empty());
    assert_eq!(runs[0].reason.as_deref(), Some(sked_core::ledger::PAUSED_AT_CLAIM));
    let occurrence = sked_core::ledger::of_run(&runs[0]).unwrap();
    assert_eq!(occurrence.reason.as_deref(), Some("paused"));
    assert!(runs[1..].iter().all(|r| r.attempts.is_empty()));
    assert_eq!(h.executor.calls(), 0, "nothing of the paused schedule started");

    // A run asked for by hand starts, paused or not.
    let manual = sked.trigger_job(&h.tenant, &id).await.unwrap();
    h.until("the manual run SUCCEEDED", |runs| {
        runs.iter()
            .any(|r| r.run_id == manual.run_id && r.state == RunState::Succeeded)
    })
    .await;
    assert_eq!(h.executor.calls(), 1);

    // Resumed: the two kept start now, without waiting for their deferral to end.
    sked.resume_job(&h.tenant, &id).await.unwrap();
    let kept: Vec<_> = runs[1..3].iter().map(|r| r.run_id.clone()).collect();
    let runs = h
        .until("10:02 and 10:03 SUCCEEDED", |runs| {
            kept.iter()
                .all(|id| runs.iter().any(|r| &r.run_id == id && r.state == RunState::Succeeded))
        })
        .await;
    let scheduled: Vec<&Run> = runs.iter().filter(|r| r.trigger == Trigger::Schedule).collect();
    assert!(scheduled[3..].iter().all(|r| r.state == RunState::Pending));
    assert_eq!(h.executor.calls(), 3);

    // The next starts when it comes due.
    let fourth = scheduled[3].clone();
    h.clock.set(fourth.scheduled_for);
    h.until("the fourth run SUCCEEDED", |runs| {
        runs.iter()
            .any(|r| r.run_id == fourth.run_id && r.state == RunState::Succeeded)
    })
    .await;
    assert_eq!(h.executor.calls(), 4);
}

/// The same under `misfire: skip` and `overlap: forbid`, every 20 s: a run due while paused
/// waits only while it is on time (within the misfire grace), and of those kept the latest
/// stands for the others (skipped, `overlap`), as one sweep at the resume would have fired it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_s_policies_decide_which_runs_due_meanwhile_start_at_the_resume() {
    let h = Harness::new();
    let sked = h.sked();
    let mut spec = h.every("20s", "forbid");
    spec["misfire"] = json!("skip");
    assert_eq!(h.create_and_fire_ahead(&sked, "skips", spec).await, 30);
    let id = JobId::from("skips");
    let job = sked.get_job(&h.tenant, &id).await.unwrap();
    let overlapped = sked_core::paused::overlapped_reason(&job);
    let paused = Some(sked_core::ledger::PAUSED_AT_CLAIM);
    sked.pause_job(&h.tenant, &id).await.unwrap();
    h.start_worker();
    // Every run due by `now` met by the worker: ended, or waiting.
    let settled = |runs: &[Run], now: Timestamp| {
        runs.iter()
            .filter(|r| r.scheduled_for <= now)
            .all(|r| r.state.is_terminal() || r.not_before > now)
    };
    let reasons = |runs: &[Run], now: Timestamp| -> Vec<Option<String>> {
        runs.iter()
            .filter(|r| r.scheduled_for <= now)
            .map(|r| r.reason.clone())
            .collect()
    };

    // 10:00:45: 10:00:20 and 10:00:40 are on time; 10:00:40 stands for both.
    h.clock.set(h.in_secs(45));
    let now = h.clock.now();
    let runs = h.until("both met", |runs| settled(runs, now)).await;
    assert_eq!(reasons(&runs, now), [Some(overlapped.clone()), None]);
    sked.resume_job(&h.tenant, &id).await.unwrap();
    h.until("10:00:40 SUCCEEDED", |runs| runs[1].state == RunState::Succeeded)
        .await;
    assert_eq!(h.executor.calls(), 1);

    // Paused again until 10:05:05. At 10:03:05, 10:01:00 to 10:02:00 are missed (skipped,
    // `paused`) and 10:03:00 stands for 10:02:20 and 10:02:40; at 10:05:05, 10:03:00 to
    // 10:04:00 are missed too, and 10:05:00 stands for 10:04:20 and 10:04:40.
    sked.pause_job(&h.tenant, &id).await.unwrap();
    h.clock.set(h.in_secs(140));
    let now = h.clock.now();
    h.until("all met at 10:03:05", |runs| settled(runs, now)).await;
    h.clock.advance(Dur::secs(120));
    let now = h.clock.now();
    let runs = h.until("all met at 10:05:05", |runs| settled(runs, now)).await;
    let due = reasons(&runs, now);
    assert_eq!(due.len(), 15);
    let missed = [&due[2..6], &due[8..12]].concat();
    assert!(missed.iter().all(|r| r.as_deref() == paused), "{due:?}");
    for stood_for in [&due[6..8], &due[12..14]] {
        assert!(stood_for.iter().all(|r| r.as_ref() == Some(&overlapped)), "{due:?}");
    }
    assert_eq!(due[14], None);
    sked.resume_job(&h.tenant, &id).await.unwrap();
    h.until("10:05:00 SUCCEEDED", |runs| runs[14].state == RunState::Succeeded)
        .await;
    assert_eq!(h.executor.calls(), 2, "nothing missed started");
}

/// A job whose schedule changes after its runs were fired ahead starts none of those whose
/// time the new schedule does not have: they end at the change, CANCELLED unstarted (the
/// ledger's reason `rescheduled`); those at a time both schedules share are kept and start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_change_ends_the_runs_fired_ahead_at_times_it_no_longer_has() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("minutely");
    let every = |interval: &str| h.every(interval, "forbid");
    assert_eq!(h.create_and_fire_ahead(&sked, "minutely", every("60s")).await, 10);

    let every_two_minutes = serde_json::from_value(every("120s")).unwrap();
    sked.replace_job(&h.tenant, &id, every_two_minutes, None).await.unwrap();
    let runs = h.runs().await;
    assert_eq!(runs.len(), 10);
    for (minute, run) in (1..).zip(&runs) {
        if minute % 2 == 0 {
            assert_eq!(
                run.state,
                RunState::Pending,
                "{} is a time of the new schedule",
                run.run_id
            );
            continue;
        }
        assert_eq!(run.state, RunState::Cancelled, "{} is not", run.run_id);
        assert!(run.attempts.is_empty());
        let occurrence = sked_core::ledger::of_run(run).unwrap();
        assert_eq!(occurrence.reason.as_deref(), Some("rescheduled"));
    }

    // The first minute's run, ended, does not start; the second's does.
    h.start_worker();
    h.clock.set(runs[1].scheduled_for);
    h.until("the second minute's run SUCCEEDED", |runs| {
        runs[1].state == RunState::Succeeded
    })
    .await;
    assert_eq!(h.executor.calls(), 1);
}

/// The change itself ends the runs fired ahead at times it dropped, as a step after its write;
/// if that step is lost (here: the change is written to the store alone, as if the process
/// died just after), the worker skips each such run when it comes due (CANCELLED unstarted,
/// `rescheduled`). The runs at times the new schedule has start, and so does a run asked for
/// by hand, whose time is no occurrence either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_fired_ahead_at_a_time_a_schedule_change_dropped_is_skipped_at_claim() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("minutely");
    // No overlap check holds its runs at claim: only the dropped time does.
    let every = |interval: &str| h.every(interval, "allow");
    assert_eq!(h.create_and_fire_ahead(&sked, "minutely", every("60s")).await, 10);

    // The change's write alone: every two minutes.
    let job = h.store.get_job(&h.tenant, &id).await.unwrap().unwrap();
    let mut changed = job.clone();
    changed.spec = serde_json::from_value(every("120s")).unwrap();
    changed.next_fire_at = job.first_fire_after_change(&changed.spec, h.clock.now());
    changed.version += 1;
    changed.updated_at = h.clock.now();
    h.store
        .update_job(&changed, job.version, job.next_fire_at)
        .await
        .unwrap();
    assert!(
        h.runs().await.iter().all(|r| r.state == RunState::Pending),
        "nothing ended them"
    );

    h.start_worker();
    let runs = h.runs().await;
    h.clock.set(runs[0].scheduled_for);
    let runs = h
        .until("the first minute's run ended", |runs| runs[0].state.is_terminal())
        .await;
    assert_eq!(runs[0].state, RunState::Cancelled);
    assert!(runs[0].attempts.is_empty(), "the dropped time was started");
    assert_eq!(runs[0].reason.as_deref(), Some(sked_core::ledger::RESCHEDULED));
    assert_eq!(h.executor.calls(), 0);

    h.clock.advance(Dur::secs(1));
    let manual = sked.trigger_job(&h.tenant, &id).await.unwrap();
    h.until("the manual run SUCCEEDED", |runs| {
        runs.iter()
            .any(|r| r.run_id == manual.run_id && r.state == RunState::Succeeded)
    })
    .await;
    let second = runs[1].clone();
    h.clock.set(second.scheduled_for);
    h.until("the second minute's run SUCCEEDED", |runs| {
        runs.iter()
            .any(|r| r.run_id == second.run_id && r.state == RunState::Succeeded)
    })
    .await;
    assert_eq!(h.executor.calls(), 2);
}

/// A pause stops what has not started: a run whose first attempt failed before the pause
/// still gets its retry (it is no occurrence left to skip, but one under way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_s_run_under_way_gets_its_retry() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("flaky");
    let spec = json!({
        "schedule": {"every": "60s"},
        "task": {"command": {"argv": ["fail", "1"]}},
        "max_retries": 1,
        "backoff": {"initial": "10s", "jitter": 0},
    });
    assert_eq!(h.create_and_fire_ahead(&sked, "flaky", spec).await, 10);
    h.start_worker();
    h.clock.set(h.in_secs(60));
    h.until("the first attempt failed, its retry waiting", |runs| {
        runs[0].state == RunState::Pending && runs[0].attempts.len() == 1
    })
    .await;

    sked.pause_job(&h.tenant, &id).await.unwrap();
    h.clock.advance(Dur::secs(11));
    let runs = h.until("the retry ran", |runs| runs[0].state == RunState::Failed).await;
    assert_eq!(runs[0].attempts.len(), 2, "the retry was made while paused");
    assert_eq!(h.executor.calls(), 2);
}

/// A one-shot fired ahead of its time is COMPLETED while its run waits: it can still be
/// paused, and its run then does not start when due: it waits for the resume (a one-shot
/// never misfires), and starts at it; the job is COMPLETED again. Once its run has ended, a
/// pause is refused as for any COMPLETED job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_fired_ahead_can_be_paused_until_its_run_starts() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("once");
    let at = sked_core::timestamp::format(&h.in_secs(300));
    let spec = json!({"schedule": {"at": at}, "task": {"command": {"argv": ["ok"]}}});
    assert_eq!(h.create_and_fire_ahead(&sked, "once", spec).await, 1);
    assert_eq!(sked.get_job(&h.tenant, &id).await.unwrap().state, JobState::Completed);

    let paused = sked.pause_job(&h.tenant, &id).await.unwrap();
    assert_eq!(paused.state, JobState::Paused);
    h.start_worker();
    h.clock.set(h.in_secs(300));
    let now = h.clock.now();
    h.until("the run waits", |runs| runs[0].not_before > now).await;
    // An hour later, it still waits.
    h.clock.advance(Dur::secs(3600));
    let now = h.clock.now();
    h.until("the run waits again", |runs| runs[0].not_before > now).await;
    assert_eq!(h.executor.calls(), 0);

    let resumed = sked.resume_job(&h.tenant, &id).await.unwrap();
    assert_eq!(resumed.state, JobState::Completed, "nothing is left to fire");
    h.until("the run SUCCEEDED", |runs| runs[0].state == RunState::Succeeded)
        .await;
    assert_eq!(h.executor.calls(), 1);
    let refused = sked.pause_job(&h.tenant, &id).await;
    assert!(
        matches!(refused, Err(sked_core::error::CoreError::Conflict(_))),
        "{refused:?}"
    );
}

/// A resume that lands while a worker decides to keep a paused job's due run (it read the job
/// PAUSED, the resume then started the kept run, and only then comes the worker's deferral)
/// does not leave the run waiting out the deferral: the worker reads the job again after its
/// deferral and, resumed, makes the run due at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_racing_a_worker_s_deferral_does_not_make_the_run_wait() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("minutely");
    assert_eq!(
        h.create_and_fire_ahead(&sked, "minutely", h.every("60s", "forbid"))
            .await,
        10
    );
    sked.pause_job(&h.tenant, &id).await.unwrap();
    let first = h.runs().await[0].clone();
    h.clock.set(first.scheduled_for);
    let now = h.clock.now();
    // The resume's write and its start of the kept run, just before the worker's deferral.
    let (tenant, job_id, run_id) = (h.tenant.clone(), id.clone(), first.run_id.clone());
    h.store.before_next_defer(move |state| {
        state.job_mut(&tenant, &job_id).expect("the job").state = JobState::Active;
        state.run_mut(&tenant, &run_id).expect("the run").not_before = now;
    });
    h.start_worker();
    let runs = h
        .until("the first run SUCCEEDED", |runs| runs[0].state == RunState::Succeeded)
        .await;
    assert_eq!(
        runs[0].attempts[0].started_at, now,
        "started at the resume, not 5 min later"
    );
    assert_eq!(h.executor.calls(), 1);
}

/// A change of the job's priority, retries, concurrency key or notify reaches its runs fired
/// ahead that have not started: each takes the new settings, and its message moves to the
/// new priority. A run already started keeps what it started with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_priority_retries_concurrency_or_notify_reaches_the_runs_fired_ahead() {
    use sked_core::run_settings::RunSettings;
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("minutely");
    let mut spec = h.every("60s", "allow");
    assert_eq!(h.create_and_fire_ahead(&sked, "minutely", spec.clone()).await, 10);
    let runs = h.runs().await;
    let started = &runs[0];
    h.clock.set(started.scheduled_for);
    let outcome = h
        .ports
        .store
        .claim_one(
            &h.tenant,
            &started.run_id,
            &WorkerId::from("w0"),
            h.clock.now(),
            h.in_secs(90),
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, sked_core::ports::ClaimOutcome::Claimed { .. }),
        "{outcome:?}"
    );

    spec["priority"] = json!(9);
    spec["max_retries"] = json!(2);
    spec["concurrency"] = json!({"key": "db", "limit": 1});
    spec["notify"] = json!({"on": ["failed"], "webhook": "http://127.0.0.1:9/hook"});
    let changed = serde_json::from_value(spec).unwrap();
    let job = sked.replace_job(&h.tenant, &id, changed, None).await.unwrap();
    let settings = RunSettings::of(&job.spec);
    assert_eq!((settings.priority, settings.max_attempts), (9, 3));

    let after = h.runs().await;
    assert_eq!(
        after[0].settings(),
        runs[0].settings(),
        "the started run keeps its settings"
    );
    for run in &after[1..] {
        assert_eq!(run.settings(), settings, "{} takes the job's new settings", run.run_id);
        assert_eq!(run.state, RunState::Pending);
    }
    // The next run's message is served at its new priority.
    h.clock.set(after[1].scheduled_for);
    let delivered = h.ports.queue.receive(10, Dur::secs(30), Dur::ZERO).await.unwrap();
    let next = delivered
        .iter()
        .find(|d| d.dispatch.run_id == after[1].run_id)
        .expect("the next run's message");
    assert_eq!(next.dispatch.priority, 9);
}

/// A job deleted after its runs were fired ahead starts none of them, even where the delete's
/// own step that cancels them did not happen (it comes after the delete's write, and a crash
/// or a race with the firing can leave runs PENDING): the worker that meets such a run reads
/// its job DELETED and ends the run CANCELLED (`job deleted`) instead of starting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_job_s_runs_fired_ahead_start_nothing_even_when_the_delete_did_not_cancel_them() {
    let h = Harness::new();
    let sked = h.sked();
    let id = JobId::from("minutely");
    assert_eq!(
        h.create_and_fire_ahead(&sked, "minutely", h.every("60s", "allow"))
            .await,
        10
    );
    // The delete's write, without its step that cancels the runs.
    let job = h.store.get_job(&h.tenant, &id).await.unwrap().unwrap();
    let mut deleted = job.clone();
    deleted.state = JobState::Deleted;
    deleted.next_fire_at = None;
    deleted.version += 1;
    h.store
        .update_job(&deleted, job.version, job.next_fire_at)
        .await
        .unwrap();
    h.start_worker();

    h.clock.set(h.in_secs(61));
    let runs = h
        .until("the first run CANCELLED", |runs| runs[0].state == RunState::Cancelled)
        .await;
    assert_eq!(runs[0].reason.as_deref(), Some(sked_core::lifecycle::JOB_DELETED));
    assert!(runs[0].attempts.is_empty(), "never started");
    assert!(
        runs[1..].iter().all(|r| r.state == RunState::Pending),
        "the others not due yet"
    );
    assert_eq!(h.executor.calls(), 0);
}
