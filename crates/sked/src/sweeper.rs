//! `sked sweeper`: the sweeper alone, on the SQLite file of a `sked server --no-sweeper`, so
//! that the API, the sweeper and the workers can run as processes of their own. Any number may
//! run at once: a firing is conditional on the job's version and next fire time, and a run's
//! id is its occurrence, so two sweepers never fire one occurrence twice; each fires what is
//! due when it looks, so none is missed while one runs.
//!
//! No API call wakes a sweeper in another process: it sleeps until the next due time it knows
//! or [`POLL`], whichever comes first, so a job created due at once starts within [`POLL`]
//! (in `sked server` the sweeper is woken by the change itself).
//!
//! It also runs the log retention pass (`--log-retention`): old attempts' logs are removed by
//! the processes that fire the jobs.
//!
//! Prints `sked sweeper ready` on stdout once started (after `sked sweeper metrics on
//! http://<addr>` with `--metrics-listen`); on SIGINT or SIGTERM it stops between sweeps and
//! exits 0.

use crate::cli::SweeperArgs;
use crate::runtime;
use sked_core::duration::Dur;
use sked_core::service::SweepSignal;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use std::process::ExitCode;
use std::time::Duration;
use tokio::task::JoinSet;

/// The longest a sweeper of its own sleeps without looking for new due jobs.
pub const POLL: Dur = Dur::millis(250);

/// Runs the sweeper until a shutdown signal.
pub async fn run(args: SweeperArgs) -> anyhow::Result<ExitCode> {
    let _telemetry = runtime::init_tracing(args.store.log_format(), "sked-sweeper")?;
    let shutdown = runtime::shutdown_on_signals()?;
    let local = runtime::open(&args.store).await?;

    let mut tasks = JoinSet::new();
    let config = SweeperConfig {
        max_sleep: POLL,
        ..SweeperConfig::default()
    };
    let sweeper = Sweeper::new(local.ports.clone(), SweepSignal::default(), config);
    tasks.spawn(sweeper.run(shutdown.clone()));
    runtime::spawn_log_retention(&local, args.retention.log_retention, &shutdown, &mut tasks);
    if let Some(listen) = args.metrics_listen {
        runtime::serve_ops(&local, listen, "sked sweeper", &shutdown, &mut tasks).await?;
    }
    tracing::info!(data_dir = %args.store.data_dir.display(), poll_ms = POLL.0.as_millis() as u64, "sked sweeper started");
    runtime::announce("sked sweeper ready");

    shutdown.cancelled().await;
    runtime::drain(tasks, Duration::from_secs(5)).await;
    tracing::info!("sked sweeper stopped");
    Ok(ExitCode::SUCCESS)
}
