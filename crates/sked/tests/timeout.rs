//! End to end: `sleep 30` with a 1 s timeout is stopped and ends TIMED_OUT, retried or not
//! per `on_timeout`; a payload ignoring SIGTERM is killed after the grace period.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

/// Grace passed to the test server (`--grace`), in ms.
const GRACE_MS: i64 = 1000;

#[tokio::test]
async fn on_timeout_retry_times_out_every_attempt() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let api = server.api();

    api.create_job(json!({
        "id": "slow-retry", "schedule": {"at": iso(in_secs(0.0))},
        "task": {"command": {"argv": ["sleep", "30"]}},
        "timeout": "1s", "on_timeout": "retry", "max_retries": 1,
        "backoff": {"initial": "1s", "max": "1s"},
    }))
    .await;
    let run = wait_first_run(&api, "slow-retry", Duration::from_secs(10)).await;
    let run = wait_terminal(&api, run["run_id"].as_str().unwrap(), Duration::from_secs(20)).await;

    assert_eq!(run["state"], "TIMED_OUT", "{run}");
    let attempts = run["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{run}");
    for a in attempts {
        assert_eq!(a["outcome"], "timed_out", "{a}");
        // `sleep` dies at SIGTERM, so the attempt lasts about the timeout (never more than
        // timeout + grace).
        let d = duration_ms(a);
        assert!((950..=1000 + GRACE_MS + 750).contains(&d), "attempt lasted {d} ms: {a}");
    }
    let gap = (time(&attempts[1], "started_at") - time(&attempts[0], "finished_at")).num_milliseconds();
    assert!(
        gap >= 700,
        "retry started {gap} ms after the first attempt ended (backoff 1s ± 20%)"
    );
    report_lag("timeout", &run);
}

#[tokio::test]
async fn on_timeout_fail_ends_after_one_attempt_killed_after_grace() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let api = server.api();

    // Ignores SIGTERM (and so does its `sleep`, which inherits the disposition): only the
    // SIGKILL after the grace period stops it.
    api.create_job(json!({
        "id": "slow-fail", "schedule": {"at": iso(in_secs(0.0))},
        "task": sh("trap '' TERM; sleep 30"),
        "timeout": "1s", "on_timeout": "fail", "max_retries": 3,
    }))
    .await;
    let run = wait_first_run(&api, "slow-fail", Duration::from_secs(10)).await;
    let run = wait_terminal(&api, run["run_id"].as_str().unwrap(), Duration::from_secs(20)).await;

    assert_eq!(run["state"], "TIMED_OUT", "{run}");
    let attempts = run["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "on_timeout fail must not retry: {run}");
    assert_eq!(attempts[0]["outcome"], "timed_out", "{run}");
    let d = duration_ms(&attempts[0]);
    assert!(
        (1000 + GRACE_MS - 100..=1000 + GRACE_MS + 1500).contains(&d),
        "attempt lasted {d} ms, expected ≈ timeout + grace"
    );
    report_lag("timeout", &run);
}
