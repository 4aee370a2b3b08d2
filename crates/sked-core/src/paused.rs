//! What becomes of a paused job's runs that come due: runs of its schedule fired before the
//! pause — ahead of their time (a look-ahead, as on AWS) or due and still queued. None starts
//! while the job is paused. Each waits, PENDING (the worker that meets it defers it by
//! [`PARKED_RECHECK`] at a time), and at the resume the job's misfire policy decides which of
//! them start, as it decides for the occurrences the pause kept from firing: `fire_once`
//! keeps the latest missed occurrence of all of them, `fire_all` up to
//! [`MAX_FIRE_ALL`](crate::job::MAX_FIRE_ALL), `skip` none; an occurrence due within the
//! misfire grace starts, and so does a one-shot's run; under an overlap policy other than
//! `allow`, the latest of those kept stands for the others. A run the policies drop at any
//! later resume is ended as soon as a worker meets it or a later one of its job (CANCELLED,
//! the ledger's `paused`), so a paused job keeps no more runs waiting than its policies can
//! start; the resume ends what is left to drop while the job is still paused, then starts what
//! is kept.

use crate::duration::Dur;
use crate::firing::MISFIRE_GRACE;
use crate::job::{Job, JobState, MAX_FIRE_ALL, Misfire, Overlap};
use crate::ledger::SKIPPED_AT_CLAIM;
use crate::run::Run;
use crate::schedule::Schedule;
use crate::schedule::next::next_fire_after;
use crate::timestamp::Timestamp;

/// How long a waiting run of a paused job is deferred each time a worker meets it: the
/// resume starts the runs it keeps at once, and this is how late one starts if that step
/// failed (the worker then finds the job resumed and claims it).
pub const PARKED_RECHECK: Dur = Dur::secs(300);

/// The decision about a paused (or just resumed) job's runs that came due.
#[derive(Debug, Default, PartialEq)]
pub struct DueWhilePaused<'a> {
    /// Runs the misfire policy may still start: they wait for the resume (or, at the resume,
    /// start now).
    pub keep: Vec<&'a Run>,
    /// Runs the policy drops whenever the job resumes: ended now, skipped as `paused`.
    pub drop: Vec<&'a Run>,
    /// Runs the misfire policy keeps that a later kept run stands for, under an overlap
    /// policy other than `allow` (as a firing keeps only the latest of the runs it would
    /// start at once): ended now, skipped as `overlap`.
    pub overlapped: Vec<&'a Run>,
    /// Runs at a time a change of the job's timing, made after `timing_since`, dropped:
    /// ended now, skipped as `rescheduled` (see [`crate::lifecycle::retimed_away`]).
    pub rescheduled: Vec<&'a Run>,
}

/// Whether `run` waits for the resume of `job`, its job: a run of the schedule never tried,
/// of a PAUSED job. It may never start if the job is not resumed (or is deleted: then it
/// ends CANCELLED).
pub fn waits_for_resume(run: &Run, job: &Job) -> bool {
    job.state == JobState::Paused && run.tenant == job.tenant && run.job_id == job.id && run.is_untried_occurrence()
}

/// Decides, at `now`, about `job`'s runs of its schedule never tried that came due (of
/// `runs`, the job's PENDING and RUNNING runs in any order). `timing_since` is when the job
/// was last changed before its resume (its `updated_at` while paused): a run at a later time
/// that its timing does not have was dropped by that change.
///
/// Whatever it drops at `now` it also drops at any later time: the missed occurrences only
/// grow, and so do the job's own missed occurrences that were never fired (from its
/// `next_fire_at`), which take the policy's places first as they are the latest.
pub fn decide<'a>(job: &Job, timing_since: Timestamp, runs: &'a [Run], now: Timestamp) -> DueWhilePaused<'a> {
    let mut due: Vec<&Run> = runs
        .iter()
        .filter(|r| r.is_untried_occurrence() && r.scheduled_for <= now)
        .collect();
    due.sort_by_key(|r| r.scheduled_for);
    let mut decision = DueWhilePaused::default();
    let (retimed, due): (Vec<&Run>, Vec<&Run>) = due
        .into_iter()
        .partition(|r| r.scheduled_for > timing_since && !job.spec.is_occurrence(r.scheduled_for));
    decision.rescheduled = retimed;
    if matches!(job.spec.schedule, Schedule::At(_)) {
        decision.keep = due;
        return decision;
    }
    let missed_before = now - MISFIRE_GRACE.to_chrono();
    let split = due.partition_point(|r| r.scheduled_for < missed_before);
    let unfired = unfired_missed(job, missed_before);
    let places = match job.spec.misfire {
        Misfire::Skip => 0,
        Misfire::FireAll => MAX_FIRE_ALL.saturating_sub(unfired),
        // fire_once and any later policy: one run stands for everything missed.
        _ => usize::from(unfired == 0),
    };
    let dropped = split.saturating_sub(places);
    decision.drop = due[..dropped].to_vec();
    decision.keep = due[dropped..].to_vec();
    if job.spec.overlap_policy() != Overlap::Allow {
        let latest = decision.keep.pop();
        decision.overlapped = std::mem::take(&mut decision.keep);
        decision.keep.extend(latest);
    }
    decision
}

impl DueWhilePaused<'_> {
    /// Keeps among the runs to end only `this` and those that wait, deferred past `now`: a
    /// worker that read the job PAUSED ends no run another worker may be starting after a
    /// resume it has not seen (a run still due at its time is decided when its own delivery
    /// comes, or at the resume).
    pub fn end_only_waiting_and(&mut self, this: &crate::ids::RunId, now: Timestamp) {
        let ends = |r: &&Run| &r.run_id == this || r.not_before > now;
        self.drop.retain(ends);
        self.overlapped.retain(ends);
        self.rescheduled.retain(ends);
    }
}

/// The reason a run ends with when [`DueWhilePaused::overlapped`] (the ledger's `overlap`).
pub fn overlapped_reason(job: &Job) -> String {
    format!(
        "{SKIPPED_AT_CLAIM}a later occurrence due while the job was paused runs instead (overlap: {})",
        job.spec.overlap_policy().as_str()
    )
}

/// How many of `job`'s occurrences from its `next_fire_at` were never fired and are missed
/// (before `missed_before`), counted up to [`MAX_FIRE_ALL`].
fn unfired_missed(job: &Job, missed_before: Timestamp) -> usize {
    let spec = &job.spec;
    let mut count = 0;
    let mut next = job.next_fire_at;
    while let Some(t) = next.filter(|t| *t < missed_before && count < MAX_FIRE_ALL) {
        count += 1;
        next = next_fire_after(&spec.schedule, &spec.dst, &spec.window(), t);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;
    use crate::run::{RunState, Trigger};
    use crate::timestamp::parse;

    fn at(s: &str) -> Timestamp {
        parse(s).unwrap()
    }

    /// A job every minute from 10:00 with `misfire`, paused at 10:00:30 after the look-ahead
    /// had fired it up to 10:10 (so its next fire time is 10:11).
    fn minutely(misfire: &str) -> Job {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": {"every": "60s", "anchor": "2026-12-01T10:00:00Z"},
            "task": {"command": {"argv": ["ok"]}},
            "misfire": misfire,
            "overlap": "allow",
        }))
        .unwrap();
        Job {
            tenant: Default::default(),
            id: crate::ids::JobId::from("j"),
            spec,
            state: JobState::Paused,
            next_fire_at: Some(at("2026-12-01T10:11:00Z")),
            version: 2,
            created_at: at("2026-12-01T09:59:00Z"),
            updated_at: at("2026-12-01T10:00:30Z"),
        }
    }

    fn runs_at(job: &Job, minutes: std::ops::RangeInclusive<u32>) -> Vec<Run> {
        minutes
            .map(|m| {
                let t = at(&format!("2026-12-01T10:{m:02}:00Z"));
                Run::of_job(job, t, Trigger::Schedule, t, at("2026-12-01T10:00:00Z"))
            })
            .collect()
    }

    fn minutes(runs: &[&Run]) -> Vec<u32> {
        runs.iter()
            .map(|r| chrono::Timelike::minute(&r.scheduled_for))
            .collect()
    }

    #[test]
    fn fire_once_keeps_the_latest_missed_and_what_is_within_the_grace() {
        let job = minutely("fire_once");
        let runs = runs_at(&job, 1..=10);
        let d = decide(&job, job.updated_at, &runs, at("2026-12-01T10:05:30Z"));
        assert_eq!(minutes(&d.drop), [1, 2, 3]);
        assert_eq!(
            minutes(&d.keep),
            [4, 5],
            "10:04 stands for the missed, 10:05 is on time"
        );
        assert!(d.rescheduled.is_empty());
    }

    #[test]
    fn skip_keeps_only_what_is_within_the_grace_and_fire_all_keeps_every_one() {
        let runs = runs_at(&minutely("skip"), 1..=10);
        let now = at("2026-12-01T10:05:30Z");
        let skip = minutely("skip");
        let d = decide(&skip, skip.updated_at, &runs, now);
        assert_eq!((minutes(&d.drop), minutes(&d.keep)), (vec![1, 2, 3, 4], vec![5]));
        let all = minutely("fire_all");
        let d = decide(&all, all.updated_at, &runs, now);
        assert_eq!((minutes(&d.drop), minutes(&d.keep)), (vec![], vec![1, 2, 3, 4, 5]));
    }

    #[test]
    fn occurrences_never_fired_take_the_policy_s_places_first() {
        // Paused past the look-ahead: 10:11 and 10:12 were never fired and are missed too.
        let runs = runs_at(&minutely("fire_once"), 1..=10);
        let now = at("2026-12-01T10:13:30Z");
        let once = minutely("fire_once");
        let d = decide(&once, once.updated_at, &runs, now);
        assert_eq!(d.drop.len(), 10, "the sweeper fires 10:12 for all of them");
        assert!(d.keep.is_empty());
        let all = minutely("fire_all");
        let d = decide(&all, all.updated_at, &runs, now);
        assert_eq!(d.keep.len(), 10, "100 places, 2 taken by 10:11 and 10:12");
    }

    #[test]
    fn what_is_dropped_now_is_dropped_at_any_later_resume() {
        for misfire in ["fire_once", "fire_all", "skip"] {
            let job = minutely(misfire);
            let runs = runs_at(&job, 1..=10);
            let mut dropped_before: Vec<u32> = Vec::new();
            for m in 0..20 {
                let now = at("2026-12-01T10:00:30Z") + chrono::Duration::seconds(37 * m);
                let d = decide(&job, job.updated_at, &runs, now);
                let dropped = minutes(&d.drop);
                assert!(dropped_before.iter().all(|m| dropped.contains(m)), "{misfire} at {now}");
                dropped_before = dropped;
            }
        }
    }

    #[test]
    fn under_an_overlap_policy_the_latest_kept_run_stands_for_the_others() {
        let mut job = minutely("fire_all");
        job.spec.overlap = Some(Overlap::Forbid);
        let runs = runs_at(&job, 1..=10);
        let d = decide(&job, job.updated_at, &runs, at("2026-12-01T10:03:30Z"));
        assert_eq!((minutes(&d.overlapped), minutes(&d.keep)), (vec![1, 2], vec![3]));
        assert!(overlapped_reason(&job).starts_with(SKIPPED_AT_CLAIM));
    }

    #[test]
    fn a_worker_ends_only_its_own_run_and_those_waiting() {
        let job = minutely("skip");
        let mut runs = runs_at(&job, 1..=3);
        let now = at("2026-12-01T10:03:30Z");
        runs[1].not_before = now + chrono::Duration::minutes(5);
        let mut d = decide(&job, job.updated_at, &runs, now);
        assert_eq!(minutes(&d.drop), [1, 2]);
        d.end_only_waiting_and(&runs[2].run_id, now);
        assert_eq!(minutes(&d.drop), [2], "10:01 is due at its time: maybe being claimed");
        d.end_only_waiting_and(&runs[0].run_id, now);
        assert_eq!(minutes(&d.drop), [2]);
    }

    #[test]
    fn a_run_tried_already_or_not_yet_due_plays_no_part_and_a_one_shot_s_run_is_kept() {
        let job = minutely("skip");
        let mut runs = runs_at(&job, 1..=3);
        runs[0].state = RunState::Running;
        runs[1].trigger = Trigger::Manual;
        let d = decide(&job, job.updated_at, &runs, at("2026-12-01T10:02:30Z"));
        assert_eq!(d, DueWhilePaused::default());

        let mut once = minutely("skip");
        once.spec.schedule = Schedule::At(at("2026-12-01T10:01:00Z"));
        once.next_fire_at = None;
        let runs = runs_at(&once, 1..=1);
        let d = decide(&once, once.updated_at, &runs, at("2026-12-01T12:00:00Z"));
        assert_eq!(minutes(&d.keep), [1], "a one-shot never misfires");
    }

    #[test]
    fn a_run_at_a_time_a_later_change_dropped_is_rescheduled() {
        let mut job = minutely("fire_all");
        let runs = runs_at(&job, 1..=3);
        job.spec.schedule =
            serde_json::from_value(serde_json::json!({"every": "120s", "anchor": "2026-12-01T10:00:00Z"})).unwrap();
        let d = decide(&job, job.updated_at, &runs, at("2026-12-01T10:03:30Z"));
        assert_eq!(minutes(&d.rescheduled), [1, 3]);
        assert_eq!(minutes(&d.keep), [2]);
        // Runs due before the change came due under the timing of their time.
        let d = decide(&job, at("2026-12-01T10:03:10Z"), &runs, at("2026-12-01T10:03:30Z"));
        assert!(d.rescheduled.is_empty());
    }
}
