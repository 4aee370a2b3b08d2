//! schedules: N active cron jobs stored (each at a random minute and second of the hour, so
//! about N/3600 fall due every second). Figures: creation rate, database size, RSS of this
//! process (the whole engine), time per sweep, and the start lag of the runs that fall due
//! while it runs.
//!
//! The sweep loop here is the core sweeper's own (`Sweeper::sweep_once`, then sleep until
//! `next_due_at`), driven by the harness so each sweep can be timed.

use super::{Settings, secs};
use crate::engine::{Engine, Exec, lags, runs_between};
use crate::jobs;
use crate::stats::{Record, Summary, round1, rss_mib};
use rand::Rng as _;
use sked_core::service::SweepSignal;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use std::time::{Duration, Instant};

/// Runs every size; jobs are created once per size and shared by the executors.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    let window = if settings.quick { 8 } else { 30 };
    for n in settings.sizes_or(&[20_000], &[1_000_000]) {
        let dir = super::data_dir(settings)?;
        let place = settings.backend.place(dir.path())?;
        let (create_rate, rss_after_create) = {
            let engine = Engine::open(&place).await?;
            let template = jobs::template(&["/bin/true"]);
            let mut rng = rand::rng();
            let spent = jobs::create(&engine.sked, n, |i| {
                let (m, s) = (rng.random_range(0..60), rng.random_range(0..60));
                jobs::cron(&template, "cron", i, format!("{s} {m} * * * *"))
            })
            .await?;
            (n as f64 / secs(spent), rss_mib().0)
        };
        for &exec in &settings.execs {
            let mut engine = Engine::open(&place).await?;
            out.push(one(&mut engine, settings, exec, n, window, create_rate, rss_after_create).await?);
        }
    }
    Ok(out)
}

/// `window` seconds of sweeping over the stored jobs, with workers running `exec`.
async fn one(
    engine: &mut Engine,
    settings: &Settings,
    exec: Exec,
    n: usize,
    window: u64,
    create_rate: f64,
    rss_after_create: f64,
) -> anyhow::Result<Record> {
    engine.start_reaper();
    engine.start_workers(exec, settings.slots)?;
    let sweeper = Sweeper::new(engine.ports.clone(), SweepSignal::default(), SweeperConfig::default());
    let clock = engine.ports.clock.clone();
    let store = engine.ports.store.clone();

    // Catch up on what fell due while the jobs were being created (not measured).
    let catch_up = Instant::now();
    while sweeper.sweep_once().await?.more {}
    let catch_up = catch_up.elapsed();

    let from = sked_core::timestamp::trunc_ms(clock.now());
    let until = from + chrono::Duration::seconds(window as i64);
    let mut busy = Vec::new(); // ms per sweep that fired something
    let mut idle = Vec::new(); // ms per sweep that found nothing due
    let mut fired = 0usize;
    while clock.now() < until {
        let started = Instant::now();
        let report = sweeper.sweep_once().await?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        fired += report.fired;
        if report.jobs == 0 {
            idle.push(ms)
        } else {
            busy.push(ms)
        };
        if report.more {
            continue;
        }
        let wake = match store.next_due_at().await? {
            Some(due) => due.min(until),
            None => until,
        };
        clock.sleep_until(wake).await;
    }
    // Let the workers finish what was fired.
    let deadline = Instant::now() + Duration::from_secs(120);
    while engine.depth().await? > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (rss, peak) = rss_mib();
    let db_mib = engine.db_mib().await?;
    let runs = runs_between(store.as_ref(), from, until).await?;
    engine.stop().await;

    let (mut lag, _, _) = lags(&runs);
    let lag = Summary::of(&mut lag);
    let busy_n = busy.len();
    let busy = Summary::of(&mut busy);
    let idle = Summary::of(&mut idle);
    let mut r = Record::new("schedules", exec.name(), n);
    r.set("create_per_s", create_rate.round())
        .set("db_mib", round1(db_mib))
        .set("rss_after_create_mib", round1(rss_after_create))
        .set("rss_mib", round1(rss))
        .set("rss_peak_mib", round1(peak))
        .set("catch_up_ms", round1(catch_up.as_secs_f64() * 1000.0))
        .set("window_s", window)
        .set("fired", fired)
        .set("sweeps_firing", busy_n)
        .set("sweep_ms", busy.json())
        .set("idle_sweep_ms", idle.json())
        .set("runs_in_window", runs.len())
        .set("lag_ms", lag.json());
    r.key = lag.p99;
    r.headline = format!(
        "create {create_rate:.0}/s  db {db_mib:.0} MiB  rss {rss:.0} MiB (peak {peak:.0})  sweep p50 {:.2} ms ({} fired/{}s)  idle sweep {:.2} ms  lag p50 {:.1} p99 {:.1} max {:.1} ms",
        busy.p50, fired, window, idle.p50, lag.p50, lag.p99, lag.max
    );
    Ok(r)
}
