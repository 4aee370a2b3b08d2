//! End to end: the `sked` client commands against a running server — create with flags,
//! list, get, runs, logs (also `--follow` while a payload runs), and exit codes.

mod common;

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

    let out = ok(cli(
        &url,
        &[
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
        ],
    ));
    assert!(out.contains("cli-job"), "{out}");
    let out = ok(cli(
        &url,
        &[
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
        ],
    ));
    assert!(out.contains("every 5m"), "{out}");

    let out = ok(cli(&url, &["jobs", "list"]));
    let header = out.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") && header.contains("STATE") && header.contains("NEXT FIRE"),
        "{out}"
    );
    assert!(out.contains("cli-job") && out.contains("every-job"), "{out}");

    let job: Value = serde_json::from_str(&ok(cli(&url, &["jobs", "get", "cli-job", "--json"]))).unwrap();
    assert_eq!(job["priority"], 7);
    assert_eq!(job["task"]["command"]["argv"], serde_json::json!(["echo", "hello-cli"]));

    let preview = ok(cli(&url, &["jobs", "preview", "every-job", "--count", "3"]));
    assert_eq!(preview.lines().count(), 3, "{preview}");

    let run = wait_first_run(&api, "cli-job", Duration::from_secs(10)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let run = wait_terminal(&api, &run_id, Duration::from_secs(15)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    report_lag("cli", &run);

    let listed: Value = serde_json::from_str(&ok(cli(&url, &["runs", "list", "--json"]))).unwrap();
    assert!(
        items(&listed).iter().any(|r| r["run_id"] == run_id.as_str()),
        "{listed}"
    );
    let table = ok(cli(&url, &["runs", "list", "--job", "cli-job"]));
    assert!(table.contains(&run_id) && table.contains("SUCCEEDED"), "{table}");

    let shown = ok(cli(&url, &["runs", "get", &run_id]));
    assert!(shown.contains("SUCCEEDED") && shown.contains("start_lag"), "{shown}");
    let logs = ok(cli(&url, &["logs", &run_id]));
    assert_eq!(logs.trim(), "hello-cli");

    // Errors print the API's message and exit 2 for a 4xx.
    let o = cli(&url, &["jobs", "get", "no-such-job"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    let o = cli(&url, &["jobs", "create", "--cron", "* * *", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cron"), "{}", stderr(&o));
    // An unreachable server is exit 1.
    let o = cli("http://127.0.0.1:9", &["jobs", "list"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // Tenants see only their own jobs.
    ok(cli(
        &url,
        &[
            "jobs", "create", "--tenant", "acme", "--id", "acme-job", "--every", "1h", "--", "true",
        ],
    ));
    let theirs = ok(cli(&url, &["jobs", "list", "--tenant", "acme"]));
    assert!(theirs.contains("acme-job") && !theirs.contains("cli-job"), "{theirs}");
    assert!(!ok(cli(&url, &["jobs", "list"])).contains("acme-job"));
    assert_eq!(cli(&url, &["jobs", "get", "acme-job"]).status.code(), Some(2));

    ok(cli(&url, &["jobs", "pause", "every-job"]));
    assert_eq!(api.get_ok("/v1/jobs/every-job").await["state"], "PAUSED");
    ok(cli(&url, &["jobs", "delete", "every-job"]));
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
    ok(cli(
        &url,
        &[
            "jobs", "create", "--id", "chatty", "--at", "now", "--", "sh", "-c", &script,
        ],
    ));
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
    assert_eq!(cli(&url, &["runs", "get", &run_id]).status.code(), Some(0));

    ok(cli(
        &url,
        &[
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
        ],
    ));
    let run = wait_first_run(&api, "failing", Duration::from_secs(10)).await;
    let o = cli(&url, &["runs", "get", run["run_id"].as_str().unwrap(), "--wait"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("FAILED"), "{}", stdout(&o));
}
