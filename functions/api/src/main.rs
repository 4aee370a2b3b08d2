//! `sked-fn-api`: the API function's entry point. Reads the settings from the environment once
//! (names in `sked_aws::env`), builds the AWS ports, and serves the router with `lambda_http`.

use anyhow::Context as _;
use sked_core::ports::SystemClock;
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lambda_http::tracing::init_default_subscriber();
    let settings = sked_aws::Settings::from_env().context("reading the function's environment")?;
    let clients = sked_aws::connect(&settings.aws).await;
    let ports = sked_aws::ports(&clients, &settings.aws, Arc::new(SystemClock));
    let app = sked_fn_api::app(ports, &settings);
    lambda_http::run(app).await.map_err(|e| anyhow::anyhow!(e))
}
