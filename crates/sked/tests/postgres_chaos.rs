//! End to end on PostgreSQL, as the self-hosted deployment runs: two `sked server` processes
//! (each an API and a sweeper), two `sked worker` processes, one database — a private cluster
//! this test starts (`sked_postgres::testing`). While one-shots and an every-second job run,
//! a worker is killed with SIGKILL and started again, a server likewise, and the database is
//! stopped and started again. Checked: a request during the outage answers 503; every run
//! ends SUCCEEDED; each job has its runs, one per occurrence, none lost; no attempt of a run
//! started before the previous one had ended (none twice at once); each payload attempt is
//! one of the run's recorded attempts. Printed: the tally (kills, restarts, attempts
//! re-executed).

mod common;

use chrono::{Duration as Span, DurationRound, Utc};
use common::*;
use serde_json::json;
use sked_postgres::testing::PgServer;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One-shots created before the chaos, due over its course.
const ONE_SHOTS: usize = 40;
/// Seconds of the every-second job's window.
const WINDOW_SECS: i64 = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_killed_processes_and_a_database_restart() {
    let database = PgServer::start();
    let sandbox = Sandbox::on_postgres(&database.fresh_database());
    let mut servers = [sandbox.server(&["--workers", "0"]), sandbox.server(&["--workers", "0"])];
    let api = servers[0].api();
    let mut workers = [sandbox.worker(&["--workers", "2"]), sandbox.worker(&["--workers", "2"])];

    // Each attempt appends "<run> <attempt> start|end" around a second of work.
    let effects = sandbox.path().join("effects");
    let task = sh(&format!(
        "echo \"$SKED_RUN_ID $SKED_ATTEMPT start\" >> {e}; sleep 1; echo \"$SKED_RUN_ID $SKED_ATTEMPT end\" >> {e}",
        e = effects.display()
    ));
    let retries = json!({"initial": "1s", "max": "1s"});
    let first = Utc::now().duration_trunc(Span::seconds(1)).unwrap() + Span::seconds(3);
    let last = first + Span::seconds(WINDOW_SECS - 1);
    let half = Span::milliseconds(500);
    api.create_job(json!({
        "id": "tick", "schedule": {"every": "1s", "anchor": iso(first)},
        "start_at": iso(first - half), "end_at": iso(last + half),
        "overlap": "allow", "max_retries": 9, "backoff": retries, "task": task,
    }))
    .await;
    let jobs: Vec<_> = (0..ONE_SHOTS)
        .map(|i| {
            let due = first + Span::milliseconds(i as i64 * WINDOW_SECS * 1000 / ONE_SHOTS as i64);
            json!({"id": format!("once-{i:02}"), "schedule": {"at": iso(due)},
                   "max_retries": 9, "backoff": retries, "task": task})
        })
        .collect();
    // The second server answers for jobs it did not create.
    let (status, body) = servers[1].api().post("/v1/jobs:batch", &json!({ "jobs": jobs })).await;
    assert_eq!(status, 201, "{body}");

    // The chaos, paced by the runs it interrupts (not by sleeps): each step waits until some
    // attempt is under way, so it lands mid-payload.
    let mut tally = BTreeMap::<&str, usize>::new();
    let under_way = |n: usize| {
        let effects = effects.clone();
        async move {
            wait_until("attempts under way", Duration::from_secs(60), async || {
                let text = std::fs::read_to_string(&effects).unwrap_or_default();
                (text.lines().filter(|l| l.ends_with(" start")).count() >= n).then_some(())
            })
            .await
        }
    };
    under_way(3).await;
    workers[0].kill9();
    *tally.entry("worker SIGKILL").or_default() += 1;
    workers[0] = sandbox.worker(&["--workers", "2"]);

    under_way(10).await;
    servers[0].kill9();
    *tally.entry("server SIGKILL").or_default() += 1;
    servers[0] = sandbox.server(&["--workers", "0"]);

    under_way(18).await;
    database.stop();
    *tally.entry("database restart").or_default() += 1;
    let (status, body) = servers[1].api().get("/v1/jobs/tick").await;
    assert_eq!(status, 503, "a request while the database is down: {body}");
    let (status, _) = servers[1].api().get("/readyz").await;
    assert_eq!(status, 503, "not ready while the database is down");
    database.start_again();

    under_way(26).await;
    workers[1].kill9();
    *tally.entry("worker SIGKILL").or_default() += 1;
    workers[1] = sandbox.worker(&["--workers", "2"]);

    // Every occurrence's run, ended.
    let api = servers[0].api();
    let expected = WINDOW_SECS as usize + ONE_SHOTS;
    let runs = wait_until("every run to end", Duration::from_secs(120), async || {
        let runs = api.all_runs("").await;
        (runs.len() >= expected && runs.iter().all(is_terminal)).then_some(runs)
    })
    .await;

    for run in &runs {
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
    }
    let mut per_job: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for run in &runs {
        let job = run["job_id"].as_str().unwrap().to_string();
        let fresh = per_job.entry(job).or_default().insert(iso(time(run, "scheduled_for")));
        assert!(fresh, "an occurrence with two runs: {run}");
    }
    let tick_times: Vec<String> = (0..WINDOW_SECS).map(|s| iso(first + Span::seconds(s))).collect();
    assert_eq!(
        per_job.get("tick").map(|t| t.iter().cloned().collect::<Vec<_>>()),
        Some(tick_times),
        "the every-second job's runs, one per second"
    );
    for i in 0..ONE_SHOTS {
        assert_eq!(
            per_job.get(&format!("once-{i:02}")).map(BTreeSet::len),
            Some(1),
            "once-{i:02}"
        );
    }
    assert_eq!(runs.len(), expected, "runs of nothing else");

    // Per run, the payload's attempts in order: attempt k + 1 started only after attempt k
    // ended (its "end" line) or was killed (no "end" line: it must come before any line of
    // a later attempt in the file, which appends in time order).
    let text = std::fs::read_to_string(&effects).unwrap();
    let mut seen: BTreeMap<String, Vec<(u32, String)>> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (run, attempt, what) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        seen.entry(run.to_string())
            .or_default()
            .push((attempt.parse().unwrap(), what.to_string()));
    }
    let mut re_executed = 0;
    for run in &runs {
        let id = run["run_id"].as_str().unwrap();
        let lines = seen.get(id).unwrap_or_else(|| panic!("no payload ran for {id}"));
        let attempts = run["attempts"].as_array().unwrap();
        re_executed += attempts.len() - 1;
        let mut open: Option<u32> = None;
        let mut last_attempt = 0;
        for (attempt, what) in lines {
            assert!(
                *attempt >= last_attempt,
                "{id}: attempt {attempt} after {last_attempt}: {lines:?}"
            );
            if *attempt > last_attempt {
                // A new attempt starts: the one before must not be open unless it was lost.
                if let Some(prev) = open {
                    let lost = attempts[prev as usize - 1]["outcome"] == "worker_lost";
                    assert!(lost, "{id}: attempt {attempt} started while {prev} ran: {lines:?}");
                }
                last_attempt = *attempt;
            }
            open = (what == "start").then_some(*attempt);
        }
        assert_eq!(lines.last().map(|l| l.1.as_str()), Some("end"), "{id}: {lines:?}");
        assert_eq!(
            last_attempt as usize,
            attempts.len(),
            "{id}: payload attempts vs. recorded"
        );
    }
    eprintln!(
        "postgres chaos: {} runs SUCCEEDED, lost 0; {tally:?}; attempts re-executed {re_executed}",
        runs.len()
    );
}
