//! `sked server`: the whole local deployment in one process — the REST API on a TCP
//! listener, the sweeper (and the log retention pass), a reaper and N workers, all over one
//! SQLite file. With `--no-sweeper --workers 0` it is the API alone, beside `sked sweeper` and
//! `sked worker` processes on the same file.
//!
//! With `SKED_OPERATOR_KEY` set (a deployment's Secret: several API servers, no shared disk)
//! it makes that operator key of tenant `default` known to the store. Otherwise, on an empty
//! store, it creates an operator key for tenant `default` and writes it to
//! `<data-dir>/admin.key` (mode 0600). Keys never appear in a log.
//!
//! Once everything is started it prints exactly one line on stdout,
//! `sked listening on http://<addr>` (with the actual port when `--listen` asked for 0),
//! and on SIGINT or SIGTERM it stops accepting requests, lets the workers stop their
//! payloads, and exits 0.

use crate::cli::ServerArgs;
use crate::runtime;
use anyhow::Context as _;
use sked_core::ids::TenantId;
use sked_core::service::alerts::WebhookSecretService;
use sked_core::service::keys::{Adopted, Keys};
use sked_core::service::quotas::Quotas;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Sked, SkedConfig, SweepSignal};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use tokio::task::JoinSet;

/// Runs the server until a shutdown signal.
pub async fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    let _telemetry = runtime::init_tracing(args.runtime.log_format(), "sked-server")?;
    let shutdown = runtime::shutdown_on_signals()?;
    let local = runtime::open(&args.runtime.store).await?;

    let signal = SweepSignal::default();
    let quotas = Quotas::new(local.quotas.clone(), local.ports.clock.clone());
    let secrets = WebhookSecretService::new(local.webhook_secrets.clone(), local.ports.clock.clone());
    let sked = Sked::new(local.ports.clone(), SkedConfig::default(), signal.clone())
        .with_quotas(quotas)
        .with_webhook_secrets(secrets);

    let mut tasks = JoinSet::new();
    if args.no_sweeper {
        tracing::info!("no sweeper in this process: `sked sweeper` processes fire the jobs");
    } else {
        let sweeper = Sweeper::new(local.ports.clone(), signal, SweeperConfig::default());
        tasks.spawn(sweeper.run(shutdown.clone()));
        runtime::spawn_log_retention(&local, args.retention.log_retention, &shutdown, &mut tasks);
    }
    runtime::spawn_background_tasks(&local, &args.runtime, &shutdown, &mut tasks)?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr().context("reading the listener's address")?;
    let keys = Keys::new(local.keys.clone(), local.ports.clock.clone());
    deployment_operator_key(&keys).await?;
    first_operator_key(&keys, &args.runtime.store.data_dir).await?;
    let api_config = sked_api::ApiConfig {
        metrics: local.metrics.clone(),
        ..sked_api::ApiConfig::default()
    };
    let router = sked_api::router(sked, api_config, sked_api::Auth::Keys(keys));
    tracing::info!(%addr, data_dir = %args.runtime.store.data_dir.display(), workers = args.runtime.workers, "sked server started");
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

/// The file the first operator key is written to, in the data directory.
pub const ADMIN_KEY_FILE: &str = "admin.key";

/// The variable holding an operator key chosen by the deployment.
pub const OPERATOR_KEY_ENV: &str = "SKED_OPERATOR_KEY";

/// Makes the key in `SKED_OPERATOR_KEY`, if set, known to the store ([`Keys::adopt_operator_key`]).
async fn deployment_operator_key(keys: &Keys) -> anyhow::Result<()> {
    let Ok(secret) = std::env::var(OPERATOR_KEY_ENV) else {
        return Ok(());
    };
    match keys
        .adopt_operator_key(&TenantId::default(), secret.trim())
        .await
        .with_context(|| format!("adopting the operator key of {OPERATOR_KEY_ENV}"))?
    {
        Adopted::Revoked(id) => {
            tracing::warn!(key_id = %id, "the key of {OPERATOR_KEY_ENV} was revoked: it authenticates nothing")
        }
        Adopted::Stored(id) | Adopted::Known(id) => {
            tracing::info!(key_id = %id, "operator key of {OPERATOR_KEY_ENV} in use")
        }
    }
    Ok(())
}

/// On a store without keys: creates the first operator key (tenant `default`) and writes it
/// to `<data_dir>/admin.key`, readable by this user only. Written to a temporary file first
/// and renamed, so the file is never seen half written or with looser permissions.
async fn first_operator_key(keys: &Keys, data_dir: &Path) -> anyhow::Result<()> {
    let Some(first) = keys
        .bootstrap(&TenantId::default())
        .await
        .context("creating the first API key")?
    else {
        return Ok(());
    };
    let path = data_dir.join(ADMIN_KEY_FILE);
    let temporary = data_dir.join(format!("{ADMIN_KEY_FILE}.tmp"));
    let _ = std::fs::remove_file(&temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("creating {}", temporary.display()))?;
    writeln!(file, "{}", first.secret)
        .and_then(|_| file.sync_all())
        .with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, &path).with_context(|| format!("writing {}", path.display()))?;
    tracing::info!(key_id = %first.key.id, path = %path.display(), "first operator key (tenant default) written; it is shown nowhere else");
    Ok(())
}
