//! `sked worker --backend aws` (build feature `aws`): workers of sked's AWS deployment, as the
//! ECS Fargate service of `template.yaml` runs them. The same core [`Worker`] as locally, on
//! the AWS ports: runs come from the three SQS queues, jobs and runs live in DynamoDB, logs go
//! to CloudWatch Logs and S3.
//!
//! Configuration comes from the environment, read once here (`sked_aws::env` names every
//! variable: `SKED_TABLE`, `SKED_QUEUE_HIGH|NORMAL|LOW`, `SKED_LOG_BUCKET`, `SKED_LOG_GROUP`,
//! `SKED_ECS_*`, `AWS_ENDPOINT_URL`, …); the flags `--workers`, `--concurrency`, `--lease` and
//! `--grace` work as locally (`--data-dir` is not used).
//!
//! - `command` and `http` tasks run in this process (the local executors, payloads started
//!   through the same spawner); `container` tasks go to ECS Fargate through `sked_aws::EcsExecutor` when
//!   `SKED_ECS_CLUSTER` is set, and otherwise fail with the local "no container executor"
//!   error.
//! - Without `SKED_LOG_BUCKET`/`SKED_LOG_GROUP`, logs are written to files under the
//!   temporary directory (with a warning): the runs work, but the API cannot read their logs.
//! - No reaper runs here: the sweeper function reaps on every tick.
//! - Metrics: the workers' runs started and finished, retries, start lags and gauges, written
//!   on stdout every `SKED_METRICS_INTERVAL` seconds (60) as CloudWatch embedded-metric-format
//!   lines (`sked_aws::emf`), and once more at shutdown.

use crate::cli::WorkerArgs;
use crate::runtime;
use anyhow::Context as _;
use sked_core::duration::Dur;
use sked_core::ports::{Clock, Executor, SystemClock};
use sked_core::service::alerts::NotifierConfig;
use sked_core::service::worker::Worker;
use sked_embedded::logs::FileLogStore;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// How often each AWS worker process looks for due alerts: every pass queries each shard's
/// `ALERT#` key, so at the local default (1 s) an idle worker would make 4 index queries a
/// second for nothing; at 5 s an alert is posted within about 5 s of its run's end, and a
/// retry within 5 s of its time.
const NOTIFIER_INTERVAL: Dur = Dur::secs(5);

/// Runs AWS workers until a shutdown signal.
pub async fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let _telemetry = runtime::init_tracing(args.runtime.log_format(), "sked-worker")?;
    let shutdown = runtime::shutdown_on_signals()?;
    let settings = sked_aws::Settings::from_env().context("reading the AWS settings from the environment")?;
    let clients = sked_aws::connect(&settings.aws).await;
    sked_aws::check_table_layout(&clients, &settings.aws)
        .await
        .context("checking the table's layout")?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let metrics = Arc::new(sked_aws::EmfRecorder::from_env("sked-worker"));
    let (ports, tenants) = sked_aws::ports_and_tenants(&clients, &settings.aws, clock.clone());
    let mut ports = ports.with_observer(metrics.clone());
    if settings.aws.logs.is_none() {
        let dir = std::env::temp_dir().join("sked-logs");
        tracing::warn!(dir = %dir.display(), "SKED_LOG_BUCKET/SKED_LOG_GROUP not set: attempt logs go to local files the API cannot read");
        ports.logs = Arc::new(FileLogStore::new(dir));
    }
    let mut executor = runtime::payload_executor(clock.clone())?;
    match &settings.aws.ecs {
        Some(ecs) => {
            tracing::info!(cluster = %ecs.cluster, task_definition = %ecs.task_definition, "container tasks run on ECS Fargate");
            let ecs = sked_aws::EcsExecutor::new(clients.ecs.clone(), ecs.clone(), clock.clone());
            executor = executor.with_container_executor(Arc::new(ecs));
        }
        None => tracing::info!("SKED_ECS_CLUSTER not set: container tasks fail"),
    }
    let executor: Arc<dyn Executor> = Arc::new(executor);

    let mut tasks = JoinSet::new();
    for n in 1..=args.runtime.workers {
        let mut config = runtime::worker_config(&args.runtime, n)?;
        // The sweeper and the API fire runs ahead of their time (SQS delays them).
        config.fired_ahead = true;
        tracing::info!(worker = %config.id, concurrency = config.concurrency, "starting worker");
        tasks.spawn(Worker::new(ports.clone(), executor.clone(), config).run(shutdown.clone()));
    }
    let notifier = NotifierConfig {
        interval: NOTIFIER_INTERVAL,
        ..NotifierConfig::default()
    };
    tasks.spawn(runtime::notifier(&ports, tenants.webhook_secrets, notifier).run(shutdown.clone()));
    tasks.spawn(print_metrics(
        metrics.clone(),
        clock.clone(),
        metrics_interval()?,
        shutdown.clone(),
    ));
    tracing::info!(table = %settings.aws.table, workers = args.runtime.workers, "sked worker (aws) started");
    runtime::announce("sked worker ready");

    shutdown.cancelled().await;
    runtime::drain(tasks, Duration::from_secs(args.runtime.grace + 5)).await;
    metrics.print(clock.now().timestamp_millis());
    tracing::info!("sked worker stopped");
    Ok(ExitCode::SUCCESS)
}

/// Seconds between two metric lines: `SKED_METRICS_INTERVAL` (default 60).
fn metrics_interval() -> anyhow::Result<Duration> {
    match std::env::var(sked_aws::env::METRICS_INTERVAL) {
        Err(_) => Ok(Duration::from_secs(60)),
        Ok(text) => {
            let secs: u64 = text
                .parse()
                .ok()
                .filter(|s| (1..=3600).contains(s))
                .with_context(|| format!("{}={text:?}: use 1 to 3600 seconds", sked_aws::env::METRICS_INTERVAL))?;
            Ok(Duration::from_secs(secs))
        }
    }
}

/// Writes the workers' metrics as embedded-metric-format lines on stdout every `interval`
/// (CloudWatch Logs makes metrics of them), until `shutdown`.
async fn print_metrics(
    metrics: Arc<sked_aws::EmfRecorder>,
    clock: Arc<dyn Clock>,
    interval: Duration,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => metrics.print(clock.now().timestamp_millis()),
        }
    }
}
