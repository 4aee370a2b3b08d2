//! What `sked server` and `sked worker` share: structured logging (and span export), the shutdown signal,
//! opening the data directory into sked-core's ports, and spawning workers, a reaper and a
//! notifier (and, where the sweeper runs, the log retention pass).
//!
//! This is wiring only. Scheduling behaviour lives in sked-core; storage in sked-embedded.

use crate::cli::{LogFormat, RuntimeArgs, StoreArgs};
use crate::telemetry::Telemetry;
use anyhow::Context as _;
use sked_api::metrics::Recorder;
use sked_core::WorkerId;
use sked_core::duration::Dur;
use sked_core::ports::{Clock, Executor, KeyStore, LogRetention, QuotaStore, SystemClock, WebhookSecrets};
use sked_core::service::alerts::{Notifier, NotifierConfig, NotifierPorts};
use sked_core::service::keys::Keys;
use sked_core::service::log_retention::{LogPruner, LogRetentionConfig, Retention};
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::worker::{LongLease, Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_embedded::exec::{HttpExecutor, ProcessExecutor, Spawner, TaskExecutor};
use sked_embedded::logs::FileLogStore;
use sked_embedded::sqlite::{SqliteDb, SqliteKeys, SqliteQueue, SqliteStore, SqliteWork};
use sked_embedded::webhook::HttpWebhookSender;
use sked_postgres::{PgDb, PgKeys, PgLogs, PgOptions, PgQueue, PgStore, PgWork};
use std::sync::Arc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Installs the tracing subscriber: to stderr (colours only on a terminal), filtered by
/// `SKED_LOG` (default `info`), as text or as JSON lines (`--log-format json`,
/// `SKED_LOG_FORMAT=json`): an event's fields at the top level of its object, the fields of
/// the span it happened in (an attempt's `job_id`, `run_id`, `attempt`) under `span`. When an
/// OTLP endpoint is configured, spans are exported there too ([`crate::telemetry`], `service`
/// names the process); keep the answer until the process ends, so the last spans are flushed.
///
/// A log line that cannot be written (stderr on a full disk, a closed pipe) is dropped.
/// tracing-subscriber's default would report it with `eprintln!`, which panics when stderr
/// is what failed: the task that logged dies — the signal handler, so SIGTERM was lost;
/// the main task, so the server exited 101 at its first log line.
pub fn init_tracing(format: LogFormat, service: &str) -> anyhow::Result<Telemetry> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = EnvFilter::try_from_env("SKED_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let lines = if format == LogFormat::Json {
        lines
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed()
    } else {
        lines.boxed()
    };
    let (spans, telemetry) = crate::telemetry::otlp_layer(service)?;
    // A second init (never expected in this binary) is harmless, so its error is ignored.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(spans)
        .try_init();
    Ok(telemetry)
}

/// A token cancelled on the first SIGINT or SIGTERM.
pub fn shutdown_on_signals() -> anyhow::Result<CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let cancel = token.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
        cancel.cancel();
    });
    Ok(token)
}

/// The opened data directory: sked-core's ports over it, and the executor workers use.
pub struct Local {
    /// Store, queue, work, logs and clock.
    pub ports: Ports,
    /// API keys, in the same file.
    pub keys: Arc<dyn KeyStore>,
    /// Tenants' quotas, in the same file (the store's transactions enforce them).
    pub quotas: Arc<dyn QuotaStore>,
    /// Tenants' webhook secrets, in the same file.
    pub webhook_secrets: Arc<dyn WebhookSecrets>,
    /// Removing attempts' logs past their retention (the same logs as `ports.logs`).
    pub log_retention: Arc<dyn LogRetention>,
    /// Runs command and HTTP tasks.
    pub executor: Arc<dyn Executor>,
    /// This process's metrics: the ports report to it; `GET /metrics` reads it.
    pub metrics: Arc<Recorder>,
}

/// Opens the store `args` names: the PostgreSQL database of `--database-url`, or else
/// (creating it if needed) the data dir's `sked.db` and `logs/`.
pub async fn open(args: &StoreArgs) -> anyhow::Result<Local> {
    let dir = &args.data_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating data directory {}", dir.display()))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let metrics = Arc::new(Recorder::new());
    let executor = Arc::new(payload_executor(clock.clone())?);
    match &args.database_url {
        Some(url) => open_postgres(url, args, clock, metrics, executor).await,
        None => {
            if args.log_bucket.is_some() || args.log_endpoint.is_some() {
                anyhow::bail!(
                    "--log-bucket/--log-endpoint (SKED_LOG_BUCKET/SKED_LOG_ENDPOINT) apply to a PostgreSQL database only (--database-url): with the data dir's SQLite file, logs are files under {}",
                    dir.join("logs").display()
                );
            }
            open_sqlite(dir, clock, metrics, executor)
        }
    }
}

fn open_sqlite(
    dir: &std::path::Path,
    clock: Arc<dyn Clock>,
    metrics: Arc<Recorder>,
    executor: Arc<dyn Executor>,
) -> anyhow::Result<Local> {
    let db_path = dir.join("sked.db");
    let db = Arc::new(SqliteDb::open(&db_path).with_context(|| format!("opening {}", db_path.display()))?);
    let store = Arc::new(SqliteStore::new(db.clone()));
    // The queue is a table of the store's file: the work port makes each hand-over of a run
    // one transaction over both, and the process's workers share its one receive turn.
    let logs = Arc::new(FileLogStore::new(dir.join("logs")));
    let ports = Ports {
        store: store.clone(),
        queue: Arc::new(SqliteQueue::new(db.clone(), clock.clone())),
        work: Arc::new(SqliteWork::new(db.clone(), clock.clone())),
        logs: logs.clone(),
        clock,
        observer: metrics.clone(),
    };
    Ok(Local {
        ports,
        metrics,
        log_retention: logs,
        keys: Arc::new(SqliteKeys::new(db)),
        quotas: store.clone(),
        webhook_secrets: store,
        executor,
    })
}

/// Everything in the database at `url` (migrated first), run logs included (or, with
/// `--log-bucket`, finished logs in that bucket), so that any process on any host reads any
/// run and its log.
async fn open_postgres(
    url: &str,
    args: &StoreArgs,
    clock: Arc<dyn Clock>,
    metrics: Arc<Recorder>,
    executor: Arc<dyn Executor>,
) -> anyhow::Result<Local> {
    // The URL may hold a password: errors name the database's host, never the URL.
    let db = PgDb::connect(url, &PgOptions::default())
        .await
        .context("opening the PostgreSQL database of --database-url")?;
    let store = Arc::new(PgStore::new(db.clone()));
    let (logs, log_retention) = crate::pg_logs::open(PgLogs::new(db.clone()), args).await?;
    let ports = Ports {
        store: store.clone(),
        queue: Arc::new(PgQueue::new(db.clone(), clock.clone())),
        work: Arc::new(PgWork::new(db.clone(), clock.clone())),
        logs,
        clock,
        observer: metrics.clone(),
    };
    Ok(Local {
        ports,
        metrics,
        log_retention,
        keys: Arc::new(PgKeys::new(db)),
        quotas: store.clone(),
        webhook_secrets: store,
        executor,
    })
}

/// Process and HTTP executors; payloads start through this binary's spawner (`sked
/// __spawner`), so that nothing of theirs outlives a worker killed with SIGKILL.
pub fn payload_executor(clock: Arc<dyn Clock>) -> anyhow::Result<TaskExecutor> {
    let sked = std::env::current_exe().context("locating the sked binary for the payload spawner")?;
    let process = ProcessExecutor::new(clock.clone()).with_spawner(Spawner::sked(sked));
    Ok(TaskExecutor::from_parts(process, HttpExecutor::new(clock)))
}

/// This host's name, for worker ids.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// The settings of worker `n` of this process (id `<hostname>-<pid>-<n>`), checked.
pub fn worker_config(args: &RuntimeArgs, n: usize) -> anyhow::Result<WorkerConfig> {
    let mut config = WorkerConfig::new(WorkerId(format!("{}-{}-{n}", hostname(), std::process::id())));
    config.concurrency = args.concurrency.max(1);
    config.lease = Dur::secs(args.lease.max(1));
    config.long_lease = args.long_lease.filter(|&secs| secs > 0).map(|secs| LongLease {
        after: Dur::secs(args.long_lease_after),
        lease: Dur::secs(secs),
    });
    config.grace = Dur::secs(args.grace);
    config.max_clock_skew = Dur::millis(args.max_clock_skew_ms);
    config
        .check()
        .map_err(|e| anyhow::anyhow!("--lease, --long-lease, --long-lease-after, --grace, --max-clock-skew-ms: {e}"))?;
    Ok(config)
}

/// Spawns `args.workers` workers, one reaper and one notifier (failure alerts) onto `tasks`.
pub fn spawn_background_tasks(
    local: &Local,
    args: &RuntimeArgs,
    shutdown: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    for n in 1..=args.workers {
        let config = worker_config(args, n)?;
        tracing::info!(worker = %config.id, concurrency = config.concurrency, "starting worker");
        let worker = Worker::new(local.ports.clone(), local.executor.clone(), config);
        tasks.spawn(worker.run(shutdown.clone()));
    }
    let reaper = Reaper::new(local.ports.clone(), ReaperConfig::default());
    tasks.spawn(reaper.run(shutdown.clone()));
    tasks.spawn(notifier(&local.ports, local.webhook_secrets.clone(), NotifierConfig::default()).run(shutdown.clone()));
    Ok(())
}

/// Spawns the log retention pass onto `tasks` (nothing with `Retention::Forever`): in the
/// processes that fire the jobs, one or two per deployment, not in every worker.
pub fn spawn_log_retention(local: &Local, retention: Retention, shutdown: &CancellationToken, tasks: &mut JoinSet<()>) {
    match retention {
        Retention::Forever => tracing::info!("log retention off: attempts' logs are kept forever"),
        Retention::Keep(keep) => {
            tracing::info!(keep = %keep, "removing attempts' logs older than the retention period, hourly");
            let pruner = LogPruner::new(
                local.log_retention.clone(),
                local.ports.clock.clone(),
                LogRetentionConfig::keeping(keep),
            );
            tasks.spawn(pruner.run(shutdown.clone()));
        }
    }
}

/// Serves this process's `/metrics`, `/healthz` and `/readyz` on `listen` until `shutdown`,
/// behind the data dir's API keys (the probes need none); prints `<who> metrics on
/// http://<addr>` once bound.
pub async fn serve_ops(
    local: &Local,
    listen: std::net::SocketAddr,
    who: &str,
    shutdown: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr().context("reading the listener's address")?;
    let sked = Sked::new(local.ports.clone(), SkedConfig::default(), SweepSignal::default());
    let keys = Keys::new(local.keys.clone(), local.ports.clock.clone());
    let config = sked_api::ApiConfig {
        metrics: local.metrics.clone(),
        ..sked_api::ApiConfig::default()
    };
    let router = sked_api::ops_router(sked, config, sked_api::Auth::Keys(keys));
    let stop = shutdown.clone();
    let what = who.to_string();
    tasks.spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, process = %what, "serving /metrics failed");
        }
    });
    announce(&format!("{who} metrics on http://{addr}"));
    Ok(())
}

/// The notifier of failure alerts over `ports`' store, posting over HTTP.
pub fn notifier(ports: &Ports, secrets: Arc<dyn WebhookSecrets>, config: NotifierConfig) -> Notifier {
    let notifier_ports = NotifierPorts {
        store: ports.store.clone(),
        secrets,
        sender: Arc::new(HttpWebhookSender::new()),
        clock: ports.clock.clone(),
    };
    Notifier::new(notifier_ports, config)
}

/// Waits for the background tasks to stop after shutdown, at most `limit`.
pub async fn drain(mut tasks: JoinSet<()>, limit: std::time::Duration) {
    let all = async {
        while let Some(done) = tasks.join_next().await {
            if let Err(err) = done {
                tracing::error!(error = %err, "background task ended abnormally");
            }
        }
    };
    if tokio::time::timeout(limit, all).await.is_err() {
        tracing::warn!("background tasks still busy after {limit:?}; exiting anyway");
    }
}

/// Prints one line on stdout and flushes it (tests and scripts wait for it).
pub fn announce(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    // A closed stdout must not stop the server.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
