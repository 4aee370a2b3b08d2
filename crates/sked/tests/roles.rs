//! End to end: the API, the sweepers and the workers as processes of their own on one data
//! directory — `sked server --no-sweeper --workers 0`, two `sked sweeper`, one `sked worker`.
//! The API alone fires nothing; with the sweepers a one-shot and an every-second job run, each
//! occurrence once, though two sweepers look at once; every process answers `/readyz`.

mod common;

use common::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test]
async fn the_api_sweepers_and_workers_run_as_separate_processes() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--no-sweeper", "--workers", "0"]);
    let api = server.api();
    let (status, ready) = api.get("/readyz").await;
    assert_eq!((status, ready), (200, json!({"status": "ready"})));
    let _worker = sandbox.worker(&["--workers", "2"]);

    api.create_job(json!({"id": "once", "schedule": {"at": iso(in_secs(0.0))}, "task": sh("echo once")}))
        .await;
    // Nothing fires it while no sweeper runs (the server has none). An absence can only be
    // seen by waiting: 1.5 s is six times a sweeper's poll and far beyond the server's
    // in-process sweep it would otherwise run.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(api.runs_of("once").await.is_empty(), "fired without a sweeper");

    let sweepers = [sandbox.sweeper(1), sandbox.sweeper(2)];
    for sweeper in &sweepers {
        let probe = Api::new(sweeper.url.as_deref().unwrap());
        assert_eq!(probe.get("/readyz").await.0, 200, "a sweeper's readiness");
    }
    let run = wait_first_run(&api, "once", Duration::from_secs(10)).await;
    let run = wait_terminal(&api, run["run_id"].as_str().unwrap(), Duration::from_secs(20)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");

    api.create_job(json!({"id": "tick", "schedule": {"every": "1s"}, "task": sh("true")}))
        .await;
    let runs = wait_until("five ticks run", Duration::from_secs(30), async || {
        let runs = api.runs_of("tick").await;
        (runs.iter().filter(|r| r["state"] == "SUCCEEDED").count() >= 5).then_some(runs)
    })
    .await;
    let times: BTreeSet<String> = runs.iter().map(|r| r["scheduled_for"].to_string()).collect();
    assert_eq!(times.len(), runs.len(), "an occurrence fired twice: {runs:?}");
    assert!(
        runs.iter()
            .all(|r| matches!(r["state"].as_str(), Some("SUCCEEDED" | "PENDING" | "RUNNING"))),
        "{runs:?}"
    );
}
