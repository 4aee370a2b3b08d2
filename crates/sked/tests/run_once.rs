//! End to end: a one-shot job due in 2 s runs exactly once, on time, and its output is
//! readable through the logs endpoint.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_job_due_in_two_seconds_runs_once_and_its_output_is_logged() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let api = server.api();

    let due = in_secs(2.0);
    let job = api
        .create_job(
            json!({"id": "hello", "schedule": {"at": iso(due)}, "task": {"command": {"argv": ["echo", "hello-sked"]}}}),
        )
        .await;
    assert_eq!(job["state"], "ACTIVE", "{job}");
    assert_eq!(time(&job, "next_fire_at"), time(&json!({"t": iso(due)}), "t"));

    let first = wait_first_run(&api, "hello", Duration::from_secs(10)).await;
    let run_id = first["run_id"].as_str().unwrap().to_string();
    let run = wait_terminal(&api, &run_id, Duration::from_secs(15)).await;

    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    assert_eq!(run["job_id"], "hello");
    assert_eq!(time(&run, "scheduled_for"), time(&job, "next_fire_at"));
    let attempts = run["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{run}");
    assert_eq!(attempts[0]["exit_code"], 0, "{run}");
    assert!(time(&run, "finished_at") >= time(&run, "started_at"));
    let lag = report_lag("run_once", &run);
    assert!((0..1000).contains(&lag), "start lag {lag} ms");

    let lines = api.log_lines(&run_id, "").await;
    assert!(lines.iter().any(|l| l == "hello-sked"), "log lines: {lines:?}");

    // A one-shot job completes after firing and never fires again.
    wait_until("the job to complete", Duration::from_secs(5), async || {
        let job = api.get_ok("/v1/jobs/hello").await;
        (job["state"] == "COMPLETED").then_some(())
    })
    .await;
    assert_eq!(api.runs_of("hello").await.len(), 1);
}
