//! End to end on moto (feature `aws`): sked's AWS deployment — the API function's router
//! and the sweeper function's handler in-process, real `sked worker --backend aws`
//! processes — against a real moto server.
//!
//! - a one-shot and a cron job created through the API are fired by the sweeper onto the
//!   queue of their priority, a worker receives them from that queue and runs them to
//!   SUCCEEDED, and their logs are read back from S3 (through the API and as the object);
//! - `kill -9` of a worker mid-payload: its payload and the payload's child die with it,
//!   and after the lease another worker runs attempt 2 to success;
//! - two sweeper invocations at once create each run once, with a worker running;
//! - a `container` task goes to ECS through RunTask and is stopped by StopTask when its
//!   timeout passes; the run ends TIMED_OUT;
//! - a two-job chain: the worker's completion of the upstream run writes the downstream's run
//!   at the same nominal time and sends its message, and the worker runs it; the ledger of
//!   each shows its occurrence fired;
//! - a failed run's alert: the worker posts it to a receiver on 127.0.0.1, signed with the
//!   tenant's secret kept in DynamoDB, and the run read through the API shows the try.
//! - runs fired ahead: those of a job paused after the sweep are skipped at their claim, and
//!   those at times a schedule change dropped end at the change.
//!
//! Each test prints the start lag (attempt start − scheduled time) of its runs as
//! `e2e-start-lag` lines.

#![cfg(feature = "aws")]

mod common;

use axum::http::StatusCode;
use common::aws::Deployment;
use common::webhook::{WebhookReceiver, header, wait_delivered};
use common::*;
use serde_json::{Value, json};
use sked_aws::testing::{MotoServer, freeze_ecs_tasks, fresh_config, fresh_ecs_on, with_logs};
use sked_core::alert::{self, WebhookSecret};
use sked_core::duration::Dur;
use sked_core::ids::TenantId;
use std::collections::BTreeSet;
use std::time::Duration;

/// The template's look-ahead.
const LOOKAHEAD: Dur = Dur::secs(600);

/// Every run of `job`, once each has ended (`count` of them expected).
async fn ended_runs(api: &Api, job: &str, count: usize, timeout: Duration) -> Vec<Value> {
    wait_until(&format!("{count} ended runs of {job}"), timeout, async || {
        let runs = api.runs_of(job).await;
        (runs.len() >= count && runs.iter().all(is_terminal)).then_some(runs)
    })
    .await
}

/// The nominal times `preview` lists for `job`.
async fn preview(api: &Api, job: &str) -> BTreeSet<String> {
    let body = api.get_ok(&format!("/v1/jobs/{job}/preview?count=100")).await;
    items(&body)
        .iter()
        .map(|t| {
            iso(chrono::DateTime::parse_from_rfc3339(t.as_str().unwrap())
                .unwrap()
                .into())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_created_through_the_api_are_swept_onto_their_priority_queue_run_by_a_worker_and_logged_to_s3() {
    // The API fires nothing itself here (look-ahead 0), so the runs are the sweeper's.
    let aws = Deployment::start(with_logs(fresh_config()), Dur::ZERO, LOOKAHEAD).await;
    let api = &aws.api;
    let queues = aws.settings.aws.queues.clone();

    let at = in_secs(4.0);
    api.create_job(json!({
        "id": "once", "schedule": {"at": iso(at)}, "priority": 8,
        "task": sh("echo hello from once; echo to stderr >&2"),
    }))
    .await;
    // Every other second over a 5-second window: two or three occurrences.
    api.create_job(json!({
        "id": "every2s", "schedule": {"cron": "*/2 * * * * *", "timezone": "UTC"}, "priority": 1,
        "start_at": iso(in_secs(4.0)), "end_at": iso(in_secs(9.0)),
        "task": sh("echo tick $SKED_RUN_ID"),
    }))
    .await;
    let cron_times = preview(api, "every2s").await;
    assert!((2..=3).contains(&cron_times.len()), "{cron_times:?}");
    assert!(
        api.runs_of("once").await.is_empty(),
        "the API fired the one-shot itself"
    );

    let outcome = aws.sweep().await;
    assert_eq!(outcome.fired, 1 + cron_times.len(), "{outcome:?}");
    // The messages wait (DelaySeconds) on the queue of their priority.
    assert_eq!(aws.messages_on(&queues.high).await, 1);
    assert_eq!(aws.messages_on(&queues.normal).await, 0);
    assert_eq!(aws.messages_on(&queues.low).await, cron_times.len() as u64);

    let _worker = aws.worker(&["--workers", "2"]);
    let once = ended_runs(api, "once", 1, Duration::from_secs(60)).await;
    let crons = ended_runs(api, "every2s", cron_times.len(), Duration::from_secs(60)).await;
    let scheduled: BTreeSet<String> = crons.iter().map(|r| iso(time(r, "scheduled_for"))).collect();
    assert_eq!(scheduled, cron_times, "one run per occurrence");

    let received = aws.received();
    for (run, queue) in once.iter().map(|r| (r, "high")).chain(crons.iter().map(|r| (r, "low"))) {
        let run_id = run["run_id"].as_str().unwrap();
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        assert_eq!(run["attempts"].as_array().unwrap().len(), 1, "{run}");
        let from: Vec<&str> = received
            .iter()
            .filter(|(_, r)| r == run_id)
            .map(|(q, _)| q.as_str())
            .collect();
        assert_eq!(from, vec![queue], "queues {run_id} was received from");
        report_lag("aws_e2e_sweep", run);
    }
    // Done messages are deleted.
    for url in [&queues.high, &queues.normal, &queues.low] {
        assert_eq!(aws.messages_on(url).await, 0, "{url}");
    }

    // Logs: through the API (an ended attempt's small log is read from its run's item, where
    // the completion that ended the run wrote it) and the item; no item of its own, no S3
    // object.
    let once_id = once[0]["run_id"].as_str().unwrap();
    let lines = api.log_lines(once_id, "attempt=1").await;
    assert!(lines.iter().any(|l| l == "hello from once"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "to stderr"), "{lines:?}");
    let item = |key| async {
        aws.clients
            .dynamodb
            .get_item()
            .table_name(&aws.settings.aws.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
    };
    let run_key = sked_aws::dynamo::codec::run_key(&"default".into(), &once_id.into()).unwrap();
    let run_item = item(run_key).await.unwrap_or_else(|| panic!("the item of {once_id}"));
    let text = run_item["logs"].as_m().unwrap()["1"].as_s().unwrap();
    assert!(text.contains("hello from once"), "{text}");
    let log_key = sked_aws::dynamo::codec::key(format!("T#default#LOG#{once_id}"), "ATTEMPT#1".into());
    assert!(item(log_key).await.is_none(), "the log rides in the run's item");
    let logs = aws.settings.aws.logs.clone().unwrap();
    let key = sked_aws::logs::object_key(&sked_core::ports::LogKey {
        tenant: "default".into(),
        run_id: once_id.into(),
        attempt: 1,
    });
    let object = aws.clients.s3.head_object().bucket(&logs.bucket).key(&key).send().await;
    assert!(object.is_err(), "a small log has no S3 object: {key}");
    for run in &crons {
        let run_id = run["run_id"].as_str().unwrap();
        let lines = api.log_lines(run_id, "attempt=1").await;
        assert_eq!(lines, vec![format!("tick {run_id}")]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_s_run_is_retried_by_another_worker_after_the_lease() {
    let aws = Deployment::start(with_logs(fresh_config()), LOOKAHEAD, LOOKAHEAD).await;
    let api = &aws.api;
    let mut first = aws.worker(&["--workers", "1"]);

    let pids = aws.path().join("pids");
    // Due now: the API call fires it onto the queue itself.
    api.create_job(json!({
        "id": "long", "schedule": {"at": iso(in_secs(0.0))}, "task": killable_payload(&pids),
        "max_retries": 2, "backoff": {"initial": "1s", "max": "1s"},
    }))
    .await;
    let run = wait_first_run(api, "long", Duration::from_secs(10)).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let payload = attempt_one_pids(&pids, Duration::from_secs(30)).await;
    assert_eq!(api.run(&run_id).await["state"], "RUNNING");

    first.kill9();
    wait_payload_gone(payload).await;

    // The message comes back when its visibility (the lease) runs out; the second worker
    // claims the run over the expired lease.
    let _second = aws.worker(&["--workers", "1"]);
    let run = wait_terminal(api, &run_id, Duration::from_secs(60)).await;
    assert_retried_after_worker_loss(api, &run).await;
    let attempts = run["attempts"].as_array().unwrap();
    report_lag("aws_e2e_worker_kill", &run);
    eprintln!(
        "aws e2e: attempt 2 started {} ms after attempt 1 was closed as worker_lost",
        (time(&attempts[1], "started_at") - time(&attempts[0], "finished_at")).num_milliseconds()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sweeper_invocations_at_once_create_each_run_once() {
    let aws = Deployment::start(with_logs(fresh_config()), Dur::ZERO, LOOKAHEAD).await;
    let api = &aws.api;
    let _worker = aws.worker(&["--workers", "2", "--concurrency", "4"]);

    const ONE_SHOTS: usize = 12;
    for i in 0..ONE_SHOTS {
        api.create_job(json!({
            "id": format!("once-{i}"), "schedule": {"at": iso(in_secs(3.0 + i as f64 * 0.1))},
            "priority": (i % 10), "task": sh(":"),
        }))
        .await;
    }
    api.create_job(json!({
        "id": "cron", "schedule": {"cron": "* * * * * *", "timezone": "UTC"},
        "start_at": iso(in_secs(3.0)), "end_at": iso(in_secs(6.5)),
        "misfire": "fire_all", "overlap": "allow", "task": sh(":"),
    }))
    .await;
    let cron_times = preview(api, "cron").await;
    let expected = ONE_SHOTS + cron_times.len();

    // First two ticks past their deadlines, whose sweep leases have expired: both sweep the same due jobs
    // at the same time and only the conditional writes keep each run single; then two
    // rounds of two ordinary concurrent ticks (the lease lets one of them sweep).
    let now_ms = chrono::Utc::now().timestamp_millis() as u64;
    let (a, b) = tokio::join!(aws.sweep_until(now_ms - 1000), aws.sweep_until(now_ms - 1000));
    eprintln!("aws e2e: concurrent ticks with expired leases: {a:?} / {b:?}");
    assert!(!a.lease_held_elsewhere && !b.lease_held_elsewhere, "both ticks swept");
    let mut fired = a.fired + b.fired;
    for round in 1..3 {
        let (a, b) = tokio::join!(aws.sweep(), aws.sweep());
        eprintln!("aws e2e: concurrent ticks, round {round}: {a:?} / {b:?}");
        assert_eq!(
            [a.lease_held_elsewhere, b.lease_held_elsewhere]
                .iter()
                .filter(|held| **held)
                .count(),
            1,
            "the lease lets one tick of a pair sweep"
        );
        fired += a.fired + b.fired;
    }
    assert_eq!(fired, expected, "runs reported fired by the ticks");

    for i in 0..ONE_SHOTS {
        let runs = ended_runs(api, &format!("once-{i}"), 1, Duration::from_secs(60)).await;
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0]["state"], "SUCCEEDED", "{runs:?}");
        assert_eq!(runs[0]["attempts"].as_array().unwrap().len(), 1, "{runs:?}");
        report_lag("aws_e2e_concurrent_sweeps", &runs[0]);
    }
    let crons = ended_runs(api, "cron", cron_times.len(), Duration::from_secs(60)).await;
    let scheduled: Vec<String> = crons.iter().map(|r| iso(time(r, "scheduled_for"))).collect();
    let distinct: BTreeSet<String> = scheduled.iter().cloned().collect();
    assert_eq!(
        scheduled.len(),
        distinct.len(),
        "two runs of one occurrence: {scheduled:?}"
    );
    assert_eq!(distinct, cron_times);
    for run in &crons {
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        assert_eq!(run["attempts"].as_array().unwrap().len(), 1, "{run}");
        report_lag("aws_e2e_concurrent_sweeps", run);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_task_runs_on_ecs_and_is_stopped_by_stop_task_at_its_timeout() {
    // A moto server of the test's own, its ECS tasks frozen RUNNING until stopped.
    let server = MotoServer::start();
    freeze_ecs_tasks(&server);
    let (_, config) = fresh_ecs_on(&server).await;
    let ecs = config.ecs.clone().unwrap();
    let aws = Deployment::start(config, LOOKAHEAD, LOOKAHEAD).await;
    let api = &aws.api;
    let _worker = aws.worker(&["--workers", "1"]);

    api.create_job(json!({
        "id": "boxed", "schedule": {"at": iso(in_secs(0.0))},
        "task": {"container": {"image": ecs.bootstrap_image, "command": ["sleep", "600"]}},
        "timeout": "3s", "on_timeout": "fail", "max_retries": 0,
    }))
    .await;
    let run = ended_runs(api, "boxed", 1, Duration::from_secs(60)).await.remove(0);
    assert_eq!(run["state"], "TIMED_OUT", "{run}");
    let attempts = run["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{run}");
    assert_eq!(attempts[0]["outcome"], "timed_out", "{run}");
    report_lag("aws_e2e_container", &run);

    // The executor's first line names the task it started; ECS has it STOPPED by sked.
    let run_id = run["run_id"].as_str().unwrap();
    let lines = api.log_lines(run_id, "attempt=1").await;
    let arn = lines
        .iter()
        .find_map(|l| l.strip_prefix("[sked] ECS task "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no task line in {lines:?}"))
        .to_string();
    let described = aws
        .clients
        .ecs
        .describe_tasks()
        .cluster(&ecs.cluster)
        .tasks(&arn)
        .send()
        .await
        .unwrap();
    let task = &described.tasks()[0];
    assert_eq!(task.last_status(), Some("STOPPED"), "{task:?}");
    let reason = task.stopped_reason().unwrap_or_default();
    assert!(
        reason.starts_with("sked: ") && reason.contains("timed out"),
        "{reason:?}"
    );
    let overrides = task.overrides().and_then(|o| o.container_overrides().first());
    assert_eq!(
        overrides.map(|o| o.command().to_vec()),
        Some(vec!["sleep".to_string(), "600".to_string()]),
        "{task:?}"
    );
}

/// The workers' metrics leave as CloudWatch embedded-metric-format lines on stdout (what the
/// `awslogs` driver ships to CloudWatch Logs): the run started and ended, with the local
/// families' names under the deployment and service dimensions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_writes_its_metrics_as_embedded_metric_format_lines() {
    let aws = Deployment::start(fresh_config(), Dur::ZERO, LOOKAHEAD).await;
    let api = &aws.api;
    api.create_job(json!({"id": "once", "schedule": {"at": iso(in_secs(1.0))}, "task": sh("true")}))
        .await;
    assert_eq!(aws.sweep().await.fired, 1);
    let mut worker = aws.worker_with(
        &["--workers", "1"],
        &[("SKED_METRICS_INTERVAL", "1"), ("SKED_DEPLOYMENT", "e2e")],
    );
    let run = &ended_runs(api, "once", 1, Duration::from_secs(60)).await[0];
    assert_eq!(run["state"], "SUCCEEDED", "{run}");

    let emf = |line: &str| {
        serde_json::from_str::<Value>(line)
            .ok()
            .filter(|doc| doc.get("_aws").is_some())
    };
    let started = worker.wait_for_stdout("EMF line with the run started", Duration::from_secs(30), |line| {
        emf(line).is_some_and(|doc| doc["sked_runs_started_total"] == 1)
    });
    let doc = emf(&started).unwrap();
    assert_eq!(
        (&doc["Deployment"], &doc["Service"]),
        (&json!("e2e"), &json!("sked-worker"))
    );
    let directive = &doc["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "sked");
    let declared: Vec<&str> = directive["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    assert!(declared.contains(&"sked_run_start_lag_seconds"), "{declared:?}");
    assert_eq!(doc["sked_workers"], 1);
    let lags = doc["sked_run_start_lag_seconds"].as_array().unwrap();
    assert_eq!(lags.len(), 1, "one run, one lag: {doc}");
    let finished = worker.wait_for_stdout("EMF line with the run succeeded", Duration::from_secs(30), |line| {
        emf(line).is_some_and(|doc| doc["outcome"] == "succeeded" && doc["sked_runs_finished_total"] == 1)
    });
    assert_eq!(
        emf(&finished).unwrap()["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        json!([["Deployment", "Service", "outcome"]])
    );
}

/// A two-job chain on the AWS deployment: `extract`'s run ends on the worker, and that
/// completion's transaction writes `load`'s run at the same nominal time, whose message the
/// worker sends and then receives; no sweep is needed for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_job_chain_runs_the_downstream_after_the_upstream_at_its_nominal_time() {
    let aws = Deployment::start(fresh_config(), Dur::ZERO, LOOKAHEAD).await;
    let api = &aws.api;
    api.create_job(json!({"id": "extract", "schedule": {"at": iso(in_secs(1.0))}, "task": sh("echo extracted")}))
        .await;
    let load = api
        .create_job(json!({"id": "load", "schedule": {"after": {"jobs": ["extract"]}}, "task": sh("echo loaded")}))
        .await;
    assert_eq!(load["state"], "ACTIVE", "{load}");
    assert_eq!(aws.sweep().await.fired, 1, "the sweeper fires extract only");
    let _worker = aws.worker(&["--workers", "2"]);
    let extract = &ended_runs(api, "extract", 1, Duration::from_secs(60)).await[0];
    let load = &ended_runs(api, "load", 1, Duration::from_secs(60)).await[0];
    assert_eq!(extract["state"], "SUCCEEDED", "{extract}");
    assert_eq!(load["state"], "SUCCEEDED", "{load}");
    assert_eq!(load["trigger"], "after", "{load}");
    assert_eq!(load["scheduled_for"], extract["scheduled_for"]);
    assert!(
        time(load, "started_at") >= time(extract, "finished_at"),
        "load started before extract ended: {load} {extract}"
    );
    report_lag("aws_e2e_chain", load);
    // The ledger on DynamoDB: each job's occurrence fired, as its run.
    for (job, run) in [("extract", extract), ("load", load)] {
        let ledger = api.get_ok(&format!("/v1/jobs/{job}/occurrences")).await;
        let items = items(&ledger);
        assert_eq!(items.len(), 1, "{ledger}");
        assert_eq!(
            (&items[0]["outcome"], &items[0]["run_id"], &items[0]["scheduled_for"]),
            (&json!("fired"), &run["run_id"], &run["scheduled_for"]),
            "{ledger}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_s_alert_is_posted_by_the_worker_signed_with_the_secret_in_dynamodb() {
    let aws = Deployment::start(fresh_config(), Dur::ZERO, LOOKAHEAD).await;
    let (receiver, webhook) = WebhookReceiver::start(&[StatusCode::SERVICE_UNAVAILABLE]).await;
    let (_, tenants) = sked_aws::ports_and_tenants(&aws.clients, &aws.settings.aws, aws.ports.clock.clone());
    let secret = alert::new_secret();
    let made = WebhookSecret {
        secret: secret.clone(),
        created_at: aws.ports.clock.now(),
    };
    tenants
        .webhook_secrets
        .put_webhook_secret(&TenantId::default(), &made)
        .await
        .unwrap();
    let api = &aws.api;
    api.create_job(json!({
        "id": "nightly",
        "schedule": {"at": iso(in_secs(1.0))},
        "max_retries": 0,
        "task": sh("exit 3"),
        "notify": {"on": ["failed"], "webhook": webhook},
    }))
    .await;
    assert_eq!(aws.sweep().await.fired, 1);
    let _worker = aws.worker(&[]);
    let run = &ended_runs(api, "nightly", 1, Duration::from_secs(60)).await[0];
    assert_eq!(run["state"], "FAILED", "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let (run, statuses) = wait_delivered(api, &run_id, Duration::from_secs(60)).await;
    assert_eq!(statuses, [json!(503), json!(200)], "{run}");
    let posts = receiver.posts();
    assert_eq!(posts.len(), 2);
    for (headers, body) in &posts {
        assert!(alert::verify(&secret, header(headers, alert::SIGNATURE_HEADER), body));
        assert_eq!(header(headers, alert::DELIVERY_HEADER), run_id);
    }
}

/// Runs the sweeper fired ahead follow the changes made to their job before they come due:
/// a job paused after the sweep starts none of its runs while paused. Each waits for the
/// resume (PENDING, deferred), or ends skipped if the job's policies would drop it then: here,
/// all due within the misfire grace under `overlap: forbid`, the latest stands for the others
/// (CANCELLED, no attempt; the ledger's reason `paused`, as for any occurrence a policy drops
/// while its job is paused). A one-shot the sweep fired
/// (COMPLETED, and paused all the same) waits too. Resumed, the runs kept start. A job whose
/// schedule changes from every second to every other second has its runs at the odd seconds
/// ended at the change (`rescheduled`), and only those at the even ones run. (The sweep looks
/// 9 s ahead, so the jobs, whose windows reach further, are still ACTIVE after it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_fired_ahead_start_nothing_a_pause_or_a_schedule_change_dropped() {
    let aws = Deployment::start(fresh_config(), Dur::ZERO, Dur::secs(9)).await;
    let api = &aws.api;
    // 5 s for the calls below, made before the first run is due.
    let (start, end) = (iso(in_secs(5.0)), iso(in_secs(60.0)));
    let every = |cron: &str| {
        json!({
            "schedule": {"cron": cron, "timezone": "UTC"}, "start_at": start, "end_at": end,
            "task": sh("echo tick"),
        })
    };
    for id in ["paused", "moved"] {
        let mut job = every("* * * * * *");
        job["id"] = json!(id);
        api.create_job(job).await;
    }
    api.create_job(json!({"id": "once", "schedule": {"at": start}, "task": sh("echo once")}))
        .await;
    let outcome = aws.sweep().await;
    let fired = api.runs_of("moved").await.len();
    assert!(fired >= 2, "{outcome:?}");
    assert_eq!(outcome.fired, 2 * fired + 1, "{outcome:?}");

    // The one-shot, fired, is COMPLETED while its run waits: it can still be paused.
    assert_eq!(api.get_ok("/v1/jobs/once").await["state"], "COMPLETED");
    for job in ["paused", "once"] {
        let (status, body) = api.post(&format!("/v1/jobs/{job}/pause"), &json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["state"], "PAUSED", "{body}");
    }
    let (status, body) = api
        .send(reqwest::Method::PUT, "/v1/jobs/moved", Some(&every("*/2 * * * * *")))
        .await;
    assert_eq!(status, 200, "{body}");
    let even_second = |run: &Value| time(run, "scheduled_for").timestamp() % 2 == 0;
    let mut kept = BTreeSet::new();
    for run in api.runs_of("moved").await {
        let expected = if even_second(&run) { "PENDING" } else { "CANCELLED" };
        assert_eq!(run["state"], expected, "{run}");
        if even_second(&run) {
            kept.insert(iso(time(&run, "scheduled_for")));
        }
    }
    assert!(!kept.is_empty() && kept.len() < fired, "{kept:?} of {fired}");

    let _worker = aws.worker(&["--workers", "2"]);
    let moved_runs = ended_runs(api, "moved", fired, Duration::from_secs(60)).await;
    let ran: BTreeSet<String> = moved_runs
        .iter()
        .filter(|r| r["state"] == "SUCCEEDED")
        .map(|r| iso(time(r, "scheduled_for")))
        .collect();
    assert_eq!(ran, kept, "only the new schedule's times ran");
    // Every run of the paused jobs met by the worker: ended, or deferred to wait.
    let waits = |run: &Value| run["state"] == "PENDING" && time(run, "not_before") > time(run, "scheduled_for");
    for (job, count) in [("paused", fired), ("once", 1)] {
        let runs = wait_until(&format!("{job}'s runs met"), Duration::from_secs(60), async || {
            let runs = api.runs_of(job).await;
            (runs.len() == count && runs.iter().all(|r| is_terminal(r) || waits(r))).then_some(runs)
        })
        .await;
        let latest = runs.iter().max_by_key(|r| time(r, "scheduled_for")).unwrap();
        assert!(waits(latest), "{latest}");
        for run in runs.iter().filter(|r| *r != latest) {
            assert_eq!(run["state"], "CANCELLED", "{run}");
            assert_eq!(run["attempts"].as_array().map(Vec::len), Some(0), "{run}");
        }
    }
    for (job, reason, skipped) in [
        ("paused", "paused", fired - 1),
        ("once", "paused", 0),
        ("moved", "rescheduled", fired - kept.len()),
    ] {
        let ledger = api.get_ok(&format!("/v1/jobs/{job}/occurrences")).await;
        let reasons: Vec<Value> = items(&ledger)
            .iter()
            .filter(|o| o["outcome"] == "skipped")
            .map(|o| o["reason"].clone())
            .collect();
        assert_eq!(reasons, vec![json!(reason); skipped], "{ledger}");
    }

    // Resumed, the runs that waited start at once.
    for job in ["paused", "once"] {
        let (status, body) = api.post(&format!("/v1/jobs/{job}/resume"), &json!({})).await;
        assert_eq!(status, 200, "{body}");
        let runs = ended_runs(api, job, 1, Duration::from_secs(60)).await;
        let succeeded: Vec<&Value> = runs.iter().filter(|r| r["state"] == "SUCCEEDED").collect();
        assert_eq!(succeeded.len(), 1, "{runs:?}");
    }
}

/// A change of priority and retries reaches the runs fired ahead that have not started: each
/// takes the job's new settings in DynamoDB, and a message for it waits on the new priority's
/// queue (the old one stays where it was: whichever a worker takes first starts the run, once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_priority_reaches_the_runs_fired_ahead_on_their_new_queue() {
    let aws = Deployment::start(fresh_config(), Dur::ZERO, Dur::secs(9)).await;
    let api = &aws.api;
    let queues = &aws.settings.aws.queues;
    // 5 s for the calls below, made before the first run is due.
    let (start, end) = (iso(in_secs(5.0)), iso(in_secs(60.0)));
    api.create_job(json!({
        "id": "raised", "schedule": {"cron": "* * * * * *", "timezone": "UTC"}, "priority": 1,
        "start_at": start, "end_at": end, "task": sh("echo tick"),
    }))
    .await;
    let fired = aws.sweep().await.fired;
    assert!(fired >= 2, "{fired} fired");
    assert_eq!(aws.messages_on(&queues.low).await, fired as u64);
    assert_eq!(aws.messages_on(&queues.high).await, 0);

    let (status, body) = api
        .send(
            reqwest::Method::PATCH,
            "/v1/jobs/raised",
            Some(&json!({"priority": 8, "max_retries": 2})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for run in api.runs_of("raised").await {
        assert_eq!(
            (run["state"].as_str(), run["priority"].as_u64()),
            (Some("PENDING"), Some(8)),
            "{run}"
        );
    }
    assert_eq!(aws.messages_on(&queues.high).await, fired as u64);

    let _worker = aws.worker(&["--workers", "2"]);
    let runs = ended_runs(api, "raised", fired, Duration::from_secs(60)).await;
    assert_eq!(runs.len(), fired);
    for run in &runs {
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        assert_eq!(run["attempts"].as_array().map(Vec::len), Some(1), "started once: {run}");
    }
}
