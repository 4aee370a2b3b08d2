//! `sked server`: the whole local deployment in one process — the REST API on a TCP
//! listener, the sweeper, a reaper and N workers, all over one SQLite file.
//!
//! Once everything is started it prints exactly one line on stdout,
//! `sked listening on http://<addr>` (with the actual port when `--listen` asked for 0),
//! and on SIGINT or SIGTERM it stops accepting requests, lets the workers stop their
//! payloads, and exits 0.

use crate::cli::ServerArgs;
use crate::runtime;
use anyhow::Context as _;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Sked, SkedConfig, SweepSignal};
use std::process::ExitCode;
use std::time::Duration;
use tokio::task::JoinSet;

/// Runs the server until a shutdown signal.
pub async fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    runtime::init_tracing(args.runtime.log_json);
    let shutdown = runtime::shutdown_on_signals()?;
    let local = runtime::open(&args.runtime)?;

    let signal = SweepSignal::default();
    let sked = Sked::new(local.ports.clone(), SkedConfig::default(), signal.clone());

    let mut tasks = JoinSet::new();
    let sweeper = Sweeper::new(local.ports.clone(), signal, SweeperConfig::default());
    tasks.spawn(sweeper.run(shutdown.clone()));
    runtime::spawn_workers_and_reaper(&local, &args.runtime, &shutdown, &mut tasks)?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr().context("reading the listener's address")?;
    let router = sked_api::router(sked, sked_api::ApiConfig::default());
    tracing::info!(%addr, data_dir = %args.runtime.data_dir.display(), workers = args.runtime.workers, "sked server started");
    runtime::announce(&format!("sked listening on http://{addr}"));

    let serve = axum::serve(listener, router).with_graceful_shutdown(shutdown.clone().cancelled_owned());
    let served = serve.await;
    // Whatever ended serving (a signal or an I/O error), stop the background tasks too.
    shutdown.cancel();
    runtime::drain(tasks, Duration::from_secs(args.runtime.grace + 5)).await;
    served.context("serving the API")?;
    tracing::info!("sked server stopped");
    Ok(ExitCode::SUCCESS)
}
