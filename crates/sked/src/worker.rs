//! `sked worker`: workers (and a reaper) in their own process, on the SQLite file of a
//! running `sked server`. Several may run at once; each claims runs through the shared
//! dispatch queue with fenced leases, so a killed worker's runs move to another.
//!
//! Prints `sked worker ready` on stdout once its workers are started; on SIGINT or SIGTERM
//! it stops taking work, stops its payloads (their runs are retried elsewhere) and exits 0.
//! With `--metrics-listen ADDR` it also serves its own `GET /metrics` (its workers' runs
//! started and finished, its retries, its workers) and `/healthz` there, behind the same API
//! keys as the server, and prints `sked worker metrics on http://<addr>` first.
//!
//! With `--backend aws` (build feature `aws`) the workers serve sked's AWS deployment instead:
//! see [`crate::aws`].

use crate::cli::{Backend, WorkerArgs};
use crate::runtime;
use std::process::ExitCode;
use std::time::Duration;
use tokio::task::JoinSet;

/// Runs workers until a shutdown signal.
pub async fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    if args.backend == Backend::Aws {
        return run_aws(args).await;
    }
    let _telemetry = runtime::init_tracing(args.runtime.log_format(), "sked-worker")?;
    let shutdown = runtime::shutdown_on_signals()?;
    let local = runtime::open(&args.runtime.store).await?;

    let mut tasks = JoinSet::new();
    runtime::spawn_background_tasks(&local, &args.runtime, &shutdown, &mut tasks)?;
    if let Some(listen) = args.metrics_listen {
        runtime::serve_ops(&local, listen, "sked worker", &shutdown, &mut tasks).await?;
    }
    tracing::info!(data_dir = %args.runtime.store.data_dir.display(), workers = args.runtime.workers, "sked worker started");
    runtime::announce("sked worker ready");

    shutdown.cancelled().await;
    runtime::drain(tasks, Duration::from_secs(args.runtime.grace + 5)).await;
    tracing::info!("sked worker stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "aws")]
async fn run_aws(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    crate::aws::run(args).await
}

#[cfg(not(feature = "aws"))]
async fn run_aws(_args: WorkerArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this sked was built without AWS support: build it with `cargo build --release -p sked --features aws`"
    )
}
