//! [`HttpWebhookSender`]: the [`WebhookSender`] port over HTTP with [`reqwest`]: one POST per
//! try, a bounded wait ([`WEBHOOK_TIMEOUT`]), no redirects followed (a webhook that moved
//! answers 3xx, which is a failed try the user can see), and errors without the URL (a
//! webhook URL may carry a token, and tries are logged).

use async_trait::async_trait;
use reqwest::header::CONTENT_TYPE;
use sked_core::ports::{WebhookPost, WebhookSender};
use std::time::Duration;

/// The longest a try waits for its answer.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Posts alerts over HTTP.
#[derive(Debug, Clone)]
pub struct HttpWebhookSender {
    client: reqwest::Client,
}

impl HttpWebhookSender {
    /// A sender with its own client.
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("sked-webhook/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a reqwest client with rustls builds");
        HttpWebhookSender { client }
    }
}

impl Default for HttpWebhookSender {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl WebhookSender for HttpWebhookSender {
    async fn post(&self, post: &WebhookPost) -> Result<u16, String> {
        let mut request = self
            .client
            .post(&post.url)
            .header(CONTENT_TYPE, "application/json")
            .body(post.body.clone());
        for (name, value) in &post.headers {
            request = request.header(*name, value);
        }
        match request.send().await {
            Ok(response) => Ok(response.status().as_u16()),
            Err(e) if e.is_timeout() => Err(format!("no answer within {} s", WEBHOOK_TIMEOUT.as_secs())),
            Err(e) if e.is_connect() => Err("could not connect".into()),
            Err(e) => Err(e.without_url().to_string()),
        }
    }
}
