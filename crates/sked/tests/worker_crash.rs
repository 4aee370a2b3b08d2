//! End to end: `kill -9` of a `sked worker` mid-payload. The payload dies with its worker
//! (its own children too),
//! the lease expires, and another worker runs attempt 2 to success; attempt 1 is closed as
//! worker lost.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_killed_worker_s_run_completes_on_another_worker() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "0"]);
    let api = server.api();
    let mut first = sandbox.worker(&["--workers", "1"]);

    let pids = sandbox.path().join("pids");
    api.create_job(json!({
        "id": "long", "schedule": {"at": iso(in_secs(0.0))}, "task": killable_payload(&pids),
        "max_retries": 2, "backoff": {"initial": "1s", "max": "1s"},
    }))
    .await;

    // Wait until attempt 1's payload is running and has written its pid.
    let run = wait_first_run(&api, "long", Duration::from_secs(10)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let payload = attempt_one_pids(&pids, Duration::from_secs(10)).await;
    assert_eq!(api.run(&run_id).await["state"], "RUNNING");

    first.kill9();
    wait_payload_gone(payload).await;

    let _second = sandbox.worker(&["--workers", "1"]);
    let run = wait_terminal(&api, &run_id, Duration::from_secs(30)).await;
    assert_retried_after_worker_loss(&api, &run).await;
    // Attempt 1 never finished its payload: it was killed before `echo done`.
    let lines = api.log_lines(&run_id, "attempt=1").await;
    assert!(!lines.iter().any(|l| l == "done"), "attempt 1 log: {lines:?}");
}
