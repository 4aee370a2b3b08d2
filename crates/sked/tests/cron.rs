//! End to end: a cron job firing every second keeps time across 10 s — one run per whole
//! second, no duplicate nominal times, each started well within a second.

mod common;

use chrono::{SubsecRound, Timelike};
use common::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test]
async fn an_every_second_cron_fires_on_time_without_duplicates() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let api = server.api();

    let created = chrono::Utc::now();
    api.create_job(json!({"id": "tick", "schedule": {"cron": "* * * * * *"}, "task": sh("echo tick")}))
        .await;
    // The ten whole seconds after creation.
    let last = created.trunc_subsecs(0) + chrono::Duration::seconds(10);
    let in_window = |run: &serde_json::Value| {
        let t = time(run, "scheduled_for");
        t > created && t <= last
    };

    let runs = wait_until("ten seconds of runs to end", Duration::from_secs(20), async || {
        let runs: Vec<_> = api.runs_of("tick").await.into_iter().filter(|r| in_window(r)).collect();
        let reached_end = runs.iter().any(|r| time(r, "scheduled_for") == last);
        (reached_end && runs.iter().all(is_terminal)).then_some(runs)
    })
    .await;
    let (status, _) = api.post("/v1/jobs/tick/pause", &json!({})).await;
    assert_eq!(status, 200);

    assert!(runs.len() >= 9, "only {} runs in 10 s: {runs:?}", runs.len());
    let nominal: BTreeSet<_> = runs.iter().map(|r| time(r, "scheduled_for")).collect();
    assert_eq!(nominal.len(), runs.len(), "duplicate scheduled_for");
    for r in &runs {
        let t = time(r, "scheduled_for");
        assert_eq!(t.nanosecond(), 0, "scheduled_for not on a whole second: {r}");
        assert_eq!(r["state"], "SUCCEEDED", "{r}");
        let lag = report_lag("cron", r);
        assert!((0..1000).contains(&lag), "start lag {lag} ms: {r}");
    }
}
