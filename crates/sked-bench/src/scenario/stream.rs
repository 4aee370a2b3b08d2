//! stream: jobs due at a steady rate (500/s by default), each at its own millisecond,
//! created ahead through the batch path. Figure: start lag p50/p99/max, split into the
//! sweeper's part (run written after its time) and the rest (queue and worker).

use super::Settings;
use crate::engine::{Exec, Slots, lags, ms_between, runs_between};
use crate::jobs;
use crate::stats::{Record, Summary};
use std::time::Duration;

/// Jobs per second.
const RATE: usize = 500;

/// Runs the stream with every executor and every worker count.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for seconds in settings.sizes_or(&[5], &[60]) {
        for &workers in &settings.stream_workers {
            let slots = Slots {
                workers,
                ..settings.slots
            };
            for &exec in &settings.execs {
                out.push(one(settings, exec, seconds, slots).await?);
            }
        }
    }
    Ok(out)
}

/// `seconds` of stream on `slots`.
pub async fn one(settings: &Settings, exec: Exec, seconds: usize, slots: Slots) -> anyhow::Result<Record> {
    let n = RATE * seconds;
    let mut engine = super::engine(settings).await?;
    engine.start_all(exec, slots)?;
    let t0 = jobs::whole_second_after(Duration::from_millis(1500 + n as u64 / 4));
    let step_us = 1_000_000 / RATE as i64;
    let template = jobs::template(&["/bin/true"]);
    jobs::create(&engine.sked, n, |i| {
        jobs::one_shot(
            &template,
            "stream",
            i,
            t0 + chrono::Duration::microseconds(step_us * i as i64),
        )
    })
    .await?;
    let created_before_t = chrono::Utc::now() < t0;
    engine
        .wait_drained(n, Duration::from_secs(seconds as u64 + 600))
        .await?;
    let end = t0 + chrono::Duration::seconds(seconds as i64 + 1);
    let runs = runs_between(engine.ports.store.as_ref(), t0, end).await?;
    engine.stop().await;
    anyhow::ensure!(runs.len() == n, "stream: {} runs for {n} jobs", runs.len());

    let (mut lag, _, _) = lags(&runs);
    let lag = Summary::of(&mut lag);
    // Where a late start lost its time: before the sweeper wrote the run (fire lag), or
    // between that and the attempt's start (queue and worker).
    let (mut fired, mut queued): (Vec<f64>, Vec<f64>) = runs
        .iter()
        .filter_map(|run| {
            let start = run.attempts.first()?.started_at;
            let fired_at = run.created_at.max(run.scheduled_for);
            Some((ms_between(run.scheduled_for, fired_at), ms_between(fired_at, start)))
        })
        .unzip();
    let (fire_lag, start_after_fire) = (Summary::of(&mut fired), Summary::of(&mut queued));
    let case = format!("{RATE}/s×{seconds}s, {}×{} slots", slots.workers, slots.concurrency);
    let mut r = Record::new("stream", exec.name(), case);
    r.set("runs", n)
        .set("created_before_t", created_before_t)
        .set("lag_ms", lag.json())
        .set("fire_lag_ms", fire_lag.json())
        .set("start_after_fire_ms", start_after_fire.json());
    r.key = lag.p99;
    r.headline = format!(
        "lag p50 {:.1} p99 {:.1} max {:.1} ms (fired p99 {:.1}, then started p99 {:.1} ms){}",
        lag.p50,
        lag.p99,
        lag.max,
        fire_lag.p99,
        start_after_fire.p99,
        if created_before_t {
            ""
        } else {
            "  (creation ran past T!)"
        }
    );
    Ok(r)
}
