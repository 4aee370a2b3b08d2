//! `sked`: the local server, standalone workers, and the client commands.
//!
//! - [`cli`]: the clap definitions (flags, defaults, help).
//! - [`server`]: `sked server` — API, sweeper, reaper and workers in one process.
//! - [`worker`]: `sked worker` — workers (and a reaper) on a server's SQLite file.
//! - [`sweeper`]: `sked sweeper` — the sweeper alone, beside a `sked server --no-sweeper`.
//! - `aws` (build feature `aws`): `sked worker --backend aws` — workers of the AWS deployment.
//! - [`runtime`]: what both share — opening the data dir, logging, shutdown signals.
//! - [`pg_logs`]: where a PostgreSQL deployment keeps run logs (the database, or with
//!   `--log-bucket` an S3-compatible bucket once finished).
//! - [`client`]: the HTTP client and the `jobs`, `runs`, `logs`, `keys` and `tenants` commands.
//! - [`output`]: human tables and `--json`.
//!
//! Exit codes: 0 on success; 2 when the API refused the request (a 4xx); 1 on any other
//! error, and for `sked runs get` when the run ended other than SUCCEEDED.

#[cfg(feature = "aws")]
mod aws;
mod cli;
mod client;
mod output;
mod pg_logs;
mod runtime;
mod server;
mod sweeper;
mod telemetry;
mod worker;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // `sked __spawner`: the helper a worker starts its payloads through (see
    // sked_embedded::exec::spawner). Handled before anything else starts.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == sked_embedded::exec::spawner::SPAWNER_SUBCOMMAND)
    {
        return ExitCode::from(u8::try_from(sked_embedded::exec::spawner::serve()).unwrap_or(u8::MAX));
    }
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run()),
        Err(err) => client::report_error(&err.into()),
    }
}

async fn run() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Server(args) => server::run(args).await,
        cli::Command::Worker(args) => worker::run(args).await,
        cli::Command::Sweeper(args) => sweeper::run(args).await,
        cli::Command::Jobs { client, command } => client::jobs::run(&client, command).await,
        cli::Command::Runs { client, command } => client::runs::run(&client, command).await,
        cli::Command::Logs { client, args } => client::logs::run(&client, args).await,
        cli::Command::Keys { client, command } => client::keys::run(&client, command).await,
        cli::Command::Tenants { client, command } => client::tenants::run(&client, command).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => client::report_error(&err),
    }
}
