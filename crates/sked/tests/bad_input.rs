//! End to end: bad input answers 4xx naming the field, and nothing is stored. A
//! representative case per kind of field; sked-api's own tests cover every rule.

mod common;

use common::*;
use serde_json::{Value, json};

/// A valid job with `patch` merged in at the top level (`null` removes a key).
fn job(patch: Value) -> Value {
    let mut job = json!({"schedule": {"every": "1m"}, "task": {"command": {"argv": ["true"]}}});
    for (k, v) in patch.as_object().unwrap() {
        if v.is_null() {
            job.as_object_mut().unwrap().remove(k);
        } else {
            job[k] = v.clone();
        }
    }
    job
}

#[tokio::test]
async fn bad_fields_answer_4xx_naming_the_field_and_store_nothing() {
    let sandbox = Sandbox::new();
    let server = sandbox.server(&["--workers", "0"]);
    let api = server.api();

    let labels: serde_json::Map<String, Value> = (0..33).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("bad id", job(json!({"id": "no spaces allowed"})), "id"),
        (
            "cron with 3 fields",
            job(json!({"schedule": {"cron": "* * *"}})),
            "cron",
        ),
        (
            "unknown time zone",
            job(json!({"schedule": {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}})),
            "timezone",
        ),
        (
            "interval under 1 s",
            job(json!({"schedule": {"every": "500ms"}})),
            "every",
        ),
        ("unparsable at", job(json!({"schedule": {"at": "tomorrow-ish"}})), "at"),
        (
            "two schedule kinds",
            job(json!({"schedule": {"every": "1m", "cron": "* * * * *"}})),
            "schedule",
        ),
        ("jitter ≥ interval", job(json!({"jitter": "2m"})), "jitter"),
        (
            "end before start",
            job(json!({"start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"})),
            "end_at",
        ),
        ("empty argv", job(json!({"task": {"command": {"argv": []}}})), "argv"),
        (
            "relative http url",
            job(json!({"task": {"http": {"url": "/hook"}}})),
            "url",
        ),
        (
            "container locally",
            job(json!({"task": {"container": {"image": "alpine"}}})),
            "container",
        ),
        ("missing task", job(json!({"task": null})), "task"),
        ("priority 10", job(json!({"priority": 10})), "priority"),
        ("negative max_retries", job(json!({"max_retries": -1})), "max_retries"),
        ("bad timeout", job(json!({"timeout": "forever"})), "timeout"),
        ("unknown overlap", job(json!({"overlap": "sometimes"})), "overlap"),
        ("unknown misfire", job(json!({"misfire": "maybe"})), "misfire"),
        ("33 labels", job(json!({ "labels": labels })), "labels"),
        ("unknown field", job(json!({"colour": "blue"})), "colour"),
    ];

    let mut failures = Vec::new();
    for (name, body, field) in &cases {
        let (status, answer) = api.post("/v1/jobs", body).await;
        let error = &answer["error"];
        let named = error["field"].as_str().unwrap_or_default();
        if !(400..500).contains(&status)
            || !named.contains(field)
            || error["message"].as_str().is_none_or(str::is_empty)
        {
            failures.push(format!("{name}: expected 4xx naming {field:?}, got {status} {answer}"));
        }
    }

    // Not JSON at all.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/jobs", api.base))
        .bearer_auth(server.key.as_deref().expect("the server's key"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    if response.status().as_u16() != 400 {
        failures.push(format!("malformed JSON: expected 400, got {}", response.status()));
    }

    // A batch with one bad entry creates nothing and names the entry.
    let batch = json!({"jobs": [job(json!({"id": "fine"})), job(json!({"id": "bad", "priority": 42}))]});
    let (status, answer) = api.post("/v1/jobs:batch", &batch).await;
    if status != 422 || !answer.to_string().contains("priority") {
        failures.push(format!(
            "batch with a bad entry: expected 422 naming priority, got {status} {answer}"
        ));
    }

    let listed = api.get_ok("/v1/jobs").await;
    assert!(items(&listed).is_empty(), "bad input was stored: {listed}");
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len() + 2,
        failures.join("\n")
    );
}
