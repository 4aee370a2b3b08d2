//! `sked-fn-sweeper`: the sweeper function's entry point. Reads the settings from the
//! environment once (names in `sked_aws::env`), builds the AWS ports and the sweep lease, and
//! hands every tick to [`sked_fn_sweeper::SweeperFn`]; after each tick, what it did as
//! CloudWatch embedded-metric-format lines (`sked_aws::emf`, service `sked-sweeper`).

use anyhow::Context as _;
use lambda_runtime::{LambdaEvent, service_fn};
use sked_core::ports::{Clock, SystemClock};
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lambda_runtime::tracing::init_default_subscriber();
    let settings = sked_aws::Settings::from_env().context("reading the function's environment")?;
    let clients = sked_aws::connect(&settings.aws).await;
    sked_aws::check_table_layout(&clients, &settings.aws)
        .await
        .context("checking the table's layout")?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let metrics = Arc::new(sked_aws::EmfRecorder::from_env("sked-sweeper"));
    let ports = sked_aws::ports(&clients, &settings.aws, clock.clone()).with_observer(metrics.clone());
    let lease = sked_aws::SweepLease::new(clients.dynamodb.clone(), &settings.aws, clock.clone());
    let handler = Arc::new(sked_fn_sweeper::SweeperFn::new(ports, lease, settings.lookahead));
    let service = service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let (handler, metrics, clock) = (handler.clone(), metrics.clone(), clock.clone());
        async move {
            let answer = handler.handle(event).await;
            // This tick's firings, skips, sweep durations and reaped runs, as EMF lines.
            metrics.print(clock.now().timestamp_millis());
            answer
        }
    });
    lambda_runtime::run(service).await.map_err(|e| anyhow::anyhow!(e))
}
