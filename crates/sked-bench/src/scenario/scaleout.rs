//! scale-out: 1, 2 and 4 `sked worker` processes (the real binary) on one database, running
//! `sleep 0.1` tasks. This process only creates the jobs and runs the sweeper, like a
//! `sked server` would. Figure: throughput (runs / (last finish − first start)) and its ratio
//! to one process.

use super::{Settings, secs};
use crate::engine::{Place, runs_between, sked_binary};
use crate::jobs;
use crate::stats::{Record, round1};
use anyhow::Context as _;
use sked_core::run::RunState;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// Attempts each worker process runs at once (`--workers 1 --concurrency C`).
pub const CONCURRENCY: usize = 8;

/// Runs with 1, 2 and 4 processes (or the given counts).
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let sked = sked_binary().context("scale-out needs target/release/sked beside sked-bench (make bench builds it)")?;
    let counts = settings.sizes_or(&[1, 2, 4], &[1, 2, 4]);
    let n = if settings.quick { 240 } else { 960 };
    let mut out: Vec<Record> = Vec::new();
    let mut base = None;
    for procs in counts {
        let (rate, took) = one(settings, &sked, procs, n).await?;
        let base = *base.get_or_insert(rate);
        let ratio = rate / base;
        let mut r = Record::new("scale-out", "sleep", format!("{procs} proc"));
        r.set("processes", procs)
            .set("concurrency_per_process", CONCURRENCY)
            .set("runs", n)
            .set("seconds", round1(took))
            .set("runs_per_s", round1(rate))
            .set("ratio", (ratio * 100.0).round() / 100.0);
        r.key = rate;
        r.headline = format!(
            "{n} × sleep 0.1 on {procs}×{CONCURRENCY} slots: {rate:.1} runs/s ({:.0}% of ideal {:.0}/s), ratio {ratio:.2}×",
            100.0 * rate / (procs * CONCURRENCY) as f64 / 10.0,
            (procs * CONCURRENCY * 10) as f64
        );
        out.push(r);
    }
    Ok(out)
}

/// `n` sleep tasks on `procs` worker processes; returns runs/s and the seconds it took.
async fn one(settings: &Settings, sked: &Path, procs: usize, n: usize) -> anyhow::Result<(f64, f64)> {
    let mut engine = super::engine(settings).await?;
    let mut workers = Vec::new();
    for _ in 0..procs {
        workers.push(spawn_worker(sked, &engine.place).await?);
    }
    engine.start_sweeper();
    let t = jobs::whole_second_after(Duration::from_millis(500));
    let template = jobs::template(&["/bin/sleep", "0.1"]);
    jobs::create(&engine.sked, n, |i| jobs::one_shot(&template, "scale", i, t)).await?;
    let store = engine.ports.store.clone();
    let deadline = Instant::now() + Duration::from_secs(300);
    let runs = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let runs = runs_between(store.as_ref(), t, t + chrono::Duration::milliseconds(1)).await?;
        if runs.len() == n && runs.iter().all(|r| r.state.is_terminal()) {
            break runs;
        }
        anyhow::ensure!(Instant::now() < deadline, "scale-out: runs not finished in time");
    };
    engine.stop().await;
    for mut w in workers {
        stop(&mut w).await;
    }
    let failed = runs.iter().filter(|r| r.state != RunState::Succeeded).count();
    anyhow::ensure!(failed == 0, "scale-out: {failed} runs did not succeed");
    let first = runs.iter().filter_map(|r| r.started_at).min().context("no start")?;
    let last = runs.iter().filter_map(|r| r.finished_at).max().context("no finish")?;
    let took = (last - first).to_std().unwrap_or_default();
    Ok((n as f64 / secs(took), took.as_secs_f64()))
}

/// Starts `sked worker` on `place` (its data dir, and its database on PostgreSQL) and waits
/// for its ready line.
async fn spawn_worker(sked: &Path, place: &Place) -> anyhow::Result<Child> {
    let mut command = Command::new(sked);
    command
        .args(["worker", "--workers", "1", "--concurrency"])
        .arg(CONCURRENCY.to_string())
        .arg("--data-dir")
        .arg(&place.dir);
    if let Some(url) = &place.database_url {
        command.arg("--database-url").arg(url);
    }
    let mut child = command
        .env("SKED_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", sked.display()))?;
    let stdout = child.stdout.take().context("worker stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("worker did not get ready")??;
    anyhow::ensure!(
        line.as_deref() == Some("sked worker ready"),
        "unexpected worker output {line:?}"
    );
    Ok(child)
}

/// SIGTERM, then wait (SIGKILL after 10 s).
pub async fn stop(child: &mut Child) {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await;
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}
