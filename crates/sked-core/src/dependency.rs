//! Dependencies between jobs by nominal time: a job whose schedule is
//! `{"after": {"jobs": ["a", "b"], "on": "success", "within": "1h"}}` has one occurrence per
//! nominal time T at which its upstreams run, decided when they end:
//!
//! - every upstream has a run at T that ended as `on` asks → one run of the downstream job at
//!   T (trigger `after`), PENDING at once;
//! - an upstream's run at T ended otherwise → the occurrence is recorded as a run at T in state
//!   SKIPPED with reason `upstream_failed` (so a chain keeps going: a job after a skipped one
//!   sees its upstream's occurrence ended, SKIPPED, which only `on: any` accepts);
//! - `within` passed since the first upstream's run at T ended, before the others had →
//!   SKIPPED with reason `upstream_timeout`;
//! - the downstream job is PAUSED when its occurrence would run → SKIPPED with reason `paused`.
//!
//! The decision is made in the transaction that ends an upstream run ([`release`]), so no
//! poll is needed and a crash cannot lose it. The run id `<downstream>@T` makes it happen once
//! whichever upstream ends last, however often it is decided. While an occurrence with a
//! `within` waits for more upstreams, a [`Wait`] names its deadline; the reaper gives it up
//! when that passes ([`expire`]), in a transaction of its own.
//!
//! This module holds the rules; stores with transactions run [`release`] and [`expire`] on a
//! [`DependencyTx`], and a store whose writes are conditional expressions (DynamoDB) makes
//! the same [`decide`] with conditions on what it read.

use crate::duration::Dur;
use crate::ids::{JobId, RunId, TenantId};
use crate::job::{Job, JobState, wire_enum};
use crate::lifecycle::ClaimTx;
use crate::run::{Run, RunState, Trigger};
use crate::timestamp::{Timestamp, trunc_ms};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Reason of an occurrence skipped because an upstream's run ended otherwise than `on` asks.
pub const UPSTREAM_FAILED: &str = "upstream_failed";
/// Reason of an occurrence skipped because its upstreams did not all end within `within`.
pub const UPSTREAM_TIMEOUT: &str = "upstream_timeout";
/// Reason of an occurrence skipped because the downstream job was paused when it came.
pub const PAUSED: &str = "paused";
/// Most upstream jobs one job may name.
pub const MAX_UPSTREAMS: usize = 32;
/// Longest `within`.
pub const MAX_WITHIN: Dur = Dur::secs(7 * 24 * 3600);

wire_enum!(
    /// How an upstream's run must end for the downstream to run.
    AfterOn {
        /// SUCCEEDED.
        Success = "success",
        /// FAILED or TIMED_OUT.
        Failure = "failure",
        /// Any end (SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, SKIPPED).
        Any = "any",
    }
);

impl AfterOn {
    /// Whether an upstream run that ended in `state` lets the downstream run.
    pub fn accepts(&self, state: RunState) -> bool {
        match self {
            AfterOn::Success => state == RunState::Succeeded,
            AfterOn::Failure => matches!(state, RunState::Failed | RunState::TimedOut),
            AfterOn::Any => state.is_terminal(),
        }
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by `wire_enum!`
impl Default for AfterOn {
    fn default() -> Self {
        AfterOn::Success
    }
}

/// The `after` schedule: run at each nominal time the upstream jobs ran at, once they ended.
/// (Its OpenAPI schema is written with [`crate::schedule::Schedule`]'s.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct After {
    /// The upstream jobs (same tenant), 1 to 32, each named once.
    pub jobs: Vec<JobId>,
    /// How each upstream's run must end (default `success`).
    #[serde(default)]
    pub on: AfterOn,
    /// Give the occurrence up (`upstream_timeout`) if the upstreams have not all ended this
    /// long after the first of them did; none: wait as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<Dur>,
}

/// A downstream occurrence waiting for more upstreams, given up at `deadline`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Owner.
    pub tenant: TenantId,
    /// The downstream job.
    pub job_id: JobId,
    /// The occurrence's nominal time.
    pub scheduled_for: Timestamp,
    /// When it is given up.
    pub deadline: Timestamp,
}

/// What becomes of a downstream occurrence, given its upstreams' runs at its nominal time.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a return value, moved once; boxing would only add an allocation
pub enum Decision {
    /// This run is written: PENDING to run, or SKIPPED with its reason.
    Write(Run),
    /// Not yet: some upstreams have not ended; given up at this instant.
    Wait(Timestamp),
    /// Not yet, with no deadline (no `within`), or nothing ran at this time.
    Undecided,
}

/// The decision for `downstream`'s occurrence at `t` at `now`, from `upstream_runs` (each
/// listed upstream's run at `t`, if it has one).
pub fn decide(
    downstream: &Job,
    after: &After,
    t: Timestamp,
    upstream_runs: &[Option<Run>],
    now: Timestamp,
) -> Decision {
    let ended: Vec<&Run> = upstream_runs
        .iter()
        .flatten()
        .filter(|r| r.state.is_terminal())
        .collect();
    let Some(first_end) = ended.iter().filter_map(|r| r.finished_at).min() else {
        return Decision::Undecided;
    };
    let skip = |reason| Decision::Write(skipped(downstream, t, now, reason));
    if ended.iter().any(|r| !after.on.accepts(r.state)) {
        return skip(UPSTREAM_FAILED);
    }
    let deadline = after.within.map(|within| first_end + within.to_chrono());
    if deadline.is_some_and(|deadline| now > deadline) {
        return skip(UPSTREAM_TIMEOUT);
    }
    if ended.len() < after.jobs.len() {
        return deadline.map_or(Decision::Undecided, Decision::Wait);
    }
    if downstream.state == JobState::Paused {
        return skip(PAUSED);
    }
    Decision::Write(Run::of_job(downstream, t, Trigger::After, now, now))
}

/// The occurrence at `t` of `downstream`, written at `now` as not run: SKIPPED with `reason`.
fn skipped(downstream: &Job, t: Timestamp, now: Timestamp, reason: &str) -> Run {
    let mut run = Run::of_job(downstream, t, Trigger::After, now, now);
    run.state = RunState::Skipped;
    run.finished_at = Some(trunc_ms(now));
    run.reason = Some(reason.to_string());
    run.arm_alert();
    run
}

/// What a [`Decision`] writes for `downstream`'s occurrence at `t`.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a return value, moved once; boxing would only add an allocation
pub enum Step {
    /// This run (PENDING, or SKIPPED with its reason).
    Write(Run),
    /// This wait.
    Wait(Wait),
    /// Nothing.
    Nothing,
}

/// The write of `decision` at `now`; `expired`: the occurrence's wait passed its deadline, so
/// one still waiting (or undecided) is given up.
pub fn step(downstream: &Job, t: Timestamp, decision: Decision, now: Timestamp, expired: bool) -> Step {
    match decision {
        Decision::Write(run) => Step::Write(run),
        Decision::Wait(_) | Decision::Undecided if expired => Step::Write(given_up(downstream, t, now)),
        Decision::Wait(deadline) => Step::Wait(Wait {
            tenant: downstream.tenant.clone(),
            job_id: downstream.id.clone(),
            scheduled_for: t,
            deadline,
        }),
        Decision::Undecided => Step::Nothing,
    }
}

/// The occurrence at `t` of `downstream` whose wait expired at `now`, given up: SKIPPED with
/// reason `upstream_timeout`.
fn given_up(downstream: &Job, t: Timestamp, now: Timestamp) -> Run {
    skipped(downstream, t, now, UPSTREAM_TIMEOUT)
}

/// The reads and writes [`release`] and [`expire`] make, in the caller's transaction.
pub trait DependencyTx: ClaimTx {
    /// The jobs (of `tenant`, not DELETED) whose `after` names `upstream`.
    fn downstream_jobs(&mut self, tenant: &TenantId, upstream: &JobId) -> Result<Vec<Job>, Self::Error>;
    /// Inserts a run unless its id exists; whether it did.
    fn insert_run(&mut self, run: &Run) -> Result<bool, Self::Error>;
    /// Records a wait, unless one for its occurrence exists.
    fn put_wait(&mut self, wait: &Wait) -> Result<(), Self::Error>;
    /// Removes the wait of an occurrence, if any.
    fn delete_wait(&mut self, tenant: &TenantId, job_id: &JobId, scheduled_for: Timestamp) -> Result<(), Self::Error>;
    /// Called before a downstream occurrence (`job_id` at `t`) is decided: a store whose
    /// transactions do not isolate on their own (PostgreSQL at `READ COMMITTED`) locks the
    /// occurrence here until its transaction ends, so that two upstreams ending at once decide
    /// it one after the other (the second seeing the first's end). Nothing by default.
    fn lock_occurrence(&mut self, tenant: &TenantId, job_id: &JobId, t: Timestamp) -> Result<(), Self::Error> {
        let _ = (tenant, job_id, t);
        Ok(())
    }
}

/// After `ended` reached a terminal state in this transaction: every downstream occurrence it
/// decides, written. Answers the runs written (PENDING ones to enqueue, SKIPPED ones to
/// report), those of the downstream's own downstreams included.
pub fn release<T: DependencyTx>(tx: &mut T, ended: &Run) -> Result<Vec<Run>, T::Error> {
    let mut written = Vec::new();
    if !ended.state.is_terminal() {
        return Ok(written);
    }
    let now = ended.finished_at.unwrap_or(ended.created_at);
    for downstream in tx.downstream_jobs(&ended.tenant, &ended.job_id)? {
        written.extend(settle(tx, &downstream, ended.scheduled_for, now, false)?);
    }
    Ok(written)
}

/// A wait whose deadline passed: its occurrence given up unless it was decided meanwhile.
pub fn expire<T: DependencyTx>(tx: &mut T, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, T::Error> {
    let written = match tx.job(&wait.tenant, &wait.job_id)? {
        Some(job) if job.state != JobState::Deleted => settle(tx, &job, wait.scheduled_for, now, true)?,
        _ => Vec::new(),
    };
    tx.delete_wait(&wait.tenant, &wait.job_id, wait.scheduled_for)?;
    Ok(written)
}

/// Decides `downstream`'s occurrence at `t` and writes the decision; `expired`: its wait's
/// deadline passed, so an occurrence still waiting is given up.
fn settle<T: DependencyTx>(
    tx: &mut T,
    downstream: &Job,
    t: Timestamp,
    now: Timestamp,
    expired: bool,
) -> Result<Vec<Run>, T::Error> {
    let Some(after) = downstream.spec.schedule.after() else {
        return Ok(Vec::new());
    };
    let tenant = &downstream.tenant;
    tx.lock_occurrence(tenant, &downstream.id, t)?;
    if tx.run(tenant, &RunId::derive(&downstream.id, t))?.is_some() {
        return Ok(Vec::new());
    }
    let mut upstream_runs = Vec::with_capacity(after.jobs.len());
    for upstream in &after.jobs {
        upstream_runs.push(tx.run(tenant, &RunId::derive(upstream, t))?);
    }
    let run = match step(
        downstream,
        t,
        decide(downstream, after, t, &upstream_runs, now),
        now,
        expired,
    ) {
        Step::Write(run) => run,
        Step::Wait(wait) => {
            tx.put_wait(&wait)?;
            return Ok(Vec::new());
        }
        Step::Nothing => return Ok(Vec::new()),
    };
    let mut written = Vec::new();
    if tx.insert_run(&run)? {
        tx.delete_wait(tenant, &downstream.id, t)?;
        if run.state.is_terminal() {
            let cascade = release(tx, &run)?;
            written.push(run);
            written.extend(cascade);
        } else {
            written.push(run);
        }
    }
    Ok(written)
}

/// The problems of an `after` schedule that the job itself shows (the upstreams' existence
/// and cycles need the store: [`crate::service`] checks those).
pub fn problems(after: &After, own_id: Option<&JobId>) -> Vec<crate::error::FieldError> {
    use crate::error::FieldError;
    let mut out = Vec::new();
    let field = "schedule.after.jobs";
    if after.jobs.is_empty() || after.jobs.len() > MAX_UPSTREAMS {
        out.push(FieldError::new(
            field,
            format!("names {} jobs; name 1 to {MAX_UPSTREAMS}", after.jobs.len()),
        ));
    }
    for (i, id) in after.jobs.iter().enumerate() {
        if let Some(bad) = crate::validate::validate_job_id(id.as_str()) {
            out.push(FieldError::new(field, format!("{id:?}: {}", bad.message)));
        } else if after.jobs[..i].contains(id) {
            out.push(FieldError::new(field, format!("{id} is named twice")));
        } else if own_id == Some(id) {
            out.push(FieldError::new(field, format!("a job cannot run after itself ({id})")));
        }
    }
    if let Some(within) = after.within
        && (within < Dur::secs(1) || within > MAX_WITHIN)
    {
        out.push(FieldError::new(
            "schedule.after.within",
            format!("within is {within}; use 1s to 7d"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WorkerId;
    use crate::job::JobSpec;
    use crate::timestamp;

    fn ts(s: &str) -> Timestamp {
        timestamp::parse(s).unwrap()
    }

    fn job(after: serde_json::Value) -> (Job, After) {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": {"after": after},
            "task": {"command": {"argv": ["true"]}},
        }))
        .unwrap();
        let after = spec.schedule.after().unwrap().clone();
        let now = ts("2026-12-01T00:00:00Z");
        let job = Job {
            tenant: TenantId("t".into()),
            id: JobId("d".into()),
            state: JobState::Active,
            next_fire_at: None,
            spec: spec.normalised(now),
            version: 1,
            created_at: now,
            updated_at: now,
        };
        (job, after)
    }

    fn upstream(id: &str, state: RunState, ended: Option<&str>) -> Option<Run> {
        let t = ts("2026-12-01T02:00:00Z");
        let mut run = Run::new_pending(TenantId("t".into()), JobId(id.into()), t, Trigger::Schedule, 5, t, 1, t);
        run.state = state;
        run.finished_at = ended.map(ts);
        if state == RunState::Running {
            run.start_attempt(&WorkerId("w".into()), t, t, 1);
        }
        Some(run)
    }

    fn written(d: Decision) -> (RunState, Option<String>) {
        match d {
            Decision::Write(run) => (run.state, run.reason),
            other => panic!("expected a run, got {other:?}"),
        }
    }

    const T: &str = "2026-12-01T02:00:00Z";

    #[test]
    fn every_upstream_ended_as_asked_gives_a_pending_run_at_their_nominal_time() {
        let (d, after) = job(serde_json::json!({"jobs": ["a", "b"]}));
        let ups = [
            upstream("a", RunState::Succeeded, Some("2026-12-01T02:01:00Z")),
            upstream("b", RunState::Succeeded, Some("2026-12-01T02:03:00Z")),
        ];
        let now = ts("2026-12-01T02:03:00Z");
        let Decision::Write(run) = decide(&d, &after, ts(T), &ups, now) else {
            panic!("no run")
        };
        assert_eq!(
            (run.state, run.scheduled_for, run.trigger, run.not_before),
            (RunState::Pending, ts(T), Trigger::After, now)
        );
        assert_eq!(run.run_id, RunId::derive(&d.id, ts(T)));
    }

    #[test]
    fn an_upstream_still_going_leaves_it_undecided_or_waiting_until_within() {
        let (d, after) = job(serde_json::json!({"jobs": ["a", "b"]}));
        let ups = [
            upstream("a", RunState::Succeeded, Some("2026-12-01T02:01:00Z")),
            upstream("b", RunState::Running, None),
        ];
        let now = ts("2026-12-01T02:02:00Z");
        assert_eq!(decide(&d, &after, ts(T), &ups, now), Decision::Undecided);
        let (d, after) = job(serde_json::json!({"jobs": ["a", "b"], "within": "10m"}));
        assert_eq!(
            decide(&d, &after, ts(T), &ups, now),
            Decision::Wait(ts("2026-12-01T02:11:00Z"))
        );
        let missing = [upstream("a", RunState::Succeeded, Some("2026-12-01T02:01:00Z")), None];
        assert_eq!(
            decide(&d, &after, ts(T), &missing, now),
            Decision::Wait(ts("2026-12-01T02:11:00Z"))
        );
        let late = ts("2026-12-01T02:11:00.001Z");
        let ended = [
            upstream("a", RunState::Succeeded, Some("2026-12-01T02:01:00Z")),
            upstream("b", RunState::Succeeded, Some("2026-12-01T02:11:00.001Z")),
        ];
        assert_eq!(
            written(decide(&d, &after, ts(T), &ended, late)),
            (RunState::Skipped, Some(UPSTREAM_TIMEOUT.into()))
        );
    }

    #[test]
    fn an_upstream_that_ended_otherwise_skips_it_at_once() {
        let (d, after) = job(serde_json::json!({"jobs": ["a", "b"]}));
        let ups = [
            upstream("a", RunState::Failed, Some("2026-12-01T02:01:00Z")),
            upstream("b", RunState::Running, None),
        ];
        assert_eq!(
            written(decide(&d, &after, ts(T), &ups, ts("2026-12-01T02:01:00Z"))),
            (RunState::Skipped, Some(UPSTREAM_FAILED.into()))
        );
    }

    #[test]
    fn on_says_which_ends_count() {
        let cases = [
            (AfterOn::Success, RunState::Succeeded, true),
            (AfterOn::Success, RunState::Failed, false),
            (AfterOn::Success, RunState::Skipped, false),
            (AfterOn::Failure, RunState::Failed, true),
            (AfterOn::Failure, RunState::TimedOut, true),
            (AfterOn::Failure, RunState::Succeeded, false),
            (AfterOn::Failure, RunState::Cancelled, false),
            (AfterOn::Any, RunState::Cancelled, true),
            (AfterOn::Any, RunState::Skipped, true),
            (AfterOn::Any, RunState::Running, false),
        ];
        for (on, state, accepted) in cases {
            assert_eq!(on.accepts(state), accepted, "{on} {state}");
        }
    }

    #[test]
    fn a_paused_downstream_skips_the_occurrence_it_would_have_run() {
        let (mut d, after) = job(serde_json::json!({"jobs": ["a"]}));
        d.state = JobState::Paused;
        let ups = [upstream("a", RunState::Succeeded, Some("2026-12-01T02:01:00Z"))];
        assert_eq!(
            written(decide(&d, &after, ts(T), &ups, ts("2026-12-01T02:01:00Z"))),
            (RunState::Skipped, Some(PAUSED.into()))
        );
    }

    #[test]
    fn problems_name_the_field() {
        let bad = After {
            jobs: vec![
                JobId("a".into()),
                JobId("a".into()),
                JobId("d".into()),
                JobId("bad id".into()),
            ],
            on: AfterOn::Success,
            within: Some(Dur::millis(10)),
        };
        let fields: Vec<String> = problems(&bad, Some(&JobId("d".into())))
            .into_iter()
            .map(|p| p.field)
            .collect();
        assert_eq!(
            fields,
            [
                "schedule.after.jobs",
                "schedule.after.jobs",
                "schedule.after.jobs",
                "schedule.after.within"
            ]
        );
        let none = After {
            jobs: vec![],
            on: AfterOn::Any,
            within: None,
        };
        assert_eq!(problems(&none, None).len(), 1);
    }
}
