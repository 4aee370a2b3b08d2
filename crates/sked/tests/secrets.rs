//! End to end: an env value given as `{"secret": "…"}` reaches the payload as a plain
//! variable, is never returned by the API (it reads back as `{"secret": true}`), is kept by a
//! write-back of what was read, is masked as `***` in the captured output, and appears in
//! none of sked's own log lines.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

const SECRET: &str = "hunter2-s3cr3t-value";

#[tokio::test]
async fn a_secret_reaches_the_payload_and_is_never_shown() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&[]);
    let api = server.api();
    let seen = sandbox.path().join("seen");

    let script = format!("echo \"token=$TOKEN\"; printf %s \"$TOKEN\" > {}", seen.display());
    let job = json!({
        "id": "deploy",
        "schedule": {"every": "1h"},
        "task": {"command": {"argv": ["sh", "-c", script], "env": {"TOKEN": {"secret": SECRET}, "LEVEL": "full"}}},
    });
    let created = api.create_job(job).await;
    let shown = json!({"TOKEN": {"secret": true}, "LEVEL": "full"});
    assert_eq!(created["task"]["command"]["env"], shown, "{created}");
    let read = api.get_ok("/v1/jobs/deploy").await;
    assert_eq!(read["task"]["command"]["env"], shown);
    assert!(!api.get_ok("/v1/jobs").await.to_string().contains(SECRET));

    // Writing back what was read keeps the secret; a create cannot keep what it has not got.
    let mut back = read.clone();
    for field in ["id", "state", "next_fire_at", "version", "created_at", "updated_at"] {
        back.as_object_mut().unwrap().remove(field);
    }
    back["priority"] = json!(6);
    let (status, replaced) = api.send(reqwest::Method::PUT, "/v1/jobs/deploy", Some(&back)).await;
    assert_eq!(status, 200, "{replaced}");
    let mut fresh = back.clone();
    fresh["id"] = json!("other");
    let (status, refused) = api.post("/v1/jobs", &fresh).await;
    assert_eq!(
        (status, refused["error"]["field"].as_str()),
        (422, Some("task.command.env")),
        "{refused}"
    );

    let run = api.post("/v1/jobs/deploy/trigger", &json!({})).await.1;
    let run_id = run["run_id"].as_str().expect("a run").to_string();
    let run = wait_terminal(&api, &run_id, Duration::from_secs(15)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");

    // The payload got the value; the log shows it masked.
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), SECRET);
    assert_eq!(api.log_lines(&run_id, "").await, vec!["token=***".to_string()]);
    let server_log = std::fs::read_to_string(sandbox.path().join("server.log")).unwrap();
    assert!(!server_log.contains(SECRET), "the secret is in sked's own log");
}
