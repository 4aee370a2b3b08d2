//! Crash test of the AWS deployment on moto (feature `aws`; the AWS counterpart of the local crash tests): the local
//! crash soak's job mix and audit (`common::soak`, checks listed in `crash_soak.rs`) against
//! the AWS processes, under `kill -9`, concurrent sweeper invocations and injected throttling.
//!
//! Set-up: fresh resources on moto; the API function's router and the sweeper function's
//! handler in-process; three `sked worker --backend aws --workers 2 --concurrency 4`
//! processes, lease 3 s. **Every AWS client** — the in-process functions' and each worker's —
//! sends through `sked_aws::FaultyHttpClient`: a seeded fraction of requests is answered with
//! the service's own throttling error without being sent, and (in `aws_crash_long`) a
//! smaller one is sent but its answer replaced by a 500 (the write happened, the caller sees
//! an error) —
//! `SKED_AWS_FAULT_THROTTLE`, `SKED_AWS_FAULT_LOST_ANSWER` and `SKED_AWS_FAULT_SEED` for the
//! workers — so the SDK's retry classifier and sked's error mapping deal with it, and calls
//! whose retries run out reach sked as transient errors.
//!
//! The jobs (two hundred: short, long, flaky, broken, timing-out once, hanging, and two
//! kinds of second-by-second crons) are created one by one through the API before any is due
//! (retrying a create the throttling failed, as a client would); the API fires none itself
//! (look-ahead 0), so every run is fired by the sweeper, whose tick — every
//! [`TICK_EVERY`] — invokes the handler **twice concurrently** (the lease lets one sweep; the
//! other returns, as overlapping Lambda invocations do). Chaos: every 2–4 s a random worker
//! gets `kill -9` and a replacement starts. Then the test waits for every run to end, and
//! audits every run and the payloads' side-effect log: every run terminal, no occurrence
//! lost, attempts within policy, no two attempts of a run overlapping, no effect committed
//! twice under a valid token.
//!
//! Printed: the seed (`SKED_SOAK_SEED=<n>` replays the mix, kills and faults), jobs, runs,
//! attempts, kills, sweeper ticks and their errors, faults injected (in-process and in the
//! workers, from their logs), messages SQS dead-lettered (no DLQ function runs here: the
//! repair pass re-enqueues their runs), re-executed attempts, lost (asserted 0).
//!
//! A limit of moto, not of sked: moto's `TransactWriteItems` snapshots the whole table and,
//! when the transaction fails (a condition, as in a retried write whose answer was lost),
//! puts the snapshot back — undoing whatever other clients wrote meanwhile. Under enough
//! concurrency that loses items (`aws_crash_long` once lost a freshly created job this way);
//! the `make test` size keeps the creation apart from the sweeps and has passed every run. `aws_crash` runs in
//! `make test` (about a minute); `aws_crash_long` (`--ignored`) has twice the jobs and two
//! minutes of chaos.

#![cfg(feature = "aws")]

mod common;

use chrono::{Duration as Span, DurationRound, Utc};
use common::aws::{Deployment, tick};
use common::soak::*;
use common::*;
use futures::StreamExt;
use serde_json::Value;
use sked_aws::Faults;
use sked_aws::testing::{fresh_config, with_logs};
use sked_core::duration::Dur;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The `make test` variant: 202 jobs (≈ 260 runs) over 20 s — as much as one moto server
/// serves in about a minute (its TransactWriteItems copies the whole table).
const SHORT: Soak = Soak {
    short: 130,
    long: 15,
    flaky: 15,
    broken: 12,
    slowonce: 12,
    hang: 12,
    cron1: 2,
    cron2: 4,
    window_secs: 20,
    drain: Duration::from_secs(150),
};

/// Twice the jobs, chaos for two minutes. (Not more: moto's TransactWriteItems copies the
/// whole table, so creating a thousand jobs takes minutes.)
const LONG: Soak = Soak {
    short: 260,
    long: 30,
    flaky: 30,
    broken: 24,
    slowonce: 24,
    hang: 24,
    cron1: 2,
    cron2: 4,
    window_secs: 120,
    drain: Duration::from_secs(600),
};

const WORKER_FLAGS: &[&str] = &["--workers", "2", "--concurrency", "4"];
const WORKER_PROCESSES: usize = 3;
/// Fraction of AWS requests answered with a throttling error instead of being sent.
const THROTTLE: f64 = 0.05;
/// Fraction of AWS requests sent whose answer is replaced by a 500 (the write happened), in
/// `aws_crash_long` only: a retried transaction whose first try went through fails its
/// condition, and moto then restores its copy of the table, undoing concurrent writes (see
/// above) — a moto artefact `make test` must not trip over.
const LOST_ANSWER: f64 = 0.01;
/// How often the sweeper is ticked (each tick: two invocations at once).
const TICK_EVERY: Duration = Duration::from_secs(2);
/// Creates in flight at once.
const CREATES_AT_ONCE: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_crash() {
    crash(SHORT, Variant::default()).await;
}

/// The same on the lean store: one-shots' plain firings left unwritten
/// (`AwsConfig::unwritten_one_shots`: the sweeper writes nothing, the claim puts the run, its
/// message alone carries it), no succeeded run's state in `list`
/// (`RunListedState::Unsuccessful`), jobs keyed by tenant shards (`JobKeys::TenantShards`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_crash_with_firings_left_unwritten() {
    let variant = Variant {
        lean_store: true,
        ..Variant::default()
    };
    crash(SHORT, variant).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "two minutes of chaos, twice the jobs; run with --ignored"]
async fn aws_crash_long() {
    let variant = Variant {
        lost_answer: LOST_ANSWER,
        ..Variant::default()
    };
    crash(LONG, variant).await;
}

/// What a crash run varies beside its size.
#[derive(Debug, Clone, Copy, Default)]
struct Variant {
    /// Fraction of requests whose answer is lost ([`LOST_ANSWER`] or none).
    lost_answer: f64,
    /// Whether the store is the lean one (see [`aws_crash_with_firings_left_unwritten`]).
    lean_store: bool,
}

/// What the sweeper ticks did.
#[derive(Default)]
struct Ticks {
    invocations: AtomicUsize,
    errors: AtomicUsize,
    held_elsewhere: AtomicUsize,
    fired: AtomicUsize,
}

/// Creates `job` through the API, retrying while the injected throttling fails it (a
/// re-POST of the same job is answered 200).
async fn create(api: &Api, job: &Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = api.post("/v1/jobs", job).await;
        if status == 201 || status == 200 {
            return;
        }
        assert!(
            status >= 500 && Instant::now() < deadline,
            "creating {}: {status} {body}",
            job["id"]
        );
    }
}

async fn crash(soak: Soak, variant: Variant) {
    let started = Instant::now();
    let seed = seed_from_env();
    println!("aws crash seed {seed} (SKED_SOAK_SEED={seed} replays the mix, kill choices and faults)");
    let mut rng = Rng(seed);

    let mut config = with_logs(fresh_config());
    config.faults = Some(Faults {
        throttle: THROTTLE,
        lost_answer: variant.lost_answer,
        seed,
        ..Faults::default()
    });
    if variant.lean_store {
        config.unwritten_one_shots = true;
        config.run_listed_state = sked_aws::RunListedState::Unsuccessful;
        config.job_keys = sked_aws::JobKeys::TenantShards;
    }
    let mut aws = Deployment::start(config, Dur::ZERO, Dur::secs(600)).await;
    // The repair pass re-enqueues runs left PENDING (e.g. written by a sweep whose enqueue
    // failed) after a few of the test's ticks rather than EventBridge's minute.
    // The pass interval: the tick's sleep plus the time the two invocations take.
    aws.set_tick(Dur(TICK_EVERY + Duration::from_secs(1)), Dur::secs(10));
    let effects_path = aws.path().join("effects");
    let mut workers: Vec<Proc> = (0..WORKER_PROCESSES).map(|_| aws.worker(WORKER_FLAGS)).collect();

    // Create everything before the first job is due.
    // Creation slows down as moto's table grows (its transactions copy the table).
    let lead = Span::seconds(8 + (soak.jobs() * soak.jobs()) as i64 / 4000);
    let base = (Utc::now() + lead).duration_trunc(Span::milliseconds(1)).unwrap();
    let planned = plan(&soak, &mut rng, effects_path.to_str().unwrap(), base);
    assert_eq!(planned.len(), soak.jobs());
    futures::stream::iter(planned.iter().map(|p| create(&aws.api, &p.job)))
        .buffer_unordered(CREATES_AT_ONCE)
        .collect::<Vec<()>>()
        .await;
    assert!(
        Utc::now() < base,
        "creating the jobs took too long; the first was due already"
    );
    let created_in = started.elapsed();

    // Every tick from now on: two invocations at once. (Not during the creation, which
    // they would slow down: each sweep's transactions copy moto's whole table.)
    let ticks = Arc::new(Ticks::default());
    let ticking = {
        let (sweeper, ticks) = (aws.sweeper(), ticks.clone());
        tokio::spawn(async move {
            for n in 0usize.. {
                let (id_a, id_b) = (format!("tick-{n}-a"), format!("tick-{n}-b"));
                let (a, b) = tokio::join!(tick(&sweeper, &id_a, 0), tick(&sweeper, &id_b, 0));
                for outcome in [a, b] {
                    ticks.invocations.fetch_add(1, Ordering::Relaxed);
                    match outcome {
                        Ok(o) => {
                            ticks.fired.fetch_add(o.fired, Ordering::Relaxed);
                            if o.lease_held_elsewhere {
                                ticks.held_elsewhere.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            ticks.errors.fetch_add(1, Ordering::Relaxed);
                            eprintln!("aws crash: sweeper invocation failed: {e}");
                        }
                    }
                }
                tokio::time::sleep(TICK_EVERY).await;
            }
        })
    };

    // Chaos until every one-shot was due and the longest payloads had time to run.
    let chaos_end = base + Span::seconds(soak.window_secs + 3);
    let mut kills = 0;
    let mut next_kill = base + Span::milliseconds(2000 + rng.below(2000) as i64);
    while Utc::now() < chaos_end {
        if Utc::now() >= next_kill {
            let i = rng.below(workers.len() as u64) as usize;
            workers[i].kill9();
            kills += 1;
            workers[i] = tokio::task::block_in_place(|| aws.worker(WORKER_FLAGS));
            next_kill = Utc::now() + Span::milliseconds(2000 + rng.below(2000) as i64);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let chaos_done = started.elapsed();

    let expected_runs: usize = planned.iter().map(|p| p.occurrences.len()).sum();
    let runs = drain(&aws.observer, expected_runs, soak.drain).await;
    let drained = started.elapsed();
    ticking.abort();

    assert_jobs_kept(&planned, &aws.observer.all_jobs("").await);

    let effects = read_effects(&effects_path);
    let tally = audit(&planned, &runs, &effects);
    let lost = expected_runs.saturating_sub(runs.len());
    let in_process = aws.clients.faults.clone().expect("faults are on");
    let (worker_throttles, worker_lost_answers) = aws.worker_faults();
    let dead_lettered = aws.messages_on(&aws.settings.aws.queues.dlq).await;
    println!(
        "aws crash: jobs={} runs={} attempts={} worker_kills={kills} sweeper_invocations={} (lease held elsewhere {}, \
         failed {}) fired={} throttles_injected={} (in-process {}, workers {worker_throttles}) of {} in-process requests \
         lost_answers_injected={} dead_lettered_messages={dead_lettered} lost={lost} {}",
        planned.len(),
        tally.runs,
        tally.attempts,
        ticks.invocations.load(Ordering::Relaxed),
        ticks.held_elsewhere.load(Ordering::Relaxed),
        ticks.errors.load(Ordering::Relaxed),
        ticks.fired.load(Ordering::Relaxed),
        in_process.throttled() as usize + worker_throttles,
        in_process.throttled(),
        in_process.throttled() + in_process.passed() + in_process.lost_answers(),
        in_process.lost_answers() as usize + worker_lost_answers,
        tally.figures(),
    );
    let phases = Phases {
        started,
        created_in,
        chaos_done,
        drained,
    };
    println!("{}", phases.line("aws crash"));
    assert_eq!(lost, 0);
    assert!(kills >= 3, "too few worker kills to mean anything");
    assert!(
        in_process.throttled() > 0 && worker_throttles > 0,
        "throttling was not injected everywhere"
    );
}
