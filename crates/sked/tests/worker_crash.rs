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
    // The payload's real work runs in a child of the shell: both must die with the worker.
    // Attempt 1 would sleep far longer than the test waits for it to die.
    let script = format!(
        "sleep $((SKED_ATTEMPT == 1 ? 120 : 1)) & echo \"$SKED_ATTEMPT $$ $!\" >> {}; wait; echo done",
        pids.display()
    );
    api.create_job(json!({
        "id": "long", "schedule": {"at": iso(in_secs(0.0))}, "task": sh(&script),
        "max_retries": 2, "backoff": {"initial": "1s", "max": "1s"},
    }))
    .await;

    // Wait until attempt 1's payload is running and has written its pid.
    let run = wait_first_run(&api, "long", Duration::from_secs(10)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let (payload_pid, grandchild_pid): (u32, u32) =
        wait_until("attempt 1's payload to start", Duration::from_secs(10), async || {
            let text = std::fs::read_to_string(&pids).ok()?;
            let line = text.lines().find_map(|l| l.strip_prefix("1 "))?;
            let (shell, child) = line.trim().split_once(' ')?;
            Some((shell.parse().ok()?, child.parse().ok()?))
        })
        .await;
    assert_eq!(api.run(&run_id).await["state"], "RUNNING");

    first.kill9();
    wait_until(
        "attempt 1's payload to die with its worker",
        Duration::from_secs(5),
        async || process_gone(payload_pid).then_some(()),
    )
    .await;
    wait_until(
        "the payload's own child to die with the worker",
        Duration::from_secs(5),
        async || process_gone(grandchild_pid).then_some(()),
    )
    .await;

    let _second = sandbox.worker(&["--workers", "1"]);
    let run = wait_terminal(&api, &run_id, Duration::from_secs(30)).await;

    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    let attempts = run["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{run}");
    assert_eq!(attempts[0]["outcome"], "worker_lost", "{run}");
    assert_eq!(attempts[1]["outcome"], "succeeded", "{run}");
    assert_ne!(attempts[0]["worker"], attempts[1]["worker"], "{run}");
    let lines = api.log_lines(&run_id, "attempt=2").await;
    assert!(lines.iter().any(|l| l == "done"), "attempt 2 log: {lines:?}");
    // Attempt 1 never finished its payload: it was killed before `echo done`.
    let lines = api.log_lines(&run_id, "attempt=1").await;
    assert!(!lines.iter().any(|l| l == "done"), "attempt 1 log: {lines:?}");
}
