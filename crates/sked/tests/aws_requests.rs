//! What a one-shot run costs on AWS, counted (feature `aws`): one-shot jobs run end to end
//! in-process on moto — created through the API function's router, fired by the sweeper
//! function's handler, run by the core `Worker` on the AWS ports with the local process
//! executor — with a [`RequestCounter`] on every AWS client. Prints the requests per
//! service and operation, per run, the estimated DynamoDB capacity units, and the cost per
//! million runs at the list prices below; asserts the counts are sane. Measured twice: runs
//! whose payload prints a line (its log one table item), and silent runs (no log at all).
//!
//! Reads the test itself makes to wait for the runs go through clients without the counter.

#![cfg(feature = "aws")]

mod common;

use common::aws::Deployment;
use common::*;
use serde_json::json;
use sked_aws::RequestCounter;
use sked_aws::testing::{fresh_config, with_logs};
use sked_core::WorkerId;
use sked_core::duration::Dur;
use sked_core::ids::TenantId;
use sked_core::ports::{Clock, Executor, PageRequest, RunFilter, SystemClock};
use sked_core::run::RunState;
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_embedded::exec::TaskExecutor;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One-shot runs measured.
const RUNS: usize = 20;

/// us-east-1 list prices (USD), as published on the AWS pricing pages in 2025 (DynamoDB
/// on-demand after its November 2024 reduction). Check them for your region and date.
mod price {
    /// DynamoDB on-demand, per write request unit.
    pub const DYNAMODB_WRU: f64 = 0.625 / 1e6;
    /// DynamoDB on-demand, per read request unit.
    pub const DYNAMODB_RRU: f64 = 0.125 / 1e6;
    /// SQS standard queue, per request (a batch of up to 10 is one request).
    pub const SQS_REQUEST: f64 = 0.40 / 1e6;
    /// S3 Standard PUT, COPY, POST, LIST.
    pub const S3_PUT: f64 = 0.005 / 1e3;
    /// S3 Standard GET and others.
    pub const S3_GET: f64 = 0.0004 / 1e3;
    /// CloudWatch Logs standard ingestion, per GB.
    pub const CWL_INGEST_GB: f64 = 0.50;
    /// API Gateway HTTP API, per request (first 300 million a month).
    pub const HTTP_API_REQUEST: f64 = 1.00 / 1e6;
    /// Lambda, per invocation.
    pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    /// Lambda arm64, per GB-second.
    pub const LAMBDA_GB_S: f64 = 0.000_013_333_4;
}

/// The API function's memory (template.yaml) and an assumed billed duration per create.
const API_GB: f64 = 0.25;
const API_SECONDS: f64 = 0.1;
/// Index (GSI) writes DynamoDB bills on top of the table writes counted here, per run:
/// create 2 (`sched`, `list`), fire 5, claim 3, complete 3 (the `active` local index: one at
/// the run's insert, one at its end) — from the item layout in
/// `sked_aws::dynamo` (README "Costs"); the interceptor sees only the requests.
const INDEX_WRU_PER_RUN: f64 = 13.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_one_shot_run_are_counted_and_priced() {
    measure("one-shot runs printing a line", sh("echo run $SKED_RUN_ID"), true).await;
    measure("silent one-shot runs", sh(":"), false).await;
}

/// Runs [`RUNS`] one-shots of `task` end to end and prints what they cost as `what`; `prints`:
/// whether the payload writes a log line.
async fn measure(what: &str, task: serde_json::Value, prints: bool) {
    let counter = RequestCounter::new();
    let mut config = with_logs(fresh_config());
    config.request_counter = Some(counter.clone());
    // The API fires nothing itself: the sweeper does, as for a job created ahead of time.
    let aws = Deployment::start(config, Dur::ZERO, Dur::secs(600)).await;
    let observer = {
        let mut plain = aws.settings.aws.clone();
        plain.request_counter = None;
        let clients = sked_aws::connect(&plain).await;
        sked_aws::ports(&clients, &plain, Arc::new(SystemClock))
    };
    counter.reset(); // the resources' creation is not a run's

    let due = in_secs(3.0);
    for i in 0..RUNS {
        aws.api
            .create_job(json!({
                "id": format!("once-{i}"), "schedule": {"at": iso(due)},
                "task": task,
            }))
            .await;
    }
    let after_create = counter.snapshot();
    let units_created = counter.dynamodb_capacity();
    let outcome = aws.sweep().await;
    assert_eq!(outcome.fired, RUNS, "{outcome:?}");
    let after_sweep = counter.snapshot();
    let units_swept = counter.dynamodb_capacity();

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let executor: Arc<dyn Executor> = Arc::new(TaskExecutor::new(clock));
    let mut worker_config = WorkerConfig::new(WorkerId("requests-worker".into()));
    worker_config.fired_ahead = true;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(Worker::new(aws.ports.clone(), executor, worker_config).run(shutdown.clone()));
    let tenant = TenantId::from("default");
    let succeeded = RunFilter {
        state: Some(RunState::Succeeded),
        ..RunFilter::default()
    };
    let page = PageRequest {
        cursor: None,
        limit: 1000,
    };
    wait_until("every run to succeed", Duration::from_secs(60), async || {
        let runs = observer.store.list_runs(&tenant, &succeeded, &page).await.ok()?;
        (runs.items.len() == RUNS).then_some(())
    })
    .await;
    shutdown.cancel();
    worker.await.expect("the worker stops");
    let total = counter.snapshot();

    let phase = |from: &BTreeMap<(String, String), u64>, to: &BTreeMap<(String, String), u64>| {
        let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
        for (op, n) in to {
            let d = n - from.get(op).copied().unwrap_or(0);
            if d > 0 {
                out.insert(op.clone(), d);
            }
        }
        out
    };
    let none = BTreeMap::new();
    eprintln!("AWS requests for {RUNS} {what} (API create → sweeper → worker), per run:");
    eprintln!(
        "{:<16} {:<28} {:>7} {:>7} {:>7} {:>9}",
        "service", "operation", "create", "sweep", "worker", "per run"
    );
    let (created, swept, worked) = (
        phase(&none, &after_create),
        phase(&after_create, &after_sweep),
        phase(&after_sweep, &total),
    );
    for (op, n) in &total {
        let get = |m: &BTreeMap<(String, String), u64>| m.get(op).copied().unwrap_or(0);
        eprintln!(
            "{:<16} {:<28} {:>7} {:>7} {:>7} {:>9.2}",
            op.0,
            op.1,
            get(&created),
            get(&swept),
            get(&worked),
            *n as f64 / RUNS as f64
        );
    }
    let units = counter.dynamodb_capacity();
    let per = |u: f64| u / RUNS as f64;
    type Units = fn(&sked_aws::request_count::Capacity) -> f64;
    let rows: [(&str, Units); 2] = [("table WRU", |c| c.write_units), ("table RRU", |c| c.read_units)];
    for (what, of) in rows {
        eprintln!(
            "{:<16} {:<28} {:>7.1} {:>7.1} {:>7.1} {:>9.2}",
            "DynamoDB",
            what,
            per(of(&units_created)),
            per(of(&units_swept) - of(&units_created)),
            per(of(&units) - of(&units_swept)),
            per(of(&units))
        );
    }
    let all: u64 = total.values().sum();
    let receives = counter.of("SQS", "ReceiveMessage");
    eprintln!(
        "total {all} requests = {:.2} per run ({:.2} without ReceiveMessage, whose count follows idle time)",
        all as f64 / RUNS as f64,
        (all - receives) as f64 / RUNS as f64
    );

    // Sanity: every step of a run made its calls, and a run costs a bounded number.
    let per_run = |service: &str, op: &str| counter.of(service, op) as f64 / RUNS as f64;
    assert!(
        per_run("DynamoDB", "TransactWriteItems") >= 1.0,
        "create + fire: {total:?}"
    );
    assert!(counter.of("SQS", "SendMessageBatch") >= 1, "{total:?}");
    assert!(
        counter.of("SQS", "SendMessageBatch") <= RUNS.div_ceil(10) as u64 + 1,
        "sends are batched: {total:?}"
    );
    assert!(receives >= 1, "{total:?}");
    assert_eq!(
        counter.of("SQS", "DeleteMessage"),
        RUNS as u64,
        "one delete per run: {total:?}"
    );
    // A small finished log is a table item, never an S3 object; a silent attempt has no
    // log at all, not even a stream.
    assert_eq!(
        counter.of("S3", "PutObject"),
        0,
        "no S3 object for a log of one line: {total:?}"
    );
    let streams_and_sends = if prints { RUNS as u64 } else { 0 };
    assert_eq!(
        counter.of("CloudWatch Logs", "CreateLogStream"),
        streams_and_sends,
        "a stream per attempt that printed: {total:?}"
    );
    assert_eq!(
        counter.of("CloudWatch Logs", "PutLogEvents"),
        streams_and_sends,
        "{total:?}"
    );
    assert!(
        (all - receives) as f64 / RUNS as f64 <= 20.0,
        "more than 20 requests per run besides receives: {total:?}"
    );

    // Cost per million runs.
    let capacity = counter.dynamodb_capacity();
    let wru = capacity.write_units / RUNS as f64 + INDEX_WRU_PER_RUN;
    let rru = capacity.read_units / RUNS as f64;
    let sqs_requests: u64 = total.iter().filter(|((s, _), _)| s == "SQS").map(|(_, n)| n).sum();
    let sqs = sqs_requests as f64 / RUNS as f64;
    let s3_put = per_run("S3", "PutObject");
    let s3_get = per_run("S3", "GetObject");
    // A printing run logs one short line: well under 1 KB with the event's overhead.
    let cwl_gb = if prints { 1024.0 / 1e9 } else { 0.0 };
    let million = 1e6;
    let lines = [
        (
            "DynamoDB writes",
            format!(
                "{wru:.1} WRU (table {:.1} + index {INDEX_WRU_PER_RUN})",
                wru - INDEX_WRU_PER_RUN
            ),
            wru * price::DYNAMODB_WRU,
        ),
        ("DynamoDB reads", format!("{rru:.1} RRU"), rru * price::DYNAMODB_RRU),
        ("SQS", format!("{sqs:.2} requests"), sqs * price::SQS_REQUEST),
        (
            "S3",
            format!("{s3_put:.1} PUT + {s3_get:.1} GET"),
            s3_put * price::S3_PUT + s3_get * price::S3_GET,
        ),
        (
            "CloudWatch Logs",
            format!("~{} KB ingested", if prints { 1 } else { 0 }),
            cwl_gb * price::CWL_INGEST_GB,
        ),
        (
            "API (create)",
            format!("1 HTTP API request + 1 Lambda invocation × {API_SECONDS} s × {API_GB} GB"),
            price::HTTP_API_REQUEST + price::LAMBDA_REQUEST + API_SECONDS * API_GB * price::LAMBDA_GB_S,
        ),
    ];
    eprintln!("cost per million {what} (us-east-1 list prices, 2025):");
    let mut sum = 0.0;
    for (what, amount, dollars) in &lines {
        eprintln!("  {what:<16} {amount:<60} ${:>7.2}", dollars * million);
        sum += dollars * million;
    }
    eprintln!("  total ${sum:.2} per million {what}");
    assert!(sum > 0.0 && capacity.write_units > 0.0 && capacity.read_units > 0.0);
}
