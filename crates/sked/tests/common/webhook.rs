//! A webhook receiver on 127.0.0.1 for the alert tests: it keeps every post (headers, body)
//! and answers the statuses it was given, in order, then 200.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Posts received and answers still to give.
#[derive(Default)]
pub struct WebhookReceiver {
    posts: Mutex<Vec<(HeaderMap, Vec<u8>)>>,
    answers: Mutex<Vec<StatusCode>>,
}

impl WebhookReceiver {
    /// Serves a receiver answering `answers` first; it and its URL.
    pub async fn start(answers: &[StatusCode]) -> (Arc<Self>, String) {
        let receiver = Arc::new(WebhookReceiver {
            answers: Mutex::new(answers.to_vec()),
            ..WebhookReceiver::default()
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let app = Router::new().route("/hook", post(hook)).with_state(receiver.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, url)
    }

    /// Every post so far, oldest first.
    pub fn posts(&self) -> Vec<(HeaderMap, Vec<u8>)> {
        self.posts.lock().unwrap().clone()
    }
}

async fn hook(State(r): State<Arc<WebhookReceiver>>, headers: HeaderMap, body: axum::body::Bytes) -> StatusCode {
    r.posts.lock().unwrap().push((headers, body.to_vec()));
    let mut answers = r.answers.lock().unwrap();
    if answers.is_empty() {
        StatusCode::OK
    } else {
        answers.remove(0)
    }
}

/// Polls run `run_id` until its alert is delivered; the run, and each try's status.
pub async fn wait_delivered(api: &super::Api, run_id: &str, timeout: std::time::Duration) -> (Value, Vec<Value>) {
    let run = super::wait_until("the alert delivered", timeout, async || {
        let run = api.run(run_id).await;
        (run["alert"]["state"] == "delivered").then_some(run)
    })
    .await;
    let statuses = run["alert"]["deliveries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["status"].clone())
        .collect();
    (run, statuses)
}

/// A header of a post, or "".
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}
