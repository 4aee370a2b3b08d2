//! End to end: SIGTERM stops `sked server` and `sked worker` cleanly — exit 0 within the
//! grace period, running payloads stopped, nothing left behind — and a worker stopped
//! mid-payload hands its attempt back (closed, the run PENDING) so another worker finishes the
//! run: nothing is lost, nothing waits for a lease to expire.

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

#[tokio::test]
async fn sigterm_mid_payload_hands_the_attempt_back_and_another_worker_finishes_the_run() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "0"]);
    let mut first = sandbox.worker(&["--workers", "1"]);
    let api = server.api();

    // The first attempt waits; a later one finds the marker and ends at once.
    let marker = sandbox.path().join("started");
    let script = format!(
        "if [ -e {m} ]; then echo again; exit 0; fi; touch {m}; exec sleep 30",
        m = marker.display()
    );
    api.create_job(json!({"id": "long", "schedule": {"at": iso(in_secs(0.0))}, "task": sh(&script)}))
        .await;
    wait_until("the first attempt to start", Duration::from_secs(10), async || {
        marker.exists().then_some(())
    })
    .await;
    assert_eq!(first.terminate(Duration::from_secs(5)), Some(0), "worker exit");

    // The attempt is closed, not left holding its lease: the run is waiting for another worker.
    let run_id = api.runs_of("long").await[0]["run_id"].as_str().unwrap().to_string();
    let handed_back = api.run(&run_id).await;
    assert_eq!(handed_back["state"], "PENDING", "{handed_back}");
    let attempt = &handed_back["attempts"][0];
    assert!(!attempt["finished_at"].is_null(), "attempt 1 not closed: {handed_back}");

    let _second = sandbox.worker(&["--workers", "1"]);
    let run = wait_terminal(&api, &run_id, Duration::from_secs(20)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    assert_eq!(run["attempts"].as_array().map(Vec::len), Some(2), "{run}");
}
