//! End to end: a failure alert from a real `sked server` to a real HTTP receiver on 127.0.0.1,
//! set up through the CLI (`sked tenants webhook-secret --rotate`, `sked jobs create
//! --notify-webhook`). The receiver answers the first post 500 and the second 200; both posts
//! carry an HMAC-SHA256 signature that verifies with the secret the CLI printed, the run shows
//! both tries, and the secret is in none of sked's log lines.

mod common;

use axum::http::StatusCode;
use common::webhook::{WebhookReceiver, header, wait_delivered};
use common::*;
use serde_json::{Value, json};
use sked_core::alert;
use std::time::Duration;

#[tokio::test]
async fn a_failed_run_is_posted_signed_and_retried_after_a_500() {
    let (receiver, webhook) = WebhookReceiver::start(&[StatusCode::INTERNAL_SERVER_ERROR]).await;

    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "1"]);
    let api = server.api();
    let made = server.cli(&["tenants", "webhook-secret", "--rotate"]);
    assert!(made.status.success(), "{made:?}");
    let secret = String::from_utf8(made.stdout).unwrap().trim().to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let shown = server.cli(&["tenants", "webhook-secret"]);
    assert!(!String::from_utf8_lossy(&shown.stdout).contains(&secret), "shown once");

    let argv = [
        "jobs",
        "create",
        "--id",
        "nightly",
        "--every",
        "1h",
        "--max-retries",
        "0",
        "--notify-webhook",
        &webhook,
        "--notify-on",
        "failed",
        "--",
        "sh",
        "-c",
        "exit 3",
    ];
    let created = server.cli(&argv);
    assert!(created.status.success(), "{created:?}");
    let job = api.get_ok("/v1/jobs/nightly").await;
    assert_eq!(job["notify"], json!({"on": ["failed"], "webhook": webhook}), "{job}");
    let run = api.post("/v1/jobs/nightly/trigger", &json!({})).await.1;
    let run_id = run["run_id"].as_str().expect("a run").to_string();
    let run = wait_terminal(&api, &run_id, Duration::from_secs(15)).await;
    assert_eq!(run["state"], "FAILED", "{run}");

    // The first try is answered 500; the second comes after the backoff (5 s) and is taken.
    let (run, statuses) = wait_delivered(&api, &run_id, Duration::from_secs(30)).await;
    assert_eq!(statuses, [json!(500), json!(200)], "{run}");
    assert_eq!(run["alert"]["event"], "failed");

    let posts = receiver.posts();
    assert_eq!(posts.len(), 2);
    for (n, (headers, body)) in posts.iter().enumerate() {
        assert!(
            alert::verify(&secret, header(headers, alert::SIGNATURE_HEADER), body),
            "try {n}: the signature does not verify"
        );
        assert_eq!(header(headers, alert::DELIVERY_HEADER), run_id);
        assert_eq!(header(headers, alert::EVENT_HEADER), "failed");
        assert_eq!(header(headers, "content-type"), "application/json");
        let event: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(event["type"], "run.failed");
        assert_eq!(event["run_id"], run_id.as_str());
        assert_eq!(event["exit_code"], 3);
        assert_eq!(event["delivery"], n + 1);
    }
    let server_log = std::fs::read_to_string(sandbox.path().join("server.log")).unwrap();
    assert!(!server_log.contains(&secret), "the webhook secret is in sked's own log");
    assert!(server_log.contains("alert try"), "the tries are logged");
}
