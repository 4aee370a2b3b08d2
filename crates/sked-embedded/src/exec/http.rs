//! The HTTP executor: runs an `http` task as one request made by the worker.
//!
//! What it owns: building the request (method, URL, headers, body, and the attempt's context
//! as `Sked-*` headers, which win over task headers of the same name), deciding success from
//! the status (`expect_status`, or any 2xx), passing the response body to the output as
//! stdout lines (up to [`MAX_BODY_BYTES`], then one stderr line saying it was cut), and
//! aborting the request when a stop is asked for.
//!
//! What it must not do: retry (the worker's retry policy does) or time out on its own (the
//! worker enforces the job's timeout through `stop`).

use super::lines::LineSplitter;
use super::wait_for_stop;
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use sked_core::ports::{Clock, ExecRequest, ExecResult, Executor, LogLine, LogStream, StopReason};
use sked_core::task::{HttpTask, Task};
use sked_core::timestamp;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// How much of a response body is kept as output: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Runs `http` tasks with a shared [`reqwest::Client`] (rustls, connection pooling).
pub struct HttpExecutor {
    /// Makes the requests.
    client: reqwest::Client,
    /// Stamps output lines.
    clock: Arc<dyn Clock>,
}

impl HttpExecutor {
    /// An HTTP executor with a default client (redirects followed, no overall timeout).
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        HttpExecutor::with_client(reqwest::Client::new(), clock)
    }

    /// An HTTP executor using `client` (for proxies, custom roots, timeouts…).
    pub fn with_client(client: reqwest::Client, clock: Arc<dyn Clock>) -> Self {
        HttpExecutor { client, clock }
    }

    /// Makes the request and reads the response; the caller races this against `stop`.
    async fn call(&self, task: &HttpTask, context: &[(String, String)], output: &mpsc::Sender<LogLine>) -> ExecResult {
        let request = match self.build(task, context) {
            Ok(request) => request,
            Err(error) => return failure(error),
        };
        let mut response = match self.client.execute(request).await {
            Ok(response) => response,
            Err(e) => return failure(error_chain(&e)),
        };
        let status = response.status();
        let success = match task.expect_status {
            Some(expected) => status.as_u16() == expected,
            None => status.is_success(),
        };
        let mut result = ExecResult {
            success,
            http_status: Some(status.as_u16()),
            error: (!success).then(|| {
                let expected = task.expect_status.map_or_else(|| "2xx".to_string(), |s| s.to_string());
                format!("unexpected status {status} (expected {expected})")
            }),
            ..Default::default()
        };

        let mut splitter = LineSplitter::default();
        let mut kept = 0usize;
        let mut lines = Vec::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    result.success = false;
                    result.error = Some(format!("failed to read the response body: {}", error_chain(&e)));
                    break;
                }
            };
            let take = chunk.len().min(MAX_BODY_BYTES - kept);
            splitter.feed(&chunk[..take], |line| lines.push((LogStream::Stdout, line)));
            kept += take;
            if take < chunk.len() {
                splitter.finish(|line| lines.push((LogStream::Stdout, line)));
                lines.push((
                    LogStream::Stderr,
                    format!("[sked: response body truncated at {MAX_BODY_BYTES} bytes]"),
                ));
                break;
            }
            self.send(&mut lines, output).await;
        }
        splitter.finish(|line| lines.push((LogStream::Stdout, line)));
        self.send(&mut lines, output).await;
        result
    }

    /// The request for `task`, with the context as `Sked-*` headers.
    fn build(&self, task: &HttpTask, context: &[(String, String)]) -> Result<reqwest::Request, String> {
        let method = reqwest::Method::from_bytes(task.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("invalid HTTP method {:?}", task.method))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &task.headers {
            headers.insert(header_name(name)?, header_value(name, value)?);
        }
        for (name, value) in context {
            let name = context_header(name);
            headers.insert(header_name(&name)?, header_value(&name, value)?);
        }
        let mut builder = self.client.request(method, &task.url).headers(headers);
        if let Some(body) = &task.body {
            builder = builder.body(body.clone());
        }
        builder
            .build()
            .map_err(|e| format!("invalid request: {}", error_chain(&e)))
    }

    /// Stamps and sends the lines collected so far (dropping them if nobody listens).
    async fn send(&self, lines: &mut Vec<(LogStream, String)>, output: &mpsc::Sender<LogLine>) {
        if lines.is_empty() {
            return;
        }
        let ts = timestamp::trunc_ms(self.clock.now());
        for (stream, line) in lines.drain(..) {
            if output.is_closed() {
                continue;
            }
            let _ = output.send(LogLine { ts, stream, line }).await;
        }
    }
}

#[async_trait]
impl Executor for HttpExecutor {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        mut stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        let Task::Http(task) = &request.task else {
            return failure(format!(
                "the HTTP executor runs http tasks, not {} tasks",
                request.task.kind()
            ));
        };
        if let Some(reason) = *stop.borrow_and_update() {
            return ExecResult {
                stopped: Some(reason),
                error: Some("stopped before it started".into()),
                ..Default::default()
            };
        }
        tokio::select! {
            result = self.call(task, &request.context, &output) => result,
            // Dropping the call's future aborts the request (and closes its connection).
            reason = wait_for_stop(&mut stop) => ExecResult {
                stopped: Some(reason),
                error: Some("request aborted".into()),
                ..Default::default()
            },
        }
    }
}

/// The header that carries context variable `name`: `SKED_JOB_ID` → `Sked-Job-Id`.
pub fn context_header(name: &str) -> String {
    name.split('_')
        .filter(|word| !word.is_empty())
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// A header name, or why it is not one.
fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("invalid header name {name:?}"))
}

/// A header value, or why it is not one.
fn header_value(name: &str, value: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(value).map_err(|_| format!("invalid value for header {name:?}"))
}

/// A failed result with `error`.
fn failure(error: String) -> ExecResult {
    ExecResult {
        success: false,
        error: Some(error),
        ..Default::default()
    }
}

/// An error and its sources, `: `-separated, without repeating a message its source repeats.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let message = e.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_names_become_sked_headers() {
        assert_eq!(context_header("SKED_JOB_ID"), "Sked-Job-Id");
        assert_eq!(context_header("SKED_FENCING_TOKEN"), "Sked-Fencing-Token");
        assert_eq!(context_header("SKED_SCHEDULED_FOR"), "Sked-Scheduled-For");
    }
}
