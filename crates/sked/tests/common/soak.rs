//! The crash tests' job mix and audit, shared by the local crash soak (`crash_soak.rs`) and
//! the AWS one (`aws_crash.rs`): the [`plan`] of one-shot and cron jobs whose payloads append
//! `<run_id> <attempt> <fencing token> start|end` to a side-effect log, the drain until every
//! run has ended, and the [`audit`] of every run against its plan and that log (the checks
//! are listed in `crash_soak.rs`'s header).

use super::*;
use chrono::{DateTime, Duration as Span, DurationRound, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How many jobs of each kind, and how long the chaos lasts.
#[derive(Debug, Clone, Copy)]
pub struct Soak {
    pub short: usize,
    pub long: usize,
    pub flaky: usize,
    pub broken: usize,
    pub slowonce: usize,
    pub hang: usize,
    pub cron1: usize,
    pub cron2: usize,
    /// One-shots are due over this many seconds; crons fire over most of it.
    pub window_secs: i64,
    /// Most time allowed, after the chaos, for every run to end.
    pub drain: Duration,
}

impl Soak {
    pub fn jobs(&self) -> usize {
        self.short + self.long + self.flaky + self.broken + self.slowonce + self.hang + self.cron1 + self.cron2
    }
}

/// xorshift64*: enough randomness for kill choices and the job mix, replayable by seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What a job does (its id is `<kind>-<n>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
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
    pub fn is_cron(self) -> bool {
        matches!(self, Kind::Cron1 | Kind::Cron2)
    }

    /// How an attempt numbered `n` ends when its worker survives it.
    pub fn outcome(self, n: u64) -> &'static str {
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
pub struct Planned {
    pub job: Value,
    pub kind: Kind,
    pub max_attempts: u64,
    pub retry_on_timeout: bool,
    /// Nominal times its runs must have.
    pub occurrences: BTreeSet<DateTime<Utc>>,
}

/// The payload: `start` line, `work`, `end` line.
pub fn payload(log: &str, work: &str) -> Value {
    sh(&format!(
        "e=\"$SKED_RUN_ID $SKED_ATTEMPT $SKED_FENCING_TOKEN\"; echo \"$e start\" >> {log}; {work}; echo \"$e end\" >> {log}"
    ))
}

/// Every whole second `t` in `[from, to]` with `t.second % step == 0`.
pub fn cron_seconds(from: DateTime<Utc>, to: DateTime<Utc>, step: u32) -> BTreeSet<DateTime<Utc>> {
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
pub fn plan(soak: &Soak, rng: &mut Rng, log: &str, base: DateTime<Utc>) -> Vec<Planned> {
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
pub struct Effect {
    /// Position in the file (append order).
    pub seq: usize,
    pub attempt: u64,
    pub token: u64,
    pub end: bool,
}

/// The side-effect log, by run id.
pub fn read_effects(path: &std::path::Path) -> BTreeMap<String, Vec<Effect>> {
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

/// Tallies of the audit.
#[derive(Debug, Default)]
pub struct Tally {
    pub runs: usize,
    pub attempts: usize,
    pub worker_lost: usize,
    pub reexecuted: usize,
    pub stale_effects: usize,
    pub log_overlaps: usize,
    /// `start` and `end` lines in the side-effect log.
    pub starts: usize,
    pub ends: usize,
    pub by_state: BTreeMap<String, usize>,
}

/// The soak's seed: `SKED_SOAK_SEED`, else one from the clock (printed by the caller so a
/// failure can be replayed).
pub fn seed_from_env() -> u64 {
    std::env::var("SKED_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Utc::now().timestamp_nanos_opt().unwrap_or(1) as u64 | 1)
}

/// Asserts that `jobs` (as the API lists them) are exactly the planned ones.
pub fn assert_jobs_kept(planned: &[Planned], jobs: &[Value]) {
    let job_ids: BTreeSet<&str> = jobs.iter().map(|j| j["id"].as_str().unwrap()).collect();
    let planned_ids: BTreeSet<&str> = planned.iter().map(|p| p.job["id"].as_str().unwrap()).collect();
    assert_eq!(job_ids, planned_ids, "jobs lost or invented");
}

/// When a soak's phases ended, from its start.
pub struct Phases {
    pub started: Instant,
    pub created_in: Duration,
    pub chaos_done: Duration,
    pub drained: Duration,
}

impl Phases {
    /// The `<name>: wall …` line.
    pub fn line(&self, name: &str) -> String {
        format!(
            "{name}: wall {:.1}s (created in {:.1}s, chaos until {:.1}s, drained at {:.1}s)",
            self.started.elapsed().as_secs_f64(),
            self.created_in.as_secs_f64(),
            self.chaos_done.as_secs_f64(),
            self.drained.as_secs_f64()
        )
    }
}

impl Tally {
    /// The audit's figures as `name=value` pairs.
    pub fn figures(&self) -> String {
        format!(
            "worker_lost={} reexecuted_attempts={} effects(start/end)={}/{} stale_token_effects={} log_overlaps={} \
             states={:?}",
            self.worker_lost,
            self.reexecuted,
            self.starts,
            self.ends,
            self.stale_effects,
            self.log_overlaps,
            self.by_state
        )
    }
}

/// Waits (at most `timeout`) until `api` lists at least `expected_runs` runs and every run
/// has ended; returns them all. Panics with what is still open at the deadline.
pub async fn drain(api: &Api, expected_runs: usize, timeout: Duration) -> Vec<Value> {
    let drain_deadline = Instant::now() + timeout;
    let mut next_report = Instant::now() + Duration::from_secs(10);
    loop {
        let pending = api.all_runs("state=PENDING").await;
        let running = api.all_runs("state=RUNNING").await;
        let open = pending.len() + running.len();
        if Instant::now() >= next_report {
            // Progress, so a slow drain shows what it waits for.
            let oldest = |runs: &[Value]| {
                runs.iter()
                    .map(|r| r["run_id"].as_str().unwrap_or("?").to_string())
                    .min()
            };
            eprintln!(
                "draining: {} PENDING (e.g. {:?}), {} RUNNING (e.g. {:?})",
                pending.len(),
                oldest(&pending),
                running.len(),
                oldest(&running)
            );
            next_report = Instant::now() + Duration::from_secs(10);
        }
        if open == 0 {
            let runs = api.all_runs("").await;
            if runs.len() >= expected_runs && runs.iter().all(is_terminal) {
                return runs;
            }
        }
        if Instant::now() > drain_deadline {
            let runs = api.all_runs("").await;
            let open: Vec<_> = runs.iter().filter(|r| !is_terminal(r)).take(5).collect();
            panic!(
                "after {timeout:?} of draining: {} of {expected_runs} runs exist, {} not terminal; e.g. {open:?}",
                runs.len(),
                runs.iter().filter(|r| !is_terminal(r)).count()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Checks every run against its job's plan and the side-effect log; panics listing the
/// first problems found.
pub fn audit(planned: &[Planned], runs: &[Value], effects: &BTreeMap<String, Vec<Effect>>) -> Tally {
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
pub fn check_run(
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
