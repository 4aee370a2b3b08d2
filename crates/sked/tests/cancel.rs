//! End to end: a PENDING run that is cancelled ends CANCELLED and never starts, even once
//! a worker comes along.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_cancelled_pending_run_never_starts() {
    let sandbox = Sandbox::new();
    // No workers in the server: the run stays PENDING until we start a worker process.
    let server = sandbox.server(&["--workers", "0"]);
    let api = server.api();

    api.create_job(json!({"id": "doomed", "schedule": {"at": iso(in_secs(1.0))}, "task": sh("echo should-not-run")}))
        .await;
    let run = wait_first_run(&api, "doomed", Duration::from_secs(10)).await;
    assert_eq!(run["state"], "PENDING", "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();

    let (status, cancelled) = api.post(&format!("/v1/runs/{run_id}/cancel"), &json!({})).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");
    // Cancelling a run that has ended is a conflict.
    let (status, body) = api.post(&format!("/v1/runs/{run_id}/cancel"), &json!({})).await;
    assert_eq!(status, 409, "{body}");

    // Start a worker, and prove it is working by running another job to completion.
    let _worker = sandbox.worker(&["--workers", "1"]);
    api.create_job(json!({"id": "probe", "schedule": {"at": iso(in_secs(0.0))}, "task": sh("echo probe")}))
        .await;
    let probe = wait_first_run(&api, "probe", Duration::from_secs(10)).await;
    let probe = wait_terminal(&api, probe["run_id"].as_str().unwrap(), Duration::from_secs(15)).await;
    assert_eq!(probe["state"], "SUCCEEDED", "{probe}");

    let after = api.run(&run_id).await;
    assert_eq!(after["state"], "CANCELLED", "{after}");
    assert!(after["started_at"].is_null(), "{after}");
    assert_eq!(after["attempts"].as_array().map(Vec::len), Some(0), "{after}");
}
