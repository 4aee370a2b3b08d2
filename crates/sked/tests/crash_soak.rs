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
use common::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How many jobs of each kind, and how long the chaos lasts.
#[derive(Debug, Clone, Copy)]
struct Soak {
    short: usize,
    long: usize,
    flaky: usize,
    broken: usize,
    slowonce: usize,
    hang: usize,
    cron1: usize,
    cron2: usize,
    /// One-shots are due over this many seconds; crons fire over most of it.
    window_secs: i64,
    /// Most time allowed, after the chaos, for every run to end.
    drain: Duration,
}

impl Soak {
    fn jobs(&self) -> usize {
        self.short + self.long + self.flaky + self.broken + self.slowonce + self.hang + self.cron1 + self.cron2
    }
}

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

/// xorshift64*: enough randomness for kill choices and the job mix, replayable by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What a job does (its id is `<kind>-<n>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Short,
    Long,
    Flaky,
    Broken,
    SlowOnce,
    Hang,
    Cron1,
    Cron2,
}

impl Kind {
    fn is_cron(self) -> bool {
        matches!(self, Kind::Cron1 | Kind::Cron2)
    }

    /// How an attempt numbered `n` ends when its worker survives it.
    fn outcome(self, n: u64) -> &'static str {
        match self {
            Kind::Short | Kind::Long | Kind::Cron1 | Kind::Cron2 => "succeeded",
            Kind::Flaky if n == 1 => "failed",
            Kind::Flaky => "succeeded",
            Kind::Broken => "failed",
            Kind::SlowOnce if n == 1 => "timed_out",
            Kind::SlowOnce => "succeeded",
            Kind::Hang => "timed_out",
        }
    }
}

/// One job's definition and what the test expects of it.
struct Planned {
    job: Value,
    kind: Kind,
    max_attempts: u64,
    retry_on_timeout: bool,
    /// Nominal times its runs must have.
    occurrences: BTreeSet<DateTime<Utc>>,
}

/// The payload: `start` line, `work`, `end` line.
fn payload(log: &str, work: &str) -> Value {
    sh(&format!(
        "e=\"$SKED_RUN_ID $SKED_ATTEMPT $SKED_FENCING_TOKEN\"; echo \"$e start\" >> {log}; {work}; echo \"$e end\" >> {log}"
    ))
}

/// Every whole second `t` in `[from, to]` with `t.second % step == 0`.
fn cron_seconds(from: DateTime<Utc>, to: DateTime<Utc>, step: u32) -> BTreeSet<DateTime<Utc>> {
    let mut t = from.duration_trunc(Span::seconds(1)).unwrap();
    let mut out = BTreeSet::new();
    while t <= to {
        if t >= from && chrono::Timelike::second(&t).is_multiple_of(step) {
            out.insert(t);
        }
        t += Span::seconds(1);
    }
    out
}

/// The job mix: one-shots due over `[base, base + window]`, crons over most of it.
fn plan(soak: &Soak, rng: &mut Rng, log: &str, base: DateTime<Utc>) -> Vec<Planned> {
    let window_ms = soak.window_secs * 1000;
    let backoff = json!({"initial": "1s", "max": "2s", "factor": 2, "jitter": 0});
    let mut out = Vec::new();
    let mut one_shot = |rng: &mut Rng, kind: Kind, n: usize, extra: Value, work: &dyn Fn(&mut Rng) -> String| {
        for i in 0..n {
            let at = base + Span::milliseconds(rng.below(window_ms as u64) as i64);
            let name = format!("{kind:?}").to_lowercase();
            let mut job = json!({
                "id": format!("{name}-{i:05}"), "schedule": {"at": iso(at)},
                "task": payload(log, &work(rng)), "backoff": backoff,
            });
            job.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            let max_retries = job["max_retries"].as_u64().unwrap_or(3);
            out.push(Planned {
                retry_on_timeout: job["on_timeout"] == "retry",
                job,
                kind,
                max_attempts: max_retries + 1,
                occurrences: BTreeSet::from([at]),
            });
        }
    };
    one_shot(rng, Kind::Short, soak.short, json!({}), &|_| ":".into());
    one_shot(
        rng,
        Kind::Long,
        soak.long,
        json!({"max_retries": 5, "timeout": "30s"}),
        &|rng| format!("sleep {}", 1 + rng.below(3)),
    );
    one_shot(rng, Kind::Flaky, soak.flaky, json!({"max_retries": 2}), &|_| {
        "[ \"$SKED_ATTEMPT\" -gt 1 ] || exit 1".into()
    });
    one_shot(rng, Kind::Broken, soak.broken, json!({"max_retries": 1}), &|_| {
        "exit 1".into()
    });
    one_shot(
        rng,
        Kind::SlowOnce,
        soak.slowonce,
        json!({"max_retries": 2, "timeout": "1s", "on_timeout": "retry"}),
        &|_| "[ \"$SKED_ATTEMPT\" -gt 1 ] || sleep 10".into(),
    );
    one_shot(
        rng,
        Kind::Hang,
        soak.hang,
        json!({"max_retries": 3, "timeout": "1s", "on_timeout": "fail"}),
        &|_| "sleep 10".into(),
    );
    // Crons: from half a second after `base` to three quarters of the window.
    let from = base + Span::milliseconds(500);
    let to = base + Span::seconds(soak.window_secs * 3 / 4) + Span::milliseconds(500);
    for (kind, n, expr, step) in [
        (Kind::Cron1, soak.cron1, "* * * * * *", 1),
        (Kind::Cron2, soak.cron2, "*/2 * * * * *", 2),
    ] {
        for i in 0..n {
            let name = format!("{kind:?}").to_lowercase();
            out.push(Planned {
                job: json!({
                    "id": format!("{name}-{i:05}"),
                    "schedule": {"cron": expr, "timezone": "UTC"},
                    "start_at": iso(from), "end_at": iso(to),
                    "task": payload(log, ":"), "backoff": backoff,
                    "misfire": "fire_all", "overlap": "allow",
                }),
                kind,
                max_attempts: 4,
                retry_on_timeout: false,
                occurrences: cron_seconds(from, to, step),
            });
        }
    }
    out
}

/// One line of the side-effect log.
#[derive(Debug, Clone)]
struct Effect {
    /// Position in the file (append order).
    seq: usize,
    attempt: u64,
    token: u64,
    end: bool,
}

/// The side-effect log, by run id.
fn read_effects(path: &std::path::Path) -> BTreeMap<String, Vec<Effect>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: BTreeMap<String, Vec<Effect>> = BTreeMap::new();
    for (seq, line) in text.lines().enumerate() {
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 4, "torn side-effect line {seq}: {line:?}");
        let effect = Effect {
            seq,
            attempt: parts[1].parse().unwrap_or_else(|_| panic!("bad attempt in {line:?}")),
            token: parts[2].parse().unwrap_or_else(|_| panic!("bad token in {line:?}")),
            end: match parts[3] {
                "start" => false,
                "end" => true,
                other => panic!("bad marker {other:?} in {line:?}"),
            },
        };
        out.entry(parts[0].to_string()).or_default().push(effect);
    }
    out
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

/// Tallies of the audit.
#[derive(Debug, Default)]
struct Tally {
    runs: usize,
    attempts: usize,
    worker_lost: usize,
    reexecuted: usize,
    stale_effects: usize,
    log_overlaps: usize,
    /// `start` and `end` lines in the side-effect log.
    starts: usize,
    ends: usize,
    by_state: BTreeMap<String, usize>,
}

async fn soak(soak: Soak) {
    let started = Instant::now();
    let seed = std::env::var("SKED_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Utc::now().timestamp_nanos_opt().unwrap_or(1) as u64 | 1);
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
    let drain_deadline = Instant::now() + soak.drain;
    let runs = loop {
        let open = api.all_runs("state=PENDING").await.len() + api.all_runs("state=RUNNING").await.len();
        if open == 0 {
            let runs = api.all_runs("").await;
            if runs.len() >= expected_runs && runs.iter().all(is_terminal) {
                break runs;
            }
        }
        if Instant::now() > drain_deadline {
            let runs = api.all_runs("").await;
            let open: Vec<_> = runs.iter().filter(|r| !is_terminal(r)).take(5).collect();
            panic!(
                "after {:?} of draining: {} of {expected_runs} runs exist, {} not terminal; e.g. {open:?}",
                soak.drain,
                runs.len(),
                runs.iter().filter(|r| !is_terminal(r)).count()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let drained = started.elapsed();

    // Every job is still there.
    let jobs = api.all_jobs("").await;
    let job_ids: BTreeSet<&str> = jobs.iter().map(|j| j["id"].as_str().unwrap()).collect();
    let planned_ids: BTreeSet<&str> = planned.iter().map(|p| p.job["id"].as_str().unwrap()).collect();
    assert_eq!(job_ids, planned_ids, "jobs lost or invented");

    let effects = read_effects(&effects_path);
    let tally = audit(&planned, &runs, &effects);

    let lost = expected_runs.saturating_sub(runs.len());
    println!(
        "crash soak: jobs={} runs={} attempts={} worker_kills={} server_kills={} worker_lost={} \
         reexecuted_attempts={} effects(start/end)={}/{} stale_token_effects={} log_overlaps={} lost={lost} \
         states={:?}",
        planned.len(),
        tally.runs,
        tally.attempts,
        fleet.worker_kills,
        fleet.server_kills,
        tally.worker_lost,
        tally.reexecuted,
        tally.starts,
        tally.ends,
        tally.stale_effects,
        tally.log_overlaps,
        tally.by_state,
    );
    println!(
        "crash soak: wall {:.1}s (created in {:.1}s, chaos until {:.1}s, drained at {:.1}s)",
        started.elapsed().as_secs_f64(),
        created_in.as_secs_f64(),
        chaos_done.as_secs_f64(),
        drained.as_secs_f64()
    );
    assert_eq!(lost, 0);
    assert!(fleet.worker_kills >= 3, "too few worker kills to mean anything");
}

/// Checks every run against its job's plan and the side-effect log; panics listing the
/// first problems found.
fn audit(planned: &[Planned], runs: &[Value], effects: &BTreeMap<String, Vec<Effect>>) -> Tally {
    let mut tally = Tally::default();
    let mut problems: Vec<String> = Vec::new();
    let by_id: BTreeMap<&str, &Planned> = planned.iter().map(|p| (p.job["id"].as_str().unwrap(), p)).collect();
    let mut runs_of: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for run in runs {
        runs_of.entry(run["job_id"].as_str().unwrap()).or_default().push(run);
    }
    let known_runs: BTreeSet<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    for run_id in effects.keys() {
        if !known_runs.contains(run_id.as_str()) {
            problems.push(format!("a payload ran for {run_id}, which the API does not list"));
        }
    }

    for p in planned {
        let id = p.job["id"].as_str().unwrap();
        let mine = runs_of.remove(id).unwrap_or_default();
        let nominal: Vec<DateTime<Utc>> = mine.iter().map(|r| time(r, "scheduled_for")).collect();
        let distinct: BTreeSet<DateTime<Utc>> = nominal.iter().copied().collect();
        if distinct.len() != nominal.len() {
            problems.push(format!("{id}: two runs for one nominal time"));
        }
        if distinct != p.occurrences {
            let missing: Vec<_> = p.occurrences.difference(&distinct).map(|t| iso(*t)).collect();
            let extra: Vec<_> = distinct.difference(&p.occurrences).map(|t| iso(*t)).collect();
            problems.push(format!("{id}: occurrences missing {missing:?}, unexpected {extra:?}"));
        }
        for run in mine {
            tally.runs += 1;
            *tally
                .by_state
                .entry(run["state"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
            check_run(p, run, effects, &mut tally, &mut problems);
        }
    }
    for (job, rs) in runs_of {
        if !by_id.contains_key(job) {
            problems.push(format!("{} runs of unknown job {job}", rs.len()));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems, first ones:\n{}",
        problems.len(),
        problems.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    tally
}

/// The per-run checks (see the module header).
fn check_run(
    p: &Planned,
    run: &Value,
    effects: &BTreeMap<String, Vec<Effect>>,
    tally: &mut Tally,
    problems: &mut Vec<String>,
) {
    let run_id = run["run_id"].as_str().unwrap();
    let state = run["state"].as_str().unwrap_or("?");
    let attempts = run["attempts"].as_array().cloned().unwrap_or_default();
    let mut bad = |what: String| problems.push(format!("{run_id} ({state}): {what}; run: {run}"));
    tally.attempts += attempts.len();

    if !is_terminal(run) {
        bad("not terminal".into());
        return;
    }
    if attempts.is_empty() || attempts.len() as u64 > p.max_attempts {
        bad(format!(
            "{} attempts, policy allows 1..={}",
            attempts.len(),
            p.max_attempts
        ));
        return;
    }
    let mut previous_lost = false;
    for (i, a) in attempts.iter().enumerate() {
        let n = i as u64 + 1;
        let outcome = a["outcome"].as_str().unwrap_or("");
        if a["attempt"].as_u64() != Some(n) {
            bad(format!("attempt {n} is numbered {}", a["attempt"]));
        }
        if a["finished_at"].is_null() || outcome.is_empty() {
            bad(format!("attempt {n} never closed"));
            continue;
        }
        if time(a, "finished_at") < time(a, "started_at") {
            bad(format!("attempt {n} finished before it started"));
        }
        if let Some(next) = attempts.get(i + 1)
            && time(next, "started_at") < time(a, "finished_at")
        {
            bad(format!("attempts {n} and {} overlap", n + 1));
        }
        let last = i + 1 == attempts.len();
        if outcome == "worker_lost" {
            tally.worker_lost += 1;
        } else if outcome != p.kind.outcome(n) {
            bad(format!(
                "attempt {n} ended {outcome}, its payload dictates {}",
                p.kind.outcome(n)
            ));
        }
        if previous_lost {
            tally.reexecuted += 1;
        }
        previous_lost = outcome == "worker_lost";
        if !last {
            let retryable =
                outcome == "failed" || outcome == "worker_lost" || (outcome == "timed_out" && p.retry_on_timeout);
            if !retryable {
                bad(format!("attempt {n} ended {outcome} yet was retried"));
            }
        } else {
            let exhausted = attempts.len() as u64 == p.max_attempts;
            let expected_state = match outcome {
                "succeeded" => Some("SUCCEEDED"),
                "failed" | "worker_lost" if exhausted => Some("FAILED"),
                "timed_out" if exhausted || !p.retry_on_timeout => Some("TIMED_OUT"),
                _ => None,
            };
            if expected_state != Some(state) {
                bad(format!(
                    "last attempt {n} ended {outcome} with {} attempts allowed",
                    p.max_attempts
                ));
            }
        }
    }

    // The side-effect log.
    let lines = effects.get(run_id).map(Vec::as_slice).unwrap_or_default();
    tally.starts += lines.iter().filter(|e| !e.end).count();
    tally.ends += lines.iter().filter(|e| e.end).count();
    let mut token_of: BTreeMap<u64, u64> = BTreeMap::new();
    for e in lines.iter().filter(|e| !e.end) {
        if token_of.insert(e.attempt, e.token).is_some() {
            bad(format!("attempt {} ran its payload twice", e.attempt));
        }
        if e.attempt == 0 || e.attempt > attempts.len() as u64 {
            bad(format!(
                "a payload ran as attempt {}, which the API does not list",
                e.attempt
            ));
        }
    }
    let tokens: Vec<u64> = token_of.values().copied().collect();
    if tokens.windows(2).any(|w| w[0] >= w[1]) {
        bad(format!("tokens do not grow with the attempt number: {token_of:?}"));
    }
    for e in lines.iter().filter(|e| e.end) {
        if token_of.get(&e.attempt) != Some(&e.token) {
            bad(format!(
                "an end line of attempt {} token {} without its start",
                e.attempt, e.token
            ));
        }
    }
    for (i, a) in attempts.iter().enumerate() {
        let n = i as u64 + 1;
        let outcome = a["outcome"].as_str().unwrap_or("");
        let ends = lines.iter().filter(|e| e.end && e.attempt == n).count();
        match outcome {
            "worker_lost" => tally.stale_effects += ends,
            _ if !token_of.contains_key(&n) => bad(format!("attempt {n} ended {outcome} without running its payload")),
            "succeeded" => {
                // The valid token: this attempt's. Its effect must be committed exactly once.
                let valid = token_of[&n];
                let committed = lines.iter().filter(|e| e.end && e.token == valid).count();
                if committed != 1 {
                    bad(format!(
                        "the effect under valid token {valid} was committed {committed} times"
                    ));
                }
            }
            _ if ends > 0 => bad(format!("attempt {n} ended {outcome} yet wrote its effect")),
            _ => {}
        }
    }
    // Payload overlap in file order: an attempt's end after the next attempt's start.
    for e in lines.iter().filter(|e| e.end) {
        if lines.iter().any(|s| !s.end && s.attempt > e.attempt && s.seq < e.seq) {
            tally.log_overlaps += 1;
        }
    }
}
