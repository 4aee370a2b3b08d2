//! A worker's smallest finished logs ([`sked_aws::logs::FoldedLogs`]) on a real moto server,
//! through the AWS ports (the store and the log store wired together): a log handed over by
//! its writer is written in the run's item by the completion that ends the run — no item of
//! its own — and read back from there; a run that will be retried, and a completion fenced off,
//! keep the log as an item of its own. Either way the lines read back.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::*;
use sked_aws::dynamo::codec::{Item, key};
use sked_aws::dynamo::keys::{job_pk, log_pk, log_sk, run_sk};
use sked_core::ids::{TenantId, WorkerId};
use sked_core::ports::store::{ClaimOutcome, Completion, JobStoreExt, RunTransition, StoreError};
use sked_core::ports::{LogKey, LogLine, LogQuery, LogStream, SystemClock};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::service::Ports;
use sked_testkit::contract::fixtures;
use std::sync::Arc;

fn run(job: &str) -> Run {
    let at = fixtures::t0();
    Run::new_pending(TenantId::from("acme"), job.into(), at, Trigger::Schedule, 5, at, 3, at)
}

fn log_key(run: &Run, attempt: u32) -> LogKey {
    LogKey {
        tenant: run.tenant.clone(),
        run_id: run.run_id.clone(),
        attempt,
    }
}

/// Claims `run` at `at` with a 30 s lease; its fencing token.
async fn claim(ports: &Ports, run: &Run, at: chrono::DateTime<chrono::Utc>) -> u64 {
    match ports
        .store
        .claim_one(
            &run.tenant,
            &run.run_id,
            &WorkerId::from("w"),
            at,
            at + chrono::Duration::seconds(30),
        )
        .await
        .unwrap()
    {
        ClaimOutcome::Claimed { token, .. } => token,
        other => panic!("claim: {other:?}"),
    }
}

/// Writes one line as `key`'s log and finishes it.
async fn print(ports: &Ports, key: &LogKey, text: &str) {
    let mut writer = ports.logs.writer(key).await.unwrap();
    writer
        .append(LogLine {
            ts: fixtures::t0(),
            stream: LogStream::Stdout,
            line: text.into(),
        })
        .await
        .unwrap();
    writer.finish().await.unwrap();
}

async fn read_lines(ports: &Ports, key: &LogKey) -> Vec<String> {
    let page = ports.logs.read(key, &LogQuery::default()).await.unwrap();
    page.lines.into_iter().map(|l| l.line).collect()
}

async fn raw_item(clients: &sked_aws::AwsClients, table: &str, k: Item) -> Option<Item> {
    clients
        .dynamodb
        .get_item()
        .table_name(table)
        .set_key(Some(k))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

fn run_item_key(run: &Run) -> Item {
    key(
        job_pk(run.tenant.as_str(), run.job_id.as_str()),
        run_sk(run.scheduled_for.timestamp_millis()),
    )
}

fn log_item_key(key_of: &LogKey) -> Item {
    key(
        log_pk(key_of.tenant.as_str(), key_of.run_id.as_str()),
        log_sk(key_of.attempt),
    )
}

fn completion(run: &Run, token: u64, next: RunTransition) -> Completion {
    Completion {
        tenant: run.tenant.clone(),
        run_id: run.run_id.clone(),
        token,
        result: fixtures::result(AttemptOutcome::Succeeded, fixtures::t0()),
        next,
        only_if_expired_by: None,
    }
}

#[tokio::test]
async fn a_small_log_is_written_in_the_write_that_ends_its_run() {
    let (clients, config) = fresh_logs().await;
    let ports = sked_aws::ports(&clients, &config, Arc::new(SystemClock));
    let done = run("printing");
    ports.store.insert_run(&done).await.unwrap();
    let token = claim(&ports, &done, fixtures::t0()).await;
    let key_of = log_key(&done, 1);
    print(&ports, &key_of, "hello").await;
    assert!(
        raw_item(&clients, &config.table, log_item_key(&key_of)).await.is_none(),
        "handed to the completion, not written"
    );
    ports
        .store
        .complete(&completion(&done, token, RunTransition::Finish(RunState::Succeeded)))
        .await
        .unwrap();
    let item = raw_item(&clients, &config.table, run_item_key(&done)).await.unwrap();
    let folded = item
        .get("logs")
        .and_then(|v| v.as_m().ok())
        .expect("the run's item holds its log");
    assert!(matches!(folded.get("1"), Some(AttributeValue::S(lines)) if lines.contains("hello")));
    assert!(raw_item(&clients, &config.table, log_item_key(&key_of)).await.is_none());
    assert_eq!(read_lines(&ports, &key_of).await, ["hello"]);
    // The run reads as it was written: the folded log is the item's, not the run's.
    assert_eq!(
        ports
            .store
            .get_run(&done.tenant, &done.run_id)
            .await
            .unwrap()
            .unwrap()
            .state,
        RunState::Succeeded
    );
}

#[tokio::test]
async fn a_retried_run_s_log_and_a_fenced_completion_s_log_are_items_of_their_own() {
    let (clients, config) = fresh_logs().await;
    let ports = sked_aws::ports(&clients, &config, Arc::new(SystemClock));
    let t0 = fixtures::t0();

    let retried = run("retried");
    ports.store.insert_run(&retried).await.unwrap();
    let token = claim(&ports, &retried, t0).await;
    let first = log_key(&retried, 1);
    print(&ports, &first, "try 1").await;
    let next = RunTransition::Retry {
        not_before: t0 + chrono::Duration::seconds(5),
    };
    ports.store.complete(&completion(&retried, token, next)).await.unwrap();
    assert!(raw_item(&clients, &config.table, log_item_key(&first)).await.is_some());
    let item = raw_item(&clients, &config.table, run_item_key(&retried)).await.unwrap();
    assert!(!item.contains_key("logs"), "a run that goes on is not the log's home");
    assert_eq!(read_lines(&ports, &first).await, ["try 1"]);

    let fenced = run("fenced");
    ports.store.insert_run(&fenced).await.unwrap();
    let old = claim(&ports, &fenced, t0).await;
    let lost = log_key(&fenced, 1);
    print(&ports, &lost, "before the lease ran out").await;
    claim(&ports, &fenced, t0 + chrono::Duration::seconds(31)).await; // the lease expired
    let refused = ports
        .store
        .complete(&completion(&fenced, old, RunTransition::Finish(RunState::Succeeded)))
        .await;
    assert!(matches!(refused, Err(StoreError::Fenced)), "{refused:?}");
    assert!(raw_item(&clients, &config.table, log_item_key(&lost)).await.is_some());
    assert_eq!(read_lines(&ports, &lost).await, ["before the lease ran out"]);
}
