//! A one-shot's firing left unwritten: how a store that writes a run first at its claim (the
//! lean layout, `docs/lean-layout.md`) fires a one-shot, and what it shows meanwhile.
//!
//! A one-shot's firing would write two things: the job COMPLETED with nothing left to fire,
//! and the run of its occurrence PENDING. Such a store writes neither. It keeps the fact that
//! the occurrence was sent (DynamoDB: the sweeper's watermark has passed the job's due
//! bucket; memory: a mark of the job as stored, passed at the next sweep), and until the job
//! or the run is written it answers every read as if the firing had been written: the job as
//! [`job_after`] leaves it, the run as [`pending_run`] builds it. The first write that touches
//! either puts what the firing left unwritten first ("settles" it): a claim puts the run
//! (conditional on its absence), a cancel, a deferral or a change of the job puts the run and
//! the job as the firing leaves them. So every reader and writer sees one history, the same
//! as a store that wrote the firing, and the firing itself costs no write.
//!
//! Between the send and the mark (the send window) the job reads as not fired: a change then
//! writes the job alone, and the claim of the occurrence — its message is out — puts the run
//! the job then has ([`due_run`]), or finds none. A job changed in the window is due, and
//! sent, again: a second message of the same run, which one claim starts.
//!
//! Only the plainest firing is left unwritten ([`can_leave_unwritten`]): a one-shot's one
//! run, on schedule, with nothing cancelled or skipped. Any other firing is written as before.

use crate::firing::scheduled_run;
use crate::job::{Job, JobState};
use crate::ports::Firing;
use crate::run::Run;
use crate::schedule::Schedule;
use crate::timestamp::trunc_ms;

/// The one-shot's nominal time, if `job` is a one-shot.
fn one_shot_at(job: &Job) -> Option<crate::timestamp::Timestamp> {
    match job.spec.schedule {
        Schedule::At(at) => Some(trunc_ms(at)),
        _ => None,
    }
}

/// Whether `firing` of `job` (as stored, the firing's condition holding) may be left
/// unwritten: it fires a one-shot's own occurrence and nothing else — one run, of the job's
/// `at`, on schedule, with no cancellation and no skip record — and leaves the job COMPLETED.
pub fn can_leave_unwritten(job: &Job, firing: &Firing) -> bool {
    let Some(at) = one_shot_at(job) else {
        return false;
    };
    let [run] = firing.runs.as_slice() else {
        return false;
    };
    job.state == JobState::Active
        && job.next_fire_at.map(trunc_ms) == Some(at)
        && firing.state == JobState::Completed
        && firing.next_fire_at.is_none()
        && firing.cancel.is_empty()
        && firing.skipped.is_empty()
        && pending_run(job).is_some_and(|expected| same_occurrence(&expected, run))
}

/// Whether `planned` is the run [`pending_run`] stands for (all but its creation time).
fn same_occurrence(expected: &Run, planned: &Run) -> bool {
    let mut planned = planned.clone();
    planned.created_at = expected.created_at;
    planned.scheduled_for = trunc_ms(planned.scheduled_for);
    planned.not_before = trunc_ms(planned.not_before);
    &planned == expected
}

/// `job` (as stored when its firing was left unwritten) as that firing leaves it: COMPLETED,
/// nothing left to fire.
pub fn job_after(job: &Job) -> Job {
    let mut job = job.clone();
    job.state = JobState::Completed;
    job.next_fire_at = None;
    job
}

/// The run an unwritten firing of `job` (as stored) stands for until it is written: the run
/// a firing creates ([`scheduled_run`]), dated when the job was last written — a store that
/// wrote nothing at the firing does not know the firing's time, and the run's message
/// carries this same run. `None` if `job` is not a one-shot.
pub fn pending_run(job: &Job) -> Option<Run> {
    let at = one_shot_at(job)?;
    let mut run = scheduled_run(job, at, trunc_ms(job.updated_at));
    run.not_before = trunc_ms(run.not_before);
    Some(run)
}

/// The run of `job`'s occurrence, while `job` (as stored) is an ACTIVE one-shot still due
/// at it: what a claim of the occurrence puts in the send window when no run of its id is
/// stored (its message proves the firing). A job changed meanwhile to another time, paused
/// or deleted has none, and neither has a recurring job.
pub fn due_run(job: &Job) -> Option<Run> {
    let run = pending_run(job)?;
    (job.state == JobState::Active && job.next_fire_at.map(trunc_ms) == Some(run.scheduled_for)).then_some(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Dur;
    use crate::firing::plan;
    use crate::job::JobSpec;
    use crate::timestamp::parse;

    fn job(schedule: serde_json::Value, next_fire_at: &str) -> Job {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": schedule,
            "task": {"command": {"argv": ["true"]}},
            "jitter": "5s",
        }))
        .unwrap();
        let created = parse("2026-12-01T09:00:00Z").unwrap();
        let spec = spec.normalised(created);
        Job {
            tenant: "t".into(),
            id: "j".into(),
            spec,
            state: JobState::Active,
            next_fire_at: Some(parse(next_fire_at).unwrap()),
            version: 1,
            created_at: created,
            updated_at: created,
        }
    }

    #[test]
    fn a_one_shots_plain_firing_is_left_unwritten_and_shown_as_written() {
        let j = job(
            serde_json::json!({"at": "2026-12-01T10:00:00Z"}),
            "2026-12-01T10:00:00Z",
        );
        let now = parse("2026-12-01T09:55:00Z").unwrap();
        let p = plan(&j, &[], now, Dur::secs(600)).unwrap();
        assert!(can_leave_unwritten(&j, &p.firing));
        let run = pending_run(&j).unwrap();
        let mut planned = p.firing.runs[0].clone();
        assert_eq!(run.created_at, j.updated_at, "dated when the job was written");
        planned.created_at = run.created_at;
        assert_eq!(run, planned, "the same run as the plan's, jitter included");
        let after = job_after(&j);
        assert_eq!(
            (after.state, after.next_fire_at),
            (p.firing.state, p.firing.next_fire_at)
        );
    }

    #[test]
    fn a_recurring_firing_or_one_that_does_more_is_written() {
        let every_minute = job(serde_json::json!({"cron": "* * * * *"}), "2026-12-01T09:01:00Z");
        let now = parse("2026-12-01T09:05:00Z").unwrap();
        let p = plan(&every_minute, &[], now, Dur::ZERO).unwrap();
        assert!(!can_leave_unwritten(&every_minute, &p.firing));
        assert_eq!(pending_run(&every_minute), None);

        let one_shot = job(
            serde_json::json!({"at": "2026-12-01T10:00:00Z"}),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&one_shot, &[], parse("2026-12-01T10:00:00Z").unwrap(), Dur::ZERO).unwrap();
        let mut cancels = p.firing.clone();
        cancels.cancel.push(crate::ids::RunId("j@20261201T095900.000Z".into()));
        assert!(!can_leave_unwritten(&one_shot, &cancels));
        let mut other_run = p.firing.clone();
        other_run.runs[0].priority += 1;
        assert!(!can_leave_unwritten(&one_shot, &other_run));
        let mut paused = one_shot.clone();
        paused.state = JobState::Paused;
        assert!(!can_leave_unwritten(&paused, &p.firing));
    }
}
