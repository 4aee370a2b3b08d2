//! The local engine in this process: an SQLite file in a temporary directory, file logs, the
//! core services (Sked, Sweeper, Reaper, Workers) and an executor chosen per scenario.
//!
//! Wiring mirrors `sked server` (crates/sked/src/runtime.rs) so the figures are the ones a
//! user of the local deployment gets; only the executor can be swapped for a no-op.

use anyhow::Context as _;
use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::ids::{TenantId, WorkerId};
use sked_core::ports::{
    Clock, ExecRequest, ExecResult, Executor, JobStore, LogLine, PageRequest, RunFilter, StopReason, SystemClock,
};
use sked_core::run::Run;
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_embedded::exec::{HttpExecutor, NoopExecutor, ProcessExecutor, Spawner, TaskExecutor};
use sked_embedded::logs::FileLogStore;
use sked_embedded::sqlite::{SqliteDb, SqliteQueue, SqliteStore, SqliteWork};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The tenant every benchmark job lives in.
pub fn tenant() -> TenantId {
    TenantId::from("bench")
}

/// Which executor workers run tasks with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exec {
    /// [`NoopExecutor`]: succeeds at once; measures the scheduler alone.
    Noop,
    /// The real process executor (starting payloads through the `sked` spawner when the `sked`
    /// binary sits next to this one, as in `sked server`) running the job's `command` task.
    Process,
}

impl Exec {
    /// Name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Exec::Noop => "noop",
            Exec::Process => "true",
        }
    }
}

/// The `sked` binary built beside this one (`target/release/sked`), if present.
pub fn sked_binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let sked = me.parent()?.join("sked");
    sked.is_file().then_some(sked)
}

/// The process executor, starting payloads through the `sked` spawner (as `sked server`
/// does) if `spawner` and the `sked` binary sits beside this one, else directly.
pub fn process_executor(clock: Arc<dyn Clock>, spawner: bool) -> ProcessExecutor {
    let process = ProcessExecutor::new(clock);
    match sked_binary().filter(|_| spawner) {
        Some(sked) => process.with_spawner(Spawner::sked(sked)),
        None => process,
    }
}

/// Counts finished executions, so a scenario knows when its work has run.
#[derive(Default)]
pub struct Counter {
    /// Executions returned.
    done: AtomicUsize,
}

impl Counter {
    /// Executions so far.
    pub fn get(&self) -> usize {
        self.done.load(Ordering::Relaxed)
    }
}

/// An executor that counts what its inner executor finished.
struct Counting {
    inner: Arc<dyn Executor>,
    counter: Arc<Counter>,
}

#[async_trait]
impl Executor for Counting {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        let result = self.inner.execute(request, output, stop).await;
        self.counter.done.fetch_add(1, Ordering::Relaxed);
        result
    }
}

/// Worker layout: `workers` worker tasks running `concurrency` attempts each.
#[derive(Debug, Clone, Copy)]
pub struct Slots {
    /// Worker tasks.
    pub workers: usize,
    /// Attempts per worker.
    pub concurrency: usize,
}

impl Slots {
    /// Total attempts at once.
    pub fn total(self) -> usize {
        self.workers * self.concurrency
    }
}

/// The engine of one scenario.
pub struct Engine {
    /// Temporary data directory (removed on drop) or a caller's directory.
    _dir: Option<tempfile::TempDir>,
    /// Where `sked.db` and `logs/` live.
    pub data_dir: PathBuf,
    /// The queue (for its depth).
    pub queue: Arc<SqliteQueue>,
    /// The ports the services run on.
    pub ports: Ports,
    /// The API-facing service.
    pub sked: Sked,
    /// Wakes the sweeper.
    signal: SweepSignal,
    /// Stops the background tasks.
    shutdown: CancellationToken,
    /// Sweeper, reaper, workers.
    tasks: JoinSet<()>,
    /// Executions finished by this engine's workers.
    pub counter: Arc<Counter>,
    /// Settings of the sweeper [`Self::start_sweeper`] starts (the server's by default).
    pub sweeper: SweeperConfig,
    /// Whether payloads start through the `sked` spawner process, as in `sked server`.
    pub spawner: bool,
}

impl Engine {
    /// Opens a fresh engine in a new temporary directory under `parent` (or the system's),
    /// removed with the engine: a case's data goes when the case ends (since silent payloads
    /// leave no log files, removing it is cheap; keeping every case's data to the end took
    /// ~10 GB and slowed the later cases while the disk wrote it back).
    pub fn fresh(parent: Option<&Path>) -> anyhow::Result<Engine> {
        let dir = case_dir(parent)?;
        let mut engine = Engine::open(dir.path())?;
        engine._dir = Some(dir);
        Ok(engine)
    }

    /// Opens (creating) the engine's files in `dir`; starts nothing.
    pub fn open(dir: &Path) -> anyhow::Result<Engine> {
        std::fs::create_dir_all(dir)?;
        let db_path = dir.join("sked.db");
        let db = Arc::new(SqliteDb::open(&db_path).with_context(|| format!("opening {}", db_path.display()))?);
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let queue = Arc::new(SqliteQueue::new(db.clone(), clock.clone()));
        let ports = Ports {
            store: Arc::new(SqliteStore::new(db.clone())),
            queue: queue.clone(),
            work: Arc::new(SqliteWork::new(db.clone(), clock.clone())),
            logs: Arc::new(FileLogStore::new(dir.join("logs"))),
            clock,
            observer: Arc::new(sked_core::ports::NoObserver),
        };
        let signal = SweepSignal::default();
        let sked = Sked::new(ports.clone(), SkedConfig::default(), signal.clone());
        Ok(Engine {
            _dir: None,
            data_dir: dir.to_path_buf(),
            queue,
            ports,
            sked,
            signal,
            shutdown: CancellationToken::new(),
            tasks: JoinSet::new(),
            counter: Arc::default(),
            sweeper: SweeperConfig::default(),
            spawner: true,
        })
    }

    /// Starts the sweeper with the server's settings.
    pub fn start_sweeper(&mut self) {
        let sweeper = Sweeper::new(self.ports.clone(), self.signal.clone(), self.sweeper);
        self.tasks.spawn(sweeper.run(self.shutdown.clone()));
    }

    /// Starts the reaper with the server's settings.
    pub fn start_reaper(&mut self) {
        let reaper = Reaper::new(self.ports.clone(), ReaperConfig::default());
        self.tasks.spawn(reaper.run(self.shutdown.clone()));
    }

    /// Starts `slots.workers` workers running tasks with `exec`.
    pub fn start_workers(&mut self, exec: Exec, slots: Slots) -> anyhow::Result<()> {
        let inner: Arc<dyn Executor> = match exec {
            Exec::Noop => Arc::new(NoopExecutor),
            Exec::Process => {
                let clock = self.ports.clock.clone();
                let process = process_executor(clock.clone(), self.spawner);
                Arc::new(TaskExecutor::from_parts(process, HttpExecutor::new(clock)))
            }
        };
        let executor: Arc<dyn Executor> = Arc::new(Counting {
            inner,
            counter: self.counter.clone(),
        });
        for n in 1..=slots.workers {
            let mut config = WorkerConfig::new(WorkerId(format!("bench-{n}")));
            config.concurrency = slots.concurrency;
            let worker = Worker::new(self.ports.clone(), executor.clone(), config);
            self.tasks.spawn(worker.run(self.shutdown.clone()));
        }
        Ok(())
    }

    /// Sweeper, reaper and workers: the whole server minus the API.
    pub fn start_all(&mut self, exec: Exec, slots: Slots) -> anyhow::Result<()> {
        self.start_sweeper();
        self.start_reaper();
        self.start_workers(exec, slots)
    }

    /// Waits until `n` executions have finished and the queue is empty (every run was
    /// completed and acked), or fails after `limit`.
    pub async fn wait_drained(&self, n: usize, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            if self.counter.get() >= n && self.queue.depth().await? == 0 {
                return Ok(());
            }
            if started.elapsed() > limit {
                anyhow::bail!(
                    "not drained after {limit:?}: {} of {n} executions, queue depth {}",
                    self.counter.get(),
                    self.queue.depth().await?
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the queue holds `n` messages (the sweeper has fired that many runs).
    pub async fn wait_queued(&self, n: u64, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.queue.depth().await? < n {
            if started.elapsed() > limit {
                anyhow::bail!("only {} of {n} runs queued after {limit:?}", self.queue.depth().await?);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Stops every background task and waits for them.
    pub async fn stop(&mut self) {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
    }

    /// Size of the database file and its WAL, in MiB.
    pub fn db_mib(&self) -> f64 {
        let size = |name: &str| std::fs::metadata(self.data_dir.join(name)).map_or(0, |m| m.len());
        (size("sked.db") + size("sked.db-wal")) as f64 / (1024.0 * 1024.0)
    }
}

/// A new, empty temporary directory under `parent` (or the system's), removed on drop.
pub fn case_dir(parent: Option<&Path>) -> anyhow::Result<tempfile::TempDir> {
    let builder = tempfile::Builder::new().prefix("case-").to_owned();
    Ok(match parent {
        Some(p) => builder.tempdir_in(p)?,
        None => builder.tempdir()?,
    })
}

/// Every run of `store`'s bench tenant with `scheduled_for` in `[since, until)`, read back
/// page by page.
pub async fn runs_between(store: &dyn JobStore, since: Timestamp, until: Timestamp) -> anyhow::Result<Vec<Run>> {
    let filter = RunFilter {
        since: Some(since),
        until: Some(until),
        ..RunFilter::default()
    };
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_runs(&tenant(), &filter, &PageRequest { cursor, limit: 5000 })
            .await?;
        out.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
}

/// Start lag of each run's first attempt, in ms (runs without an attempt are skipped), and
/// the earliest and latest first-attempt start.
pub fn lags(runs: &[Run]) -> (Vec<f64>, Option<Timestamp>, Option<Timestamp>) {
    let mut lags = Vec::with_capacity(runs.len());
    let (mut first, mut last): (Option<Timestamp>, Option<Timestamp>) = (None, None);
    for run in runs {
        if let Some(a) = run.attempts.first() {
            lags.push(ms_between(run.scheduled_for, a.started_at));
            first = Some(first.map_or(a.started_at, |f| f.min(a.started_at)));
            last = Some(last.map_or(a.started_at, |l| l.max(a.started_at)));
        }
    }
    (lags, first, last)
}

/// `b − a` in milliseconds.
pub fn ms_between(a: Timestamp, b: Timestamp) -> f64 {
    (b - a).num_microseconds().map_or(f64::MAX, |us| us as f64 / 1000.0)
}
