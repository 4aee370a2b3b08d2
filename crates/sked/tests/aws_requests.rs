//! What a one-shot run costs on AWS, counted (feature `aws`): one-shot jobs run end to end
//! in-process on moto — created through the API function's router, fired by the sweeper
//! function's handler (or, due at once, by the create itself), run by the core `Worker` on
//! the AWS ports with the local process executor — with a [`RequestCounter`] on every AWS
//! client. Prints the requests per service and operation, per run, the estimated DynamoDB
//! capacity units, and the cost per million runs at the list prices below; asserts the counts
//! are sane. Measured: one-shots whose payload prints a line (its log in the run's item),
//! silent one-shots (no log at all), silent one-shots created in one `POST /v1/jobs:batch`,
//! silent one-shots due at once (created one by one, and in one batch), a per-second cron's
//! runs (no create), and a running minute of heartbeats; the batch and the one-shots due at
//! once one by one against the one-shots created ahead one by one, the cron's runs and the
//! heartbeats against targets (see their tests).
//!
//! Reads the test itself makes to wait for the runs go through clients without the counter.

#![cfg(feature = "aws")]

mod common;

use common::aws::Deployment;
use common::*;
use serde_json::json;
use sked_aws::dynamo::keys::RUNNING_KEY_STEP_MS;
use sked_aws::request_count::Capacity;
use sked_aws::testing::{fresh_config, with_logs};
use sked_aws::{AwsConfig, RequestCounter};
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
    /// API Gateway HTTP API, per request (first 300 million a month). A Lambda function URL
    /// (template.yaml `ApiFront: FunctionUrl`) has no charge of its own.
    pub const HTTP_API_REQUEST: f64 = 1.00 / 1e6;
    /// Lambda, per invocation.
    pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    /// Lambda arm64, per GB-second.
    pub const LAMBDA_GB_S: f64 = 0.000_013_333_4;
}

/// The API function's memory (template.yaml) and an assumed billed duration per create.
const API_GB: f64 = 0.25;
const API_SECONDS: f64 = 0.1;
/// Index writes DynamoDB bills on top of the table writes counted here, per one-shot run:
/// create 2 (`sched`, `list`), fire 5 (the job's `sched` and `list` entries; the run's
/// `live`, `list` and `active` ones), claim 0 (a claim on time leaves the run's `live` entry
/// where its firing filed it, `sked_aws::dynamo::keys::live_sk`, and its `list` entry as it
/// was: a run's state is projected there only once it has ended,
/// `sked_aws::dynamo::codec::LISTED_STATE`), complete 2 (`live`, `list`: the one run of a
/// firing that ends its job keeps its `active` entry, `sked_aws::dynamo::codec::ENDS_ITS_JOB`)
/// — from the item layout in `sked_aws::dynamo` (README "Costs"); the interceptor sees only
/// the requests. (12 until 2026-12-04, when a pending run was filed in `sched` and its claim
/// moved it to `live`; 10 until 2026-12-05, when a one-shot's run began to keep its `active` entry.)
const INDEX_WRU_PER_ONE_SHOT: f64 = 9.0;

/// Index writes per one-shot run created ahead on the lean store ([`Store::Lean`]): create 1
/// (`sched`; no `list` entry, the job is keyed in its tenant's shards:
/// `sked_aws::JobKeys::TenantShards`), fire 0 (the job is not written: its entry stays), claim 1
/// (the run's first put: its `list` entry; none in `active`, the run is read by its key, and
/// none in `live`, its message carries it: `sked_aws::dynamo::codec::KEYED`), complete 0 (its
/// state is not projected in `list`: `RunListedState::Unsuccessful`). (6 until 2026-12-05
/// evening: such a run's `live` entry, its claim's put and its end's delete, and its state in
/// `list`; 3 until that night, the job's `list` entry.)
const INDEX_WRU_PER_ONE_SHOT_ON_THE_LEAN_STORE: f64 = 2.0;

/// What a silent one-shot on the lean store costs per million behind a function URL, at most:
/// issue 15's $5.00 ($4.61–4.74 measured on 2026-12-05, receives vary; $4.68 for runs printing a line).
const LEAN_BEHIND_A_FUNCTION_URL_AT_MOST: f64 = 5.00;

/// Index writes per one-shot run created due at once, its job written with its first firing
/// (`sked_aws::dynamo::create_fired`): the job's `list` entry (put COMPLETED; it never enters
/// `sched`), the run's `live`, `list` and `active` entries; at its end 2, as any one-shot's.
const INDEX_WRU_PER_ONE_SHOT_CREATED_FIRED: f64 = 6.0;

/// Index writes of a run of a recurring job besides its firing's share: its `live`, `list` and
/// `active` entries written by the firing and removed (or, `list`, given its state) at its end
/// — a firing that keeps its job active marks no run to keep its `active` entry.
const INDEX_WRU_OF_A_RECURRING_RUN: f64 = 6.0;

/// [`INDEX_WRU_OF_A_RECURRING_RUN`] on the lean store ([`Store::Lean`]): a run that succeeds
/// leaves its `list` entry as its firing wrote it (`RunListedState::Unsuccessful`). (A
/// recurring job's firing is written: its runs have their `live` and `active` entries.)
const INDEX_WRU_OF_A_RECURRING_RUN_ON_THE_LEAN_STORE: f64 = 5.0;

/// Index writes of a firing that keeps its job active, shared by the runs it fires: the job's
/// `sched` entry moves to its next due time (a key changed: a delete and a put); its `list`
/// entry stays (its state stays ACTIVE).
const INDEX_WRU_OF_A_RECURRING_FIRING: f64 = 2.0;

/// Index writes of a heartbeat at a lease of `lease_secs` (one every third of it): none while
/// the run's `live` entry (keys only) stays where it is (its `not_before` for the first five
/// minutes, then the 5-minute step its lease expires in); one delete and one put when an
/// extension crosses into the next step — once a step.
fn index_wru_per_heartbeat(lease_secs: f64) -> f64 {
    2.0 * (lease_secs / 3.0) / (RUNNING_KEY_STEP_MS as f64 / 1000.0)
}

/// One-shots, created one by one and in a batch, ahead of their time and due at once, then a
/// recurring job's runs. A batch's one-shot must cost less than one created alone (its call is
/// shared; its job's put, in the batch's transaction, is billed twice), and so must one due at
/// once (its job written with its firing). A recurring job's run pays for neither a create
/// nor an API call: the target set for it is to cost less than a silent one-shot run without
/// its API call (measured just before), its overlap check (`forbid`) included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_one_shot_and_recurring_run_are_counted_and_priced() {
    measure(
        "one-shot runs printing a line",
        sh("echo run $SKED_RUN_ID"),
        true,
        Created::OneByOne,
    )
    .await;
    let one_shot = measure("silent one-shot runs", sh(":"), false, Created::OneByOne).await;
    // Their jobs created together: the calls shared, each job's put in the batch's
    // transaction (billed twice). Cheaper all the same.
    let batched = measure(
        &format!("silent one-shot runs created {RUNS} a call"),
        sh(":"),
        false,
        Created::InOneBatch,
    )
    .await;
    assert!(
        batched.dollars < one_shot.dollars,
        "created in a batch ${:.2} per million, one by one ${:.2}",
        batched.dollars,
        one_shot.dollars
    );
    // Due at once: each create writes its job with its first firing (one transaction) and
    // sends the run itself; the sweeper fires nothing.
    let at_once = measure("silent one-shot runs due at once", sh(":"), false, Created::DueAtOnce).await;
    assert!(
        at_once.dollars < one_shot.dollars,
        "due at once ${:.2} per million, created ahead ${:.2}",
        at_once.dollars,
        one_shot.dollars
    );
    // Due at once and created together: the batch's firings are written together and their
    // runs sent in shared batches.
    measure(
        &format!("silent one-shot runs due at once, created {RUNS} a call"),
        sh(":"),
        false,
        Created::InOneBatchDueAtOnce,
    )
    .await;
    let recurring = measure_recurring(Store::WritesEveryFiring).await;
    let target = one_shot.dollars - one_shot.api_dollars;
    assert!(
        recurring.dollars < target,
        "a recurring run costs ${:.2} per million, a one-shot's without its create ${target:.2}",
        recurring.dollars
    );
    let recurring_lean = measure_recurring(Store::Lean).await;
    assert!(
        recurring_lean.dollars < recurring.dollars,
        "a recurring run on the lean store ${:.2} per million, on the default ${:.2}",
        recurring_lean.dollars,
        recurring.dollars
    );
}

/// Silent one-shots created one by one, on the lean store ([`Store::Lean`],
/// `docs/lean-layout.md`): the sweep writes nothing, the claim puts the run (built from its
/// job, read before and after the put, in batches) with no `live` entry, and its end writes
/// no index, and its job is keyed in its tenant's shards (no `list` entry). Measured against
/// the same one-shots on the store that writes every firing; must cost less, within the same
/// bounds (8 requests a run, no query by the worker: its runs are marked lone by the claim),
/// and at most issue 15's $5.00 a million behind a function URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_one_shot_on_the_lean_store_are_counted_and_priced() {
    let written = measure("silent one-shot runs", sh(":"), false, Created::OneByOne).await;
    let unwritten = measure_on(
        Store::Lean,
        "silent one-shot runs, lean store",
        sh(":"),
        false,
        Created::OneByOne,
    )
    .await;
    assert!(
        unwritten.dollars < written.dollars,
        "lean ${:.2} per million, written ${:.2}",
        unwritten.dollars,
        written.dollars
    );
    let behind_a_function_url = unwritten.dollars - unwritten.http_api_dollars;
    assert!(
        behind_a_function_url <= LEAN_BEHIND_A_FUNCTION_URL_AT_MOST,
        "lean behind a function URL ${behind_a_function_url:.2} per million"
    );
    // Logs included: a run that prints a line keeps it in its run's item.
    let printing = measure_on(
        Store::Lean,
        "one-shot runs printing a line, lean store",
        sh("echo run $SKED_RUN_ID"),
        true,
        Created::OneByOne,
    )
    .await;
    let printing_behind_a_function_url = printing.dollars - printing.http_api_dollars;
    assert!(
        printing_behind_a_function_url <= LEAN_BEHIND_A_FUNCTION_URL_AT_MOST,
        "lean, printing a line, behind a function URL ${printing_behind_a_function_url:.2} per million"
    );
}

/// The runs a sweep fires for the next 10 s of a silent per-second cron (default policies:
/// `forbid`), what they cost once run on `store`.
async fn measure_recurring(store: Store) -> Spent {
    let counter = RequestCounter::new();
    let mut config = with_logs(fresh_config());
    config.request_counter = Some(counter.clone());
    store.configure(&mut config);
    let aws = Deployment::start(config, Dur::ZERO, Dur::secs(10)).await;
    aws.api
        .create_job(json!({"id": "every-second", "schedule": {"cron": "*/1 * * * * *"}, "task": sh(":")}))
        .await;
    counter.reset(); // a job's create is paid once for all its runs
    let fired = aws.sweep().await.fired;
    assert!(fired >= 9, "{fired} runs fired for 10 s");
    run_until_succeeded(&aws, fired, Dur::secs(15)).await;
    let recurring = Spent::of(&counter, fired, Created::Before { runs_per_firing: fired }, store);
    let on = match store {
        Store::WritesEveryFiring => "",
        Store::Lean => ", lean store",
    };
    recurring.print(&format!(
        "{fired} runs of a per-second cron{on} (no create, no API call)"
    ));
    recurring
}

/// What a running minute costs in heartbeats, measured: in one deployment, a silent run of no
/// time and then one of 5 s, each alone with a 3 s lease (a heartbeat a second), the worker's
/// requests counted for each; the difference is the heartbeats' (each also extends the
/// message: `ChangeMessageVisibility`, one per heartbeat). Then per minute at `sked worker`'s
/// default lease (15 s: 12 heartbeats a minute) and at `--lease 60s` (3 a minute; a lost
/// attempt is then found within 60 s instead of 15), and an hour-long attempt on the
/// template's worker settings (15 s for its first 5 minutes, then `--long-lease 60`). Targets
/// set: $15, $4 and $5 per million run-minutes — a heartbeat is one write of the run (1 WRU)
/// and one SQS request, its index writes once per 5-minute step (`live`), so $1.03 a million
/// and a fifth above for slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_minute_of_heartbeats_is_counted_and_priced() {
    let counter = RequestCounter::new();
    let mut config = with_logs(fresh_config());
    config.request_counter = Some(counter.clone());
    let aws = Deployment::start(config, Dur::ZERO, Dur::secs(600)).await;
    let mut spent = Vec::new();
    for (n, script) in [(1, ":"), (2, "sleep 5")] {
        aws.api
            .create_job(json!({"id": format!("run-{n}"), "schedule": {"at": iso(in_secs(2.0))}, "task": sh(script)}))
            .await;
        assert_eq!(aws.sweep().await.fired, 1);
        counter.reset(); // the worker's requests only
        run_until_succeeded(&aws, n, Dur::secs(3)).await;
        spent.push((
            Spent::of(
                &counter,
                1,
                Created::Before { runs_per_firing: 1 },
                Store::WritesEveryFiring,
            ),
            counter.of("SQS", "ChangeMessageVisibility"),
        ));
    }
    let [(short, short_beats), (long, heartbeats)] = [&spent[0], &spent[1]];
    assert_eq!(*short_beats, 0, "a run of no time has no heartbeat");
    assert!(
        (3..=6).contains(heartbeats),
        "{heartbeats} heartbeats in 5 s with a 3 s lease"
    );
    let beats = *heartbeats as f64;
    let requests = (long.requests_without_receives - short.requests_without_receives) / beats;
    let table_wru = (long.wru - short.wru) / beats;
    let rru = (long.rru - short.rru) / beats;
    // The worker's store keeps the run as its last heartbeat wrote it: the next one starts
    // from that copy instead of reading the item (its write is conditional on the copy's
    // version).
    assert!(rru < 0.5, "a heartbeat reads the run again: {rru:.1} RRU each");
    let per_heartbeat = (long.dollars_without_receives() - short.dollars_without_receives()) / beats;
    eprintln!(
        "a heartbeat: {requests:.1} requests, {table_wru:.1} table WRU, {rru:.1} RRU: ${per_heartbeat:.2} per million, plus its index writes"
    );
    let per_run_minute = |lease: f64| {
        let per_minute = 60.0 / (lease / 3.0);
        let index_wru = index_wru_per_heartbeat(lease);
        let dollars = (per_heartbeat + index_wru * price::DYNAMODB_WRU * 1e6) * per_minute;
        eprintln!(
            "a running minute with a {lease} s lease: {per_minute} heartbeats, {index_wru:.3} index WRU each, ${dollars:.2} per million run-minutes"
        );
        dollars
    };
    let (short, long) = (per_run_minute(15.0), per_run_minute(60.0));
    // The template's workers: the 15 s lease for an attempt's first 5 minutes, then the 60 s
    // long lease (`--long-lease 60`). An hour-long attempt, averaged over its minutes.
    let hour = (5.0 * short + 55.0 * long) / 60.0;
    eprintln!(
        "an hour-long attempt on the 15 s lease, then the 60 s long lease from 5 minutes: ${hour:.2} per million run-minutes"
    );
    for (what, dollars, target) in [
        ("a 15 s lease", short, 15.0),
        ("a 60 s lease", long, 4.0),
        ("an hour on the template's leases", hour, 5.0),
    ] {
        assert!(
            dollars <= target,
            "${dollars:.2} per million run-minutes with {what} (target ${target})"
        );
    }
}

/// Counts per phase: what a create, a sweep and the worker spent.
struct Phases {
    after_create: BTreeMap<(String, String), u64>,
    units_created: Capacity,
    after_sweep: BTreeMap<(String, String), u64>,
    units_swept: Capacity,
}

/// Starts a worker on `aws` (the core `Worker` in-process, the local executor, `lease`) and
/// waits until `runs` runs succeeded, then stops it.
async fn run_until_succeeded(aws: &Deployment, runs: usize, lease: Dur) {
    let observer = {
        let mut plain = aws.settings.aws.clone();
        plain.request_counter = None;
        let clients = sked_aws::connect(&plain).await;
        sked_aws::ports(&clients, &plain, Arc::new(SystemClock))
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let executor: Arc<dyn Executor> = Arc::new(TaskExecutor::new(clock));
    let mut worker_config = WorkerConfig::new(WorkerId("requests-worker".into()));
    worker_config.fired_ahead = true;
    worker_config.lease = lease;
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
        let found = observer.store.list_runs(&tenant, &succeeded, &page).await.ok()?;
        (found.items.len() == runs).then_some(())
    })
    .await;
    shutdown.cancel();
    worker.await.expect("the worker stops");
}

/// Runs [`RUNS`] one-shots of `task` end to end and prints what they cost as `what`; `prints`:
/// whether the payload writes a log line.
async fn measure(what: &str, task: serde_json::Value, prints: bool, created: Created) -> Spent {
    measure_on(Store::WritesEveryFiring, what, task, prints, created).await
}

/// Which DynamoDB store the measured deployment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    /// Every firing written (the default).
    WritesEveryFiring,
    /// The lean configuration: one-shots' plain firings left unwritten
    /// (`AwsConfig::unwritten_one_shots`), and no run's state projected in the `list` index
    /// for a run that succeeded (`RunListedState::Unsuccessful`).
    Lean,
}

impl Store {
    /// Sets `config` up as this store.
    fn configure(self, config: &mut AwsConfig) {
        if self == Store::Lean {
            config.unwritten_one_shots = true;
            config.run_listed_state = sked_aws::RunListedState::Unsuccessful;
            config.job_keys = sked_aws::JobKeys::TenantShards;
        }
    }
}

/// [`measure`] on `store`.
async fn measure_on(store: Store, what: &str, task: serde_json::Value, prints: bool, created: Created) -> Spent {
    let counter = RequestCounter::new();
    let mut config = with_logs(fresh_config());
    config.request_counter = Some(counter.clone());
    store.configure(&mut config);
    // Created ahead of time, the jobs are fired by the sweeper; due at once, by their create
    // (the API function's direct firing).
    let api_lookahead = match created {
        Created::DueAtOnce | Created::InOneBatchDueAtOnce => Dur::secs(600),
        _ => Dur::ZERO,
    };
    let aws = Deployment::start(config, api_lookahead, Dur::secs(600)).await;
    counter.reset(); // the resources' creation is not a run's

    let due = in_secs(3.0);
    let jobs = (0..RUNS).map(|i| json!({"id": format!("once-{i}"), "schedule": {"at": iso(due)}, "task": task}));
    match created {
        Created::OneByOne | Created::DueAtOnce => {
            for job in jobs {
                aws.api.create_job(job).await;
            }
        }
        Created::InOneBatch | Created::InOneBatchDueAtOnce => {
            let batch = json!({"jobs": jobs.collect::<Vec<_>>()});
            let (status, body) = aws.api.post("/v1/jobs:batch", &batch).await;
            assert_eq!(status, 201, "{body}");
        }
        Created::Before { .. } => unreachable!("one-shots are created here"),
    }
    let after_create = counter.snapshot();
    let units_created = counter.dynamodb_capacity();
    let outcome = aws.sweep().await;
    let swept = match created {
        Created::DueAtOnce | Created::InOneBatchDueAtOnce => 0,
        _ => RUNS,
    };
    assert_eq!(outcome.fired, swept, "{outcome:?}");
    let phases = Phases {
        after_create,
        units_created,
        after_sweep: counter.snapshot(),
        units_swept: counter.dynamodb_capacity(),
    };
    run_until_succeeded(&aws, RUNS, WorkerConfig::new(WorkerId("defaults".into())).lease).await;
    print_phases(&counter, &phases, what);
    check_counts(&counter, &phases, created, store);
    let spent = Spent::of(&counter, RUNS, created, store);
    // (Counted, if anything: read after the figures are taken.)
    let queues = &aws.settings.aws.queues;
    for url in [&queues.high, &queues.normal, &queues.low] {
        assert_eq!(aws.messages_on(url).await, 0, "every message deleted: {url}");
    }
    // What each run printed is kept (its finished log), though no stream was made.
    for i in 0..RUNS {
        let run = &aws.observer.runs_of(&format!("once-{i}")).await[0];
        let run_id = run["run_id"].as_str().expect("a run id");
        let lines = aws.observer.log_lines(run_id, "").await;
        let printed = if prints { vec![format!("run {run_id}")] } else { vec![] };
        assert_eq!(lines, printed, "{run}");
    }
    spent.print(what);
    spent
}

/// Prints the requests per service and operation, per phase and per run.
fn print_phases(counter: &RequestCounter, phases: &Phases, what: &str) {
    let total = counter.snapshot();
    let Phases {
        after_create,
        units_created,
        after_sweep,
        units_swept,
    } = phases;
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
        phase(&none, after_create),
        phase(after_create, after_sweep),
        phase(after_sweep, &total),
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
    type Units = fn(&Capacity) -> f64;
    let rows: [(&str, Units); 2] = [("table WRU", |c| c.write_units), ("table RRU", |c| c.read_units)];
    for (what, of) in rows {
        eprintln!(
            "{:<16} {:<28} {:>7.1} {:>7.1} {:>7.1} {:>9.2}",
            "DynamoDB",
            what,
            per(of(units_created)),
            per(of(units_swept) - of(units_created)),
            per(of(&units) - of(units_swept)),
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
}

/// Sanity of [`RUNS`] one-shots' counts: every step of a run made its calls, and a run costs
/// a bounded number.
fn check_counts(counter: &RequestCounter, phases: &Phases, created: Created, store: Store) {
    let total = counter.snapshot();
    let all: u64 = total.values().sum();
    let receives = counter.of("SQS", "ReceiveMessage");
    let per_run = |service: &str, op: &str| counter.of(service, op) as f64 / RUNS as f64;
    // The sweep's firings of one tenant that cancel nothing share transactions of up to 100
    // items (`fire_together`): 20 one-shots, one.
    let transactions = |at: &BTreeMap<(String, String), u64>| {
        let op = ("DynamoDB".to_string(), "TransactWriteItems".to_string());
        at.get(&op).copied().unwrap_or(0)
    };
    let sends = counter.of("SQS", "SendMessageBatch");
    if created == Created::DueAtOnce {
        // Each create is one transaction, its job and its run, and sends its run.
        assert_eq!(
            transactions(&phases.after_create),
            RUNS as u64,
            "a create and its firing in one transaction: {total:?}"
        );
        assert_eq!(
            transactions(&phases.after_sweep),
            RUNS as u64,
            "the sweep fired nothing: {total:?}"
        );
        assert_eq!(sends, RUNS as u64, "{total:?}");
    } else {
        // Created ahead, the sweep's firings go in one transaction; created due at once in
        // one batch, the call's: after the batch's own.
        let (fired_by, ahead) = match created {
            Created::InOneBatchDueAtOnce => (&phases.after_create, 1),
            _ => (&phases.after_sweep, transactions(&phases.after_create)),
        };
        // Left unwritten, a one-shot's firing writes nothing.
        let firing_transactions = match store {
            Store::WritesEveryFiring => 1,
            Store::Lean => 0,
        };
        assert_eq!(
            transactions(fired_by) - ahead,
            firing_transactions,
            "the firings in one transaction: {total:?}"
        );
        assert_eq!(transactions(&phases.after_sweep), transactions(fired_by), "{total:?}");
        assert!(sends >= 1, "{total:?}");
        assert!(sends <= RUNS.div_ceil(10) as u64 + 1, "sends are batched: {total:?}");
    }
    assert!(receives >= 1, "{total:?}");
    // Every message is deleted (the queues are found empty after the runs), each in a
    // `DeleteMessage` of its own or a share of a `DeleteMessageBatch` of up to 10.
    let deletes = counter.of("SQS", "DeleteMessage") + counter.of("SQS", "DeleteMessageBatch");
    assert!(
        (RUNS.div_ceil(10) as u64..=RUNS as u64).contains(&deletes),
        "{deletes} delete requests for {RUNS} runs: {total:?}"
    );
    // A small finished log is a table item, never an S3 object; a silent attempt has no
    // log at all, not even a stream.
    assert_eq!(
        counter.of("S3", "PutObject"),
        0,
        "no S3 object for a log of one line: {total:?}"
    );
    // No live stream either: these attempts end well within `stream_after` (1 s), and an
    // attempt's lines go to CloudWatch only once it has run that long.
    assert_eq!(
        counter.of("CloudWatch Logs", "CreateLogStream") + counter.of("CloudWatch Logs", "PutLogEvents"),
        0,
        "no stream for an attempt that ended within stream_after: {total:?}"
    );

    // Puts: the create, the claim and the completion (and the sweep's watermark): a log of
    // one line rides in the write that ends its run (`FoldedLogs`), no item of its own.
    assert!(
        per_run("DynamoDB", "PutItem") <= 3.1,
        "a put per run besides create, claim and completion: {total:?}"
    );
    // A lone run's end reads no edges (no job names these): the worker makes no query.
    let query = ("DynamoDB".to_string(), "Query".to_string());
    let swept = phases.after_sweep.get(&query).copied().unwrap_or(0);
    assert_eq!(counter.of("DynamoDB", "Query"), swept, "the worker queried: {total:?}");
    // The bound, receives included at this test's idle level: 7.45–7.60 measured on
    // 2026-12-04 (9.45–9.55 before firings went together and lone runs stopped reading their
    // edges; 13.85 on 2026-12-03 morning). A live stream for each short attempt (+2), a
    // transaction per firing (+0.95) or an edge query per run (+1) goes over. (Each step has a
    // test of its own: `aws_logs`, `dynamo_store`, `folded_logs`, `lone_runs`.)
    // (Not of a run due at once: its create sends it alone, where a sweep's sends share
    // batches of ten — 0.9 requests a run more, printed with the rest.)
    if created != Created::DueAtOnce {
        assert!(
            all as f64 / RUNS as f64 <= 8.0,
            "more than 8 requests per run, receives included: {total:?}"
        );
    }
}

/// How the measured runs' jobs were created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Created {
    /// Each by its own `POST /v1/jobs`.
    OneByOne,
    /// Each by its own `POST /v1/jobs`, due within the API's direct firing: the create fires
    /// it.
    DueAtOnce,
    /// All in one `POST /v1/jobs:batch`, due within the API's direct firing: the call fires
    /// them.
    InOneBatchDueAtOnce,
    /// All in one `POST /v1/jobs:batch`.
    InOneBatch,
    /// Not at all: runs of a recurring job created before, this many by each firing.
    Before { runs_per_firing: usize },
}

/// What `runs` runs spent, per run, priced.
struct Spent {
    /// Priced lines: what, amount, dollars per run.
    lines: Vec<(&'static str, String, f64)>,
    /// Dollars per million runs.
    dollars: f64,
    /// Of which the API call and its Lambda invocation (a create).
    api_dollars: f64,
    /// Of which API Gateway's charge for the call (none behind a function URL).
    http_api_dollars: f64,
    /// Requests per run, receives left out (their count follows idle time).
    requests_without_receives: f64,
    /// Receives per run.
    receives: f64,
    /// DynamoDB units per run (WRU with the index writes of a one-shot when `created`).
    wru: f64,
    rru: f64,
}

impl Spent {
    /// From `counter`'s figures for `runs` runs whose jobs were `created` so.
    fn of(counter: &RequestCounter, runs: usize, created: Created, store: Store) -> Spent {
        let total = counter.snapshot();
        let per = |n: f64| n / runs as f64;
        let capacity = counter.dynamodb_capacity();
        let index_wru = match created {
            Created::OneByOne if store == Store::Lean => INDEX_WRU_PER_ONE_SHOT_ON_THE_LEAN_STORE,
            Created::OneByOne | Created::InOneBatch | Created::InOneBatchDueAtOnce => INDEX_WRU_PER_ONE_SHOT,
            Created::DueAtOnce => INDEX_WRU_PER_ONE_SHOT_CREATED_FIRED,
            Created::Before { runs_per_firing } => {
                let run = match store {
                    Store::WritesEveryFiring => INDEX_WRU_OF_A_RECURRING_RUN,
                    Store::Lean => INDEX_WRU_OF_A_RECURRING_RUN_ON_THE_LEAN_STORE,
                };
                run + INDEX_WRU_OF_A_RECURRING_FIRING / runs_per_firing.max(1) as f64
            }
        };
        let table_wru = per(capacity.write_units);
        let wru = table_wru + index_wru;
        let rru = per(capacity.read_units);
        let sqs_requests: u64 = total.iter().filter(|((s, _), _)| s == "SQS").map(|(_, n)| n).sum();
        let sqs = per(sqs_requests as f64);
        let s3_put = per(counter.of("S3", "PutObject") as f64);
        let s3_get = per(counter.of("S3", "GetObject") as f64);
        // A batch of a printing run's live log is one short line: well under 1 KB with the
        // event's overhead.
        let cwl_gb = per(counter.of("CloudWatch Logs", "PutLogEvents") as f64) * 1024.0 / 1e9;
        let calls = match created {
            Created::OneByOne | Created::DueAtOnce => 1.0,
            Created::InOneBatch | Created::InOneBatchDueAtOnce => per(1.0),
            Created::Before { .. } => 0.0,
        };
        let api = calls * (price::HTTP_API_REQUEST + price::LAMBDA_REQUEST + API_SECONDS * API_GB * price::LAMBDA_GB_S);
        let lines = vec![
            (
                "DynamoDB writes",
                format!("{wru:.1} WRU (table {table_wru:.1} + index {index_wru:.1})"),
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
                format!("~{:.1} KB ingested", cwl_gb * 1e9 / 1024.0),
                cwl_gb * price::CWL_INGEST_GB,
            ),
            (
                "API (create)",
                match created {
                    Created::Before { .. } => "none".to_string(),
                    _ => format!("{calls:.2} × (HTTP API request + Lambda invocation × {API_SECONDS} s × {API_GB} GB)"),
                },
                api,
            ),
        ];
        let million = 1e6;
        let all: u64 = total.values().sum();
        let receives = counter.of("SQS", "ReceiveMessage");
        Spent {
            dollars: lines.iter().map(|l| l.2).sum::<f64>() * million,
            api_dollars: api * million,
            http_api_dollars: calls * price::HTTP_API_REQUEST * million,
            lines,
            requests_without_receives: per((all - receives) as f64),
            receives: per(receives as f64),
            wru,
            rru,
        }
    }

    /// Dollars per million runs, receives left out.
    fn dollars_without_receives(&self) -> f64 {
        self.dollars - self.receives * price::SQS_REQUEST * 1e6
    }

    /// Prints the cost per million runs, `what` naming them.
    fn print(&self, what: &str) {
        eprintln!("cost per million {what} (us-east-1 list prices, 2025):");
        for (item, amount, dollars) in &self.lines {
            eprintln!("  {item:<16} {amount:<60} ${:>7.2}", dollars * 1e6);
        }
        eprintln!("  total ${:.2} per million {what}", self.dollars);
        if self.http_api_dollars > 0.0 {
            eprintln!(
                "  (${:.2} behind a function URL, ApiFront FunctionUrl: no HTTP API request)",
                self.dollars - self.http_api_dollars
            );
        }
        assert!(self.dollars > 0.0 && self.wru > 0.0 && self.rru > 0.0);
    }
}
