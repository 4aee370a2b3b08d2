//! `overlap: queue_one` on AWS (feature `aws`): a run that waits its turn behind a long run
//! must not be given up by SQS. Each wait used to defer the same message, and every
//! redelivery counted toward the redrive policy's `maxReceiveCount`: a run waiting a few
//! leases was moved to the DLQ, whose function would then end it FAILED without it ever
//! running. Here the queues dead-letter after 2 receives, the lease is 1 s and the first run
//! lasts 5 s — the waiting run must still run after it and nothing must reach the DLQ.

#![cfg(feature = "aws")]

mod common;

use common::aws::Deployment;
use common::*;
use serde_json::json;
use sked_aws::testing::{fresh_config, with_logs};
use sked_core::WorkerId;
use sked_core::duration::Dur;
use sked_core::ports::{Clock, Executor, SystemClock};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_embedded::exec::TaskExecutor;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_one_run_waiting_many_leases_is_not_dead_lettered() {
    let mut config = with_logs(fresh_config());
    config.max_receive_count = 2;
    let aws = Deployment::start(config, Dur::secs(600), Dur::secs(600)).await;
    aws.api
        .create_job(json!({
            "id": "one-at-a-time",
            "schedule": {"at": iso(in_secs(3600.0))},
            "overlap": "queue_one",
            "task": sh("sleep 5"),
        }))
        .await;

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let executor: Arc<dyn Executor> = Arc::new(TaskExecutor::new(clock));
    let mut worker_config = WorkerConfig::new(WorkerId("queue-one-worker".into()));
    worker_config.fired_ahead = true;
    worker_config.concurrency = 2;
    worker_config.lease = Dur::secs(1);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(Worker::new(aws.ports.clone(), executor, worker_config).run(shutdown.clone()));

    let mut run_ids = Vec::new();
    for _ in 0..2 {
        let (status, run) = aws.api.post("/v1/jobs/one-at-a-time/trigger", &json!({})).await;
        assert_eq!(status, 201, "trigger: {run}");
        run_ids.push(run["run_id"].as_str().expect("run_id").to_string());
    }
    let mut runs = Vec::new();
    for run_id in &run_ids {
        runs.push(wait_terminal(&aws.observer, run_id, Duration::from_secs(60)).await);
    }
    shutdown.cancel();
    worker.await.expect("the worker stops");

    for run in &runs {
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        let attempts = run["attempts"].as_array().expect("attempts");
        assert_eq!(attempts.len(), 1, "one attempt each: {run}");
    }
    let (first, second) = (&runs[0]["attempts"][0], &runs[1]["attempts"][0]);
    assert!(
        time(second, "started_at") >= time(first, "finished_at"),
        "queue_one: the second run starts after the first ends: {first} {second}"
    );
    let dead_letters = aws.messages_on(&aws.settings.aws.queues.dlq).await;
    assert_eq!(dead_letters, 0, "a waiting run's message was dead-lettered");
}
