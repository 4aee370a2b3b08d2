//! [`AwsConfig`]: where sked's AWS resources are and how to reach them, read once by the
//! caller (a Lambda main, `sked worker --backend aws`, a test) and passed in; and [`connect`],
//! which builds the SDK clients from it.
//!
//! Nothing here reads environment variables: with [`AwsConfig::credentials`] set, the clients
//! are built from the config alone (no profile, no instance metadata: what tests against moto
//! need); without it, the SDK's default chain supplies credentials (real AWS).

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use std::time::Duration;

/// The three dispatch queues and their dead-letter queue, by URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueUrls {
    /// Runs of priority 7–9.
    pub high: String,
    /// Runs of priority 3–6.
    pub normal: String,
    /// Runs of priority 0–2.
    pub low: String,
    /// Where all three send a message after `max_receive_count` receives.
    pub dlq: String,
}

/// Static credentials (tests, moto, LocalStack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
}

/// Where sked's AWS resources are and how to reach them.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsConfig {
    /// Region, e.g. `us-east-1`.
    pub region: String,
    /// Endpoint for every service (moto, LocalStack); `None` for AWS itself.
    pub endpoint_url: Option<String>,
    /// Static credentials; `None` uses the SDK's default provider chain.
    pub credentials: Option<StaticCredentials>,
    /// The DynamoDB table.
    pub table: String,
    /// The SQS queues.
    pub queues: QueueUrls,
    /// Shards of every sharded index key (due jobs, run scans, run listing). Fixed for the
    /// life of a table: changing it hides items written under the old count. Default: 4.
    pub shards: u32,
    /// How long a finished run is kept before DynamoDB's TTL removes it. Default: 30 days.
    pub run_retention: Duration,
    /// How long an idempotency key is kept. Default: 24 hours.
    pub idempotency_retention: Duration,
    /// Receives of one message before SQS moves it to the DLQ (bootstrap only). Default: 5.
    pub max_receive_count: u32,
}

impl AwsConfig {
    /// A config with the documented defaults for everything but the names.
    pub fn new(region: impl Into<String>, table: impl Into<String>, queues: QueueUrls) -> Self {
        AwsConfig {
            region: region.into(),
            endpoint_url: None,
            credentials: None,
            table: table.into(),
            queues,
            shards: 4,
            run_retention: Duration::from_secs(30 * 24 * 3600),
            idempotency_retention: Duration::from_secs(24 * 3600),
            max_receive_count: 5,
        }
    }

    /// The same, against a local endpoint (moto, LocalStack) with static credentials.
    pub fn local(
        endpoint_url: impl Into<String>,
        access_key_id: &str,
        secret_access_key: &str,
        table: impl Into<String>,
        queues: QueueUrls,
    ) -> Self {
        AwsConfig {
            endpoint_url: Some(endpoint_url.into()),
            credentials: Some(StaticCredentials {
                access_key_id: access_key_id.into(),
                secret_access_key: secret_access_key.into(),
            }),
            ..AwsConfig::new("us-east-1", table, queues)
        }
    }
}

/// The SDK clients sked uses, built once and cloned cheaply.
#[derive(Debug, Clone)]
pub struct AwsClients {
    /// DynamoDB.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// SQS.
    pub sqs: aws_sdk_sqs::Client,
}

/// Builds the clients for `config`. With static credentials nothing outside `config` is read
/// (no environment, profile or instance metadata); otherwise the SDK's default chain is
/// used for credentials and the region and endpoint from `config` override it.
/// (`force_path_style` matters only to S3, which this crate does not use yet.)
pub async fn connect(config: &AwsConfig) -> AwsClients {
    let region = Region::new(config.region.clone());
    match &config.credentials {
        Some(creds) => {
            let creds = Credentials::new(
                creds.access_key_id.clone(),
                creds.secret_access_key.clone(),
                None,
                None,
                "sked-static",
            );
            let mut ddb = aws_sdk_dynamodb::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(region.clone())
                .credentials_provider(creds.clone());
            let mut sqs = aws_sdk_sqs::Config::builder()
                .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
                .region(region)
                .credentials_provider(creds);
            if let Some(url) = &config.endpoint_url {
                ddb = ddb.endpoint_url(url);
                sqs = sqs.endpoint_url(url);
            }
            AwsClients {
                dynamodb: aws_sdk_dynamodb::Client::from_conf(ddb.build()),
                sqs: aws_sdk_sqs::Client::from_conf(sqs.build()),
            }
        }
        None => {
            let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).region(region);
            if let Some(url) = &config.endpoint_url {
                loader = loader.endpoint_url(url);
            }
            let shared = loader.load().await;
            AwsClients {
                dynamodb: aws_sdk_dynamodb::Client::new(&shared),
                sqs: aws_sdk_sqs::Client::new(&shared),
            }
        }
    }
}
