//! `sked-bench`: the benchmark suite of the local deployment. `make bench` runs
//! it in full, `make bench-quick` with reduced sizes.
//!
//! Each scenario starts its own engine — an SQLite file in a temporary directory (or, with
//! `--backend postgres`, a fresh database on one PostgreSQL cluster the run starts), the core
//! services, and an executor — or, for scale-out and api, the real `sked` binary, and prints
//! one JSON line per case on stdout, then a readable table of all cases. Start lag is
//! measured from sked's own run records: first attempt's start − nominal time.
//!
//! - [`engine`]: the in-process engine and the backend its ports run on.
//! - [`postgres`]: the run's PostgreSQL cluster (durability on), a database per case.
//! - [`jobs`]: benchmark jobs and their batch creation.
//! - [`scenario`]: burst, stream, backlog, fairness, schedules, scale-out, api.
//! - [`stats`]: percentiles and the output records.

mod engine;
mod jobs;
mod postgres;
mod scenario;
mod stats;

use clap::Parser;
use engine::{Backend, Exec, Slots};
use scenario::Settings;
use stats::Record;
use std::io::Write as _;
use std::path::PathBuf;

/// Benchmarks of sked's local deployment: start lag, throughput, scale.
#[derive(Debug, Parser)]
#[command(name = "sked-bench")]
struct Args {
    /// Reduced sizes (finishes in under two minutes).
    #[arg(long)]
    quick: bool,
    /// Scenarios to run, comma-separated: burst, burst-keyed, after, stream, backlog, fairness,
    /// schedules, scale-out, api, scrape, and (only when named) spawn.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "burst,burst-keyed,after,stream,backlog,fairness,schedules,scale-out,api,scrape"
    )]
    only: Vec<String>,
    /// Executors for the in-process scenarios: noop, true.
    #[arg(long, value_delimiter = ',', default_value = "noop,true")]
    exec: Vec<String>,
    /// Sizes instead of the scenario's defaults (jobs; seconds for stream; processes for
    /// scale-out), comma-separated.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Worker tasks of the in-process engine, comma-separated: the stream runs with each
    /// count (more workers must never mean slower starts), every other scenario with the
    /// first.
    #[arg(long, value_delimiter = ',', default_value = "5")]
    workers: Vec<usize>,
    /// Attempts each worker task runs at once (workers × concurrency = the 50 slots).
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Runs of each case; the table shows the median one.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Sweeper look-ahead in ms for burst, stream and backlog (the server uses 0): runs are
    /// written and queued this far ahead of their time.
    #[arg(long, default_value_t = 0)]
    lookahead_ms: u64,
    /// Start `command` payloads directly from the worker (fork + parent-death signal), not
    /// through the `sked` spawner process (for comparison).
    #[arg(long, alias = "no-guard")]
    no_spawner: bool,
    /// Directory for the data of every case (default: the system's temp dir); a temporary
    /// folder inside it is removed when the run ends.
    #[arg(long)]
    tmp: Option<PathBuf>,
    /// Where the in-process engine and scale-out's `sked worker`s keep their data: sqlite (a
    /// file per case) or postgres (one private cluster for the run, on 127.0.0.1, with fsync
    /// and synchronous_commit on; a fresh database per case). api and scrape run on SQLite
    /// only: postgres skips them.
    #[arg(long, default_value = "sqlite", value_parser = ["sqlite", "postgres"])]
    backend: String,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let execs = args
        .exec
        .iter()
        .map(|e| match e.as_str() {
            "noop" => Ok(Exec::Noop),
            "true" => Ok(Exec::Process),
            other => Err(anyhow::anyhow!("unknown executor {other:?} (noop, true)")),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let root = match &args.tmp {
        Some(dir) => tempfile::Builder::new().prefix("sked-bench-").tempdir_in(dir)?,
        None => tempfile::Builder::new().prefix("sked-bench-").tempdir()?,
    };
    let mut only = args.only.clone();
    let cluster = match args.backend.as_str() {
        "postgres" => {
            let skipped: Vec<String> = only
                .extract_if(.., |s| matches!(s.as_str(), "api" | "scrape"))
                .collect();
            if !skipped.is_empty() {
                eprintln!(
                    "skipping {} (SQLite only: they start `sked server` on a data dir)",
                    skipped.join(", ")
                );
            }
            let cluster = std::sync::Arc::new(postgres::Cluster::start(root.path())?);
            let s = cluster.settings()?;
            println!(
                "postgres {}: shared_buffers {}, synchronous_commit {}, fsync {}, full_page_writes {}, max_connections {} (127.0.0.1, data in {})",
                s.version,
                s.shared_buffers,
                s.synchronous_commit,
                s.fsync,
                s.full_page_writes,
                s.max_connections,
                root.path().display()
            );
            Some(cluster)
        }
        _ => None,
    };
    let backend = cluster.clone().map_or(Backend::Sqlite, Backend::Postgres);
    let settings = Settings {
        quick: args.quick,
        slots: Slots {
            workers: args.workers.first().copied().unwrap_or(5).max(1),
            concurrency: args.concurrency.max(1),
        },
        stream_workers: args.workers.iter().map(|w| (*w).max(1)).collect(),
        execs,
        tmp: Some(root.path().to_path_buf()),
        no_spawner: args.no_spawner,
        sizes: args.sizes.clone(),
        lookahead: sked_core::duration::Dur::millis(args.lookahead_ms),
        backend,
    };
    let mut table: Vec<Record> = Vec::new();
    for name in &only {
        let mut runs: Vec<Vec<Record>> = Vec::new();
        for _ in 0..args.repeat.max(1) {
            // Each case starts on a quiet disk: what earlier cases wrote (and removed) is
            // flushed first, not in the middle of this case's measurements.
            settle_disk();
            let databases_before = cluster.as_ref().map_or(0, |c| c.databases());
            let records = match name.as_str() {
                "burst" => scenario::burst::run(&settings).await?,
                "burst-keyed" => scenario::burst::run_keyed(&settings).await?,
                "after" => scenario::dependencies::run(&settings).await?,
                "stream" => scenario::stream::run(&settings).await?,
                "backlog" => scenario::backlog::run(&settings).await?,
                "fairness" => scenario::fairness::run(&settings).await?,
                "schedules" => scenario::schedules::run(&settings).await?,
                "scale-out" => scenario::scaleout::run(&settings).await?,
                "api" => scenario::api::run(&settings).await?,
                "scrape" => scenario::scrape::run(&settings).await?,
                "spawn" => scenario::spawn::run(&settings).await?,
                other => anyhow::bail!("unknown scenario {other:?}"),
            };
            let mut out = std::io::stdout().lock();
            for r in &records {
                writeln!(out, "{}", r.json_line())?;
            }
            if let Some(cluster) = &cluster {
                // The case's connections are closed by now; their counts have reached the
                // statistics (a backend reports them when it ends).
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                for a in cluster.aborts(databases_before)? {
                    let total = (a.commits + a.rollbacks).max(1);
                    writeln!(
                        out,
                        "{{\"postgres_db\":\"{}\",\"scenario\":\"{name}\",\"xact_commit\":{},\"xact_rollback\":{},\"rollback_pct\":{:.3}}}",
                        a.database,
                        a.commits,
                        a.rollbacks,
                        100.0 * a.rollbacks as f64 / total as f64
                    )?;
                }
            }
            out.flush()?;
            runs.push(records);
        }
        table.extend(medians(runs));
    }
    println!();
    print!("{}", stats::table(&table));
    // The cluster stops before the run's directory, which holds it, is removed.
    drop(settings);
    drop(cluster);
    drop(root);
    Ok(())
}

/// Per case (same position in every repeat), the repeat whose key figure is the median.
fn medians(mut runs: Vec<Vec<Record>>) -> Vec<Record> {
    let cases = runs.iter().map(Vec::len).min().unwrap_or(0);
    (0..cases)
        .map(|i| {
            let mut same: Vec<Record> = runs.iter_mut().map(|r| r[i].clone()).collect();
            same.sort_by(|a, b| a.key.total_cmp(&b.key));
            let mut m = same.swap_remove(same.len() / 2);
            if runs.len() > 1 {
                m.headline.push_str(&format!("  [median of {}]", runs.len()));
            }
            m
        })
        .collect()
}

/// Flushes every file system's dirty data (`sync`), so writeback left by an earlier case does
/// not stall this one. Best effort: a failure only makes the figures noisier.
fn settle_disk() {
    if let Err(e) = std::process::Command::new("sync").status() {
        eprintln!("sync failed ({e}); figures may include an earlier case's writeback");
    }
}
