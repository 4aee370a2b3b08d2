//! Crash soak: the real binaries under `kill -9`, and an audit of everything afterwards.
//!
//! Set-up: one `sked server --workers 1 --concurrency 4` (API, sweeper, reaper and one
//! worker, so a server kill also takes in-flight attempts down with it) and three
//! `sked worker --workers 2 --concurrency 4` processes, all on one data dir, lease 3 s,
//! grace 1 s. 2,000 jobs are created through `POST /v1/jobs:batch` before any is due:
//!
//! | kind        | schedule                        | payload                             | policy |
//! |-------------|---------------------------------|-------------------------------------|--------|
//! | `short`     | one-shot                        | nothing                             | default retries |
//! | `long`      | one-shot                        | `sleep 1..3`                        | 5 retries |
//! | `flaky`     | one-shot                        | attempt 1 exits 1, later ones 0     | 2 retries, 1 s backoff |
//! | `broken`    | one-shot                        | always exits 1                      | 1 retry, 1 s backoff |
//! | `slowonce`  | one-shot                        | attempt 1 sleeps past its 1 s timeout | `on_timeout: retry`, 2 retries |
//! | `hang`      | one-shot                        | sleeps past its 1 s timeout         | `on_timeout: fail` |
//! | `cron1`     | `* * * * * *` in a window       | nothing                             | `misfire: fire_all`, `overlap: allow` |
//! | `cron2`     | `*/2 * * * * *` in a window     | nothing                             | `misfire: fire_all`, `overlap: allow` |
//!
//! One-shots are spread over the chaos window; crons fire every (other) second within
//! `start_at`/`end_at` (half-second bounds, so no occurrence sits on an edge). Every payload
//! is `sh -c` appending `<run_id> <attempt> <fencing token> start` before its work and
//! `… end` after it to one side-effect log (`SKED_RUN_ID`, `SKED_ATTEMPT`,
//! `SKED_FENCING_TOKEN`; appends of one short line are atomic). An `end` line is the
//! payload's committed effect; a payload that fails or is stopped writes none.
//!
//! Chaos: every 2–4 s a random worker process gets `kill -9` and a replacement starts;
//! the server gets `kill -9` three times (at ¼, ½ and ¾ of the window) and restarts on the
//! same data dir. Then the test waits (generous deadline) for every run to end.
//!
//! Asserted at the end:
//! - **Nothing lost**: every job still exists; every one-shot has exactly one run, at its
//!   time; every cron has exactly one run per nominal second of its window (as computed here
//!   and as `preview` listed at creation) — `fire_all` + `allow` leave no occurrence an
//!   excuse to be skipped — and no other run; every run is terminal.
//! - **Attempts within policy**: 1 ≤ attempts ≤ max_retries + 1, numbered 1..n, all
//!   closed; every attempt but the last ended `failed`, `worker_lost` or (with
//!   `on_timeout: retry`) `timed_out`; every attempt not lost ended as its payload dictates
//!   for that attempt number; the run's state follows from its last attempt (a retryable
//!   ending is final only with no attempts left).
//! - **No overlap**: attempt i finished (for a lost one: its lease expired) no later than
//!   attempt i+1 started, per the API's `finished_at`/`started_at`.
//! - **Side effects**, per run, from the log: each attempt number ran its payload at most
//!   once, under one token; tokens grow strictly with the attempt number; every attempt
//!   that ended other than `worker_lost` ran its payload; no payload ran for an attempt the
//!   API does not list. The run's *valid token* is the token of the attempt the API records
//!   as `succeeded` (its `start` line names it). **Exactly one `end` line carries the valid
//!   token of a SUCCEEDED run** — its effect was committed once, never twice; runs not
//!   SUCCEEDED have no valid token and their failed or timed-out attempts wrote no `end`.
//!   `end` lines of `worker_lost` attempts (the payload finished, its worker died before
//!   recording it) are re-executions under a stale token: allowed, and counted.
//!
//! Printed: jobs, runs, attempts, worker and server kills, re-executed attempts (attempts
//! that follow a `worker_lost` one), stale-token effects, payload overlaps seen in the log
//! (an attempt's `end` appended after the next attempt's `start`: only possible if a live
//! worker missed its lease — reported, not asserted), lost (asserted 0), wall time. The
//! seed (`SKED_SOAK_SEED=<n>` replays the job mix and kill choices) is printed first.
//!
//! `crash_soak` runs in `make test` (about a minute and a half in a debug build on two
//! cores); `crash_soak_long` (`cargo test -p sked --test crash_soak -- --ignored`) keeps
//! the chaos going for ten minutes.

mod common;

use chrono::{DateTime, Duration as Span, DurationRound, Utc};
use common::soak::*;
use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The `make test` variant: 2,000 jobs over 40 s.
const SHORT: Soak = Soak {
    short: 1350,
    long: 150,
    flaky: 150,
    broken: 100,
    slowonce: 100,
    hang: 100,
    cron1: 15,
    cron2: 35,
    window_secs: 40,
    drain: Duration::from_secs(120),
};

/// The soak variant: ten times the one-shots, the same crons firing fifteen times as
/// long, over ten minutes.
const LONG: Soak = Soak {
    short: 13_500,
    long: 1500,
    flaky: 1500,
    broken: 1000,
    slowonce: 1000,
    hang: 1000,
    cron1: 15,
    cron2: 35,
    window_secs: 600,
    drain: Duration::from_secs(600),
};

const WORKER_FLAGS: &[&str] = &["--workers", "2", "--concurrency", "4"];
const SERVER_FLAGS: &[&str] = &["--workers", "1", "--concurrency", "4"];
const WORKER_PROCESSES: usize = 3;
const SERVER_KILLS: usize = 3;

#[tokio::test]
async fn crash_soak() {
    soak(SHORT).await;
}

#[tokio::test]
#[ignore = "ten minutes; run with --ignored for a soak"]
async fn crash_soak_long() {
    soak(LONG).await;
}

/// The chaos: a server, worker processes, and the kills.
struct Fleet<'a> {
    sandbox: &'a Sandbox,
    server: Proc,
    workers: Vec<Proc>,
    worker_kills: usize,
    server_kills: usize,
}

impl Fleet<'_> {
    fn kill_a_worker(&mut self, rng: &mut Rng) {
        let i = rng.below(self.workers.len() as u64) as usize;
        self.workers[i].kill9();
        self.worker_kills += 1;
        self.workers[i] = self.sandbox.worker(WORKER_FLAGS);
    }

    fn kill_the_server(&mut self) {
        self.server.kill9();
        self.server_kills += 1;
        self.server = self.sandbox.server(SERVER_FLAGS);
    }
}

async fn soak(soak: Soak) {
    let started = Instant::now();
    let seed = seed_from_env();
    println!("crash soak seed {seed} (SKED_SOAK_SEED={seed} replays the mix and kill choices)");
    let mut rng = Rng(seed);

    let sandbox = Sandbox::new();
    let effects_path = sandbox.path().join("effects");
    let server = sandbox.server(SERVER_FLAGS);
    let workers = (0..WORKER_PROCESSES).map(|_| sandbox.worker(WORKER_FLAGS)).collect();
    let mut fleet = Fleet {
        sandbox: &sandbox,
        server,
        workers,
        worker_kills: 0,
        server_kills: 0,
    };

    // Create everything before the first job is due (allowing a second per 1,000 jobs).
    let lead = Span::seconds(5 + soak.jobs() as i64 / 1000);
    let base = (Utc::now() + lead).duration_trunc(Span::milliseconds(1)).unwrap();
    let planned = plan(&soak, &mut rng, effects_path.to_str().unwrap(), base);
    assert_eq!(planned.len(), soak.jobs());
    let api = fleet.server.api();
    // Batches of 400: a request body may hold 256 KiB.
    for chunk in planned.chunks(400) {
        let jobs: Vec<Value> = chunk.iter().map(|p| p.job.clone()).collect();
        let (status, body) = api.post("/v1/jobs:batch", &json!({ "jobs": jobs })).await;
        assert_eq!(status, 201, "creating a batch: {body}");
        assert_eq!(items(&body).len(), chunk.len());
    }
    assert!(
        Utc::now() < base,
        "creating the jobs took too long; the first was due already"
    );
    // What the API itself says each cron will fire, before any has fired.
    for p in planned.iter().filter(|p| p.kind.is_cron()) {
        let id = p.job["id"].as_str().unwrap();
        let preview = api.get_ok(&format!("/v1/jobs/{id}/preview?count=100")).await;
        let listed: BTreeSet<DateTime<Utc>> = items(&preview)
            .iter()
            .map(|t| {
                DateTime::parse_from_rfc3339(t.as_str().unwrap())
                    .unwrap()
                    .with_timezone(&Utc)
            })
            .collect();
        if p.occurrences.len() < 100 {
            assert_eq!(listed, p.occurrences, "preview of {id} differs from its cron window");
        }
    }
    let created_in = started.elapsed();

    // Chaos until every one-shot was due and the longest payloads had time to run.
    let chaos_end = base + Span::seconds(soak.window_secs + 3);
    let chaos_span = (chaos_end - Utc::now()).num_milliseconds().max(1);
    let server_kill_at: Vec<DateTime<Utc>> = (1..=SERVER_KILLS as i64)
        .map(|k| Utc::now() + Span::milliseconds(chaos_span * k / (SERVER_KILLS as i64 + 1)))
        .collect();
    let mut next_worker_kill = base + Span::milliseconds(2000 + rng.below(2000) as i64);
    while Utc::now() < chaos_end {
        if fleet.server_kills < SERVER_KILLS && Utc::now() >= server_kill_at[fleet.server_kills] {
            fleet.kill_the_server();
        }
        if Utc::now() >= next_worker_kill {
            fleet.kill_a_worker(&mut rng);
            next_worker_kill = Utc::now() + Span::milliseconds(2000 + rng.below(2000) as i64);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(fleet.server_kills, SERVER_KILLS);
    let chaos_done = started.elapsed();

    // Wait until every occurrence has a run and every run has ended.
    let api = fleet.server.api();
    let expected_runs: usize = planned.iter().map(|p| p.occurrences.len()).sum();
    let runs = drain(&api, expected_runs, soak.drain).await;
    let drained = started.elapsed();

    // Every job is still there.
    assert_jobs_kept(&planned, &api.all_jobs("").await);

    let effects = read_effects(&effects_path);
    let tally = audit(&planned, &runs, &effects);

    let lost = expected_runs.saturating_sub(runs.len());
    println!(
        "crash soak: jobs={} runs={} attempts={} worker_kills={} server_kills={} lost={lost} {}",
        planned.len(),
        tally.runs,
        tally.attempts,
        fleet.worker_kills,
        fleet.server_kills,
        tally.figures(),
    );
    let phases = Phases {
        started,
        created_in,
        chaos_done,
        drained,
    };
    println!("{}", phases.line("crash soak"));
    assert_eq!(lost, 0);
    assert!(fleet.worker_kills >= 3, "too few worker kills to mean anything");
}
