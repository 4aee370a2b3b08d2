//! sked-aws: sked's ports on AWS.
//!
//! - [`config`]: [`AwsConfig`] (read once by the caller) and [`connect`], which builds the
//!   SDK clients — with `endpoint_url` set, the same code talks to moto or LocalStack.
//! - [`dynamo`]: [`DynamoStore`], the `JobStore` on one DynamoDB table (layout in its docs).
//! - [`sqs`]: [`SqsQueue`], the `DispatchQueue` on three SQS queues and a DLQ.
//! - [`bootstrap`]: [`create_resources`] makes the table and queues (tests, `make local-aws`).
//! - [`error`]: what each SDK error means to sked (conflict, transient, other), sources kept.
//!
//! Only this crate depends on the AWS SDK; sked-core and the local deployment never see it.

pub mod bootstrap;
pub mod config;
pub mod dynamo;
pub mod error;
pub mod sqs;

pub use bootstrap::create_resources;
pub use config::{AwsClients, AwsConfig, QueueUrls, StaticCredentials, connect};
pub use dynamo::DynamoStore;
pub use sqs::SqsQueue;
