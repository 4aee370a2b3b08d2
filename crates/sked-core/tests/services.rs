//! The core services end to end on in-memory ports and a manual clock: create → sweep →
//! worker → run states, retries, timeouts, cancel, worker loss, misfire, idempotency.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::ports::{ClaimOutcome, JobStoreExt, LogStream, PageRequest, RunFilter};
use sked_core::run::{AttemptOutcome, Run, RunState};
use sked_core::service::jobs::NewJob;
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::runs::LogRequest;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use sked_core::{CoreError, JobState};
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
    shutdown: CancellationToken,
}

impl Harness {
    fn new() -> Self {
        let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
        let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
        let executor = Arc::new(FakeExecutor::new(clock.clone()));
        Harness {
            clock,
            store,
            executor,
            ports,
            sked,
            tenant: TenantId::default(),
            shutdown: CancellationToken::new(),
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn sweeper(&self) -> Sweeper {
        Sweeper::new(self.ports.clone(), SweepSignal::default(), SweeperConfig::default())
    }

    fn start_worker(&self, name: &str) {
        let mut config = WorkerConfig::new(WorkerId::from(name));
        config.lease = Dur::secs(15);
        config.grace = Dur::secs(1);
        let worker = Worker::new(self.ports.clone(), self.executor.clone(), config);
        tokio::spawn(worker.run(self.shutdown.clone()));
    }

    async fn create(&self, id: &str, spec: serde_json::Value) -> sked_core::Job {
        let spec = serde_json::from_value(spec).unwrap();
        self.sked
            .create_job(
                &self.tenant,
                NewJob {
                    id: Some(JobId::from(id)),
                    spec,
                },
                None,
            )
            .await
            .unwrap()
            .job
    }

    async fn runs_of(&self, job: &str) -> Vec<Run> {
        let filter = RunFilter {
            job_id: Some(JobId::from(job)),
            ..RunFilter::default()
        };
        self.sked
            .list_runs(
                &self.tenant,
                &filter,
                &PageRequest {
                    cursor: None,
                    limit: 1000,
                },
            )
            .await
            .unwrap()
            .items
    }

    async fn run(&self, id: &RunId) -> Run {
        self.sked.get_run(&self.tenant, id).await.unwrap()
    }

    /// Waits (in real time, bounded) until `check` holds for the run.
    async fn until_run(&self, id: &RunId, what: &str, check: impl Fn(&Run) -> bool) -> Run {
        match eventually(async || Some(self.run(id).await).filter(|run| check(run))).await {
            Some(run) => run,
            None => panic!("run {id} never got to: {what}; last seen {:?}", self.run(id).await),
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn at_in(h: &Harness, secs: i64, argv: serde_json::Value) -> serde_json::Value {
    let at = timestamp::format(&(h.now() + chrono::Duration::seconds(secs)));
    json!({"schedule": {"at": at}, "task": {"command": {"argv": argv}}, "backoff": {"initial": "10s", "jitter": 0}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_job_fires_at_its_time_runs_once_and_logs_its_output() {
    let h = Harness::new();
    let job = h
        .create("hello", at_in(&h, 2, json!(["print", "hello", "err:warn"])))
        .await;
    assert_eq!(job.state, JobState::Active);
    let sweeper = h.sweeper();
    assert_eq!(sweeper.sweep_once().await.unwrap().fired, 0, "not due yet");

    h.clock.advance(Dur::secs(2));
    assert_eq!(sweeper.sweep_once().await.unwrap().fired, 1);
    assert_eq!(
        sweeper.sweep_once().await.unwrap().fired,
        0,
        "a second sweep creates nothing"
    );
    h.start_worker("w1");
    let runs = h.runs_of("hello").await;
    assert_eq!(runs.len(), 1);
    let run = h
        .until_run(&runs[0].run_id, "SUCCEEDED", |r| r.state == RunState::Succeeded)
        .await;
    assert_eq!(run.attempts.len(), 1);
    assert_eq!(run.attempts[0].exit_code, Some(0));
    assert_eq!(
        h.sked.get_job(&h.tenant, &"hello".into()).await.unwrap().state,
        JobState::Completed
    );

    let page = h
        .sked
        .read_logs(&h.tenant, &run.run_id, &LogRequest::default())
        .await
        .unwrap();
    let lines: Vec<_> = page.lines.iter().map(|l| (l.stream, l.line.as_str())).collect();
    assert_eq!(lines, vec![(LogStream::Stdout, "hello"), (LogStream::Stderr, "warn")]);
    assert_eq!(
        h.executor.last_context_var("SKED_RUN_ID").as_deref(),
        Some(run.run_id.as_str())
    );
    assert_eq!(h.executor.last_context_var("SKED_ATTEMPT").as_deref(), Some("1"));
    assert_eq!(
        h.executor.last_context_var("SKED_SCHEDULED_FOR").as_deref(),
        Some(timestamp::format(&run.scheduled_for).as_str())
    );
    assert!(h.executor.last_context_var("SKED_FENCING_TOKEN").is_some());
    assert_eq!(h.executor.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_retries_after_its_backoff_then_fails() {
    let h = Harness::new();
    let mut spec = at_in(&h, 0, json!(["fail", "3"]));
    spec["max_retries"] = json!(2);
    h.create("flaky", spec).await;
    h.sweeper().sweep_once().await.unwrap();
    h.start_worker("w1");
    let id = h.runs_of("flaky").await[0].run_id.clone();

    let run = h
        .until_run(&id, "first retry pending", |r| {
            r.attempts.len() == 1 && r.state == RunState::Pending
        })
        .await;
    assert_eq!(
        run.not_before,
        h.now() + chrono::Duration::seconds(10),
        "10 s initial backoff"
    );
    h.clock.advance(Dur::secs(10));
    let run = h
        .until_run(&id, "second retry pending", |r| {
            r.attempts.len() == 2 && r.state == RunState::Pending
        })
        .await;
    assert_eq!(
        run.not_before,
        h.now() + chrono::Duration::seconds(20),
        "backoff doubles"
    );
    h.clock.advance(Dur::secs(20));
    let run = h.until_run(&id, "FAILED", |r| r.state == RunState::Failed).await;
    assert_eq!(run.attempts.len(), 3, "1 + max_retries attempts");
    assert!(
        run.attempts
            .iter()
            .all(|a| a.exit_code == Some(3) && a.outcome == Some(AttemptOutcome::Failed))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_attempt_is_retried_per_policy_and_ends_timed_out() {
    let h = Harness::new();
    let mut spec = at_in(&h, 0, json!(["hang"]));
    spec["timeout"] = json!("1s");
    spec["on_timeout"] = json!("retry");
    spec["max_retries"] = json!(1);
    h.create("slow", spec).await;
    h.sweeper().sweep_once().await.unwrap();
    h.start_worker("w1");
    let id = h.runs_of("slow").await[0].run_id.clone();

    h.until_run(&id, "RUNNING", |r| r.state == RunState::Running).await;
    h.clock.advance(Dur::secs(1));
    h.until_run(&id, "retry pending", |r| r.state == RunState::Pending)
        .await;
    h.clock.advance(Dur::secs(10));
    h.until_run(&id, "attempt 2 running", |r| {
        r.state == RunState::Running && r.attempts.len() == 2
    })
    .await;
    h.clock.advance(Dur::secs(1));
    let run = h.until_run(&id, "TIMED_OUT", |r| r.state == RunState::TimedOut).await;
    assert!(run.attempts.iter().all(|a| a.outcome == Some(AttemptOutcome::TimedOut)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_timeout_run_job_triggers_the_handler_job() {
    let h = Harness::new();
    let far = timestamp::format(&(h.now() + chrono::Duration::days(300)));
    h.create(
        "handler",
        json!({"schedule": {"at": far}, "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    let mut spec = at_in(&h, 0, json!(["hang"]));
    spec["timeout"] = json!("1s");
    spec["on_timeout"] = json!({"run_job": "handler"});
    h.create("slow", spec).await;
    h.sweeper().sweep_once().await.unwrap();
    h.start_worker("w1");
    let id = h.runs_of("slow").await[0].run_id.clone();
    h.until_run(&id, "RUNNING", |r| r.state == RunState::Running).await;
    h.clock.advance(Dur::secs(1));
    h.until_run(&id, "TIMED_OUT", |r| r.state == RunState::TimedOut).await;
    let handler = eventually(async || h.runs_of("handler").await.into_iter().next()).await;
    let run = handler.expect("the handler job never ran");
    assert_eq!(run.trigger, sked_core::run::Trigger::Handler);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_pending_run_before_it_starts_and_a_running_one_through_its_worker() {
    let h = Harness::new();
    h.create("later", at_in(&h, 0, json!(["ok"]))).await;
    h.sweeper().sweep_once().await.unwrap();
    let pending = h.runs_of("later").await[0].run_id.clone();
    let cancelled = h.sked.cancel_run(&h.tenant, &pending).await.unwrap();
    assert_eq!(cancelled.state, RunState::Cancelled);
    assert!(matches!(
        h.sked.cancel_run(&h.tenant, &pending).await,
        Err(CoreError::Conflict(_))
    ));

    h.create("long", at_in(&h, 0, json!(["hang"]))).await;
    h.sweeper().sweep_once().await.unwrap();
    h.start_worker("w1");
    let running = h.runs_of("long").await[0].run_id.clone();
    h.until_run(&running, "RUNNING", |r| r.state == RunState::Running).await;
    let asked = h.sked.cancel_run(&h.tenant, &running).await.unwrap();
    assert!(asked.cancel_requested);
    h.clock.advance(Dur::secs(5)); // the next heartbeat (lease/3) sees the request
    let run = h
        .until_run(&running, "CANCELLED", |r| r.state == RunState::Cancelled)
        .await;
    assert_eq!(run.attempts[0].outcome, Some(AttemptOutcome::Cancelled));
    assert_eq!(h.run(&pending).await.attempts.len(), 0, "the pending run never started");
    assert_eq!(h.executor.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_worker_is_reaped_at_lease_expiry_and_the_next_attempt_runs_elsewhere() {
    let h = Harness::new();
    h.create("job", at_in(&h, 0, json!(["ok"]))).await;
    h.sweeper().sweep_once().await.unwrap();
    let id = h.runs_of("job").await[0].run_id.clone();
    // A worker claims the run and then vanishes without a word.
    let lease_until = h.now() + chrono::Duration::seconds(15);
    let claimed = h
        .store
        .claim_one(&h.tenant, &id, &WorkerId::from("ghost"), h.now(), lease_until)
        .await
        .unwrap();
    let ClaimOutcome::Claimed { token: ghost_token, .. } = claimed else {
        panic!("not claimed: {claimed:?}")
    };

    let reaper = Reaper::new(h.ports.clone(), ReaperConfig::default());
    assert_eq!(reaper.reap_once().await.unwrap().abandoned, 0, "lease still live");
    h.clock.advance(Dur::secs(16));
    assert_eq!(reaper.reap_once().await.unwrap().abandoned, 1);
    let run = h.run(&id).await;
    assert_eq!(run.attempts[0].outcome, Some(AttemptOutcome::WorkerLost));
    assert_eq!(run.attempts[0].finished_at, Some(lease_until));

    h.clock.advance(Dur::secs(10)); // the retry's backoff
    h.start_worker("w2");
    let run = h.until_run(&id, "SUCCEEDED", |r| r.state == RunState::Succeeded).await;
    assert_eq!(run.attempts.len(), 2);
    assert_eq!(run.attempts[1].worker, WorkerId::from("w2"));
    let token: u64 = h
        .executor
        .last_context_var("SKED_FENCING_TOKEN")
        .unwrap()
        .parse()
        .unwrap();
    assert!(token > ghost_token, "fencing tokens grow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sweeps_create_each_run_once() {
    let h = Harness::new();
    for i in 0..50 {
        h.create(&format!("j{i}"), at_in(&h, 0, json!(["ok"]))).await;
    }
    let (a, b) = (h.sweeper(), h.sweeper());
    let (ra, rb) = tokio::join!(a.sweep_once(), b.sweep_once());
    assert_eq!(ra.unwrap().fired + rb.unwrap().fired, 50);
    assert_eq!(h.store.run_count(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_job_fires_once_for_what_it_missed_while_paused() {
    let h = Harness::new();
    h.create(
        "minutely",
        json!({"schedule": {"cron": "* * * * *"}, "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    h.sked.pause_job(&h.tenant, &"minutely".into()).await.unwrap();
    h.clock.advance(Dur::secs(600));
    assert_eq!(h.sweeper().sweep_once().await.unwrap().fired, 0, "paused");
    h.sked.resume_job(&h.tenant, &"minutely".into()).await.unwrap();
    let report = h.sweeper().sweep_once().await.unwrap();
    assert_eq!(
        report.fired, 1,
        "fire_once + forbid: one run for the ten missed minutes"
    );
    assert_eq!(report.skipped, 9);
    let job = h.sked.get_job(&h.tenant, &"minutely".into()).await.unwrap();
    assert!(job.next_fire_at.unwrap() > h.now());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_is_idempotent_by_id_and_by_key_and_refuses_reuse_with_another_body() {
    let h = Harness::new();
    let spec = at_in(&h, 60, json!(["ok"]));
    let first = h.create("same", spec.clone()).await;
    let again = h
        .sked
        .create_job(
            &h.tenant,
            NewJob {
                id: Some("same".into()),
                spec: serde_json::from_value(spec.clone()).unwrap(),
            },
            None,
        )
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.job, first);
    let other = at_in(&h, 120, json!(["ok"]));
    let clash = h
        .sked
        .create_job(
            &h.tenant,
            NewJob {
                id: Some("same".into()),
                spec: serde_json::from_value(other.clone()).unwrap(),
            },
            None,
        )
        .await;
    assert!(matches!(clash, Err(CoreError::Conflict(_))));

    let keyed = |s: &serde_json::Value| NewJob {
        id: None,
        spec: serde_json::from_value(s.clone()).unwrap(),
    };
    let a = h.sked.create_job(&h.tenant, keyed(&other), Some("k1")).await.unwrap();
    let b = h.sked.create_job(&h.tenant, keyed(&other), Some("k1")).await.unwrap();
    assert!(a.created && !b.created);
    assert_eq!(a.job.id, b.job.id, "the replay answers the first job");
    assert!(matches!(
        h.sked.create_job(&h.tenant, keyed(&spec), Some("k1")).await,
        Err(CoreError::Conflict(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_jobs_are_refused_naming_the_field_and_nothing_is_stored() {
    let h = Harness::new();
    let mut bad = at_in(&h, 0, json!([]));
    bad["priority"] = json!(12);
    let spec = serde_json::from_value(bad).unwrap();
    let err = h
        .sked
        .create_job(
            &h.tenant,
            NewJob {
                id: Some("x".into()),
                spec,
            },
            None,
        )
        .await
        .unwrap_err();
    let CoreError::Invalid(problems) = err else {
        panic!("{err:?}")
    };
    let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
    assert!(
        fields.contains(&"priority") && fields.contains(&"task.command.argv"),
        "{fields:?}"
    );
    assert!(h.store.get_job(&h.tenant, &"x".into()).await.unwrap().is_none());

    let container = json!({"schedule": {"every": "1m"}, "task": {"container": {"image": "alpine"}}});
    let err = h
        .sked
        .create_job(
            &h.tenant,
            NewJob {
                id: None,
                spec: serde_json::from_value(container).unwrap(),
            },
            None,
        )
        .await;
    assert!(matches!(err, Err(CoreError::Unsupported { ref field, .. }) if field == "task.container"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_runs_a_job_now_and_preview_shows_its_next_times() {
    let h = Harness::new();
    h.create(
        "daily",
        json!({"schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"}, "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    let times = h.sked.preview_job(&h.tenant, &"daily".into(), 3).await.unwrap();
    let shown: Vec<_> = times.iter().map(timestamp::format).collect();
    assert_eq!(
        shown,
        vec![
            "2026-12-02T08:00:00.000Z",
            "2026-12-03T08:00:00.000Z",
            "2026-12-04T08:00:00.000Z"
        ]
    );
    h.start_worker("w1");
    let run = h.sked.trigger_job(&h.tenant, &"daily".into()).await.unwrap();
    assert_eq!(run.trigger, sked_core::run::Trigger::Manual);
    h.until_run(&run.run_id, "SUCCEEDED", |r| r.state == RunState::Succeeded)
        .await;
}

fn hourly(overlap: &str) -> serde_json::Value {
    json!({"schedule": {"cron": "0 * * * *"}, "task": {"command": {"argv": ["hang"]}}, "overlap": overlap, "priority": 7})
}

fn ts(text: &str) -> Timestamp {
    timestamp::parse(text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_runs_past_occurrences_in_order_one_at_a_time_under_forbid_and_repeating_it_creates_nothing() {
    backfill_in_turn("forbid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_runs_take_turns_under_queue_one() {
    backfill_in_turn("queue_one").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_runs_take_turns_under_replace() {
    backfill_in_turn("replace").await;
}

/// A backfill of three occurrences of a job under `policy`, two workers: the runs start one
/// at a time, in nominal-time order, each once the one before has ended.
async fn backfill_in_turn(policy: &str) {
    let h = Harness::new(); // 10:00
    h.create("hourly", hourly(policy)).await;
    let job: JobId = "hourly".into();
    let (from, to) = (ts("2026-12-01T06:00:00Z"), ts("2026-12-01T09:00:00Z"));
    let ids = h.sked.backfill_job(&h.tenant, &job, from, to).await.unwrap();
    let nominal = ["2026-12-01T06:00:00Z", "2026-12-01T07:00:00Z", "2026-12-01T08:00:00Z"];
    let expected: Vec<RunId> = nominal.iter().map(|t| RunId::derive(&job, ts(t))).collect();
    assert_eq!(ids, expected, "one run per nominal time in [from, to), in order");
    for id in &ids {
        let run = h.run(id).await;
        assert_eq!(run.trigger, sked_core::run::Trigger::Backfill);
        assert_eq!((run.state, run.priority), (RunState::Pending, 7));
    }
    let again = h.sked.backfill_job(&h.tenant, &job, from, to).await.unwrap();
    assert!(again.is_empty(), "a repeated backfill creates nothing: {again:?}");

    h.start_worker("w1");
    h.start_worker("w2");
    for (i, id) in ids.iter().enumerate() {
        h.until_run(id, "RUNNING", |r| r.state == RunState::Running).await;
        // The later ones were looked at and put off (deferred), not started beside it.
        for later in &ids[i + 1..] {
            let now = h.now();
            h.until_run(later, "PENDING, deferred behind the running one", move |r| {
                r.state == RunState::Pending && r.not_before > now
            })
            .await;
        }
        let running = h.runs_of("hourly").await;
        let running: Vec<_> = running.iter().filter(|r| r.state == RunState::Running).collect();
        assert_eq!(
            running.len(),
            1,
            "one backfill run at a time under {policy}: {running:?}"
        );
        h.sked.cancel_run(&h.tenant, id).await.unwrap();
        h.clock.advance(Dur::secs(5)); // the next heartbeat (lease/3) sees the request
        h.until_run(id, "CANCELLED", |r| r.state == RunState::Cancelled).await;
    }
    assert_eq!(h.executor.calls(), 3, "each occurrence ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_runs_start_side_by_side_under_allow() {
    let h = Harness::new();
    h.create("hourly", hourly("allow")).await;
    let (from, to) = (ts("2026-12-01T07:00:00Z"), ts("2026-12-01T09:00:00Z"));
    let ids = h
        .sked
        .backfill_job(&h.tenant, &"hourly".into(), from, to)
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    h.start_worker("w1");
    for id in &ids {
        h.until_run(id, "RUNNING", |r| r.state == RunState::Running).await;
    }
}

#[tokio::test]
async fn a_backfill_beyond_its_bounds_is_refused_naming_the_field_and_creates_nothing() {
    let h = Harness::new(); // 10:00
    h.create("hourly", hourly("forbid")).await;
    let job: JobId = "hourly".into();
    let refused = |answer: Result<Vec<RunId>, CoreError>, field: &str| match answer {
        Err(CoreError::Invalid(errors)) => assert_eq!(errors[0].field, field, "{errors:?}"),
        other => panic!("expected a refusal naming {field}, got {other:?}"),
    };
    let backfill = |from: &str, to: &str| h.sked.backfill_job(&h.tenant, &job, ts(from), ts(to));
    refused(backfill("2026-12-01T08:00:00Z", "2026-12-01T08:00:00Z").await, "to");
    refused(backfill("2026-12-01T08:00:00Z", "2026-12-01T11:00:00Z").await, "to");
    // 1,001 hourly occurrences.
    refused(backfill("2026-10-20T13:00:00Z", "2026-12-01T06:00:00Z").await, "to");
    assert!(h.runs_of("hourly").await.is_empty(), "nothing was created");
    let exactly_the_bound = backfill("2026-10-20T14:00:00Z", "2026-12-01T06:00:00Z").await.unwrap();
    assert_eq!(exactly_the_bound.len(), sked_core::service::backfill::MAX_BACKFILL);
    assert!(matches!(
        h.sked
            .backfill_job(
                &h.tenant,
                &"nope".into(),
                ts("2026-12-01T06:00:00Z"),
                ts("2026-12-01T07:00:00Z")
            )
            .await,
        Err(CoreError::NotFound(_))
    ));
}

/// A run's id is its job and nominal time: two triggers in one millisecond each get a run of
/// their own, and a trigger at an occurrence's very millisecond does not take the id of the
/// occurrence's run, which the sweep then fires as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_in_one_millisecond_or_at_an_occurrence_s_each_make_a_run_of_their_own() {
    let h = Harness::new();
    h.create(
        "minutely",
        json!({"schedule": {"cron": "* * * * *"}, "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    h.clock.set(ts("2026-12-01T10:01:00Z"));
    let id = JobId::from("minutely");
    let first = h.sked.trigger_job(&h.tenant, &id).await.unwrap();
    let second = h.sked.trigger_job(&h.tenant, &id).await.unwrap();
    assert_eq!(first.scheduled_for, ts("2026-12-01T10:01:00.001Z"));
    assert_eq!(second.scheduled_for, ts("2026-12-01T10:01:00.002Z"));
    assert!(h.sweeper().sweep_once().await.unwrap().fired >= 1);
    let runs = h.runs_of("minutely").await;
    let occurrence = runs
        .iter()
        .find(|r| r.scheduled_for == ts("2026-12-01T10:01:00Z"))
        .expect("the occurrence fired");
    assert_eq!(occurrence.trigger, sked_core::run::Trigger::Schedule);
    let manual = runs.iter().filter(|r| r.trigger == sked_core::run::Trigger::Manual);
    assert_eq!(manual.count(), 2);
}
