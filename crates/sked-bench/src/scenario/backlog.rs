//! backlog: N runs already PENDING in the queue (fired by the sweeper before any worker
//! starts), then workers drain them. Figure: drain rate N / (last start − workers started).
//! It must stay flat from 1k to 100k.

use super::Settings;
use crate::engine::{Exec, lags, ms_between, runs_between};
use crate::jobs;
use crate::stats::{Record, round1};
use std::time::Duration;

/// Runs every size with every executor.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    let sizes = settings.sizes_or(&[1_000, 10_000], &[1_000, 20_000, 100_000]);
    for &n in &sizes {
        for &exec in settings
            .execs
            .iter()
            .filter(|&&e| super::runs_at(settings, e, n, &sizes))
        {
            out.push(one(settings, exec, n).await?);
        }
    }
    Ok(out)
}

/// Drains `n` pending runs.
pub async fn one(settings: &Settings, exec: Exec, n: usize) -> anyhow::Result<Record> {
    let mut engine = super::engine(settings).await?;
    engine.start_sweeper();
    let t = jobs::whole_second_after(Duration::ZERO) - chrono::Duration::seconds(1);
    let template = jobs::template(&["/bin/true"]);
    jobs::create(&engine.sked, n, |i| jobs::one_shot(&template, "backlog", i, t)).await?;
    engine.wait_queued(n as u64, Duration::from_secs(600)).await?;
    let started = chrono::Utc::now();
    engine.start_reaper();
    engine.start_workers(exec, settings.slots)?;
    engine.wait_drained(n, Duration::from_secs(600)).await?;
    let runs = runs_between(engine.ports.store.as_ref(), t, t + chrono::Duration::milliseconds(1)).await?;
    engine.stop().await;
    anyhow::ensure!(runs.len() == n, "backlog: {} runs for {n} jobs", runs.len());

    let (_, _, last) = lags(&runs);
    let took_ms = last.map_or(f64::NAN, |l| ms_between(started, l));
    let drain = n as f64 / (took_ms / 1000.0);
    let mut r = Record::new("backlog", exec.name(), n);
    r.set("slots", settings.slots.total())
        .set("drain_ms", round1(took_ms))
        .set("drain_per_s", drain.round());
    r.key = drain;
    r.headline = format!("drain {drain:.0}/s ({took_ms:.0} ms)");
    Ok(r)
}
