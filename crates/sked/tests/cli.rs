//! End to end: the `sked` client commands against a running server — create with flags,
//! list, get, runs, logs (also `--follow` while a payload runs), and exit codes.

mod common;

use chrono::DurationRound;
use common::*;
use serde_json::Value;
use std::process::Output;
use std::time::Duration;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

#[tokio::test]
async fn the_cli_creates_lists_and_reads_back() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let url = server.url.clone().unwrap();
    let api = server.api();

    let out = ok(server.cli(&[
        "jobs",
        "create",
        "--id",
        "cli-job",
        "--at",
        "+1s",
        "--priority",
        "7",
        "--",
        "echo",
        "hello-cli",
    ]));
    assert!(out.contains("cli-job"), "{out}");
    let out = ok(server.cli(&[
        "jobs",
        "create",
        "--id",
        "every-job",
        "--every",
        "5m",
        "--max-retries",
        "0",
        "--timeout",
        "30s",
        "--",
        "true",
    ]));
    assert!(out.contains("every 5m"), "{out}");

    let out = ok(server.cli(&["jobs", "list"]));
    let header = out.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") && header.contains("STATE") && header.contains("NEXT FIRE"),
        "{out}"
    );
    assert!(out.contains("cli-job") && out.contains("every-job"), "{out}");

    let job: Value = serde_json::from_str(&ok(server.cli(&["jobs", "get", "cli-job", "--json"]))).unwrap();
    assert_eq!(job["priority"], 7);
    assert_eq!(job["task"]["command"]["argv"], serde_json::json!(["echo", "hello-cli"]));

    let preview = ok(server.cli(&["jobs", "preview", "every-job", "--count", "3"]));
    assert_eq!(preview.lines().count(), 3, "{preview}");

    // Backfill: the three minutes before this one, run one after another (`forbid`).
    ok(server.cli(&[
        "jobs",
        "create",
        "--id",
        "minutely",
        "--cron",
        "* * * * *",
        "--",
        "true",
    ]));
    let to = chrono::Utc::now().duration_trunc(chrono::Duration::minutes(1)).unwrap();
    let from = to - chrono::Duration::minutes(3);
    let range = [sked_core::timestamp::format(&from), sked_core::timestamp::format(&to)];
    let out = ok(server.cli(&["jobs", "backfill", "minutely", "--from", &range[0], "--to", &range[1]]));
    let created: Vec<&str> = out.lines().collect();
    assert_eq!(created.len(), 3, "{out}");
    let mut previous_end: Option<String> = None;
    for run_id in &created {
        let run = wait_terminal(&api, run_id, Duration::from_secs(15)).await;
        assert_eq!(
            (run["state"].as_str(), run["trigger"].as_str()),
            (Some("SUCCEEDED"), Some("backfill")),
            "{run}"
        );
        let started = run["started_at"].as_str().unwrap().to_string();
        if let Some(end) = &previous_end {
            assert!(
                &started >= end,
                "one after another: {run_id} started at {started}, before {end}"
            );
        }
        previous_end = run["finished_at"].as_str().map(str::to_string);
    }
    let again = ok(server.cli(&["jobs", "backfill", "minutely", "--from", &range[0], "--to", &range[1]]));
    assert!(again.trim().is_empty(), "a repeated backfill creates nothing: {again}");

    // The ledger: each backfilled minute fired, newest first; `why` explains one in a sentence.
    let ledger = ok(server.cli(&[
        "jobs",
        "occurrences",
        "minutely",
        "--since",
        &range[0],
        "--until",
        &range[1],
    ]));
    let rows: Vec<&str> = ledger.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{ledger}");
    assert!(rows.iter().all(|r| r.contains("fired")), "{ledger}");
    assert!(
        rows[0].starts_with(&sked_core::timestamp::format(&(to - chrono::Duration::minutes(1)))),
        "{ledger}"
    );
    let why = ok(server.cli(&["jobs", "why", "minutely", "--at", &range[0]]));
    assert!(
        why.starts_with(&format!(
            "Job minutely's occurrence at {} fired as run minutely@",
            range[0]
        )),
        "{why}"
    );

    let run = wait_first_run(&api, "cli-job", Duration::from_secs(10)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let run = wait_terminal(&api, &run_id, Duration::from_secs(15)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    report_lag("cli", &run);

    let listed: Value = serde_json::from_str(&ok(server.cli(&["runs", "list", "--json"]))).unwrap();
    assert!(
        items(&listed).iter().any(|r| r["run_id"] == run_id.as_str()),
        "{listed}"
    );
    let table = ok(server.cli(&["runs", "list", "--job", "cli-job"]));
    assert!(table.contains(&run_id) && table.contains("SUCCEEDED"), "{table}");

    let shown = ok(server.cli(&["runs", "get", &run_id]));
    assert!(shown.contains("SUCCEEDED") && shown.contains("start_lag"), "{shown}");
    let logs = ok(server.cli(&["logs", &run_id]));
    assert_eq!(logs.trim(), "hello-cli");

    // Errors print the API's message and exit 2 for a 4xx.
    let o = server.cli(&["jobs", "get", "no-such-job"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    let o = server.cli(&["jobs", "create", "--cron", "* * *", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cron"), "{}", stderr(&o));
    // An unreachable server is exit 1.
    let o = cli_with_key("http://127.0.0.1:9", server.key.as_deref(), &["jobs", "list"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // Tenants see only their own jobs: a key made for tenant acme (shown once, by `keys
    // create`) works in acme only; the operator's tenant does not see acme's jobs.
    let made: Value = serde_json::from_str(&ok(server.cli(&[
        "keys",
        "create",
        "--role",
        "write",
        "--name",
        "acme ci",
        "--for-tenant",
        "acme",
        "--json",
    ])))
    .unwrap();
    let acme_key = made["key"].as_str().expect("the new key").to_string();
    let as_acme = |args: &[&str]| cli_with_key(&url, Some(&acme_key), args);
    ok(as_acme(&[
        "jobs", "create", "--id", "acme-job", "--every", "1h", "--", "true",
    ]));
    let theirs = ok(as_acme(&["jobs", "list"]));
    assert!(theirs.contains("acme-job") && !theirs.contains("cli-job"), "{theirs}");
    assert!(!ok(server.cli(&["jobs", "list"])).contains("acme-job"));
    assert_eq!(server.cli(&["jobs", "get", "acme-job"]).status.code(), Some(2));
    let keys = ok(server.cli(&["keys", "list"]));
    assert!(keys.contains("acme ci") && !keys.contains(&acme_key), "{keys}");
    // Revoked: refused at once (401 is a 4xx: exit 2).
    ok(server.cli(&["keys", "revoke", made["id"].as_str().unwrap()]));
    assert_eq!(as_acme(&["jobs", "list"]).status.code(), Some(2));
    // No key at all: refused.
    assert_eq!(cli_with_key(&url, None, &["jobs", "list"]).status.code(), Some(2));

    ok(server.cli(&["jobs", "pause", "every-job"]));
    assert_eq!(api.get_ok("/v1/jobs/every-job").await["state"], "PAUSED");
    ok(server.cli(&["jobs", "delete", "every-job"]));
}

#[tokio::test]
async fn logs_follow_prints_lines_live_and_runs_get_exit_code_follows_the_outcome() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let url = server.url.clone().unwrap();
    let api = server.api();

    let marker = sandbox.path().join("go");
    let script = format!(
        "echo one; while [ ! -e {} ]; do sleep 0.05; done; echo two",
        marker.display()
    );
    ok(server.cli(&[
        "jobs", "create", "--id", "chatty", "--at", "now", "--", "sh", "-c", &script,
    ]));
    let run = wait_first_run(&api, "chatty", Duration::from_secs(10)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    wait_until("the first line to be logged", Duration::from_secs(10), async || {
        api.log_lines(&run_id, "")
            .await
            .iter()
            .any(|l| l == "one")
            .then_some(())
    })
    .await;

    // Follow while the payload waits for the marker: the follower prints "one" live; only
    // then is the marker created, so "two" can only arrive through the open stream.
    let mut follower = std::process::Command::new(SKED)
        .args(["logs", &run_id, "--follow"])
        .env("SKED_URL", &url)
        .env("SKED_API_KEY", server.key.as_deref().expect("the server's key"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(follower.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "one");
    assert_eq!(api.run(&run_id).await["state"], "RUNNING");
    std::fs::write(&marker, "").unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(rest, ["two"]);
    assert!(follower.wait().unwrap().success());
    let run = wait_terminal(&api, &run_id, Duration::from_secs(10)).await;
    assert_eq!(run["state"], "SUCCEEDED");
    assert_eq!(server.cli(&["runs", "get", &run_id]).status.code(), Some(0));

    ok(server.cli(&[
        "jobs",
        "create",
        "--id",
        "failing",
        "--at",
        "now",
        "--max-retries",
        "0",
        "--",
        "false",
    ]));
    let run = wait_first_run(&api, "failing", Duration::from_secs(10)).await;
    let o = server.cli(&["runs", "get", run["run_id"].as_str().unwrap(), "--wait"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("FAILED"), "{}", stdout(&o));
}

/// `--long-lease` must be longer than `--lease`: a worker given a shorter one refuses to start,
/// naming the flag.
#[test]
fn a_worker_refuses_a_long_lease_no_longer_than_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(SKED)
        .args(["worker", "--lease", "15", "--long-lease", "10", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "stdout: {}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--long-lease") && err.contains("long lease of 10s"),
        "{err}"
    );
}
