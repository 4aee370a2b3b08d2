//! The invariants, checked after every step ([`Checker::step`]) and at the end
//! ([`Checker::finish`]). Each finding is a sentence naming the run or job and the time. This is
//! the one list of what the simulation checks; each item names the guarantee of the README
//! ("Guarantees, and what they assume") it stands for.
//!
//! - **Leases** (guarantees 2 and 3): no two live leases on one run, no completion or renewal
//!   by a fenced-off token (found by the audit, call by call); a RUNNING run holds a lease and
//!   one open attempt, other states hold neither.
//! - **Attempts** (guarantees 2 and 4): never more than `max_retries + 1`; attempts of one run
//!   never overlap in time; a retry after a failure or timeout starts no earlier than its
//!   backoff allows (jitter and clock skew accounted for).
//! - **Payloads** (guarantee 2): two executions of one run never overlap in true time (beyond
//!   the clock skew), unless the earlier one's worker was paused — a paused process cannot
//!   stop its payload; the fencing token is what keeps its late writes out.
//! - **Occurrences** (guarantee 1): every occurrence a sweep passed over became a run or was
//!   skipped with a reason, exactly once — never lost, never fired twice or fired and skipped
//!   (a run counts where a firing inserted it: after a change of timing, a firing may plan a
//!   time the old timing fired ahead, and the store keeps the run that exists);
//!   every run is of a due occurrence; a skip is of an occurrence some firing passed over;
//!   `next_fire_at` only moves by a firing or by a user change of the schedule.
//! - **Runs fired ahead** (guarantee 1; the AWS deployment's look-ahead,
//!   [`super::SimConfig::fire_ahead`]): a run of a schedule never starts before its time, and
//!   its first attempt never starts while its job stays PAUSED (observed paused at a step's
//!   end and still paused at the end of the step its attempt appeared in: one user call at
//!   most happens in a step, so the job was paused throughout, and the claim read it so),
//!   nor once a change of the job's timing (made before the step) dropped its time
//!   (`sked_core::lifecycle::retimed_away`).
//! - **Lag** (guarantee 6): an ACTIVE job is never more than [`LAG_BOUND`] behind.
//! - **The end** (guarantee 5): once jobs stop and faults cease, every run ends.
//! - **Concurrency keys**: the runs of a tenant holding a key under a lease every process
//!   counts as live never outnumber the key's limit.
//! - **Dependencies** (at the end): an `after` job's run exists only once its upstreams' runs
//!   at its nominal time ended as it asks, before it was written; a skip for `upstream_failed`
//!   has an upstream that ended otherwise; no upstream end while the downstream job existed
//!   left the downstream's occurrence undecided.
//! - **Turns** (guarantee 7): while a tenant has a ready message in the queue, no other tenant
//!   is served twice before it (the queue records each take: who was ready, who was served).

use super::audit::JobEvent;
use super::payload::Execution;
use crate::faults::{FaultCounts, FaultKind};
use crate::memory::queue::Take;
use sked_core::alert::{AlertOn, AlertState};
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::lifecycle::retimed_away;
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::schedule::next_fire_after;
use sked_core::service::fire::SkippedOccurrence;
use sked_core::timestamp::{self, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// Furthest an ACTIVE job's `next_fire_at` may fall behind the true time.
pub const LAG_BOUND: Dur = Dur::secs(60);
/// Most findings kept (the first ones matter).
const MAX_FINDINGS: usize = 20;

/// Collects findings.
#[derive(Debug, Default)]
pub struct Checker {
    /// Largest clock offset of any process, in ms.
    max_skew_ms: i64,
    /// What broke, in order.
    findings: Vec<String>,
    /// Findings already reported (each is reported once).
    seen: BTreeSet<String>,
    /// Per tenant waiting with a ready message: how many times each other tenant has been
    /// served since (reset when the waiting tenant is served or has nothing ready).
    turns_owed: BTreeMap<TenantId, BTreeMap<TenantId, u32>>,
    /// Jobs observed PAUSED at the end of the last step.
    paused: BTreeSet<(TenantId, JobId)>,
    /// Each job's version at the end of the last step.
    versions: BTreeMap<(TenantId, JobId), u64>,
    /// Runs whose first attempt has been seen.
    tried: BTreeSet<(TenantId, RunId)>,
}

impl Checker {
    /// A checker tolerating clock offsets up to `max_skew_ms`.
    pub fn new(max_skew_ms: u64) -> Self {
        Checker {
            max_skew_ms: max_skew_ms as i64,
            ..Checker::default()
        }
    }

    /// What broke so far.
    pub fn violations(&self) -> &[String] {
        &self.findings
    }

    fn report(&mut self, now: Timestamp, what: String) {
        if self.findings.len() < MAX_FINDINGS && self.seen.insert(what.clone()) {
            self.findings.push(format!("at {}: {what}", timestamp::format(&now)));
        }
    }

    /// How far apart two processes' clocks may be, as a chrono duration (plus a millisecond
    /// of truncation).
    fn skew(&self) -> chrono::Duration {
        chrono::Duration::milliseconds(2 * self.max_skew_ms + 1)
    }

    /// The checks of every step.
    pub fn step(&mut self, now: Timestamp, runs: &[Run], jobs: &[Job], execs: &[Execution], audit: Vec<String>) {
        for v in audit {
            self.report(now, v);
        }
        for run in runs {
            self.check_run(now, run, jobs);
            self.check_alert(now, run);
        }
        self.check_first_attempts(now, runs, jobs);
        self.check_executions(now, execs);
        self.check_concurrency_keys(now, runs);
        for job in jobs {
            // Measured from the job's last change too: a job just resumed is due at once.
            if job.state == JobState::Active
                && let Some(next) = job.next_fire_at
                && next.max(job.updated_at) < now - LAG_BOUND.to_chrono()
            {
                self.report(
                    now,
                    format!(
                        "job {} is behind: next_fire_at {} is more than {LAG_BOUND} ago",
                        job.id,
                        timestamp::format(&next)
                    ),
                );
            }
        }
    }

    /// Runs of a schedule whose first attempt appeared in this step: not before their time,
    /// not while their job stays paused, not at a time their job's timing dropped before the
    /// step. Then notes which jobs are paused now, and each job's version.
    fn check_first_attempts(&mut self, now: Timestamp, runs: &[Run], jobs: &[Job]) {
        let paused_now: BTreeSet<(TenantId, JobId)> = jobs
            .iter()
            .filter(|j| j.state == JobState::Paused)
            .map(|j| (j.tenant.clone(), j.id.clone()))
            .collect();
        for run in runs {
            let Some(first) = run.attempts.first() else { continue };
            if run.trigger != Trigger::Schedule || !self.tried.insert((run.tenant.clone(), run.run_id.clone())) {
                continue;
            }
            let id = &run.run_id;
            if first.started_at < run.scheduled_for - self.skew() {
                let (started, due) = (
                    timestamp::format(&first.started_at),
                    timestamp::format(&run.scheduled_for),
                );
                self.report(now, format!("{id} started at {started}, before its time {due}"));
            }
            let key = (run.tenant.clone(), run.job_id.clone());
            if self.paused.contains(&key) && paused_now.contains(&key) {
                let started = timestamp::format(&first.started_at);
                self.report(now, format!("{id} started at {started} while its job was paused"));
            }
            // The job as its claim read it (no change since the last step's end).
            let job = jobs.iter().find(|j| j.tenant == run.tenant && j.id == run.job_id);
            if let Some(job) = job.filter(|j| self.versions.get(&key) == Some(&j.version))
                && retimed_away(job, &run.run_id)
            {
                let changed = timestamp::format(&job.updated_at);
                self.report(
                    now,
                    format!("{id} started though its job's timing, changed at {changed}, no longer has its time"),
                );
            }
        }
        self.paused = paused_now;
        self.versions = jobs
            .iter()
            .map(|j| ((j.tenant.clone(), j.id.clone()), j.version))
            .collect();
    }

    /// The queue's takes since the last call, in order: a tenant with a ready message is
    /// served before any other tenant is served twice.
    pub fn takes(&mut self, now: Timestamp, takes: Vec<Take>) {
        for take in takes {
            let mut ready = take.ready;
            self.turns_owed.retain(|tenant, _| ready.contains_key(tenant));
            for tenant in ready.keys() {
                self.turns_owed.entry(tenant.clone()).or_default();
            }
            let mut findings = Vec::new();
            for served in &take.served {
                for (waiting, owed) in self.turns_owed.iter_mut().filter(|(w, _)| *w != served) {
                    let n = owed.entry(served.clone()).or_default();
                    *n += 1;
                    if *n > 1 {
                        findings.push(format!(
                            "tenant {served} was served {n} times while tenant {waiting} had a ready message"
                        ));
                    }
                }
                // The served tenant's wait restarts, or ends with its last ready message.
                let left = ready.get_mut(served).map_or(0, |n| {
                    *n = n.saturating_sub(1);
                    *n
                });
                if left == 0 {
                    self.turns_owed.remove(served);
                } else if let Some(owed) = self.turns_owed.get_mut(served) {
                    owed.clear();
                }
            }
            for finding in findings {
                self.report(now, finding);
            }
        }
    }

    /// Per tenant and concurrency key, the runs RUNNING under a lease that every process,
    /// whatever its clock's offset, still counts as live (past `now` by more than the skew)
    /// are at most the key's limit.
    fn check_concurrency_keys(&mut self, now: Timestamp, runs: &[Run]) {
        let live_for_all = now + self.skew();
        let mut holders: BTreeMap<(&TenantId, &str), (u32, Vec<&str>)> = BTreeMap::new();
        for run in runs.iter().filter(|r| r.state == RunState::Running) {
            let (Some(key), Some(lease)) = (&run.concurrency, &run.lease) else {
                continue;
            };
            if lease.expires_at > live_for_all {
                let entry = holders
                    .entry((&run.tenant, key.key.as_str()))
                    .or_insert((key.limit, Vec::new()));
                entry.1.push(run.run_id.as_str());
            }
        }
        for ((tenant, key), (limit, runs)) in holders {
            if runs.len() as u32 > limit {
                let what = format!(
                    "concurrency key {key} of tenant {tenant} is held by {} runs, past its limit {limit}: {}",
                    runs.len(),
                    runs.join(", ")
                );
                self.report(now, what);
            }
        }
    }

    /// A run's alert is armed exactly when the run has ended as its `notify.on` asks: whatever
    /// ended it (a worker, a claim, a cancel, a skip, the reaper) armed it in the same write.
    fn check_alert(&mut self, now: Timestamp, run: &Run) {
        let Some(alert) = &run.alert else { return };
        let asked = AlertOn::of(run).filter(|e| alert.notify.on.contains(e));
        let armed = alert.state != AlertState::Idle;
        if armed != asked.is_some() || (armed && alert.event != asked) {
            let id = &run.run_id;
            let state = run.state;
            self.report(
                now,
                format!("{id} is {state} but its alert is {} for {:?}", alert.state, alert.event),
            );
        }
        if armed && alert.due.is_some_and(|due| run.finished_at.is_none_or(|end| due < end)) {
            self.report(now, format!("{} has an alert due before the run ended", run.run_id));
        }
    }

    fn check_run(&mut self, now: Timestamp, run: &Run, jobs: &[Job]) {
        let id = &run.run_id;
        let n = run.attempts.len();
        if n as u32 > run.max_attempts {
            self.report(
                now,
                format!("{id} has {n} attempts; at most {} allowed", run.max_attempts),
            );
        }
        let open = run.attempts.iter().filter(|a| a.finished_at.is_none()).count();
        match run.state {
            RunState::Running => {
                if run.lease.is_none() || open != 1 || run.attempts.last().is_none_or(|a| a.finished_at.is_some()) {
                    self.report(now, format!("{id} is RUNNING without exactly one open, leased attempt"));
                }
            }
            _ => {
                if run.lease.is_some() || open != 0 {
                    self.report(
                        now,
                        format!("{id} is {} but holds a lease or an open attempt", run.state),
                    );
                }
            }
        }
        let backoff = jobs.iter().find(|j| j.id == run.job_id).map(|j| j.spec.backoff);
        for pair in run.attempts.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let Some(ended) = a.finished_at else {
                self.report(
                    now,
                    format!("{id}: attempt {} started while {} was open", b.attempt, a.attempt),
                );
                continue;
            };
            if b.started_at < ended {
                self.report(
                    now,
                    format!(
                        "{id}: attempt {} started at {} before attempt {} ended at {}",
                        b.attempt,
                        timestamp::format(&b.started_at),
                        a.attempt,
                        timestamp::format(&ended)
                    ),
                );
            }
            // Retries after a failure or a timeout wait their backoff; a lost worker's run is
            // taken over as soon as its lease has expired.
            if let (Some(AttemptOutcome::Failed | AttemptOutcome::TimedOut), Some(backoff)) = (a.outcome, backoff) {
                let raw = backoff.initial.as_millis() as f64 * backoff.factor.max(1.0).powi(a.attempt as i32 - 1);
                let least = raw.min(backoff.max.as_millis() as f64) * (1.0 - backoff.jitter.clamp(0.0, 1.0));
                let earliest = ended + chrono::Duration::milliseconds(least as i64 - 1) - self.skew();
                if b.started_at < earliest {
                    self.report(
                        now,
                        format!(
                            "{id}: attempt {} started {} ms after attempt {} ({}) ended; its backoff is at least {} ms",
                            b.attempt,
                            (b.started_at - ended).num_milliseconds(),
                            a.attempt,
                            a.error.as_deref().unwrap_or(""),
                            least as i64
                        ),
                    );
                }
            }
        }
    }

    /// `after` jobs: a downstream run (not SKIPPED) exists only once every upstream's run at its
    /// nominal time ended as `on` asks, before the downstream run was written; one skipped for
    /// `upstream_failed` has an upstream that ended otherwise; and every upstream run that
    /// ended while the downstream job existed decided the downstream's occurrence (a run at its
    /// time exists: none was lost).
    fn check_dependencies(&mut self, now: Timestamp, runs: &[Run], jobs: &[Job]) {
        let by_id: std::collections::HashMap<(&TenantId, &RunId), &Run> =
            runs.iter().map(|r| ((&r.tenant, &r.run_id), r)).collect();
        let margin = self.skew() * 2 + chrono::Duration::seconds(1);
        for d in jobs.iter().filter(|j| j.state != JobState::Deleted) {
            let Some(after) = d.spec.schedule.after() else { continue };
            let upstream_run = |u: &JobId, t: Timestamp| by_id.get(&(&d.tenant, &RunId::derive(u, t))).copied();
            for r in runs
                .iter()
                .filter(|r| r.tenant == d.tenant && r.job_id == d.id && r.trigger == Trigger::After)
            {
                let ups: Vec<Option<&Run>> = after.jobs.iter().map(|u| upstream_run(u, r.scheduled_for)).collect();
                let failed = ups
                    .iter()
                    .flatten()
                    .any(|u| u.state.is_terminal() && !after.on.accepts(u.state));
                let verdict = if r.state == RunState::Skipped {
                    match r.reason.as_deref() {
                        Some(sked_core::dependency::UPSTREAM_FAILED) if !failed => {
                            Some("skipped as upstream_failed, but no upstream ended otherwise")
                        }
                        _ => None,
                    }
                } else if ups.iter().any(|u| {
                    u.is_none_or(|u| {
                        !after.on.accepts(u.state) || u.finished_at.is_none_or(|end| end > r.created_at + margin)
                    })
                }) {
                    Some("runs without every upstream run at its time ended as asked before it")
                } else {
                    None
                };
                if let Some(what) = verdict {
                    self.report(now, format!("{}: {what}: {ups:?}", r.run_id));
                }
            }
            for u in &after.jobs {
                for ur in runs
                    .iter()
                    .filter(|r| r.tenant == d.tenant && &r.job_id == u && r.state.is_terminal())
                {
                    let ended_while_d_existed = ur.finished_at.is_some_and(|end| end > d.created_at + margin);
                    if ended_while_d_existed
                        && !by_id.contains_key(&(&d.tenant, &RunId::derive(&d.id, ur.scheduled_for)))
                    {
                        self.report(
                            now,
                            format!(
                                "{}: ended {} while {} ran after it, and {}'s occurrence at that time was never decided",
                                ur.run_id, ur.state, d.id, d.id
                            ),
                        );
                    }
                }
            }
        }
    }

    fn check_executions(&mut self, now: Timestamp, execs: &[Execution]) {
        let mut by_run: BTreeMap<&str, Vec<&Execution>> = BTreeMap::new();
        for e in execs {
            by_run.entry(e.run_id.as_str()).or_default().push(e);
        }
        for (run, mut list) in by_run {
            list.sort_by_key(|e| (e.started_at, e.token));
            for pair in list.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                if a.paused {
                    continue;
                }
                let a_end = a.ended_at.unwrap_or(now);
                if a_end > b.started_at + self.skew() {
                    let until = a.ended_at.map_or("now".to_string(), |t| timestamp::format(&t));
                    self.report(
                        now,
                        format!(
                            "{run}: payload of token {} (w{}) still ran until {until} when token {} (w{}) started at {}",
                            a.token,
                            a.worker,
                            b.token,
                            b.worker,
                            timestamp::format(&b.started_at)
                        ),
                    );
                }
            }
        }
    }

    /// The checks at the end: every run ended, every occurrence accounted for.
    pub fn finish(
        &mut self,
        now: Timestamp,
        runs: &[Run],
        jobs: &[Job],
        events: &BTreeMap<(sked_core::ids::TenantId, JobId), Vec<JobEvent>>,
        skips: &[SkippedOccurrence],
    ) {
        // A run of a paused job's schedule waits for the resume (every job is paused by now).
        let waits = |r: &Run| jobs.iter().any(|j| sked_core::paused::waits_for_resume(r, j));
        for run in runs.iter().filter(|r| !r.state.is_terminal() && !waits(r)) {
            self.report(
                now,
                format!(
                    "{} never ended: {} with {} attempts, not_before {}",
                    run.run_id,
                    run.state,
                    run.attempts.len(),
                    timestamp::format(&run.not_before)
                ),
            );
        }
        self.check_dependencies(now, runs, jobs);
        // Every occurrence accounted for exactly once.
        let mut skipped: BTreeMap<(&JobId, Timestamp), usize> = BTreeMap::new();
        for s in skips {
            *skipped.entry((&s.job_id, s.scheduled_for)).or_default() += 1;
        }
        let mut fired: BTreeMap<(&JobId, Timestamp), usize> = BTreeMap::new();
        let mut passed: BTreeSet<(&JobId, Timestamp)> = BTreeSet::new();
        // Runs inserted before a later change of their job's timing: a firing of a later
        // timing may plan or skip their time again (the ledger shows the run).
        let mut under_earlier_timing: BTreeSet<(&JobId, Timestamp)> = BTreeSet::new();
        // Occurrences sent by firings left unwritten: fired if their run was written
        // ([`JobEvent::Fired::unwritten`]).
        let mut sent: BTreeSet<(&sked_core::ids::TenantId, &JobId, Timestamp)> = BTreeSet::new();
        for ((tenant, job_id), list) in events {
            let mut cursor: Option<Timestamp> = None;
            let mut spec = None;
            for event in list {
                match event {
                    JobEvent::Created(job) => {
                        cursor = job.next_fire_at;
                        spec = Some(job.spec.clone());
                    }
                    JobEvent::Fired {
                        firing: f,
                        inserted,
                        unwritten,
                    } => {
                        // A firing left unwritten moves nothing the next firing is checked
                        // against: until a sweep passes it, the job reads as before.
                        if !unwritten && f.expected_next_fire_at != cursor {
                            self.report(
                                now,
                                format!(
                                    "{job_id}: a firing from {:?} was written while next_fire_at was {:?}",
                                    f.expected_next_fire_at, cursor
                                ),
                            );
                        }
                        let Some(spec) = &spec else { continue };
                        let mut due = Vec::new();
                        let mut t = f.expected_next_fire_at;
                        while let Some(at) = t {
                            if f.next_fire_at.is_some_and(|n| at >= n) || due.len() > 10_000 {
                                break;
                            }
                            due.push(at);
                            t = next_fire_after(&spec.schedule, &spec.dst, &spec.window(), at);
                        }
                        let planned: BTreeSet<Timestamp> = f.runs.iter().map(|r| r.scheduled_for).collect();
                        for at in inserted {
                            match unwritten {
                                true => _ = sent.insert((tenant, job_id, *at)),
                                false => *fired.entry((job_id, *at)).or_default() += 1,
                            }
                        }
                        for at in &planned {
                            if !due.contains(at) {
                                self.report(
                                    now,
                                    format!(
                                        "{job_id}: a run for {} that is not a due occurrence",
                                        timestamp::format(at)
                                    ),
                                );
                            }
                        }
                        for at in due {
                            passed.insert((job_id, at));
                            if !planned.contains(&at) && !skipped.contains_key(&(job_id, at)) {
                                self.report(
                                    now,
                                    format!(
                                        "{job_id}: occurrence {} was lost: neither fired nor skipped",
                                        timestamp::format(&at)
                                    ),
                                );
                            }
                        }
                        if !unwritten {
                            cursor = f.next_fire_at;
                        }
                    }
                    JobEvent::Updated { before, after } => {
                        let timing = before.spec.schedule != after.spec.schedule
                            || before.spec.window() != after.spec.window()
                            || before.spec.dst != after.spec.dst;
                        if timing {
                            under_earlier_timing.extend(fired.keys().filter(|(j, _)| *j == job_id).copied());
                            under_earlier_timing.extend(
                                sent.iter()
                                    .filter(|(t, j, _)| *t == tenant && *j == job_id)
                                    .map(|(_, j, at)| (*j, *at)),
                            );
                        }
                        if after.next_fire_at != before.next_fire_at && !timing && after.state != JobState::Deleted {
                            self.report(
                                now,
                                format!(
                                    "{job_id}: a user change ({} → {}) moved next_fire_at from {:?} to {:?} without changing the schedule",
                                    before.state, after.state, before.next_fire_at, after.next_fire_at
                                ),
                            );
                        }
                        spec = Some(after.spec.clone());
                        cursor = after.next_fire_at;
                    }
                }
            }
        }
        let written: BTreeSet<(&sked_core::ids::TenantId, &RunId)> =
            runs.iter().map(|r| (&r.tenant, &r.run_id)).collect();
        for (tenant, job_id, at) in sent {
            if written.contains(&(tenant, &RunId::derive(job_id, at))) {
                fired.entry((job_id, at)).or_insert(1);
            }
        }
        for ((job_id, at), n) in &fired {
            let skips = skipped.get(&(*job_id, *at)).copied().unwrap_or(0);
            // A time fired under an earlier timing and skipped by a later one's firing (after
            // two changes within the look-ahead: the first ended the run, the second has the
            // time again) is its run, as the ledger reads it (`sked_core::ledger::page`).
            let refired = *n == 1 && under_earlier_timing.contains(&(*job_id, *at));
            if n + skips > 1 && !refired {
                self.report(
                    now,
                    format!(
                        "{job_id}: occurrence {} accounted {} times (fired {n}, skipped {skips})",
                        timestamp::format(at),
                        n + skips
                    ),
                );
            }
        }
        for ((job_id, at), n) in &skipped {
            if *n > 1 && !fired.contains_key(&(*job_id, *at)) {
                self.report(
                    now,
                    format!("{job_id}: occurrence {} skipped {n} times", timestamp::format(at)),
                );
            }
            if !passed.contains(&(*job_id, *at)) {
                self.report(
                    now,
                    format!(
                        "{job_id}: a skip of {} that no firing passed over",
                        timestamp::format(at)
                    ),
                );
            }
        }
    }
}

/// Counts the payload faults the workload carried: executions that hung, failed, or ran
/// past their job's timeout.
pub fn count_payload_faults(execs: &[Execution], jobs: &[Job], counts: &mut FaultCounts) {
    for e in execs {
        let Some(job) = jobs.iter().find(|j| e.run_id.starts_with(&format!("{}@", j.id))) else {
            continue;
        };
        let sked_core::task::Task::Command(c) = &job.spec.task else {
            continue;
        };
        match c.argv.first().map(String::as_str) {
            Some("hang") => counts.add(FaultKind::PayloadHang),
            Some("fail") => counts.add(FaultKind::PayloadFail),
            Some("sleep") => {
                let ms: i64 = c.argv.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                if ms > job.spec.timeout.as_millis() {
                    counts.add(FaultKind::PayloadOverTimeout);
                }
            }
            _ => {}
        }
    }
}
