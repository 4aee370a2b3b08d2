//! `sked-fn-dlq`: the DLQ function's entry point. Reads the settings from the environment once
//! (names in `sked_aws::env`), builds the AWS ports, and hands every SQS batch to
//! [`sked_fn_dlq::DlqFn`].

use anyhow::Context as _;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{LambdaEvent, service_fn};
use sked_core::ports::SystemClock;
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lambda_runtime::tracing::init_default_subscriber();
    let settings = sked_aws::Settings::from_env().context("reading the function's environment")?;
    let clients = sked_aws::connect(&settings.aws).await;
    sked_aws::check_table_layout(&clients, &settings.aws)
        .await
        .context("checking the table's layout")?;
    let ports = sked_aws::ports(&clients, &settings.aws, Arc::new(SystemClock));
    let handler = Arc::new(sked_fn_dlq::DlqFn::new(ports, settings.aws.max_receive_count));
    let service = service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = handler.clone();
        async move { handler.handle(event).await }
    });
    lambda_runtime::run(service).await.map_err(|e| anyhow::anyhow!(e))
}
