//! High-frequency schedules on the AWS deployment on moto (feature `aws`), as a user runs them
//! in `make local-aws`: a per-second cron (`*/1 * * * * *`, default policies) and one-shots
//! created through the API while it runs, the sweeper function ticking, real
//! `sked worker --backend aws` processes running the payloads.
//!
//! - `aws_high_frequency` (in `make test`): 40 seconds of the cron and 20 one-shots, with the
//!   windows scaled down so that both firing paths keep working inside those 40 seconds: the
//!   API fires 10 s ahead, the sweeper ticks every 5 s and fires 30 s ahead; the tests' 3 s
//!   lease, so a slow heartbeat would show.
//! - `aws_high_frequency_soak` (ignored; `make soak-aws`): ten minutes and 100 one-shots with
//!   the deployment's own windows (the API's 90 s, the sweeper's 10-minute look-ahead) and
//!   `make local-aws`'s tick (10 s) and workers (2 processes × 4 worker loops, `sked worker`'s
//!   own 15 s lease).
//!
//! Checked: every API answer was a success (no 408, no 5xx); the cron has one run for each
//! second of its window — no gap, no duplicate — and each one-shot one run; every run ended
//! SUCCEEDED on attempt 1 (no retry, no worker lost), but for at most one cron run per 100
//! seconds skipped by its `forbid` policy while another of its runs was RUNNING (moto serves
//! one DynamoDB request at a time: under load a claim can take a second); each payload ran
//! once (its side-effect line); no sweeper tick failed and its reaper closed no attempt.
//!
//! Printed: create latencies, start lags, SQS receives per run (delivery is at least once: a
//! second receive is harmless, the claim decides), what the ticks fired and re-enqueued, and
//! the wall time.

#![cfg(feature = "aws")]

mod common;

use chrono::{Duration as Span, DurationRound, Utc};
use common::aws::{Deployment, tick};
use common::*;
use serde_json::{Value, json};
use sked_aws::testing::{fresh_config, with_logs};
use sked_core::duration::Dur;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The per-second cron's id.
const CRON: &str = "every-second";

/// One load and the deployment it runs on.
struct Load {
    /// Whole seconds of the cron's window: it fires at each of them.
    window_secs: i64,
    /// One-shots created through the API during the window, evenly spread.
    one_shots: usize,
    /// A one-shot is due this long after its create, alternately: `near` (within the API's
    /// direct firing) and `far` (beyond it: a sweep fires it).
    near: Span,
    far: Span,
    /// How far ahead the API fires (its window is the lesser of this and 90 s).
    api_lookahead: Dur,
    /// How far ahead the sweeper fires.
    sweep_lookahead: Dur,
    /// Time between sweeper ticks.
    tick: Duration,
    /// The sweeper's reaper: its pass interval, and how long a PENDING run waits unclaimed
    /// before the repair pass enqueues it again (`None`: the function's own, a minute each, as
    /// `make local-aws` runs it).
    reaper: Option<(Dur, Dur)>,
    /// `sked worker` processes, and their flags.
    worker_processes: usize,
    worker_flags: &'static [&'static str],
    /// The tests' 3 s lease; otherwise `sked worker`'s own 15 s.
    test_lease: bool,
    /// How long the runs may take to end once the window has passed.
    drain: Duration,
}

/// `make test`: 40 s, scaled-down windows.
const SHORT: Load = Load {
    window_secs: 40,
    one_shots: 20,
    near: Span::seconds(3),
    far: Span::seconds(15),
    api_lookahead: Dur::secs(10),
    sweep_lookahead: Dur::secs(30),
    tick: Duration::from_secs(5),
    reaper: Some((Dur::secs(5), Dur::secs(30))),
    worker_processes: 2,
    worker_flags: &["--workers", "2"],
    test_lease: true,
    drain: Duration::from_secs(90),
};

/// `make soak-aws`: ten minutes with the deployment's windows and `make local-aws`'s tick.
const SOAK: Load = Load {
    window_secs: 600,
    one_shots: 100,
    near: Span::seconds(3),
    far: Span::seconds(120),
    api_lookahead: Dur::secs(600),
    sweep_lookahead: Dur::secs(600),
    tick: Duration::from_secs(10),
    reaper: None,
    worker_processes: 2,
    worker_flags: &["--workers", "4"],
    test_lease: false,
    drain: Duration::from_secs(180),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_high_frequency() {
    high_frequency(SHORT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "ten minutes: make soak-aws"]
async fn aws_high_frequency_soak() {
    high_frequency(SOAK).await;
}

/// Every API call the test made: what, status, milliseconds.
#[derive(Default)]
struct Calls(Mutex<Vec<(String, u16, u128)>>);

impl Calls {
    /// `POST path body` through `api`, recorded; the answer.
    async fn post(&self, api: &Api, what: &str, path: &str, body: &Value) -> (u16, Value) {
        let started = Instant::now();
        let (status, answer) = api.post(path, body).await;
        self.record(what, status, started);
        (status, answer)
    }

    /// `GET path` through `api`, recorded.
    async fn get(&self, api: &Api, what: &str, path: &str) -> u16 {
        let started = Instant::now();
        let (status, _) = api.get(path).await;
        self.record(what, status, started);
        status
    }

    fn record(&self, what: &str, status: u16, started: Instant) {
        let ms = started.elapsed().as_millis();
        self.0.lock().unwrap().push((what.to_string(), status, ms));
    }

    /// Median and max of the calls named `what`, in ms.
    fn latency(&self, what: &str) -> (u128, u128) {
        let mut ms: Vec<u128> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.0 == what)
            .map(|c| c.2)
            .collect();
        ms.sort_unstable();
        (
            ms.get(ms.len() / 2).copied().unwrap_or(0),
            ms.last().copied().unwrap_or(0),
        )
    }
}

/// What the sweeper ticks did.
#[derive(Default)]
struct Ticks {
    invocations: AtomicUsize,
    failed: AtomicUsize,
    fired: AtomicUsize,
    abandoned: AtomicUsize,
    requeued: AtomicUsize,
}

async fn high_frequency(load: Load) {
    let started = Instant::now();
    let mut aws = Deployment::start(with_logs(fresh_config()), load.api_lookahead, load.sweep_lookahead).await;
    if let Some((every, stale_after)) = load.reaper {
        aws.set_tick(every, stale_after);
    }
    let _workers: Vec<Proc> = (0..load.worker_processes)
        .map(|_| match load.test_lease {
            true => aws.worker(load.worker_flags),
            false => aws.worker_with_default_lease(load.worker_flags),
        })
        .collect();
    let effects = aws.path().join("effects");
    let task = sh(&format!("echo \"$SKED_RUN_ID $SKED_ATTEMPT\" >> {}", effects.display()));

    let ticks = Arc::new(Ticks::default());
    let ticking = {
        let (sweeper, ticks, every) = (aws.sweeper(), ticks.clone(), load.tick);
        tokio::spawn(async move {
            for n in 0usize.. {
                let outcome = tick(&sweeper, &format!("tick-{n}"), 0).await;
                ticks.invocations.fetch_add(1, Ordering::Relaxed);
                match outcome {
                    Ok(o) => {
                        ticks.fired.fetch_add(o.fired, Ordering::Relaxed);
                        ticks.abandoned.fetch_add(o.abandoned, Ordering::Relaxed);
                        ticks.requeued.fetch_add(o.requeued, Ordering::Relaxed);
                    }
                    Err(e) => {
                        ticks.failed.fetch_add(1, Ordering::Relaxed);
                        eprintln!("high frequency: sweeper tick {n} failed: {e}");
                    }
                }
                // EventBridge Scheduler's part: the next tick comes at its time.
                tokio::time::sleep(every).await;
            }
        })
    };

    // The cron fires at every whole second from `first` to `last`; its window's edges sit
    // half-way between seconds, so which side of them an occurrence falls is never in doubt.
    let calls = Arc::new(Calls::default());
    let first = Utc::now().duration_trunc(Span::seconds(1)).unwrap() + Span::seconds(2);
    let last = first + Span::seconds(load.window_secs - 1);
    let half = Span::milliseconds(500);
    let (status, created) = calls
        .post(
            &aws.api,
            "create cron",
            "/v1/jobs",
            &json!({
                "id": CRON, "schedule": {"cron": "*/1 * * * * *"},
                "start_at": iso(first - half), "end_at": iso(last + half), "task": task,
            }),
        )
        .await;
    assert_eq!(status, 201, "{created}");

    // While it runs: one-shots created through the API, and a user reading the cron's runs.
    let creating = {
        let (api, calls, task) = (aws.api.clone(), calls.clone(), task.clone());
        let spacing = (last - load.far - Utc::now()) / load.one_shots as i32;
        let (near, far) = (load.near, load.far);
        tokio::spawn(async move {
            let from = Utc::now();
            for i in 0..load.one_shots {
                let create_at = from + spacing * i as i32;
                // The load's pace, not a wait for a condition.
                tokio::time::sleep((create_at - Utc::now()).to_std().unwrap_or_default()).await;
                let at = Utc::now() + if i % 2 == 0 { near } else { far };
                let job = json!({"id": format!("once-{i}"), "schedule": {"at": iso(at)}, "task": task});
                let (status, body) = calls.post(&api, "create one-shot", "/v1/jobs", &job).await;
                assert_eq!(status, 201, "once-{i}: {body}");
            }
        })
    };
    let reading = {
        let (api, calls) = (aws.api.clone(), calls.clone());
        tokio::spawn(async move {
            while Utc::now() < last {
                calls
                    .get(&api, "list runs", &format!("/v1/jobs/{CRON}/runs?limit=20"))
                    .await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    creating.await.expect("the one-shots were created");
    reading.await.expect("the reader ran");

    // Every run due in the window, ended. Polled once a second: a listing of every run is a
    // heavy request for moto.
    let expected_cron: Vec<String> = (0..load.window_secs).map(|s| iso(first + Span::seconds(s))).collect();
    let expected = expected_cron.len() + load.one_shots;
    let deadline = Instant::now() + load.drain;
    let runs = loop {
        let runs = aws.observer.all_runs("").await;
        if runs.len() >= expected && runs.iter().all(is_terminal) {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {expected} runs ended {:?} after the window",
            runs.iter().filter(|r| is_terminal(r)).count(),
            load.drain
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let drained = started.elapsed();
    ticking.abort();

    // The API answered every call.
    let failed: Vec<(String, u16, u128)> = calls
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|c| !(200..300).contains(&c.1))
        .cloned()
        .collect();
    assert!(failed.is_empty(), "API calls that failed: {failed:?}");

    // One run per second of the cron's window, no gap, no duplicate; one per one-shot.
    let job_of = |r: &Value| r["job_id"].as_str().unwrap().to_string();
    let mut cron_times: Vec<String> = runs
        .iter()
        .filter(|r| job_of(r) == CRON)
        .map(|r| iso(time(r, "scheduled_for")))
        .collect();
    cron_times.sort();
    assert_eq!(cron_times, expected_cron, "the cron's runs, one per second");
    let mut per_job: HashMap<String, usize> = HashMap::new();
    for run in &runs {
        *per_job.entry(job_of(run)).or_default() += 1;
    }
    for i in 0..load.one_shots {
        assert_eq!(per_job.get(&format!("once-{i}")), Some(&1), "runs of once-{i}");
    }
    assert_eq!(runs.len(), expected, "no run of anything else");

    // Every run SUCCEEDED on its first attempt, and its payload ran once — but for a cron run
    // its `forbid` policy skipped, rightly: another of the cron's runs was RUNNING when the
    // claim looked. moto serves one DynamoDB request at a time, so under load a claim
    // or a completion can take a second (on DynamoDB: milliseconds), and the next second's run
    // then finds the previous one still going; at most one such skip per 100 seconds of the
    // window is tolerated (none in the 40-second test), so a run path that grows slower still
    // fails. A run that did not succeed otherwise is shown with the cron's runs of the five
    // seconds around it.
    // The claim looked between the skipped run's second and the skip's write (its
    // `finished_at`): another run must have been RUNNING at some instant of that span.
    let running_between = |from: chrono::DateTime<Utc>, to: chrono::DateTime<Utc>| {
        runs.iter().any(|r| {
            job_of(r) == CRON
                && r["started_at"].is_string()
                && time(r, "started_at") <= to
                && r["finished_at"].as_str().is_none_or(|_| time(r, "finished_at") > from)
        })
    };
    let mut forbid_skips = 0;
    for run in &runs {
        let attempts = run["attempts"].as_array().unwrap();
        let skipped_rightly = job_of(run) == CRON
            && run["state"] == "CANCELLED"
            && attempts.is_empty()
            && run["reason"]
                .as_str()
                .is_some_and(|r| r.contains("previous run was still running (overlap: forbid)"))
            && running_between(time(run, "scheduled_for"), time(run, "finished_at"));
        if skipped_rightly {
            forbid_skips += 1;
            continue;
        }
        if run["state"] != "SUCCEEDED" {
            let at = time(run, "scheduled_for");
            let around: Vec<String> = runs
                .iter()
                .filter(|r| job_of(r) == CRON && (time(r, "scheduled_for") - at).num_seconds().abs() <= 5)
                .map(|r| {
                    format!(
                        "{} {} started {} finished {} attempts {}",
                        r["run_id"], r["state"], r["started_at"], r["finished_at"], r["attempts"]
                    )
                })
                .collect();
            panic!(
                "not SUCCEEDED: {run}\nthe cron's runs around it:\n{}",
                around.join("\n")
            );
        }
        assert_eq!(attempts.len(), 1, "retried: {run}");
        assert_eq!(attempts[0]["outcome"], "succeeded", "{run}");
    }
    let effects = std::fs::read_to_string(&effects).unwrap_or_default();
    let mut ran: HashMap<&str, usize> = HashMap::new();
    for line in effects.lines() {
        *ran.entry(line).or_default() += 1;
    }
    assert!(
        forbid_skips <= load.window_secs as usize / 100,
        "{forbid_skips} runs skipped by `forbid` in a {} s window",
        load.window_secs
    );
    for run in runs.iter().filter(|r| r["state"] == "SUCCEEDED") {
        let line = format!("{} 1", run["run_id"].as_str().unwrap());
        assert_eq!(ran.get(line.as_str()), Some(&1), "payload runs of {line}");
    }
    assert_eq!(
        ran.len(),
        runs.len() - forbid_skips,
        "payloads of runs that do not exist or were skipped: {effects}"
    );

    // No tick failed; the reaper closed no attempt.
    assert_eq!(ticks.failed.load(Ordering::Relaxed), 0, "sweeper ticks failed");
    assert_eq!(
        ticks.abandoned.load(Ordering::Relaxed),
        0,
        "attempts closed as worker lost"
    );

    // Figures.
    let mut lags: Vec<i64> = runs
        .iter()
        .filter(|r| r["started_at"].is_string())
        .map(|r| (time(r, "started_at") - time(r, "scheduled_for")).num_milliseconds())
        .collect();
    lags.sort_unstable();
    let mut receives: HashMap<String, usize> = HashMap::new();
    for (_, run_id) in aws.received() {
        *receives.entry(run_id).or_default() += 1;
    }
    let received_again = receives.values().filter(|n| **n > 1).count();
    let (cron_create, _) = calls.latency("create cron");
    let (once_median, once_max) = calls.latency("create one-shot");
    let (list_median, list_max) = calls.latency("list runs");
    println!(
        "aws high frequency: window={}s cron_runs={} one_shots={} api_calls={} the_rest_succeeded=true \
         create_cron_ms={cron_create} create_one_shot_ms_median={once_median} max={once_max} \
         list_runs_ms_median={list_median} max={list_max} start_lag_ms_median={} p99={} max={} \
         forbid_skips={forbid_skips} receives={} runs_received_more_than_once={received_again} max_receives={} \
         ticks={} fired_by_ticks={} requeued_by_repair={} abandoned=0 retries=0 wall_s={:.0}",
        load.window_secs,
        expected_cron.len(),
        load.one_shots,
        calls.0.lock().unwrap().len(),
        lags[lags.len() / 2],
        lags[(lags.len() * 99 / 100).min(lags.len() - 1)],
        lags[lags.len() - 1],
        receives.values().sum::<usize>(),
        receives.values().max().copied().unwrap_or(0),
        ticks.invocations.load(Ordering::Relaxed),
        ticks.fired.load(Ordering::Relaxed),
        ticks.requeued.load(Ordering::Relaxed),
        drained.as_secs_f64(),
    );
}
