//! api: `sked server` (the real binary) on 127.0.0.1, loaded by concurrent HTTP clients in
//! this process, each request authenticated with the server's operator key: job creates (`POST
//! /v1/jobs`), then reads (`GET /v1/jobs/{id}`). Figures:
//! requests per second and latency p50/p99 of each.

use super::scaleout::stop;
use super::{Settings, secs};
use crate::engine::sked_binary;
use crate::stats::{Record, Summary};
use anyhow::Context as _;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

/// Concurrent clients.
const CLIENTS: usize = 16;

/// Creates, then reads, for a few seconds each.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let seconds = if settings.quick { 2 } else { 10 };
    let dir = super::data_dir(settings)?;
    let (mut server, base, client) = start_server(dir.path()).await?;

    let created = Arc::new(AtomicUsize::new(0));

    let create = {
        let (client, base, created) = (client.clone(), base.clone(), created.clone());
        load(seconds, move |_| {
            let (client, base, created) = (client.clone(), base.clone(), created.clone());
            async move {
                let i = created.fetch_add(1, Ordering::Relaxed);
                let body = serde_json::json!({
                    "id": format!("api-{i}"),
                    "schedule": {"at": "2099-01-01T00:00:00Z"},
                    "task": {"command": {"argv": ["/bin/true"]}},
                });
                let resp = client.post(format!("{base}/v1/jobs")).json(&body).send().await?;
                Ok(resp.status().is_success())
            }
        })
        .await?
    };
    let total = created.load(Ordering::Relaxed).max(1);
    let get = {
        let (client, base) = (client.clone(), base.clone());
        load(seconds, move |k| {
            let (client, base) = (client.clone(), base.clone());
            async move {
                let id = (k * 7919) % total;
                let resp = client.get(format!("{base}/v1/jobs/api-{id}")).send().await?;
                let ok = resp.status().is_success();
                let _ = resp.bytes().await?;
                Ok(ok)
            }
        })
        .await?
    };
    stop(&mut server).await;

    let mut out = Vec::new();
    for (name, (rate, mut lat, errors)) in [("create", create), ("get", get)] {
        let lat = Summary::of(&mut lat);
        let mut r = Record::new("api", "-", name);
        r.set("clients", CLIENTS)
            .set("requests_per_s", rate.round())
            .set("errors", errors)
            .set("latency_ms", lat.json());
        r.key = rate;
        r.headline = format!(
            "{rate:.0} req/s  p50 {:.2} p99 {:.2} ms  ({CLIENTS} clients, {errors} errors)",
            lat.p50, lat.p99
        );
        out.push(r);
    }
    Ok(out)
}

/// Starts the release `sked server` on `dir` (one worker, warnings only) on a free
/// 127.0.0.1 port; answers the process, its base URL, and a client that sends the operator
/// key it wrote on its first start with every request.
pub(crate) async fn start_server(
    dir: &std::path::Path,
) -> anyhow::Result<(tokio::process::Child, String, reqwest::Client)> {
    let sked = sked_binary().context("this scenario needs target/release/sked beside sked-bench")?;
    let mut server = Command::new(&sked)
        .args(["server", "--listen", "127.0.0.1:0", "--workers", "1", "--data-dir"])
        .arg(dir)
        .env("SKED_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting sked server")?;
    let stdout = server.stdout.take().context("server stdout")?;
    let line = tokio::time::timeout(Duration::from_secs(30), BufReader::new(stdout).lines().next_line())
        .await
        .context("server did not start")??
        .context("server exited")?;
    let base = line
        .strip_prefix("sked listening on ")
        .context("unexpected server output")?
        .to_string();
    // Every request authenticates with the operator key the server wrote on its first start.
    let key = std::fs::read_to_string(dir.join("admin.key")).context("reading the server's admin.key")?;
    let mut headers = reqwest::header::HeaderMap::new();
    let mut bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.trim()))?;
    bearer.set_sensitive(true);
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .default_headers(headers)
        .build()?;
    Ok((server, base, client))
}

/// Runs `request(k)` from [`CLIENTS`] tasks for `seconds`; returns requests/s, latencies in
/// ms and the count of failed requests.
async fn load<F, Fut>(seconds: u64, request: F) -> anyhow::Result<(f64, Vec<f64>, usize)>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<bool>> + Send,
{
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let request = request.clone();
        tasks.spawn(async move {
            let (mut lat, mut errors, mut k) = (Vec::new(), 0usize, c);
            while Instant::now() < until {
                let t = Instant::now();
                match request(k).await {
                    Ok(true) => lat.push(t.elapsed().as_secs_f64() * 1000.0),
                    _ => errors += 1,
                }
                k += CLIENTS;
            }
            (lat, errors)
        });
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    while let Some(done) = tasks.join_next().await {
        let (lat, e) = done?;
        all.extend(lat);
        errors += e;
    }
    Ok((all.len() as f64 / secs(started.elapsed()), all, errors))
}
