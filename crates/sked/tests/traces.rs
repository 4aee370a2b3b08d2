//! Optional OTLP span export of a real `sked server`: with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a receiver on 127.0.0.1 (OTLP over HTTP, JSON), the `attempt` span of a run
//! arrives there with the run's `job_id`, `run_id` and `attempt`, from service `sked-server`.

mod common;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use common::{Sandbox, in_secs, iso, wait_until};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the receiver was sent: each request body to `/v1/traces`, parsed.
type Received = Arc<Mutex<Vec<Value>>>;

async fn traces(State(received): State<Received>, body: String) -> &'static str {
    let parsed = serde_json::from_str(&body).expect("an OTLP/JSON body");
    received.lock().unwrap().push(parsed);
    "{}"
}

/// The value of attribute `key` in an OTLP/JSON attribute list, as text.
fn attribute(attributes: &Value, key: &str) -> Option<String> {
    let found = attributes.as_array()?.iter().find(|a| a["key"] == key)?;
    let value = &found["value"];
    value["stringValue"]
        .as_str()
        .map(str::to_string)
        .or_else(|| value["intValue"].as_str().map(str::to_string))
        .or_else(|| value["intValue"].as_i64().map(|v| v.to_string()))
}

/// Every span received, with its resource's service name.
fn spans(received: &Received) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    for body in received.lock().unwrap().iter() {
        for resource in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = attribute(&resource["resource"]["attributes"], "service.name");
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    out.push((service.clone(), span.clone()));
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn an_attempt_span_reaches_the_otlp_endpoint_with_the_run_it_ran() {
    let received: Received = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(received.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let sandbox = Sandbox::new();
    let prelude = format!(
        "export OTEL_EXPORTER_OTLP_ENDPOINT={endpoint} OTEL_EXPORTER_OTLP_PROTOCOL=http/json OTEL_BSP_SCHEDULE_DELAY=100"
    );
    let server = sandbox.server_after(&prelude, &["--workers", "1"]);
    let api = server.api();
    api.create_job(
        json!({"id": "once", "schedule": {"at": iso(in_secs(0.0))}, "task": {"command": {"argv": ["true"]}}}),
    )
    .await;

    let (service, span) = wait_until(
        "the attempt span at the receiver",
        Duration::from_secs(30),
        async || spans(&received).into_iter().find(|(_, span)| span["name"] == "attempt"),
    )
    .await;
    assert_eq!(service.as_deref(), Some("sked-server"));
    let attributes = &span["attributes"];
    assert_eq!(attribute(attributes, "job_id").as_deref(), Some("once"));
    let run_id = attribute(attributes, "run_id").expect("run_id on the span");
    assert!(run_id.starts_with("once@"), "{run_id}");
    assert_eq!(attribute(attributes, "attempt").as_deref(), Some("1"));
    assert_eq!(api.run(&run_id).await["state"], "SUCCEEDED");
}
