//! End to end: `sked server --database-url … --log-bucket s3://… --log-endpoint …` on a real
//! PostgreSQL and a moto server as the S3: a run's log is readable through the API after it
//! ended, from one object of the bucket, and no longer from the database; a bucket that does
//! not exist stops the server at start, naming it. (Credentials come from the standard AWS
//! chain: here the child's environment.)

#![cfg(feature = "s3-logs")]

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

/// The shell lines giving the server moto's (any) credentials.
const CREDENTIALS: &str = "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_s_log_is_served_from_its_object_in_the_bucket() {
    let endpoint = &sked_aws::testing::moto().endpoint;
    let s3 = sked_objectlogs::testing::client(endpoint);
    let bucket = sked_objectlogs::testing::fresh_bucket(&s3, "e2e").await;
    let url = sked_postgres::testing::postgres().fresh_database();
    let sandbox = Sandbox::on_postgres(&url);
    let location = bucket.to_string();
    let server = sandbox.server_after(
        CREDENTIALS,
        &["--workers", "1", "--log-bucket", &location, "--log-endpoint", endpoint],
    );
    let api = server.api();
    api.create_job(json!({
        "id": "hello", "schedule": {"at": iso(in_secs(0.5))},
        "task": sh("echo one; echo two >&2"),
    }))
    .await;
    let run = wait_first_run(&api, "hello", Duration::from_secs(30)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let run = wait_terminal(&api, &run_id, Duration::from_secs(30)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");

    let key = format!("e2e/logs/default/{run_id}/1.jsonl");
    let object = s3.get_object().bucket(&bucket.bucket).key(&key).send().await;
    let body = object
        .expect("the log's object")
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert_eq!(String::from_utf8_lossy(&body).lines().count(), 2);
    let db = sked_postgres::PgDb::connect(&url, &sked_postgres::PgOptions::default())
        .await
        .unwrap();
    let rows: i64 = db
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM log_lines", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "the rows were deleted once uploaded");
    let mut lines = api.log_lines(&run_id, "").await;
    lines.sort();
    assert_eq!(lines, ["one", "two"]);
}

#[test]
fn a_missing_bucket_stops_the_server_at_start() {
    let endpoint = &sked_aws::testing::moto().endpoint;
    let url = sked_postgres::testing::postgres().fresh_database();
    let location = format!("s3://{}", sked_objectlogs::testing::unique_bucket());
    let (code, stderr) = Sandbox::on_postgres(&url).server_refusing(
        &["--log-bucket", &location, "--log-endpoint", endpoint],
        Duration::from_secs(30),
    );
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("checking the log bucket") && stderr.contains(&location),
        "{stderr}"
    );
}
