//! fairness: one tenant's burst must not hold back another tenant's due run. N one-shot jobs
//! of tenant `bench` all due at the whole second T, and one job of tenant `bench-other` due at
//! T + 200 ms. Figures: the other tenant's start lag (its run's first start − its nominal
//! time; the bound is 250 ms) and how much of it the firing took, and when the burst's last run started (what the other run
//! would have waited behind the burst if the queue served by rank alone).

use super::Settings;
use crate::engine::{Exec, lags, ms_between, runs_between};
use crate::jobs;
use crate::stats::{Record, Summary, round1};
use sked_core::TenantId;
use sked_core::ports::{PageRequest, RunFilter};
use std::time::Duration;

/// When the other tenant's run is due, after the burst's T.
const OTHER_AFTER: Duration = Duration::from_millis(200);

/// Every size with every executor.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    let sizes = settings.sizes_or(&[3_000], &[3_000]);
    for &n in &sizes {
        for &exec in &settings.execs {
            out.push(one(settings, exec, n).await?);
        }
    }
    Ok(out)
}

/// `n` runs of one tenant at T, one of another at T + 200 ms.
pub async fn one(settings: &Settings, exec: Exec, n: usize) -> anyhow::Result<Record> {
    let mut engine = super::engine(settings).await?;
    engine.start_all(exec, settings.slots)?;
    let t = jobs::whole_second_after(Duration::from_millis(1500 + n as u64 / 4));
    let other_at = t + chrono::Duration::from_std(OTHER_AFTER)?;
    let template = jobs::template(&["/bin/true"]);
    jobs::create(&engine.sked, n, |i| jobs::one_shot(&template, "burst", i, t)).await?;
    let other = TenantId::from("bench-other");
    jobs::create_for(&engine.sked, &other, 1, |i| {
        jobs::one_shot(&template, "other", i, other_at)
    })
    .await?;
    engine.wait_drained(n + 1, Duration::from_secs(600)).await?;
    let burst = runs_between(engine.ports.store.as_ref(), t, t + chrono::Duration::milliseconds(1)).await?;
    let filter = RunFilter::default();
    let page = PageRequest {
        cursor: None,
        limit: 10,
    };
    let other_runs = engine.ports.store.list_runs(&other, &filter, &page).await?.items;
    engine.stop().await;
    anyhow::ensure!(burst.len() == n, "fairness: {} burst runs for {n} jobs", burst.len());
    anyhow::ensure!(
        other_runs.len() == 1,
        "fairness: {} runs of the other tenant",
        other_runs.len()
    );

    let (mut lag, _, last) = lags(&burst);
    let burst_lag = Summary::of(&mut lag);
    let burst_last_ms = last.map_or(f64::NAN, |l| ms_between(t, l));
    let (other_lag, _, _) = lags(&other_runs);
    let other_lag_ms = other_lag.first().copied().unwrap_or(f64::NAN);
    // How much of that lag was the firing (the run written) rather than the wait for a slot.
    let other_fired_ms = other_runs
        .first()
        .map_or(f64::NAN, |r| ms_between(r.scheduled_for, r.created_at));

    let mut r = Record::new("fairness", exec.name(), n);
    r.set("slots", settings.slots.total())
        .set("other_lag_ms", round1(other_lag_ms))
        .set("other_fired_ms", round1(other_fired_ms))
        .set("burst_last_start_ms", round1(burst_last_ms))
        .set("burst_lag_ms", burst_lag.json());
    r.key = other_lag_ms;
    r.headline = format!(
        "other tenant's run (due T+{} ms): lag {:.1} ms (fired +{:.1}){}  burst: last start T+{:.0} ms, lag p50 {:.0} p99 {:.0} ms",
        OTHER_AFTER.as_millis(),
        other_lag_ms,
        other_fired_ms,
        if other_lag_ms <= 250.0 {
            ""
        } else {
            " (over the 250 ms bound!)"
        },
        burst_last_ms,
        burst_lag.p50,
        burst_lag.p99,
    );
    Ok(r)
}
