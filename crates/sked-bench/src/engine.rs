//! The local engine in this process: the core services (Sked, Sweeper, Reaper, Workers) over
//! the ports of the run's [`Backend`] — an SQLite file and file logs in a temporary
//! directory, or a fresh PostgreSQL database holding everything, run logs included — and an
//! executor chosen per scenario.
//!
//! Wiring mirrors `sked server` (crates/sked/src/runtime.rs, `open_sqlite` and
//! `open_postgres`) so the figures are the ones a user of that deployment gets; only the
//! executor can be swapped for a no-op. The scenarios never see which backend they run on.

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
use sked_postgres::{PgDb, PgLogs, PgOptions, PgQueue, PgStore, PgWork};
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

/// Which database a run's engines (and the `sked` processes of scale-out) keep their data in.
#[derive(Clone)]
pub enum Backend {
    /// `sked.db` in the case's directory, run logs as files beside it.
    Sqlite,
    /// A fresh database per case on the run's one cluster.
    Postgres(Arc<crate::postgres::Cluster>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Backend {
    /// Name in the output.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// A new place for a case's data: `dir`, and on PostgreSQL a new, empty database.
    pub fn place(&self, dir: &Path) -> anyhow::Result<Place> {
        Ok(Place {
            dir: dir.to_path_buf(),
            database_url: match self {
                Backend::Sqlite => None,
                Backend::Postgres(cluster) => Some(cluster.fresh_database()?),
            },
        })
    }
}

/// Where one case's data lives; opening it twice opens the same data.
#[derive(Debug, Clone)]
pub struct Place {
    /// The data directory (`sked.db` and `logs/` on SQLite; `--data-dir` of `sked` processes).
    pub dir: PathBuf,
    /// The case's PostgreSQL database (`--database-url`), if the backend is PostgreSQL.
    pub database_url: Option<String>,
}

/// The engine's handle on its database, for what the ports do not ask: queue depth, size.
enum Db {
    /// The SQLite queue (its depth is one `count(*)`) and the file's directory.
    Sqlite(Arc<SqliteQueue>, PathBuf),
    /// The PostgreSQL pool the ports share (boxed: its config is large).
    Postgres(Box<PgDb>),
}

/// The engine of one scenario.
pub struct Engine {
    /// Temporary data directory (removed on drop) or a caller's directory.
    _dir: Option<tempfile::TempDir>,
    /// Where the case's data lives.
    pub place: Place,
    /// The database, for its queue depth and size.
    db: Db,
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
    /// On PostgreSQL the case's database stays to the end of the run (the cluster goes then).
    pub async fn fresh(parent: Option<&Path>, backend: &Backend) -> anyhow::Result<Engine> {
        let dir = case_dir(parent)?;
        let place = backend.place(dir.path())?;
        let mut engine = Engine::open(&place).await?;
        engine._dir = Some(dir);
        Ok(engine)
    }

    /// Opens (creating) the engine's data at `place`; starts nothing.
    pub async fn open(place: &Place) -> anyhow::Result<Engine> {
        let dir = &place.dir;
        std::fs::create_dir_all(dir)?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let observer = Arc::new(sked_core::ports::NoObserver);
        let (ports, db) = match &place.database_url {
            None => {
                let db_path = dir.join("sked.db");
                let db = Arc::new(SqliteDb::open(&db_path).with_context(|| format!("opening {}", db_path.display()))?);
                let queue = Arc::new(SqliteQueue::new(db.clone(), clock.clone()));
                let ports = Ports {
                    store: Arc::new(SqliteStore::new(db.clone())),
                    queue: queue.clone(),
                    work: Arc::new(SqliteWork::new(db.clone(), clock.clone())),
                    logs: Arc::new(FileLogStore::new(dir.join("logs"))),
                    clock,
                    observer,
                };
                (ports, Db::Sqlite(queue, dir.clone()))
            }
            Some(url) => {
                let db = PgDb::connect(url, &PgOptions::default())
                    .await
                    .context("opening the case's PostgreSQL database")?;
                let ports = Ports {
                    store: Arc::new(PgStore::new(db.clone())),
                    queue: Arc::new(PgQueue::new(db.clone(), clock.clone())),
                    work: Arc::new(PgWork::new(db.clone(), clock.clone())),
                    logs: Arc::new(PgLogs::new(db.clone())),
                    clock,
                    observer,
                };
                (ports, Db::Postgres(Box::new(db)))
            }
        };
        let signal = SweepSignal::default();
        let sked = Sked::new(ports.clone(), SkedConfig::default(), signal.clone());
        Ok(Engine {
            _dir: None,
            place: place.clone(),
            db,
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
            if self.counter.get() >= n && self.depth().await? == 0 {
                return Ok(());
            }
            if started.elapsed() > limit {
                anyhow::bail!(
                    "not drained after {limit:?}: {} of {n} executions, queue depth {}",
                    self.counter.get(),
                    self.depth().await?
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the queue holds `n` messages (the sweeper has fired that many runs).
    pub async fn wait_queued(&self, n: u64, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.depth().await? < n {
            if started.elapsed() > limit {
                anyhow::bail!("only {} of {n} runs queued after {limit:?}", self.depth().await?);
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

    /// Messages in the dispatch queue (leased ones included).
    pub async fn depth(&self) -> anyhow::Result<u64> {
        Ok(match &self.db {
            Db::Sqlite(queue, _) => queue.depth().await?,
            Db::Postgres(db) => {
                let n: i64 = db
                    .get()
                    .await?
                    .query_one("SELECT count(*) FROM dispatch", &[])
                    .await?
                    .get(0);
                n.max(0) as u64
            }
        })
    }

    /// Size of the data in MiB: the SQLite file and its WAL, or the PostgreSQL database
    /// (`pg_database_size`: tables and indexes, not the cluster's WAL).
    pub async fn db_mib(&self) -> anyhow::Result<f64> {
        let bytes = match &self.db {
            Db::Sqlite(_, dir) => {
                let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
                size("sked.db") + size("sked.db-wal")
            }
            Db::Postgres(db) => {
                let n: i64 = db
                    .get()
                    .await?
                    .query_one("SELECT pg_database_size(current_database())", &[])
                    .await?
                    .get(0);
                n.max(0) as u64
            }
        };
        Ok(bytes as f64 / (1024.0 * 1024.0))
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
