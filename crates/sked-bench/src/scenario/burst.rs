//! burst: N one-shot jobs all due at the same whole second T, created through the core's
//! batch path before T. Figures: creation rate, start lag p50/p99/max, the first start after
//! T, the sweeper's fire rate (runs written per second after T) and the drain rate
//! N / (last start − T).
//!
//! burst-keyed: the same with every job naming one concurrency key (limit 50, the engine's
//! slots: the cost of counting the key at every claim; and limit 10: runs parked on the key
//! and woken one per attempt that ends), no-op payloads.

use super::{Settings, secs};
use crate::engine::{Exec, lags, ms_between, runs_between};
use crate::jobs;
use crate::stats::{Record, Summary, round1};
use sked_core::concurrency::Concurrency;
use std::time::Duration;

/// Runs every size with every executor.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    let sizes = settings.sizes_or(&[1_000, 5_000], &[1_000, 20_000, 100_000]);
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

/// Keyed bursts of 20,000 jobs (5,000 with `--quick`): limit 50, then limit 10.
pub async fn run_keyed(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for &n in &settings.sizes_or(&[5_000], &[20_000]) {
        for limit in [50, 10] {
            let key = Concurrency {
                key: "bench".into(),
                limit,
            };
            let mut r = one_with(settings, Exec::Noop, n, Some(&key)).await?;
            r.set("key_limit", limit);
            r.headline = format!("limit {limit}  {}", r.headline);
            out.push(r);
        }
    }
    Ok(out)
}

/// One burst of `n` jobs.
pub async fn one(settings: &Settings, exec: Exec, n: usize) -> anyhow::Result<Record> {
    one_with(settings, exec, n, None).await
}

/// One burst of `n` jobs, each naming `key` if given.
async fn one_with(settings: &Settings, exec: Exec, n: usize, key: Option<&Concurrency>) -> anyhow::Result<Record> {
    let mut engine = super::engine(settings).await?;
    engine.start_all(exec, settings.slots)?;
    // Leave room to create everything before T (creation runs at several thousand a second).
    let t = jobs::whole_second_after(Duration::from_millis(1500 + n as u64 / 4));
    let mut template = jobs::template(&["/bin/true"]);
    template.concurrency = key.cloned();
    let spent = jobs::create(&engine.sked, n, |i| jobs::one_shot(&template, "burst", i, t)).await?;
    let created_before_t = chrono::Utc::now() < t;
    engine.wait_drained(n, Duration::from_secs(600)).await?;
    let runs = runs_between(engine.ports.store.as_ref(), t, t + chrono::Duration::milliseconds(1)).await?;
    engine.stop().await;
    anyhow::ensure!(runs.len() == n, "burst: {} runs for {n} jobs", runs.len());

    let (mut lag, first, last) = lags(&runs);
    let lag = Summary::of(&mut lag);
    let first_start = first.map_or(f64::NAN, |f| ms_between(t, f));
    let last_start = last.map_or(f64::NAN, |l| ms_between(t, l));
    let last_fired = runs
        .iter()
        .map(|r| r.created_at)
        .max()
        .map_or(f64::NAN, |c| ms_between(t, c));
    let drain = n as f64 / (last_start / 1000.0);
    let fire_rate = n as f64 / (last_fired.max(1.0) / 1000.0);
    let create_rate = n as f64 / secs(spent);

    let scenario = if key.is_some() { "burst-keyed" } else { "burst" };
    let mut r = Record::new(scenario, exec.name(), n);
    r.set("slots", settings.slots.total())
        .set("create_per_s", create_rate.round())
        .set("created_before_t", created_before_t)
        .set("lag_ms", lag.json())
        .set("first_start_ms", round1(first_start))
        .set("last_fired_ms", round1(last_fired))
        .set("fire_per_s", fire_rate.round())
        .set("drain_per_s", drain.round());
    r.key = drain;
    r.headline = format!(
        "create {:.0}/s  first {:.1} ms  lag p50 {:.0} p99 {:.0} max {:.0} ms  fired {:.0}/s  drain {:.0}/s{}",
        create_rate,
        first_start,
        lag.p50,
        lag.p99,
        lag.max,
        fire_rate,
        drain,
        if created_before_t {
            ""
        } else {
            "  (creation ran past T!)"
        }
    );
    Ok(r)
}
