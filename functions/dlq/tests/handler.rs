//! The DLQ function driven by `events/sqs-dlq-batch.json`, against moto: the record naming a
//! run fails that run with the reason; the malformed record is reported as a batch item
//! failure, so it stays in the DLQ.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::json;
use sked_aws::testing::fresh_resources;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::ports::{Clock, SystemClock};
use sked_core::run::{AttemptOutcome, RunState};
use sked_core::service::dead_letter::DLQ_WORKER;
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_fn_dlq::DlqFn;
use std::sync::Arc;

const BATCH: &str = include_str!("../../../events/sqs-dlq-batch.json");
/// The ids in the batch.
const RUN_ID: &str = "invoice-export@20200101T000000.000Z";
const MALFORMED_MESSAGE: &str = "c80e8021-a70a-42c7-a470-796e1186f753";

/// Ports over fresh resources, with the run the batch names written (PENDING).
async fn ports_with_the_run() -> Ports {
    let (clients, aws) = fresh_resources().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ports = sked_aws::ports(&clients, &aws, clock);
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let spec = json!({"schedule": {"at": "2020-01-01T00:00:00Z"}, "task": {"command": {"argv": ["true"]}}, "priority": 8, "max_retries": 2});
    let new = NewJob {
        id: Some(JobId::from("invoice-export")),
        spec: serde_json::from_value(spec).unwrap(),
    };
    sked.create_job(&TenantId::from("acme"), new, None).await.unwrap();
    let sweeper = Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default());
    assert_eq!(sweeper.sweep_once().await.unwrap().fired, 1);
    ports
}

fn batch() -> LambdaEvent<SqsEvent> {
    LambdaEvent::new(serde_json::from_str(BATCH).unwrap(), Context::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_fails_the_named_run_and_reports_the_malformed_record() {
    let ports = ports_with_the_run().await;
    let handler = DlqFn::new(ports.clone(), 5);

    let response = handler.handle(batch()).await.unwrap();
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, vec![MALFORMED_MESSAGE]);

    let run = ports
        .store
        .get_run(&TenantId::from("acme"), &RunId::from(RUN_ID))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.state, RunState::Failed);
    let last = run.attempts.last().unwrap();
    assert_eq!(last.worker.to_string(), DLQ_WORKER);
    assert_eq!(last.outcome, Some(AttemptOutcome::Failed));
    assert_eq!(last.error.as_deref(), Some("dead-lettered after 5 receives"));

    // Delivered again (the malformed record stayed): the ended run is left as it is.
    let again = handler.handle(batch()).await.unwrap();
    assert_eq!(again.batch_item_failures.len(), 1);
    let after = ports
        .store
        .get_run(&TenantId::from("acme"), &RunId::from(RUN_ID))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, run);
}
