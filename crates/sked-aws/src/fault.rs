//! Fault injection on the SDK's HTTP client (tests and chaos runs; off by default): a
//! wrapping [`HttpClient`] that, for a seeded fraction of requests, answers a real
//! throttling error in the service's wire format **instead of sending** the request, and for
//! another fraction **sends** the request but replaces the answer with a 500 (the write
//! happened; the client sees an error). A third fraction answers a DynamoDB `BatchGetItem`,
//! without sending it, with every key unprocessed — what DynamoDB answers when a partition's
//! throughput is exceeded. The SDK's own retry classifier and sked's error mapping
//! ([`crate::error`]) handle all three, as they would the real thing.
//!
//! Enabled by [`AwsConfig::faults`](crate::AwsConfig) — from the environment
//! `SKED_AWS_FAULT_THROTTLE`, `SKED_AWS_FAULT_LOST_ANSWER` and `SKED_AWS_FAULT_SEED` (see
//! [`crate::env`]). Every injected fault is logged at debug level (target
//! `sked_aws::fault`, message `fault injected`) with its kind and the operation.
//!
//! The throttling answers, by protocol (told apart by the request's `x-amz-target`):
//! DynamoDB `400 ProvisionedThroughputExceededException`, SQS `400 RequestThrottled`,
//! CloudWatch Logs and ECS `400 ThrottlingException` (JSON `__type`); S3 `503 SlowDown`
//! (XML). The lost answer is `500 InternalServerError` (JSON) or `500 InternalError` (XML).

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to inject, as fractions of all requests (each in `0.0..=1.0`, summing to at most 1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Requests answered with a throttling error without being sent.
    pub throttle: f64,
    /// Requests sent whose answer is replaced by a 500.
    pub lost_answer: f64,
    /// DynamoDB `BatchGetItem` requests answered, without being sent, with every key in
    /// `UnprocessedKeys` (other requests drawing it pass untouched).
    pub unprocessed_keys: f64,
    /// Seed of the draw (the same seed draws the same sequence of faults).
    pub seed: u64,
}

impl Faults {
    /// Throttling only, at `fraction`.
    pub fn throttle(fraction: f64, seed: u64) -> Self {
        Faults {
            throttle: fraction,
            seed,
            ..Faults::default()
        }
    }
}

/// Counts of what a [`FaultyHttpClient`] injected; clones share them.
#[derive(Debug, Clone, Default)]
pub struct FaultCounts {
    throttled: Arc<AtomicU64>,
    lost_answers: Arc<AtomicU64>,
    unprocessed: Arc<AtomicU64>,
    passed: Arc<AtomicU64>,
}

impl FaultCounts {
    /// Requests answered with a throttling error (not sent).
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }

    /// Requests sent whose answer was replaced.
    pub fn lost_answers(&self) -> u64 {
        self.lost_answers.load(Ordering::Relaxed)
    }

    /// Batch reads answered with every key unprocessed.
    pub fn unprocessed(&self) -> u64 {
        self.unprocessed.load(Ordering::Relaxed)
    }

    /// Requests passed through untouched.
    pub fn passed(&self) -> u64 {
        self.passed.load(Ordering::Relaxed)
    }
}

/// The fault a request draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Throttle,
    LostAnswer,
    Unprocessed,
}

/// The seeded draw, shared by every connector of one client.
#[derive(Debug)]
struct Draw {
    faults: Faults,
    next: AtomicU64,
    counts: FaultCounts,
}

impl Draw {
    /// The fault of the next request; `batch_get` says whether it is a DynamoDB
    /// `BatchGetItem` (the only request an unprocessed-keys answer fits).
    fn draw(&self, batch_get: bool) -> Fault {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // splitmix64 of (seed, n): uniform in [0, 1).
        let mut z = self.faults.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.faults.throttle {
            self.counts.throttled.fetch_add(1, Ordering::Relaxed);
            Fault::Throttle
        } else if u < self.faults.throttle + self.faults.lost_answer {
            self.counts.lost_answers.fetch_add(1, Ordering::Relaxed);
            Fault::LostAnswer
        } else if batch_get && u < self.faults.throttle + self.faults.lost_answer + self.faults.unprocessed_keys {
            self.counts.unprocessed.fetch_add(1, Ordering::Relaxed);
            Fault::Unprocessed
        } else {
            self.counts.passed.fetch_add(1, Ordering::Relaxed);
            Fault::None
        }
    }
}

/// An [`HttpClient`] injecting [`Faults`] in front of another.
#[derive(Debug, Clone)]
pub struct FaultyHttpClient {
    inner: SharedHttpClient,
    draw: Arc<Draw>,
}

impl FaultyHttpClient {
    /// Wraps `inner`.
    pub fn new(inner: SharedHttpClient, faults: Faults) -> Self {
        FaultyHttpClient {
            inner,
            draw: Arc::new(Draw {
                faults,
                next: AtomicU64::new(0),
                counts: FaultCounts::default(),
            }),
        }
    }

    /// Wraps the SDK's default HTTPS client (hyper 1 with rustls).
    pub fn around_default(faults: Faults) -> Self {
        use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
        let inner = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
            .build_https();
        FaultyHttpClient::new(inner, faults)
    }

    /// What it injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.draw.counts.clone()
    }
}

impl HttpClient for FaultyHttpClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            draw: self.draw.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    draw: Arc<Draw>,
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let protocol = Protocol::of(&request);
        match self.draw.draw(protocol.operation == "DynamoDB_20120810.BatchGetItem") {
            Fault::None => self.inner.call(request),
            Fault::Throttle => {
                tracing::debug!(target: "sked_aws::fault", kind = "throttle", operation = %protocol.operation, "fault injected");
                HttpConnectorFuture::ready(Ok(protocol.throttled()))
            }
            Fault::LostAnswer => {
                tracing::debug!(target: "sked_aws::fault", kind = "lost_answer", operation = %protocol.operation, "fault injected");
                let sent = self.inner.call(request);
                HttpConnectorFuture::new(async move {
                    // The request reaches the service; whatever it answered is lost.
                    let _ = sent.await;
                    Ok(protocol.internal_error())
                })
            }
            Fault::Unprocessed => {
                tracing::debug!(target: "sked_aws::fault", kind = "unprocessed_keys", operation = %protocol.operation, "fault injected");
                HttpConnectorFuture::ready(Ok(all_unprocessed(&request)))
            }
        }
    }
}

/// Which wire format an answer must have, from the request.
#[derive(Debug, Clone)]
struct Protocol {
    /// The JSON protocols' `x-amz-target` (`DynamoDB_20120810.PutItem`), or `S3 <method>`.
    operation: String,
    kind: ProtocolKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProtocolKind {
    DynamoDb,
    Sqs,
    /// CloudWatch Logs, ECS: awsJson 1.1.
    Json11,
    /// S3: REST with XML errors.
    RestXml,
}

impl Protocol {
    fn of(request: &HttpRequest) -> Protocol {
        match request.headers().get("x-amz-target") {
            Some(target) => {
                let kind = if target.starts_with("DynamoDB_") {
                    ProtocolKind::DynamoDb
                } else if target.starts_with("AmazonSQS.") {
                    ProtocolKind::Sqs
                } else {
                    ProtocolKind::Json11
                };
                Protocol {
                    operation: target.to_string(),
                    kind,
                }
            }
            None => Protocol {
                operation: format!("S3 {}", request.method()),
                kind: ProtocolKind::RestXml,
            },
        }
    }

    /// The service's throttling error.
    fn throttled(&self) -> HttpResponse {
        match self.kind {
            ProtocolKind::DynamoDb => json(
                400,
                "application/x-amz-json-1.0",
                "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                "The level of configured provisioned throughput for the table was exceeded (injected by sked_aws::fault)",
            ),
            ProtocolKind::Sqs => json(
                400,
                "application/x-amz-json-1.0",
                "com.amazonaws.sqs#RequestThrottled",
                "Request is throttled (injected by sked_aws::fault)",
            ),
            ProtocolKind::Json11 => json(
                400,
                "application/x-amz-json-1.1",
                "ThrottlingException",
                "Rate exceeded (injected by sked_aws::fault)",
            ),
            ProtocolKind::RestXml => xml(
                503,
                "SlowDown",
                "Please reduce your request rate (injected by sked_aws::fault)",
            ),
        }
    }

    /// A server error after the request was handled.
    fn internal_error(&self) -> HttpResponse {
        let message = "The answer was lost (injected by sked_aws::fault)";
        match self.kind {
            ProtocolKind::DynamoDb | ProtocolKind::Sqs => {
                json(500, "application/x-amz-json-1.0", "InternalServerError", message)
            }
            ProtocolKind::Json11 => json(500, "application/x-amz-json-1.1", "InternalServerError", message),
            ProtocolKind::RestXml => xml(500, "InternalError", message),
        }
    }
}

/// DynamoDB's answer to a `BatchGetItem` that read nothing: every requested key unprocessed.
fn all_unprocessed(request: &HttpRequest) -> HttpResponse {
    let asked: serde_json::Value = request
        .body()
        .bytes()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    let body = serde_json::json!({
        "Responses": {},
        "UnprocessedKeys": asked.get("RequestItems").cloned().unwrap_or_else(|| serde_json::json!({})),
    });
    response(200, "application/x-amz-json-1.0", body.to_string())
}

fn response(status: u16, content_type: &'static str, body: String) -> HttpResponse {
    let status = StatusCode::try_from(status).expect("a valid status code");
    let mut response = HttpResponse::new(status, SdkBody::from(body));
    response.headers_mut().insert("content-type", content_type);
    response
}

fn json(status: u16, content_type: &'static str, error_type: &str, message: &str) -> HttpResponse {
    let body = serde_json::json!({"__type": error_type, "message": message}).to_string();
    let mut response = response(status, content_type, body);
    // SQS's JSON protocol also names the query-compatible code in a header.
    let code = error_type.rsplit('#').next().unwrap_or(error_type).to_string();
    response
        .headers_mut()
        .insert("x-amzn-query-error", format!("{code};Sender"));
    response
}

fn xml(status: u16, code: &str, message: &str) -> HttpResponse {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message><RequestId>sked-fault</RequestId></Error>"
    );
    response(status, "application/xml", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(faults: Faults, n: usize) -> Vec<Fault> {
        let draw = Draw {
            faults,
            next: AtomicU64::new(0),
            counts: FaultCounts::default(),
        };
        (0..n).map(|_| draw.draw(false)).collect()
    }

    #[test]
    fn the_draw_hits_the_fractions_and_replays_by_seed() {
        let faults = Faults {
            throttle: 0.2,
            lost_answer: 0.1,
            unprocessed_keys: 0.3,
            seed: 7,
        };
        let a = draws(faults, 10_000);
        assert_eq!(a, draws(faults, 10_000), "same seed, same faults");
        assert_ne!(a, draws(Faults { seed: 8, ..faults }, 10_000));
        let throttled = a.iter().filter(|f| **f == Fault::Throttle).count();
        let lost = a.iter().filter(|f| **f == Fault::LostAnswer).count();
        assert!((1700..2300).contains(&throttled), "{throttled}");
        assert!((800..1200).contains(&lost), "{lost}");
        assert!(
            !a.contains(&Fault::Unprocessed),
            "only a batch read can draw unprocessed keys"
        );
        assert!(draws(Faults::throttle(0.0, 1), 1000).iter().all(|f| *f == Fault::None));
    }
}
