//! End to end: a tenant's quota set with `sked tenants quota` holds on the real server — with
//! `max_concurrent_runs` 2 and eight worker slots, six runs due at once never run more than two
//! at a time, and all of them end SUCCEEDED at their first attempt (a run held back waits; it
//! is not failed or retried); `max_active_jobs` refuses a create with 429 and stores nothing.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_concurrency_cap_holds_across_workers_and_held_runs_still_run() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "2"]);
    let api = server.api();

    let set = server.cli(&[
        "tenants",
        "quota",
        "default",
        "--max-concurrent-runs",
        "2",
        "--max-active-jobs",
        "6",
    ]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let shown = server.cli(&["tenants", "quota", "default", "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("the quota as JSON");
    assert_eq!(
        (shown["max_concurrent_runs"].as_u64(), shown["max_active_jobs"].as_u64()),
        (Some(2), Some(6))
    );

    let due = iso(in_secs(1.0));
    for i in 0..6 {
        api.create_job(json!({
            "id": format!("slow{i}"),
            "schedule": {"at": due},
            "task": {"command": {"argv": ["sleep", "0.4"]}},
        }))
        .await;
    }
    let (status, refused) = api
        .post(
            "/v1/jobs",
            &json!({"id": "seventh", "schedule": {"at": due}, "task": {"command": {"argv": ["true"]}}}),
        )
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (429, Some("resource_exhausted")),
        "{refused}"
    );
    assert_eq!(
        api.get("/v1/jobs/seventh").await.0,
        404,
        "a refused create stores nothing"
    );

    let mut spans = Vec::new();
    for i in 0..6 {
        let first = wait_first_run(&api, &format!("slow{i}"), Duration::from_secs(15)).await;
        let run = wait_terminal(&api, first["run_id"].as_str().unwrap(), Duration::from_secs(30)).await;
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        let attempts = run["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "a held run is not retried: {run}");
        spans.push((time(&attempts[0], "started_at"), time(&attempts[0], "finished_at")));
    }
    let most_at_once = spans
        .iter()
        .map(|(start, _)| spans.iter().filter(|(s, f)| s <= start && start < f).count())
        .max()
        .unwrap();
    assert!(most_at_once <= 2, "{most_at_once} attempts ran at once: {spans:?}");
}
