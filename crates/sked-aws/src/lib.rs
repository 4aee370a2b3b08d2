//! sked-aws: sked's ports on AWS.
//!
//! - [`config`]: [`AwsConfig`] (read once by the caller) and [`connect`], which builds the
//!   SDK clients — with `endpoint_url` set, the same code talks to moto or LocalStack.
//! - [`dynamo`]: [`DynamoStore`], the `JobStore` on one DynamoDB table (layout in its docs).
//! - [`sqs`]: [`SqsQueue`], the `DispatchQueue` on three SQS queues and a DLQ.
//! - [`env`]: [`Settings::from_env`] — every environment variable the Lambda functions and
//!   `sked worker --backend aws` read, named in one place.
//! - [`dynamo::sweep_lease`]: [`SweepLease`], so overlapping sweeper invocations do not
//!   double the work.
//! - [`wiring`]: [`ports`] — sked-core's ports on AWS from a config, for every AWS main.
//! - `testing` (feature `testing`): the moto server fixture for tests.
//! - [`logs`]: [`CloudWatchLogStore`], the `LogStore`: a CloudWatch Logs stream per running
//!   attempt, an S3 object per finished one.
//! - [`ecs`]: [`EcsExecutor`], the `Executor` of `container` tasks on ECS Fargate.
//! - [`bootstrap`]: [`create_resources`] makes the table and queues, and the log bucket and
//!   group and the ECS cluster and task definition when configured (tests, `make local-aws`).
//! - [`request_count`]: [`RequestCounter`], an SDK interceptor counting requests per
//!   operation (what a workload costs).
//! - [`fault`]: [`FaultyHttpClient`], throttling and lost answers injected on the SDK's HTTP
//!   client (chaos tests; off by default).
//! - [`error`]: what each SDK error means to sked (conflict, transient, other), sources kept.
//!
//! Only this crate depends on the AWS SDK; sked-core and the local deployment never see it.

pub mod bootstrap;
pub mod config;
pub mod dynamo;
pub mod ecs;
pub mod emf;
pub mod env;
pub mod error;
pub mod fault;
pub mod logs;
pub mod request_count;
pub mod run_copies;
pub mod sqs;
pub mod sqs_deletes;
pub mod sqs_poller;
#[cfg(feature = "testing")]
pub mod testing;
pub mod wiring;

pub use bootstrap::create_resources;
pub use config::{
    AwsClients, AwsConfig, EcsConfig, JobKeys, LogsConfig, QueueUrls, RunListedState, StaticCredentials, connect,
};
pub use dynamo::DynamoStore;
pub use dynamo::migrate_job_keys::migrate_to_tenant_shards;
pub use dynamo::sweep_lease::SweepLease;
pub use ecs::EcsExecutor;
pub use emf::EmfRecorder;
pub use env::Settings;
pub use fault::{Faults, FaultyHttpClient};
pub use logs::CloudWatchLogStore;
pub use request_count::RequestCounter;
pub use sqs::SqsQueue;
pub use wiring::{TenantStores, check_table_layout, ports, ports_and_tenants};
