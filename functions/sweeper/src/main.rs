//! `sked-fn-sweeper`: the sweeper function's entry point. Reads the settings from the
//! environment once (names in `sked_aws::env`), builds the AWS ports and the sweep lease, and
//! hands every tick to [`sked_fn_sweeper::SweeperFn`].

use anyhow::Context as _;
use lambda_runtime::{LambdaEvent, service_fn};
use sked_core::ports::{Clock, SystemClock};
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lambda_runtime::tracing::init_default_subscriber();
    let settings = sked_aws::Settings::from_env().context("reading the function's environment")?;
    let clients = sked_aws::connect(&settings.aws).await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ports = sked_aws::ports(&clients, &settings.aws, clock.clone());
    let lease = sked_aws::SweepLease::new(clients.dynamodb.clone(), &settings.aws, clock);
    let handler = Arc::new(sked_fn_sweeper::SweeperFn::new(ports, lease, settings.lookahead));
    let service = service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let handler = handler.clone();
        async move { handler.handle(event).await }
    });
    lambda_runtime::run(service).await.map_err(|e| anyhow::anyhow!(e))
}
