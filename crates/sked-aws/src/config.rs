//! [`AwsConfig`]: where sked's AWS resources are and how to reach them, read once by the
//! caller (a Lambda main, `sked worker --backend aws`, a test) and passed in; and [`connect`],
//! which builds the SDK clients from it.
//!
//! Nothing here reads environment variables: with [`AwsConfig::credentials`] set, the clients
//! are built from the config alone (no profile, no instance metadata: what tests against moto
//! need); without it, the SDK's default chain supplies credentials (real AWS).
//!
//! Logs ([`LogsConfig`]) and the ECS executor ([`EcsConfig`]) are optional parts: a caller
//! that needs neither (the API or sweeper Lambda) leaves them `None`.

use crate::fault::{FaultCounts, Faults, FaultyHttpClient};
use crate::request_count::RequestCounter;
use aws_sdk_dynamodb::config::{Credentials, Region, SharedCredentialsProvider};
use sked_core::job::Resources;
use sked_core::ports::logs::DEFAULT_LOG_CAP_BYTES;
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
    /// Where attempt logs go (CloudWatch Logs while running, S3 after); `None` if this
    /// process reads and writes no logs. Default: `None`.
    pub logs: Option<LogsConfig>,
    /// Where `container` tasks run; `None` if this process runs none. Default: `None`.
    pub ecs: Option<EcsConfig>,
    /// Counts every request of every client [`connect`] builds (an SDK interceptor), for
    /// measuring what a workload costs. Default: `None`.
    pub request_counter: Option<RequestCounter>,
    /// Faults injected on every client's HTTP requests (throttling, lost answers): chaos
    /// tests only. Default: `None`.
    pub faults: Option<Faults>,
    /// Which run items carry `state`, the attribute the `list` index projects. Default:
    /// [`RunListedState::Ended`].
    pub run_listed_state: RunListedState,
    /// Leave a one-shot's plain firing unwritten: the sweeper sends its run and writes
    /// nothing, the claim puts the run, and reads show both as if written
    /// (`docs/lean-layout.md`, step 1; [`crate::dynamo`]'s `unwritten`). A run so fired is
    /// listed across jobs once written (`JobStore::fired_run_listing`). Every process of a
    /// table must have the same setting: one without it cannot claim such a run (README,
    /// "Costs": the rollout). Default: `false`.
    pub unwritten_one_shots: bool,
    /// Where a job's item is keyed, a property of the table fixed at its first use
    /// ([`crate::check_table_layout`]). Default: [`JobKeys::PerJob`].
    pub job_keys: JobKeys,
}

/// Where a job's item is keyed in the table (`dynamo` module doc, "Table layout").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobKeys {
    /// `T#<tenant>#J#<job>` / `JOB`, beside its runs; a tenant's jobs are listed through the
    /// `list` index (one index write per job created).
    #[default]
    PerJob,
    /// `T#<tenant>#JOBS#<shard>` / `<job>`: a tenant's jobs in
    /// [`JOB_SHARDS`](crate::dynamo::keys::JOB_SHARDS) partitions of the table, listed by the
    /// table's own keys — no `list` entry, one index write less per job (`docs/lean-layout.md`,
    /// step 5). A table chooses once: a table used one way refuses processes set the other.
    TenantShards,
}

impl std::str::FromStr for JobKeys {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "per-job" => Ok(JobKeys::PerJob),
            "tenant-shards" => Ok(JobKeys::TenantShards),
            other => Err(format!("`{other}`: expected `per-job` or `tenant-shards`")),
        }
    }
}

impl JobKeys {
    /// The setting's name (`SKED_JOB_KEYS`, the table's layout record).
    pub fn as_str(self) -> &'static str {
        match self {
            JobKeys::PerJob => "per-job",
            JobKeys::TenantShards => "tenant-shards",
        }
    }
}

impl std::fmt::Display for JobKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which run items carry `state` (`dynamo::codec::LISTED_STATE`). A run's state is always in
/// `run_state`; code before 2026-12-04 reads only `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunListedState {
    /// Ended runs only: a claim leaves the run's `list` entry as it was (one index write less
    /// per run).
    #[default]
    Ended,
    /// Every run, as code before 2026-12-04 wrote and reads them: for the first deploy of a
    /// stack made before then, while processes of both versions run.
    Always,
    /// Runs that ended otherwise than SUCCEEDED (FAILED, TIMED_OUT, CANCELLED): a run that
    /// succeeds — most runs — leaves its `list` entry as its first write made it (one index
    /// write less per run again). A listing filtered on those states still filters in the
    /// index; one filtered on SUCCEEDED (or an active state) reads the items of the succeeded
    /// runs it passes.
    Unsuccessful,
}

impl std::str::FromStr for RunListedState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ended" => Ok(RunListedState::Ended),
            "always" => Ok(RunListedState::Always),
            "unsuccessful" => Ok(RunListedState::Unsuccessful),
            other => Err(format!("`{other}`: expected `ended`, `always` or `unsuccessful`")),
        }
    }
}

impl std::fmt::Display for RunListedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunListedState::Ended => "ended",
            RunListedState::Always => "always",
            RunListedState::Unsuccessful => "unsuccessful",
        })
    }
}

/// Where attempt logs live: one CloudWatch Logs stream per attempt while it runs, one S3
/// object per attempt once it ended (see [`crate::logs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LogsConfig {
    /// The S3 bucket holding one object per finished attempt under `logs/`.
    pub bucket: String,
    /// The CloudWatch Logs group holding one stream per attempt.
    pub log_group: String,
    /// Days objects and log events are kept (bootstrap: the bucket's lifecycle rule and the
    /// group's retention policy). Default: 30. CloudWatch only accepts some values (1, 3, 5,
    /// 7, 14, 30, 60, 90, …); the bootstrap rounds up to the next one it accepts.
    pub retention_days: u32,
    /// Bytes of line text kept per attempt. Default: [`DEFAULT_LOG_CAP_BYTES`] (10 MiB).
    pub cap_bytes: u64,
    /// Longest time a line waits before it is sent to CloudWatch. Default: 200 ms.
    pub flush_interval: Duration,
    /// Lines that are sent at once without waiting for `flush_interval`. Default: 500.
    pub flush_lines: usize,
    /// How long an attempt runs before its lines go to CloudWatch (unless `flush_lines` of
    /// them are waiting sooner): an attempt that ends within it makes no CloudWatch request
    /// (its finished log keeps its lines), and a running attempt's first lines are read this
    /// late. Default: 1 s. `0`: from the first line.
    pub stream_after: Duration,
    /// A finished log whose JSON lines take at most this many bytes is kept as one item of
    /// the table instead of an S3 object: a write of up to 5 WRU ($3.1 per million at most)
    /// against a PUT's $5 per million, and read back by one `GetItem`. `0`: every log that
    /// printed goes to S3. Default: [`DEFAULT_INLINE_LOG_BYTES`].
    pub inline_bytes: usize,
}

/// Default [`LogsConfig::inline_bytes`]: 4 KiB (a few dozen lines).
pub const DEFAULT_INLINE_LOG_BYTES: usize = 4096;

impl LogsConfig {
    /// A logs config with the documented defaults.
    pub fn new(bucket: impl Into<String>, log_group: impl Into<String>) -> Self {
        LogsConfig {
            bucket: bucket.into(),
            log_group: log_group.into(),
            retention_days: 30,
            cap_bytes: DEFAULT_LOG_CAP_BYTES,
            flush_interval: Duration::from_millis(200),
            flush_lines: 500,
            stream_after: Duration::from_secs(1),
            inline_bytes: DEFAULT_INLINE_LOG_BYTES,
        }
    }
}

/// Where and how `container` tasks run on ECS Fargate (see [`crate::ecs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EcsConfig {
    /// The cluster tasks run in (name or ARN).
    pub cluster: String,
    /// The task definition used as the template (family, `family:revision` or ARN). Its
    /// container [`container_name`](Self::container_name) is the one sked overrides.
    pub task_definition: String,
    /// The container in the task definition that runs the job's command.
    pub container_name: String,
    /// Subnets of the tasks' network interfaces (awsvpc); at least one.
    pub subnets: Vec<String>,
    /// Security groups of the tasks' network interfaces.
    pub security_groups: Vec<String>,
    /// Whether tasks get a public IP (needed in public subnets without a NAT to pull
    /// images). Default: false.
    pub assign_public_ip: bool,
    /// Time between two `DescribeTasks` of a running task. Default: 2 s.
    pub poll_interval: Duration,
    /// After `StopTask`, how long to wait for the task to reach STOPPED before giving up
    /// waiting (the task's `stopTimeout` is at most 120 s on Fargate). Default: 150 s.
    pub stop_wait: Duration,
    /// The tier used when a request does not say (`SKED_RESOURCES` in its context).
    /// Default: small.
    pub default_resources: Resources,
    /// The image of the task definition [`create_resources`](crate::create_resources)
    /// registers (tests, `make local-aws`); not used at run time. Default: busybox.
    pub bootstrap_image: String,
}

impl EcsConfig {
    /// An ECS config with the documented defaults.
    pub fn new(
        cluster: impl Into<String>,
        task_definition: impl Into<String>,
        container_name: impl Into<String>,
        subnets: Vec<String>,
        security_groups: Vec<String>,
    ) -> Self {
        EcsConfig {
            cluster: cluster.into(),
            task_definition: task_definition.into(),
            container_name: container_name.into(),
            subnets,
            security_groups,
            assign_public_ip: false,
            poll_interval: Duration::from_secs(2),
            stop_wait: Duration::from_secs(150),
            default_resources: Resources::Small,
            bootstrap_image: "public.ecr.aws/docker/library/busybox:stable".into(),
        }
    }
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
            logs: None,
            ecs: None,
            request_counter: None,
            faults: None,
            run_listed_state: RunListedState::Ended,
            unwritten_one_shots: false,
            job_keys: JobKeys::PerJob,
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
    /// S3 (path-style addressing when an endpoint is configured).
    pub s3: aws_sdk_s3::Client,
    /// CloudWatch Logs.
    pub logs: aws_sdk_cloudwatchlogs::Client,
    /// ECS.
    pub ecs: aws_sdk_ecs::Client,
    /// What the fault-injecting HTTP client injected, when [`AwsConfig::faults`] is set.
    pub faults: Option<FaultCounts>,
}

/// Builds the clients for `config`. With static credentials nothing outside `config` is read
/// (no environment, profile or instance metadata); otherwise the SDK's default chain is
/// used for credentials and the region and endpoint from `config` override it.
/// With an endpoint set, S3 uses path-style addressing (`<endpoint>/<bucket>/<key>`), which
/// moto and LocalStack need. Every client carries [`AwsConfig::request_counter`] when set,
/// and sends through a [`FaultyHttpClient`] when [`AwsConfig::faults`] is set.
pub async fn connect(config: &AwsConfig) -> AwsClients {
    let region = Region::new(config.region.clone());
    if let Some(faults) = &config.faults {
        tracing::warn!(
            throttle = faults.throttle,
            lost_answer = faults.lost_answer,
            seed = faults.seed,
            "fault injection is on: AWS requests will fail on purpose (chaos testing only)"
        );
    }
    let faulty = config.faults.map(FaultyHttpClient::around_default);
    let shared = match &config.credentials {
        Some(creds) => {
            let creds = Credentials::new(
                creds.access_key_id.clone(),
                creds.secret_access_key.clone(),
                None,
                None,
                "sked-static",
            );
            let mut builder = aws_config::SdkConfig::builder()
                .behavior_version(aws_config::BehaviorVersion::latest())
                .region(region)
                .credentials_provider(SharedCredentialsProvider::new(creds));
            if let Some(url) = &config.endpoint_url {
                builder = builder.endpoint_url(url);
            }
            if let Some(client) = &faulty {
                builder = builder.http_client(client.clone());
            }
            builder.build()
        }
        None => {
            let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).region(region);
            if let Some(url) = &config.endpoint_url {
                loader = loader.endpoint_url(url);
            }
            if let Some(client) = &faulty {
                loader = loader.http_client(client.clone());
            }
            loader.load().await
        }
    };
    // The same interceptor on every service's client (each SDK crate has its own builder).
    macro_rules! client {
        ($sdk:ident $(, $setting:ident($value:expr))*) => {{
            let mut builder = $sdk::config::Builder::from(&shared) $(.$setting($value))*;
            if let Some(counter) = &config.request_counter {
                builder = builder.interceptor(counter.clone());
            }
            $sdk::Client::from_conf(builder.build())
        }};
    }
    AwsClients {
        dynamodb: client!(aws_sdk_dynamodb),
        sqs: client!(aws_sdk_sqs),
        s3: client!(aws_sdk_s3, force_path_style(config.endpoint_url.is_some())),
        logs: client!(aws_sdk_cloudwatchlogs),
        ecs: client!(aws_sdk_ecs),
        faults: faulty.map(|f| f.counts()),
    }
}
