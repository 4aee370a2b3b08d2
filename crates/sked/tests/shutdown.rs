//! End to end: SIGTERM stops `sked server` and `sked worker` cleanly — exit 0 within the
//! grace period, running payloads stopped, nothing left behind.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn sigterm_stops_server_and_worker_with_their_payloads() {
    let sandbox = Sandbox::new();
    let mut server = sandbox.server(&["--workers", "0"]);
    let mut worker = sandbox.worker(&["--workers", "1"]);
    let api = server.api();

    let pids = sandbox.path().join("pids");
    api.create_job(json!({"id": "long", "schedule": {"at": iso(in_secs(0.0))},
                          "task": sh(&format!("echo $$ >> {}; exec sleep 30", pids.display()))}))
        .await;
    let payload: u32 = wait_until("the payload to start", Duration::from_secs(10), async || {
        std::fs::read_to_string(&pids).ok()?.trim().parse().ok()
    })
    .await;

    // Stopping takes at most the grace period (1 s) plus a little.
    assert_eq!(worker.terminate(Duration::from_secs(5)), Some(0), "worker exit");
    assert!(process_gone(payload), "the payload outlived its worker");
    assert_eq!(server.terminate(Duration::from_secs(5)), Some(0), "server exit");
}
