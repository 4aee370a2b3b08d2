//! Creates sked's AWS resources from the environment the functions and workers read
//! ([`sked_aws::env`]): the table, the four queues, and — when `SKED_LOG_BUCKET` /
//! `SKED_LOG_GROUP` and `SKED_ECS_CLUSTER` are set — the log bucket and group and the ECS
//! cluster and `container` task definition. Idempotent. Meant for moto and LocalStack
//! (`make local-aws`); on AWS, `template.yaml` creates these.
//!
//! Prints the queue URLs the endpoint answered as `SKED_QUEUE_*=<url>` lines on stdout (they
//! differ between moto and LocalStack), for a script to `eval` or a user to export.
//!
//! ```sh
//! AWS_ENDPOINT_URL=http://127.0.0.1:5055 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
//! SKED_TABLE=sked SKED_QUEUE_HIGH=x/sked-high SKED_QUEUE_NORMAL=x/sked-normal \
//! SKED_QUEUE_LOW=x/sked-low SKED_QUEUE_DLQ=x/sked-dlq cargo run -p sked-aws --example bootstrap
//! ```
//! (Only the last path segment of a queue URL is used: it is the queue's name.)

use sked_aws::{Settings, connect, create_resources, env};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Settings::from_env()?.aws;
    if config.queues.dlq.is_empty() {
        return Err(format!("{} is not set", env::QUEUE_DLQ).into());
    }
    let clients = connect(&config).await;
    let urls = create_resources(&clients, &config).await?;
    println!("{}={}", env::QUEUE_HIGH, urls.high);
    println!("{}={}", env::QUEUE_NORMAL, urls.normal);
    println!("{}={}", env::QUEUE_LOW, urls.low);
    println!("{}={}", env::QUEUE_DLQ, urls.dlq);
    eprintln!(
        "created: table {}, queues high/normal/low/dlq{}{}",
        config.table,
        config
            .logs
            .as_ref()
            .map(|l| format!(", bucket {}, log group {}", l.bucket, l.log_group))
            .unwrap_or_default(),
        config
            .ecs
            .as_ref()
            .map(|e| format!(", ECS cluster {} with task definition {}", e.cluster, e.task_definition))
            .unwrap_or_default(),
    );
    Ok(())
}
