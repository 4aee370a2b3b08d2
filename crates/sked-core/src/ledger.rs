//! The occurrence ledger: what became of each nominal time of a job's schedule — fired (a
//! run, with how late it started) or skipped (with why) — read back from what the stores
//! keep, never recomputed from today's schedule alone:
//!
//! - a run at the nominal time (trigger `schedule`, `backfill` or `after`) is the occurrence
//!   fired; a SKIPPED run (an `after` job's), one ended at claim (by its overlap policy, or as
//!   its job was paused: [`PAUSED_AT_CLAIM`]) or one fired ahead and ended by a change of its
//!   job's timing ([`RESCHEDULED`]) is the occurrence skipped, with its reason;
//! - a [`SkipRecord`] is what a firing skipped by policy (misfire, overlap), written in the
//!   firing's own transaction: consecutive occurrences skipped for one reason are one record
//!   (`from`, `to`, how many), expanded on reading by walking the job's schedule between them;
//! - a pause is a record too (`reason` paused, no occurrence counted): from the pause to the
//!   resume (open while paused). An occurrence skipped while the job was paused is shown with
//!   reason `paused`, whatever policy dropped it at the resume.
//!
//! Manual and timeout-handler runs are not occurrences of the schedule and are left out.

use crate::firing::SkipReason;
use crate::ids::RunId;
use crate::job::{Job, wire_enum};
use crate::run::{Run, RunState, Trigger};
use crate::schedule::next_fire_after;
use crate::timestamp::{self, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Most occurrences one page of the ledger holds.
pub const MAX_PAGE: usize = 1_000;
/// Most occurrences expanded from one skip record (a firing walks at most 10,000).
const MAX_EXPAND: usize = 10_000;
/// How the reason of an occurrence ended at claim starts (a CANCELLED run with no attempt;
/// the worker's claim writes it): by its overlap policy, or [`PAUSED_AT_CLAIM`].
pub const SKIPPED_AT_CLAIM: &str = "skipped: ";

/// The reason of an occurrence ended at claim because its job was paused (its run was fired
/// before the pause: ahead of its time, or due and still queued).
pub const PAUSED_AT_CLAIM: &str = "skipped: the job is paused";

/// The reason of an occurrence whose run, fired ahead of its time, was ended when its job's
/// timing (schedule, window or DST rule) changed and no longer has its nominal time (a
/// CANCELLED run with no attempt, as one skipped at claim).
pub const RESCHEDULED: &str = "skipped: the job's schedule changed";

/// Occurrences a firing (or a pause) skipped: from `from` to `to` (both nominal times of the
/// schedule, inclusive), `count` of them, for `reason`. A pause record has `count` 0 and covers
/// `[from, to)`, the time the job was paused (`to` = [`open`] while it still is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRecord {
    /// The first occurrence (the pause's start).
    pub from: Timestamp,
    /// The last occurrence (the resume, or [`open`]).
    pub to: Timestamp,
    /// How many occurrences (0 for a pause).
    pub count: u32,
    /// Why.
    pub reason: SkipReason,
    /// Its alert, when its job's `notify.on` lists `skipped` ([`crate::alert::arm_skips`]).
    pub alert: Option<crate::alert::Alert>,
}

/// The `to` of a pause that has not ended (9999-12-31T23:59:59.999Z), in milliseconds.
pub const OPEN_MS: i64 = 253_402_300_799_999;

/// The `to` of a pause that has not ended.
pub fn open() -> Timestamp {
    timestamp::from_ms(OPEN_MS)
}

impl SkipRecord {
    /// The record of a pause starting at `from` (open until the resume closes it).
    pub fn pause(from: Timestamp) -> Self {
        SkipRecord {
            from: timestamp::trunc_ms(from),
            to: open(),
            count: 0,
            reason: SkipReason::Paused,
            alert: None,
        }
    }

    /// Whether this records a pause (not occurrences).
    pub fn is_pause(&self) -> bool {
        self.count == 0 && self.reason == SkipReason::Paused
    }
}

/// Consecutive occurrences skipped for the same reason, as records (`skipped` in time order).
pub fn records_of(skipped: &[(Timestamp, SkipReason)]) -> Vec<SkipRecord> {
    let mut out: Vec<SkipRecord> = Vec::new();
    for (t, reason) in skipped {
        let t = timestamp::trunc_ms(*t);
        match out.last_mut() {
            Some(last) if last.reason == *reason => {
                last.to = t;
                last.count += 1;
            }
            _ => out.push(SkipRecord {
                from: t,
                to: t,
                count: 1,
                reason: *reason,
                alert: None,
            }),
        }
    }
    out
}

wire_enum!(
    /// Whether an occurrence became a run.
    OccurrenceOutcome {
        /// A run was created for it.
        Fired = "fired",
        /// It did not run (`reason` says why).
        Skipped = "skipped",
    }
);

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Occurrence {
    /// The nominal time.
    #[serde(with = "timestamp::serde_ms")]
    #[cfg_attr(feature = "utoipa", schema(value_type = String, format = DateTime))]
    pub scheduled_for: Timestamp,
    /// Fired or skipped.
    pub outcome: OccurrenceOutcome,
    /// Why it was skipped: `overlap`, `misfire`, `paused`, `upstream_failed`,
    /// `upstream_timeout`, `rescheduled`; null when fired.
    pub reason: Option<String>,
    /// Its run (also for an `after` job's skipped occurrence, recorded as a SKIPPED run).
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<String>))]
    pub run_id: Option<RunId>,
    /// How late its first attempt started after the nominal time (fired and started only).
    pub lag_ms: Option<i64>,
}

/// The occurrence a run stands for, if it is one of the schedule's.
pub fn of_run(run: &Run) -> Option<Occurrence> {
    if !matches!(run.trigger, Trigger::Schedule | Trigger::Backfill | Trigger::After) {
        return None;
    }
    let at_claim = run.state == RunState::Cancelled
        && run.attempts.is_empty()
        && run.reason.as_deref().is_some_and(|r| r.starts_with(SKIPPED_AT_CLAIM));
    let (outcome, reason) = if run.state == RunState::Skipped {
        (OccurrenceOutcome::Skipped, run.reason.clone())
    } else if at_claim {
        let why = match run.reason.as_deref() {
            Some(PAUSED_AT_CLAIM) => SkipReason::Paused,
            Some(RESCHEDULED) => SkipReason::Rescheduled,
            _ => SkipReason::Overlap,
        };
        (OccurrenceOutcome::Skipped, Some(why.as_str().to_string()))
    } else {
        (OccurrenceOutcome::Fired, None)
    };
    let lag_ms = match outcome {
        OccurrenceOutcome::Fired => run
            .attempts
            .first()
            .map(|a| (a.started_at - run.scheduled_for).num_milliseconds().max(0)),
        _ => None,
    };
    Some(Occurrence {
        scheduled_for: run.scheduled_for,
        outcome,
        reason,
        run_id: Some(run.run_id.clone()),
        lag_ms,
    })
}

/// The occurrences of `record` (none for a pause), walking `job`'s schedule from `from` to
/// `to`.
pub fn expand(job: &Job, record: &SkipRecord) -> Vec<Occurrence> {
    if record.is_pause() {
        return Vec::new();
    }
    let spec = &job.spec;
    let mut times = vec![record.from];
    let mut t = record.from;
    while times.len() < MAX_EXPAND.min(record.count.max(1) as usize) {
        match next_fire_after(&spec.schedule, &spec.dst, &spec.window(), t) {
            Some(next) if next <= record.to => {
                times.push(next);
                t = next;
            }
            _ => break,
        }
    }
    times
        .into_iter()
        .map(|t| Occurrence {
            scheduled_for: t,
            outcome: OccurrenceOutcome::Skipped,
            reason: Some(record.reason.as_str().to_string()),
            run_id: None,
            lag_ms: None,
        })
        .collect()
}

/// One page of the ledger of `job`: the occurrences of `runs` and `records` in
/// `[since, until)`, newest first, at most `limit`, and whether more (older) ones follow. An
/// occurrence both recorded skipped and run (a backfill of a missed time) is its run; one
/// skipped while the job was paused has reason `paused`.
pub fn page(
    job: &Job,
    runs: &[Run],
    records: &[SkipRecord],
    (since, until): (Timestamp, Timestamp),
    limit: usize,
) -> (Vec<Occurrence>, bool) {
    let mut all: Vec<Occurrence> = runs.iter().filter_map(of_run).collect();
    let fired: std::collections::HashSet<Timestamp> = all.iter().map(|o| o.scheduled_for).collect();
    all.extend(
        records
            .iter()
            .flat_map(|r| expand(job, r))
            .filter(|o| !fired.contains(&o.scheduled_for)),
    );
    all.retain(|o| o.scheduled_for >= since && o.scheduled_for < until);
    let pauses: Vec<&SkipRecord> = records.iter().filter(|r| r.is_pause()).collect();
    for o in &mut all {
        let paused = pauses
            .iter()
            .any(|p| p.from <= o.scheduled_for && o.scheduled_for < p.to);
        if o.outcome == OccurrenceOutcome::Skipped && paused {
            o.reason = Some(SkipReason::Paused.as_str().to_string());
        }
    }
    all.sort_by_key(|o| std::cmp::Reverse(o.scheduled_for));
    all.dedup_by_key(|o| o.scheduled_for);
    let more = all.len() > limit;
    all.truncate(limit);
    (all, more)
}

/// One sentence on what became of `occurrence` of `job` (`run`: its run, if any).
pub fn explain(job: &Job, occurrence: &Occurrence, run: Option<&Run>) -> String {
    let at = timestamp::format(&occurrence.scheduled_for);
    let id = &job.id;
    match (occurrence.outcome, occurrence.reason.as_deref()) {
        (OccurrenceOutcome::Skipped, Some(reason)) => {
            let why = match reason {
                "overlap" => format!(
                    "an earlier run was still going and the overlap policy is {}",
                    job.spec.overlap_policy()
                ),
                "misfire" => format!(
                    "it was missed (sked was down or behind by more than {}) and the misfire policy is {}",
                    crate::firing::MISFIRE_GRACE,
                    job.spec.misfire
                ),
                "paused" => "the job was paused".to_string(),
                "rescheduled" => {
                    "the job's schedule changed after its run was fired, and this time is no longer one of it"
                        .to_string()
                }
                "upstream_failed" => "an upstream job's run at that time did not end as it asks".to_string(),
                "upstream_timeout" => "its upstream jobs had not all ended within its `within`".to_string(),
                other => other.to_string(),
            };
            format!("Job {id}'s occurrence at {at} was skipped: {why}.")
        }
        (OccurrenceOutcome::Skipped, None) => format!("Job {id}'s occurrence at {at} was skipped."),
        (OccurrenceOutcome::Fired, _) => {
            let run_id = occurrence
                .run_id
                .as_ref()
                .map_or(String::new(), |r| format!(" as run {r}"));
            let how = match (run, occurrence.lag_ms) {
                (Some(run), Some(lag)) if run.state.is_terminal() => format!(
                    ", started {lag} ms after its time and ended {} after {} attempt(s)",
                    run.state,
                    run.attempt_count()
                ),
                (Some(run), Some(lag)) => format!(", started {lag} ms after its time and is {}", run.state),
                (Some(run), None) => format!(" and is {} (not started yet)", run.state),
                (None, _) => String::new(),
            };
            format!("Job {id}'s occurrence at {at} fired{run_id}{how}.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, TenantId, WorkerId};
    use crate::job::{JobSpec, JobState};

    fn ts(s: &str) -> Timestamp {
        timestamp::parse(s).unwrap()
    }

    fn every_second() -> Job {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": {"every": "1s", "anchor": "2026-12-01T00:00:00Z"},
            "task": {"command": {"argv": ["true"]}},
        }))
        .unwrap();
        let t = ts("2026-12-01T00:00:00Z");
        Job {
            tenant: TenantId("t".into()),
            id: JobId("j".into()),
            spec: spec.normalised(t),
            state: JobState::Active,
            next_fire_at: None,
            version: 1,
            created_at: t,
            updated_at: t,
        }
    }

    fn at(secs: i64) -> Timestamp {
        ts("2026-12-01T00:00:00Z") + chrono::Duration::seconds(secs)
    }

    fn run_at(job: &Job, secs: i64, trigger: Trigger) -> Run {
        let mut run = Run::of_job(job, at(secs), trigger, at(secs), at(secs));
        run.start_attempt(
            &WorkerId("w".into()),
            at(secs) + chrono::Duration::milliseconds(7),
            at(secs + 30),
            1,
        );
        run
    }

    #[test]
    fn consecutive_skips_for_one_reason_are_one_record() {
        let skipped = [
            (at(1), SkipReason::Misfire),
            (at(2), SkipReason::Misfire),
            (at(3), SkipReason::Misfire),
            (at(5), SkipReason::Overlap),
        ];
        let records = records_of(&skipped);
        assert_eq!(records.len(), 2);
        assert_eq!((records[0].from, records[0].to, records[0].count), (at(1), at(3), 3));
        assert_eq!(
            (records[1].from, records[1].count, records[1].reason),
            (at(5), 1, SkipReason::Overlap)
        );
    }

    #[test]
    fn a_page_merges_runs_and_records_newest_first_with_no_gap() {
        let job = every_second();
        let runs = vec![run_at(&job, 0, Trigger::Schedule), run_at(&job, 4, Trigger::Schedule)];
        let mut manual = run_at(&job, 2, Trigger::Manual);
        manual.scheduled_for = at(2) + chrono::Duration::milliseconds(500);
        let records = records_of(&[
            (at(1), SkipReason::Overlap),
            (at(2), SkipReason::Overlap),
            (at(3), SkipReason::Overlap),
        ]);
        let mut all = runs.clone();
        all.push(manual);
        let (page, more) = page(&job, &all, &records, (at(0), at(10)), 100);
        let times: Vec<Timestamp> = page.iter().map(|o| o.scheduled_for).collect();
        assert_eq!(
            times,
            [at(4), at(3), at(2), at(1), at(0)],
            "manual runs are not occurrences"
        );
        assert!(!more);
        assert_eq!((page[0].outcome, page[0].lag_ms), (OccurrenceOutcome::Fired, Some(7)));
        assert_eq!(
            (page[1].outcome, page[1].reason.as_deref()),
            (OccurrenceOutcome::Skipped, Some("overlap"))
        );
        let (first, more) = super::page(&job, &runs, &records, (at(0), at(10)), 2);
        assert_eq!((first.len(), more), (2, true));
    }

    #[test]
    fn a_skip_while_paused_says_paused_and_a_run_beats_a_record() {
        let job = every_second();
        let mut pause = SkipRecord::pause(at(10));
        pause.to = at(15);
        let records = vec![
            pause,
            records_of(&[(at(11), SkipReason::Overlap), (at(12), SkipReason::Overlap)])[0].clone(),
            records_of(&[(at(16), SkipReason::Overlap)])[0].clone(),
        ];
        let backfilled = run_at(&job, 12, Trigger::Backfill);
        let (page, _) = page(&job, &[backfilled], &records, (at(0), at(100)), 100);
        let got: Vec<(Timestamp, OccurrenceOutcome, Option<&str>)> = page
            .iter()
            .map(|o| (o.scheduled_for, o.outcome, o.reason.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (at(16), OccurrenceOutcome::Skipped, Some("overlap")),
                (at(12), OccurrenceOutcome::Fired, None),
                (at(11), OccurrenceOutcome::Skipped, Some("paused")),
            ]
        );
    }

    #[test]
    fn explanations_say_what_happened_in_one_sentence() {
        let job = every_second();
        let run = run_at(&job, 4, Trigger::Schedule);
        let fired = of_run(&run).unwrap();
        assert_eq!(
            explain(&job, &fired, Some(&run)),
            format!(
                "Job j's occurrence at 2026-12-01T00:00:04.000Z fired as run {}, started 7 ms after its time and is RUNNING.",
                run.run_id
            )
        );
        let skipped = &expand(&job, &records_of(&[(at(5), SkipReason::Overlap)])[0])[0];
        assert_eq!(
            explain(&job, skipped, None),
            "Job j's occurrence at 2026-12-01T00:00:05.000Z was skipped: an earlier run was still going and the overlap policy is forbid."
        );
    }
}
