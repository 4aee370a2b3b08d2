//! End to end: `kill -9` of `sked server` right after 200 jobs were accepted; after a
//! restart on the same data dir, every job runs, exactly once.

mod common;

use common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const JOBS: usize = 200;

#[tokio::test]
async fn accepted_jobs_survive_a_server_kill() {
    let sandbox = Sandbox::new();
    let mut server = sandbox.server(&[]);
    let api = server.api();

    let out = sandbox.path().join("ran");
    let due = in_secs(3.0);
    let jobs: Vec<_> = (0..JOBS)
        .map(|i| {
            json!({"id": format!("batch-{i:03}"), "schedule": {"at": iso(due)},
                   "task": sh(&format!("echo \"$SKED_JOB_ID\" >> {}", out.display()))})
        })
        .collect();
    let (status, body) = api.post("/v1/jobs:batch", &json!({ "jobs": jobs })).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(items(&body).len(), JOBS);
    server.kill9();
    assert!(
        chrono::Utc::now() < due,
        "the server was killed after the jobs were due; the test is too slow"
    );

    let server = sandbox.server(&[]);
    let api = server.api();
    let runs = wait_until("every job's run to succeed", Duration::from_secs(60), async || {
        let runs = api.all_runs("state=SUCCEEDED").await;
        (runs.len() >= JOBS).then_some(runs)
    })
    .await;

    let mut per_job: BTreeMap<String, usize> = BTreeMap::new();
    for run in api.all_runs("").await {
        *per_job.entry(run["job_id"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert_eq!(per_job.len(), JOBS, "jobs with runs");
    assert!(
        per_job.values().all(|n| *n == 1),
        "a job ran more than once: {per_job:?}"
    );
    for run in &runs {
        assert_eq!(run["attempts"].as_array().map(Vec::len), Some(1), "{run}");
        report_lag("server_crash", run);
    }

    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        *ran.entry(line.to_string()).or_default() += 1;
    }
    assert_eq!(ran.len(), JOBS, "payloads that ran");
    assert!(ran.values().all(|n| *n == 1), "a payload ran more than once: {ran:?}");
}

#[tokio::test]
async fn runs_in_flight_survive_a_server_kill() {
    const IN_FLIGHT: usize = 40;
    let sandbox = Sandbox::new();
    let mut server = sandbox.server(&[]);
    let api = server.api();

    let out = sandbox.path().join("ran");
    let jobs: Vec<_> = (0..IN_FLIGHT)
        .map(|i| {
            json!({"id": format!("busy-{i:02}"), "schedule": {"at": iso(in_secs(0.5))},
                   "task": sh(&format!("sleep 1; echo \"$SKED_JOB_ID\" >> {}", out.display())),
                   "backoff": {"initial": "1s", "max": "1s"}})
        })
        .collect();
    let (status, body) = api.post("/v1/jobs:batch", &json!({ "jobs": jobs })).await;
    assert_eq!(status, 201, "{body}");

    // Kill the server (and with it its workers and their payloads) while runs are going.
    wait_until("runs to be running", Duration::from_secs(10), async || {
        (api.all_runs("state=RUNNING").await.len() >= 8).then_some(())
    })
    .await;
    let finished_before: Vec<_> = api.all_runs("state=SUCCEEDED").await;
    server.kill9();

    let server = sandbox.server(&[]);
    let api = server.api();
    wait_until(
        "every run to succeed after the restart",
        Duration::from_secs(40),
        async || (api.all_runs("state=SUCCEEDED").await.len() >= IN_FLIGHT).then_some(()),
    )
    .await;

    let runs = api.all_runs("").await;
    assert_eq!(runs.len(), IN_FLIGHT, "one run per job");
    for before in &finished_before {
        let now = api.run(before["run_id"].as_str().unwrap()).await;
        assert_eq!(&now, before, "a finished run changed across the crash");
    }
    let retried = runs
        .iter()
        .filter(|r| r["attempts"].as_array().map_or(0, Vec::len) > 1)
        .count();
    for run in runs.iter().filter(|r| r["attempts"].as_array().map_or(0, Vec::len) > 1) {
        assert_eq!(run["attempts"][0]["outcome"], "worker_lost", "{run}");
    }
    assert!(retried > 0, "no run was in flight at the kill");
    let text = std::fs::read_to_string(&out).unwrap();
    let ran: std::collections::BTreeSet<_> = text.lines().collect();
    assert_eq!(ran.len(), IN_FLIGHT, "every payload completed at least once");
    println!(
        "in-flight crash: {retried} of {IN_FLIGHT} runs retried, {} payload completions",
        text.lines().count()
    );
}
