//! scrape: the cost of `GET /metrics` against the number of jobs stored (the promise: a scrape
//! never scans the jobs or runs tables, so at 1M schedules it answers in ≤ 10 ms). N active
//! jobs (one-shots far in the future: stored and indexed as due, none firing meanwhile, so
//! nothing else loads the server) are written into a data dir through the core's batch path,
//! then the release `sked server` is started on it and scraped sequentially with an operator
//! key, over HTTP on 127.0.0.1. Figures: latency p50/p99/max of a scrape (after a warm-up),
//! the size of the answer, and the number of jobs, to compare across sizes.

use super::api::start_server;
use super::scaleout::stop;
use super::{Settings, secs};
use crate::engine::{Backend, Engine};
use crate::jobs;
use crate::stats::{Record, Summary};
use anyhow::Context as _;
use std::time::Instant;

/// Scrapes before measuring (connection set up, caches warm).
const WARM_UP: usize = 20;
/// Scrapes measured per size.
const SCRAPES: usize = 300;

/// Runs every size (default 20k and 1M jobs; 20k with `--quick`).
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for n in settings.sizes_or(&[20_000], &[20_000, 1_000_000]) {
        let dir = super::data_dir(settings)?;
        let create_rate = {
            let engine = Engine::open(&Backend::Sqlite.place(dir.path())?).await?;
            let template = jobs::template(&["/bin/true"]);
            let at = "2099-01-01T00:00:00Z".parse().context("a fixed instant")?;
            let spent = jobs::create(&engine.sked, n, |i| jobs::one_shot(&template, "scrape", i, at)).await?;
            n as f64 / secs(spent)
        };
        let (mut server, base, client) = start_server(dir.path()).await?;
        let url = format!("{base}/metrics");
        let mut bytes = 0;
        for _ in 0..WARM_UP {
            bytes = client.get(&url).send().await?.error_for_status()?.bytes().await?.len();
        }
        let mut lat = Vec::with_capacity(SCRAPES);
        for _ in 0..SCRAPES {
            let t = Instant::now();
            let body = client.get(&url).send().await?.error_for_status()?.bytes().await?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            bytes = body.len();
        }
        stop(&mut server).await;
        let lat = Summary::of(&mut lat);
        let mut r = Record::new("scrape", "-", n);
        r.set("jobs", n)
            .set("create_per_s", create_rate.round())
            .set("scrapes", SCRAPES)
            .set(
                "latency_us",
                serde_json::json!({
                    "p50": (lat.p50 * 1000.0).round(),
                    "p99": (lat.p99 * 1000.0).round(),
                    "max": (lat.max * 1000.0).round(),
                }),
            )
            .set("bytes", bytes);
        r.key = lat.p50;
        r.headline = format!(
            "GET /metrics p50 {:.2} p99 {:.2} max {:.2} ms  ({bytes} bytes, {n} jobs)",
            lat.p50, lat.p99, lat.max
        );
        out.push(r);
    }
    Ok(out)
}
