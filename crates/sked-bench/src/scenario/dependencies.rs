//! after: how soon a downstream job's run starts once its last upstream run ended — the
//! release happens in the transaction that ends the upstream run, so this is the time of that
//! transaction, the wake of a receiver and its claim.
//!
//! - chain: K chains of 3 jobs (`a` a one-shot, `b` after `a`, `c` after `b`), their heads
//!   staggered 20 ms apart: the lag of each `b` and `c` run after its upstream's end;
//! - fan-in: K jobs after 10 one-shots each, staggered 50 ms apart: the lag of each
//!   downstream run after the last of its 10 upstreams ended.
//!
//! No-op payloads; the in-process engine (sweeper, reaper, workers on one SQLite file).

use super::Settings;
use crate::engine::{Exec, ms_between, tenant};
use crate::jobs;
use crate::stats::{Record, Summary};
use sked_core::ids::{JobId, RunId};
use sked_core::schedule::Schedule;
use sked_core::service::jobs::NewJob;
use sked_core::{JobSpec, Timestamp};
use std::time::Duration;

/// Both shapes.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let k = settings.sizes_or(&[50], &[200])[0];
    Ok(vec![
        one(settings, "chain-3", k, 3, 1, Duration::from_millis(20)).await?,
        one(settings, "fan-in-10", k, 2, 10, Duration::from_millis(50)).await?,
    ])
}

/// `template` running after `upstreams`, with id `id`.
fn after(template: &JobSpec, id: String, upstreams: Vec<String>) -> NewJob {
    let mut spec = template.clone();
    spec.schedule =
        serde_json::from_value(serde_json::json!({"after": {"jobs": upstreams}})).expect("an after schedule");
    NewJob {
        id: Some(JobId(id)),
        spec,
    }
}

/// `k` groups of `width` one-shot heads and `levels - 1` jobs after them in a line, each
/// group's heads due `gap` after the previous group's: the lag of every downstream run after
/// the last end among its upstreams' runs.
async fn one(
    settings: &Settings,
    name: &str,
    k: usize,
    levels: usize,
    width: usize,
    gap: Duration,
) -> anyhow::Result<Record> {
    let mut engine = super::engine(settings).await?;
    engine.start_all(Exec::Noop, settings.slots)?;
    let template = jobs::template(&["/bin/true"]);
    let t = jobs::whole_second_after(Duration::from_millis(1500));
    let head_at = |g: usize| t + chrono::Duration::milliseconds((g as u32 * gap.as_millis() as u32) as i64);
    let heads = |g: usize| -> Vec<String> { (0..width).map(|w| format!("g{g}-head{w}")).collect() };
    let level = |g: usize, l: usize| format!("g{g}-l{l}");
    // Heads first, then each level (an upstream must exist before its downstream).
    let mut all: Vec<NewJob> = Vec::new();
    for g in 0..k {
        for id in heads(g) {
            let mut spec = template.clone();
            spec.schedule = Schedule::At(head_at(g));
            all.push(NewJob {
                id: Some(JobId(id)),
                spec,
            });
        }
    }
    for l in 1..levels {
        for g in 0..k {
            let upstreams = if l == 1 { heads(g) } else { vec![level(g, l - 1)] };
            all.push(after(&template, level(g, l), upstreams));
        }
    }
    let total_runs = all.len();
    let mut jobs_iter = all.into_iter();
    jobs::create(&engine.sked, total_runs, |_| jobs_iter.next().expect("a job per index")).await?;
    engine.wait_drained(total_runs, Duration::from_secs(600)).await?;

    let store = engine.ports.store.clone();
    let run_at = async |id: &str, at: Timestamp| store.get_run(&tenant(), &RunId::derive(&JobId::from(id), at)).await;
    let mut lag = Vec::new();
    for g in 0..k {
        for l in 1..levels {
            let upstreams = if l == 1 { heads(g) } else { vec![level(g, l - 1)] };
            let mut last_end: Option<Timestamp> = None;
            for u in &upstreams {
                let ended = run_at(u, head_at(g)).await?.and_then(|r| r.finished_at);
                last_end = last_end.max(ended);
            }
            let started = run_at(&level(g, l), head_at(g))
                .await?
                .and_then(|r| r.attempts.first().map(|a| a.started_at));
            if let (Some(end), Some(start)) = (last_end, started) {
                lag.push(ms_between(end, start));
            }
        }
    }
    engine.stop().await;
    let expected = k * (levels - 1);
    anyhow::ensure!(
        lag.len() == expected,
        "{name}: {} downstream runs of {expected}",
        lag.len()
    );
    let lag = Summary::of(&mut lag);
    let mut r = Record::new(name, Exec::Noop.name(), k);
    r.set("slots", settings.slots.total())
        .set("upstreams", width)
        .set("lag_after_last_upstream_ms", lag.json());
    r.key = lag.p50;
    r.headline = format!(
        "{k} groups  start after the last upstream ended: p50 {:.1} p99 {:.1} max {:.1} ms",
        lag.p50, lag.p99, lag.max
    );
    Ok(r)
}
