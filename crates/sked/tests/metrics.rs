//! `GET /metrics` of a real `sked server`: the counters and the start-lag
//! histogram move as runs fire, start, finish, retry and are skipped — read with a real
//! exposition parser (`prometheus-parse`); the route needs a key, and a tenant's key sees its
//! tenant's series only; with `SKED_LOG_FORMAT=json` every log line of a run's life carries
//! `job_id`, `run_id` and `attempt`. A `sked worker` with `--metrics-listen` serves its own
//! workers' figures, behind the same keys.

mod common;

use common::{Sandbox, in_secs, iso, sh, wait_until};
use prometheus_parse::{Scrape, Value as Sample};
use serde_json::{Value, json};
use std::time::Duration;

/// One scrape with `key`: the status, and the parsed exposition when 200.
async fn scrape(url: &str, key: Option<&str>) -> (u16, Option<Scrape>) {
    let mut request = reqwest::Client::new().get(format!("{url}/metrics"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("GET /metrics");
    let status = response.status().as_u16();
    if status != 200 {
        return (status, None);
    }
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let text = response.text().await.unwrap();
    let parsed = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("a valid exposition");
    (status, Some(parsed))
}

/// The value of the counter or gauge `metric` whose labels include `labels` (0 when absent).
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .map(|s| match s.value {
            Sample::Counter(v) | Sample::Gauge(v) | Sample::Untyped(v) => v,
            _ => panic!("{metric} is not a single value"),
        })
        .sum()
}

/// The buckets (`le`, cumulative count) of histogram `metric` for `tenant`.
fn buckets(scrape: &Scrape, metric: &str, tenant: &str) -> Vec<(f64, f64)> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && s.labels.get("tenant") == Some(tenant))
        .map(|s| match &s.value {
            Sample::Histogram(b) => b.iter().map(|b| (b.less_than, b.count)).collect(),
            _ => panic!("{metric} is not a histogram"),
        })
        .unwrap_or_default()
}

fn tenants_in(scrape: &Scrape) -> std::collections::BTreeSet<String> {
    scrape
        .samples
        .iter()
        .filter_map(|s| s.labels.get("tenant").map(str::to_string))
        .collect()
}

#[tokio::test]
async fn counters_and_the_lag_histogram_move_as_runs_fire_start_finish_retry_and_skip() {
    let sandbox = Sandbox::new();
    let server = sandbox.server_after("export SKED_LOG_FORMAT=json", &["--workers", "2"]);
    let (url, key) = (server.url.clone().unwrap(), server.key.clone().unwrap());
    let api = server.api();

    let (_, before) = scrape(&url, Some(&key)).await;
    let before = before.unwrap();
    assert_eq!(value(&before, "sked_runs_fired_total", &[]), 0.0);
    assert_eq!(value(&before, "sked_workers", &[]), 2.0, "the server's two workers");

    // Succeeds every second; skips by overlap (a 2.5 s payload every second under forbid);
    // fails once, is retried, and fails for good.
    api.create_job(json!({"id": "tick", "schedule": {"every": "1s"}, "task": {"command": {"argv": ["true"]}}}))
        .await;
    api.create_job(json!({
        "id": "slow", "schedule": {"every": "1s"}, "overlap": "forbid",
        "task": {"command": {"argv": ["sleep", "2.5"]}},
    }))
    .await;
    api.create_job(json!({
        "id": "bad", "schedule": {"at": iso(in_secs(0.0))}, "task": sh("exit 3"),
        "max_retries": 1, "backoff": {"initial": "1s", "max": "1s"},
    }))
    .await;

    let t = [("tenant", "default")];
    let after = wait_until(
        "fired, finished, retried and skipped runs in /metrics",
        Duration::from_secs(30),
        async || {
            let scrape = scrape(&url, Some(&key)).await.1.unwrap();
            let ok = value(
                &scrape,
                "sked_runs_finished_total",
                &[("tenant", "default"), ("outcome", "succeeded")],
            ) >= 3.0
                && value(
                    &scrape,
                    "sked_runs_finished_total",
                    &[("tenant", "default"), ("outcome", "failed")],
                ) >= 1.0
                && value(&scrape, "sked_retries_total", &t) >= 1.0
                && value(
                    &scrape,
                    "sked_occurrences_skipped_total",
                    &[("tenant", "default"), ("reason", "overlap")],
                ) >= 1.0;
            ok.then_some(scrape)
        },
    )
    .await;

    let fired = value(&after, "sked_runs_fired_total", &t);
    let started = value(&after, "sked_runs_started_total", &t);
    let finished = value(&after, "sked_runs_finished_total", &t);
    let retries = value(&after, "sked_retries_total", &t);
    let running = value(&after, "sked_runs_running", &t);
    assert!(fired >= 5.0, "fired {fired}");
    // Every start is an attempt of a fired run (a retry is a second attempt of one run).
    assert!(
        started <= fired + retries,
        "started {started}, fired {fired}, retries {retries}"
    );
    assert!(finished <= fired, "finished {finished}, fired {fired}");
    assert!((0.0..=4.0).contains(&running), "running {running}");
    assert_eq!(
        value(&after, "sked_occurrences_skipped_total", &[("reason", "misfire")]),
        0.0
    );

    // The lag histogram: one observation per start, cumulative buckets from 1 ms to 10 min.
    let lag = buckets(&after, "sked_run_start_lag_seconds", "default");
    assert_eq!(lag.first().map(|b| b.0), Some(0.001));
    assert!(lag.iter().any(|b| b.0 == 600.0));
    assert!(lag.windows(2).all(|w| w[0].1 <= w[1].1), "{lag:?}");
    assert_eq!(lag.last().map(|b| b.1), Some(started), "+Inf counts every start");
    assert_eq!(value(&after, "sked_run_start_lag_seconds_count", &t), started);
    // Local runs start within a second of their time.
    let within_1s = lag.iter().find(|b| b.0 == 1.0).unwrap().1;
    assert!(within_1s >= started - 1.0, "{lag:?}");

    // Process-wide series: sweeps timed, requests counted by route template, never by path.
    assert!(value(&after, "sked_sweep_duration_seconds_count", &[]) >= 1.0);
    assert_eq!(
        value(
            &after,
            "sked_http_requests_total",
            &[("route", "/v1/jobs"), ("status", "201")]
        ),
        3.0
    );
    assert!(
        value(
            &after,
            "sked_http_requests_total",
            &[("route", "/metrics"), ("status", "200")]
        ) >= 1.0
    );
    for sample in &after.samples {
        for (name, label) in sample.labels.iter() {
            assert!(
                !label.contains("tick") && !label.contains('@'),
                "{name}={label} names a job or run"
            );
        }
    }

    // The JSON log: every line that names a run names its job and attempt too, as its own
    // fields or its span's; the run's whole life is there.
    let log = std::fs::read_to_string(sandbox.path().join("server.log")).unwrap();
    let mut messages = std::collections::BTreeSet::new();
    for line in log.lines() {
        let entry: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let field = |name: &str| entry.get(name).or_else(|| entry["span"].get(name)).cloned();
        if field("run_id").is_some() {
            for name in ["job_id", "attempt"] {
                assert!(field(name).is_some(), "no {name} in {line}");
            }
            messages.insert(entry["message"].as_str().unwrap_or_default().to_string());
        }
    }
    for message in ["run fired", "attempt started", "attempt ended", "run will be retried"] {
        assert!(messages.contains(message), "no {message:?} line in {messages:?}");
    }
}

#[tokio::test]
async fn metrics_need_a_key_and_a_tenant_key_sees_only_its_tenant() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "1"]);
    let (url, operator) = (server.url.clone().unwrap(), server.key.clone().unwrap());
    let api = server.api();

    assert_eq!(scrape(&url, None).await.0, 401);
    assert_eq!(scrape(&url, Some("sked_not-a-key")).await.0, 401);

    let (status, created) = api
        .post("/v1/keys", &json!({"tenant": "acme", "role": "write", "name": "acme"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let acme = created["key"].as_str().unwrap().to_string();
    let acme_api = server.api().with_key(Some(&acme));
    let (status, created) = api
        .post("/v1/keys", &json!({"tenant": "zeta", "role": "read", "name": "zeta"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let zeta = created["key"].as_str().unwrap().to_string();

    let once =
        |id: &str| json!({"id": id, "schedule": {"at": iso(in_secs(0.0))}, "task": {"command": {"argv": ["true"]}}});
    api.create_job(once("ops-job")).await;
    acme_api.create_job(once("acme-job")).await;
    let finished = |s: &Scrape, tenant: &str| {
        value(
            s,
            "sked_runs_finished_total",
            &[("tenant", tenant), ("outcome", "succeeded")],
        )
    };
    let all = wait_until("both tenants' runs to finish", Duration::from_secs(20), async || {
        let s = scrape(&url, Some(&operator)).await.1.unwrap();
        (finished(&s, "default") >= 1.0 && finished(&s, "acme") >= 1.0).then_some(s)
    })
    .await;
    assert_eq!(tenants_in(&all), ["acme", "default"].map(String::from).into());
    assert_eq!(value(&all, "sked_workers", &[]), 1.0);

    // A write key of acme: acme's series, nothing of another tenant, nothing process-wide.
    let (status, mine) = scrape(&url, Some(&acme)).await;
    assert_eq!(status, 200);
    let mine = mine.unwrap();
    assert_eq!(tenants_in(&mine), ["acme"].map(String::from).into());
    assert_eq!(finished(&mine, "acme"), 1.0);
    assert_eq!(value(&mine, "sked_runs_fired_total", &[("tenant", "acme")]), 1.0);
    for family in [
        "sked_workers",
        "sked_http_requests_total",
        "sked_sweep_duration_seconds_count",
    ] {
        assert!(
            mine.samples.iter().all(|s| s.metric != family),
            "{family} shown to a tenant key"
        );
    }

    // A read key of a tenant with nothing yet: a valid, empty exposition.
    let (status, none) = scrape(&url, Some(&zeta)).await;
    assert_eq!(status, 200);
    assert!(none.unwrap().samples.is_empty());
}

#[tokio::test]
async fn a_worker_process_serves_its_own_metrics_behind_the_keys() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "0"]);
    let (url, operator) = (server.url.clone().unwrap(), server.key.clone().unwrap());
    let worker = sandbox.worker(&["--workers", "1", "--metrics-listen", "127.0.0.1:0"]);
    let worker_url = worker.url.clone().unwrap();

    assert_eq!(scrape(&worker_url, None).await.0, 401, "no key, no metrics");
    let health = reqwest::get(format!("{worker_url}/healthz")).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let api_path = reqwest::Client::new()
        .get(format!("{worker_url}/v1/jobs"))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(api_path.status().as_u16(), 404, "the worker's listener serves no API");

    let api = server.api();
    api.create_job(
        json!({"id": "once", "schedule": {"at": iso(in_secs(0.0))}, "task": {"command": {"argv": ["true"]}}}),
    )
    .await;
    let t = [("tenant", "default")];
    let succeeded = [("tenant", "default"), ("outcome", "succeeded")];
    let from_worker = wait_until(
        "the worker's run in its /metrics",
        Duration::from_secs(20),
        async || {
            let s = scrape(&worker_url, Some(&operator)).await.1.unwrap();
            (value(&s, "sked_runs_finished_total", &succeeded) >= 1.0).then_some(s)
        },
    )
    .await;
    assert_eq!(value(&from_worker, "sked_runs_started_total", &t), 1.0);
    assert_eq!(
        value(&from_worker, "sked_workers", &[]),
        1.0,
        "the worker process's one worker"
    );
    // The server fired the run; the worker started and finished it: each process its own part.
    let from_server = scrape(&url, Some(&operator)).await.1.unwrap();
    assert_eq!(value(&from_server, "sked_runs_fired_total", &t), 1.0);
    assert_eq!(value(&from_server, "sked_runs_started_total", &t), 0.0);
    assert_eq!(value(&from_server, "sked_workers", &[]), 0.0);
}
