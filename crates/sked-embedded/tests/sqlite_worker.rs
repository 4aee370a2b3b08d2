//! The core worker on one SQLite file (store and queue on the same handle, as in
//! `sked server`): under load it receives and claims in one store call
//! (`JobStore::receive_and_claim`), and the overlap checks made at claim time still hold.

use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState, Overlap};
use sked_core::ports::{
    Clock, Dispatch, DispatchQueue, ExecRequest, ExecResult, Executor, JobStore, LogLine, StopReason, SystemClock,
};
use sked_core::run::{Run, RunState, Trigger};
use sked_core::service::Ports;
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::timestamp::Timestamp;
use sked_embedded::sqlite::{SqliteDb, SqliteQueue, SqliteStore, SqliteWork};
use sked_testkit::memory::MemLogs;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

fn tenant() -> TenantId {
    TenantId::from("t1")
}

/// Records when each run's payload ran; every payload takes `each`.
struct Recording {
    each: Duration,
    ran: Mutex<Vec<(String, Instant, Instant)>>,
}

impl Recording {
    /// An executor whose every payload takes `each`.
    fn each(each: Duration) -> Arc<Self> {
        Arc::new(Recording {
            each,
            ran: Mutex::new(Vec::new()),
        })
    }
}

/// Stores `runs` and enqueues their messages; their ids, in order.
async fn queued(store: &SqliteStore, queue: &SqliteQueue, runs: Vec<Run>) -> Vec<RunId> {
    for run in &runs {
        store.insert_run(run).await.unwrap();
    }
    let dispatches: Vec<Dispatch> = runs.iter().map(Dispatch::from).collect();
    queue.enqueue(&dispatches).await.unwrap();
    runs.into_iter().map(|r| r.run_id).collect()
}

#[async_trait]
impl Executor for Recording {
    async fn execute(
        &self,
        request: ExecRequest,
        _output: mpsc::Sender<LogLine>,
        _stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        let job = request
            .context
            .iter()
            .find(|(k, _)| k == "SKED_JOB_ID")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let start = Instant::now();
        tokio::time::sleep(self.each).await;
        self.ran.lock().unwrap().push((job, start, Instant::now()));
        ExecResult {
            success: true,
            ..Default::default()
        }
    }
}

fn job(id: &str, overlap: Overlap, now: Timestamp) -> Job {
    let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
        "schedule": {"every": "1h", "anchor": "2026-03-01T00:00:00.000Z"},
        "task": {"command": {"argv": ["true"]}},
    }))
    .unwrap();
    spec.overlap = Some(overlap);
    Job {
        tenant: tenant(),
        id: JobId::from(id),
        spec: spec.normalised(now),
        state: JobState::Active,
        next_fire_at: None,
        version: 1,
        created_at: now,
        updated_at: now,
    }
}

/// A new SQLite file in a temporary directory, its store and queue, on the system clock.
struct Fresh {
    _dir: tempfile::TempDir,
    db: Arc<SqliteDb>,
    clock: Arc<dyn Clock>,
    store: Arc<SqliteStore>,
    queue: Arc<SqliteQueue>,
    /// When it was made, to the millisecond.
    now: Timestamp,
}

impl Fresh {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(SqliteDb::open(dir.path().join("sked.db")).unwrap());
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let store = Arc::new(SqliteStore::new(db.clone()));
        let queue = Arc::new(SqliteQueue::new(db.clone(), clock.clone()));
        let now = sked_core::timestamp::trunc_ms(clock.now());
        Fresh {
            _dir: dir,
            db,
            clock,
            store,
            queue,
            now,
        }
    }
}

/// Runs a worker with `config` over the store and queue of `db` until every run of `runs` has
/// ended (or 30 s have passed), then stops it: each run's state, in order (PENDING for one
/// that was never written).
async fn drain(
    db: &Arc<SqliteDb>,
    clock: Arc<dyn Clock>,
    executor: Arc<Recording>,
    config: WorkerConfig,
    runs: &[RunId],
) -> Vec<RunState> {
    let store = Arc::new(SqliteStore::new(db.clone()));
    let ports = Ports {
        store: store.clone(),
        queue: Arc::new(SqliteQueue::new(db.clone(), clock.clone())),
        work: Arc::new(SqliteWork::new(db.clone(), clock.clone())),
        logs: Arc::new(MemLogs::new()),
        clock,
        observer: Arc::new(sked_core::ports::NoObserver),
    };
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(ports, executor, config).run(shutdown.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let states = loop {
        let mut states = Vec::new();
        for id in runs {
            let run = store.get_run(&tenant(), id).await.unwrap();
            states.push(run.map_or(RunState::Pending, |r| r.state));
        }
        if states.iter().all(|s| s.is_terminal()) || Instant::now() > deadline {
            break states;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    shutdown.cancel();
    worker.await.unwrap();
    states
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_worker_on_one_sqlite_file_runs_everything_and_queue_one_runs_one_at_a_time() {
    let Fresh {
        _dir,
        db,
        clock,
        store,
        queue,
        now,
    } = Fresh::new();
    store
        .create_jobs(
            &[
                job("serial", Overlap::QueueOne, now),
                job("parallel", Overlap::Allow, now),
            ],
            None,
        )
        .await
        .unwrap();
    // 4 runs of the queue_one job and 60 of the other, all due now.
    let mut pending = Vec::new();
    for (job_id, n) in [("serial", 4), ("parallel", 60)] {
        for i in 0..n {
            let at = now - chrono::Duration::milliseconds(i64::from(n - i));
            pending.push(Run::new_pending(
                tenant(),
                JobId::from(job_id),
                at,
                Trigger::Manual,
                5,
                at,
                1,
                now,
            ));
        }
    }
    let runs = queued(&store, &queue, pending).await;
    let executor = Recording::each(Duration::from_millis(20));
    let mut config = WorkerConfig::new(WorkerId::from("w1"));
    config.concurrency = 8;
    config.lease = Dur::secs(2);
    let states = drain(&db, clock, executor.clone(), config, &runs).await;

    assert!(states.iter().all(|s| *s == RunState::Succeeded), "{states:?}");
    let ran = executor.ran.lock().unwrap().clone();
    assert_eq!(ran.len(), runs.len(), "each run's payload ran once");
    let mut serial: Vec<(Instant, Instant)> = ran
        .iter()
        .filter(|(job, ..)| job == "serial")
        .map(|(_, start, end)| (*start, *end))
        .collect();
    serial.sort();
    for pair in serial.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "queue_one runs overlapped: {serial:?}");
    }
    let parallel_peak = ran
        .iter()
        .filter(|(job, ..)| job == "parallel")
        .map(|(_, start, _)| {
            ran.iter()
                .filter(|(job, s, e)| job == "parallel" && s <= start && start < e)
                .count()
        })
        .max()
        .unwrap();
    assert!(parallel_peak > 1, "the other job's runs ran side by side");
}

/// Runs of two jobs naming one concurrency key (limit 2) on a busy worker: never more than
/// two run at once, every run still runs once, the ones refused wait parked on the key and
/// are woken as slots free (never by the park's fallback), the higher-priority job's first;
/// a job without the key is not held back by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_naming_a_concurrency_key_run_at_most_its_limit_at_once_and_start_as_slots_free_by_priority() {
    let Fresh {
        _dir,
        db,
        clock,
        store,
        queue,
        now,
    } = Fresh::new();
    let key = sked_core::concurrency::Concurrency {
        key: "db".into(),
        limit: 2,
    };
    let jobs: Vec<Job> = ["low", "high", "free"]
        .into_iter()
        .map(|id| {
            let mut j = job(id, Overlap::Allow, now);
            j.spec.concurrency = (id != "free").then(|| key.clone());
            j
        })
        .collect();
    store.create_jobs(&jobs, None).await.unwrap();
    let mut pending = Vec::new();
    for (job, priority) in jobs.iter().zip([1, 9, 5]) {
        for i in 0..10 {
            let at = now - chrono::Duration::milliseconds(10 - i);
            let mut run = Run::of_job(job, at, Trigger::Manual, at, now);
            run.priority = priority;
            pending.push(run);
        }
    }
    let runs = queued(&store, &queue, pending).await;
    let executor = Recording::each(Duration::from_millis(20));
    let mut config = WorkerConfig::new(WorkerId::from("w1"));
    config.concurrency = 8;
    let started = Instant::now();
    let states = drain(&db, clock, executor.clone(), config, &runs).await;
    let drained = started.elapsed();

    assert!(states.iter().all(|s| *s == RunState::Succeeded), "{states:?}");
    let ran = executor.ran.lock().unwrap().clone();
    assert_eq!(ran.len(), runs.len(), "each run's payload ran once");
    let keyed: Vec<&(String, Instant, Instant)> = ran.iter().filter(|(job, ..)| job != "free").collect();
    let peak = |of: &[&(String, Instant, Instant)]| {
        of.iter()
            .map(|(_, start, _)| of.iter().filter(|(_, s, e)| s <= start && start < e).count())
            .max()
            .unwrap()
    };
    assert_eq!(peak(&keyed), 2, "at most the key's limit at once, and the limit used");
    let free: Vec<&(String, Instant, Instant)> = ran.iter().filter(|(job, ..)| job == "free").collect();
    assert!(peak(&free) > 2, "a job without the key runs past the key's limit");
    let last_high = keyed
        .iter()
        .filter(|(job, ..)| job == "high")
        .map(|(_, s, _)| *s)
        .max()
        .unwrap();
    let first_low = keyed
        .iter()
        .filter(|(job, ..)| job == "low")
        .map(|(_, s, _)| *s)
        .min()
        .unwrap();
    assert!(
        last_high <= first_low,
        "a waiting priority-1 run started before a priority-9 one"
    );
    // Twenty payloads of 20 ms two at a time: well under one park fallback, unless a woken
    // run had to wait for it.
    assert!(
        drained < Duration::from_millis(sked_core::work::one_transaction::PARK_FALLBACK.as_millis() as u64),
        "the keyed runs waited for the park's fallback, not for a wake: {drained:?}"
    );
}

/// A chain (a → b → c) and a fan-in (d after a and x) through a real worker on one SQLite
/// file, with no sweeper and no reaper: each upstream's end writes and enqueues the
/// downstream's run at its nominal time in its own transaction, so every occurrence runs
/// down the chain, each payload after its upstreams' ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_and_fan_ins_run_each_occurrence_after_its_upstreams_with_nothing_polling() {
    let Fresh {
        _dir,
        db,
        clock,
        store,
        queue,
        now,
    } = Fresh::new();
    let after = |id: &str, upstreams: &[&str]| {
        let mut j = job(id, Overlap::Allow, now);
        j.spec.schedule = serde_json::from_value(serde_json::json!({"after": {"jobs": upstreams}})).unwrap();
        j
    };
    let jobs = vec![
        job("a", Overlap::Allow, now),
        job("x", Overlap::Allow, now),
        after("b", &["a"]),
        after("c", &["b"]),
        after("d", &["a", "x"]),
    ];
    store.create_jobs(&jobs, None).await.unwrap();
    let times: Vec<Timestamp> = (1..=5).map(|i| now - chrono::Duration::seconds(i)).collect();
    let upstream_runs: Vec<Run> = times
        .iter()
        .flat_map(|t| [&jobs[0], &jobs[1]].map(|j| Run::of_job(j, *t, Trigger::Schedule, *t, now)))
        .collect();
    queued(&store, &queue, upstream_runs).await;
    let downstream: Vec<RunId> = times
        .iter()
        .flat_map(|t| ["b", "c", "d"].map(|j| RunId::derive(&JobId::from(j), *t)))
        .collect();
    let executor = Recording::each(Duration::from_millis(10));
    let mut config = WorkerConfig::new(WorkerId::from("w1"));
    config.concurrency = 4;
    let states = drain(&db, clock, executor.clone(), config, &downstream).await;

    assert!(states.iter().all(|s| *s == RunState::Succeeded), "{states:?}");
    let ran = executor.ran.lock().unwrap().clone();
    assert_eq!(ran.len(), times.len() * 5, "every job ran once per occurrence");
    for t in &times {
        let run = async |job: &str| {
            let id = RunId::derive(&JobId::from(job), *t);
            store.get_run(&tenant(), &id).await.unwrap().unwrap()
        };
        let (a, x, b, c, d) = (
            run("a").await,
            run("x").await,
            run("b").await,
            run("c").await,
            run("d").await,
        );
        for (downstream, upstreams) in [(&b, vec![&a]), (&c, vec![&b]), (&d, vec![&a, &x])] {
            assert_eq!(downstream.trigger, Trigger::After);
            for upstream in upstreams {
                assert!(
                    downstream.started_at >= upstream.finished_at,
                    "{} started before {} ended",
                    downstream.run_id,
                    upstream.run_id
                );
            }
        }
    }
}
