//! Firing plans: what a sweep does with one due job — which occurrences become runs, which
//! are skipped by policy (misfire, overlap) and why, and where the job's schedule goes next.
//! A pure function of (job, its active runs, now), so every policy is unit-tested here.
//!
//! **Bounded**: one plan fires at most [`MAX_RUNS_PER_FIRING`] runs of a job, whatever its
//! schedule and the look-ahead. A per-second cron with AWS's 10-minute look-ahead has 600
//! occurrences within reach; a plan fires the first 96 and leaves the job's `next_fire_at` at
//! the first one it did not fire, so the next plan (the next sweep, or the same sweep's next
//! round) goes on from there. Nothing is lost or fired twice: the rest stay on the job's
//! schedule, every run id is derived from (job, nominal time), and each firing is conditional
//! on the `next_fire_at` and version the plan was made from.

use crate::duration::Dur;
use crate::job::{Job, JobState, MAX_FIRE_ALL, Misfire, Overlap};
use crate::ports::Firing;
use crate::retry::start_jitter;
use crate::run::{Run, RunState, Trigger};
use crate::schedule::{Schedule, next_fire_after};
use crate::timestamp::Timestamp;

/// An occurrence late by more than this counts as missed (sked was down, or the job was
/// paused) and follows the job's misfire policy; within it, it simply fires late.
pub const MISFIRE_GRACE: Dur = Dur::secs(60);

/// Most occurrences one plan walks through; a longer catch-up continues at the next sweep.
const MAX_SCAN: usize = 10_000;

/// Most runs one plan fires for one job. It keeps a firing one store write (on DynamoDB one
/// transaction of at most 100 items: the job, the tenant's counter and the runs) and bounds
/// what a firing costs in time, whatever the schedule: a per-second job is fed 96 s ahead
/// per firing, more than the AWS sweeper's one-minute tick consumes, so successive sweeps
/// keep it fed without firing its whole look-ahead at once.
pub const MAX_RUNS_PER_FIRING: usize = 96;

/// Whether `run`, an active run of a `replace` job, is stopped when a newer occurrence
/// starts: every one but a backfill run still waiting its turn (a backfill is asked for
/// explicitly; a new occurrence stops the one running, not the ones queued behind it).
pub fn replaced_by_newer(run: &Run) -> bool {
    !(run.trigger == crate::run::Trigger::Backfill && run.state == RunState::Pending)
}

/// Why an occurrence did not become a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Missed (late beyond [`MISFIRE_GRACE`]) and the misfire policy dropped it.
    Misfire,
    /// An earlier run of the job was still active and the overlap policy dropped it.
    Overlap,
    /// An `after` job's upstream run ended otherwise than it asks ([`crate::dependency`]).
    UpstreamFailed,
    /// An `after` job's upstreams did not all end within its `within`.
    UpstreamTimeout,
    /// The occurrence came while the job was paused: an `after` job's, or a run fired
    /// before the pause and skipped at its claim ([`crate::ledger::PAUSED_AT_CLAIM`]).
    Paused,
    /// The job's timing changed after the occurrence's run was fired ahead of its time, and
    /// the nominal time is no longer one of it: the run ended unstarted
    /// ([`crate::ledger::RESCHEDULED`]).
    Rescheduled,
}

impl SkipReason {
    /// Every reason, in label order.
    pub const ALL: [SkipReason; 6] = [
        SkipReason::Overlap,
        SkipReason::Misfire,
        SkipReason::Paused,
        SkipReason::UpstreamFailed,
        SkipReason::UpstreamTimeout,
        SkipReason::Rescheduled,
    ];

    /// The wire and label name: `misfire`, `overlap`, `upstream_failed`, `upstream_timeout`,
    /// `paused`, `rescheduled`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SkipReason::Misfire => "misfire",
            SkipReason::Overlap => "overlap",
            SkipReason::UpstreamFailed => crate::dependency::UPSTREAM_FAILED,
            SkipReason::UpstreamTimeout => crate::dependency::UPSTREAM_TIMEOUT,
            SkipReason::Paused => crate::dependency::PAUSED,
            SkipReason::Rescheduled => "rescheduled",
        }
    }

    /// The reason a SKIPPED run carries, if it is one of these.
    pub fn of_skipped(run: &crate::run::Run) -> Option<SkipReason> {
        let reason = run.reason.as_deref()?;
        SkipReason::ALL.into_iter().find(|r| r.as_str() == reason)
    }
}

/// A sweep's plan for one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The conditional write to make.
    pub firing: Firing,
    /// Occurrences not fired, with the reason.
    pub skipped: Vec<(Timestamp, SkipReason)>,
    /// More occurrences were within reach than [`MAX_RUNS_PER_FIRING`]: the firing stops
    /// short of the horizon, at `firing.next_fire_at`, and the next plan continues there.
    pub capped: bool,
}

impl Plan {
    /// Whether the job still has an occurrence due at `now` after this firing (a capped
    /// catch-up): whoever fired it should plan it again at once rather than at its next tick.
    pub fn still_due(&self, now: Timestamp) -> bool {
        self.capped && self.firing.next_fire_at.is_some_and(|t| t <= now)
    }
}

/// The run of `job`'s occurrence at `t`, as a firing at `now` creates it: its settings from
/// the job, its `not_before` the nominal time pushed by the job's start jitter.
pub fn scheduled_run(job: &Job, t: Timestamp, now: Timestamp) -> Run {
    let mut run = Run::of_job(job, t, Trigger::Schedule, t, now);
    run.not_before = t + start_jitter(job.spec.jitter, run.run_id.as_str()).to_chrono();
    run
}

/// Plans the firing of `job` at `now`: every occurrence from `job.next_fire_at` up to
/// `now + lookahead` is considered, and at most [`MAX_RUNS_PER_FIRING`] of them become runs
/// (the earliest; the job's `next_fire_at` stays at the first one left, see [`Plan::capped`]).
/// `active` are the job's PENDING/RUNNING runs. `None` if the job is not ACTIVE or has
/// nothing due.
pub fn plan(job: &Job, active: &[Run], now: Timestamp, lookahead: Dur) -> Option<Plan> {
    let first = job.next_fire_at?;
    let horizon = now + lookahead.to_chrono();
    if job.state != JobState::Active || first > horizon {
        return None;
    }
    let spec = &job.spec;
    let window = spec.window();

    // Walk the due occurrences.
    let mut due = Vec::new();
    let mut next = Some(first);
    while let Some(t) = next {
        if t > horizon || due.len() == MAX_SCAN {
            break;
        }
        due.push(t);
        next = next_fire_after(&spec.schedule, &spec.dst, &window, t);
    }

    // Misfire: split what was missed from what is (nearly) on time.
    let missed_before = now - MISFIRE_GRACE.to_chrono();
    let one_shot = matches!(spec.schedule, Schedule::At(_));
    let split = if one_shot {
        0
    } else {
        due.partition_point(|t| *t < missed_before)
    };
    let (missed, current) = due.split_at(split);
    let mut skipped = Vec::new();
    let mut fire: Vec<Timestamp> = Vec::new();
    match spec.misfire {
        Misfire::FireAll => {
            let keep_from = missed.len().saturating_sub(MAX_FIRE_ALL);
            skipped.extend(missed[..keep_from].iter().map(|t| (*t, SkipReason::Misfire)));
            fire.extend_from_slice(&missed[keep_from..]);
        }
        Misfire::Skip => skipped.extend(missed.iter().map(|t| (*t, SkipReason::Misfire))),
        // fire_once and any later policy: one run stands for everything missed.
        _ => {
            if let Some((latest, older)) = missed.split_last() {
                skipped.extend(older.iter().map(|t| (*t, SkipReason::Misfire)));
                fire.push(*latest);
            }
        }
    }
    fire.extend_from_slice(current);

    // Occurrences still ahead of now (fired early by a look-ahead) keep a run each: nothing
    // overlaps them yet, and the worker checks overlap when it claims them. Likewise runs
    // fired ahead of their time have started nothing. Only what is due now collapses.
    let ahead = fire.split_off(fire.partition_point(|t| *t <= now));
    let active: Vec<&Run> = active.iter().filter(|r| r.scheduled_for <= now).collect();

    // Overlap: with an earlier run still going, keep at most one new run (the latest).
    let mut cancel = Vec::new();
    let policy = spec.overlap_policy();
    if policy != Overlap::Allow && (fire.len() > 1 || !active.is_empty()) {
        let latest = fire.pop();
        skipped.extend(fire.drain(..).map(|t| (t, SkipReason::Overlap)));
        let keep_latest = match policy {
            Overlap::Forbid => active.is_empty(),
            Overlap::QueueOne => !active.iter().any(|r| r.state == RunState::Pending),
            Overlap::Replace => {
                cancel.extend(active.iter().filter(|r| replaced_by_newer(r)).map(|r| r.run_id.clone()));
                true
            }
            _ => true,
        };
        match latest {
            Some(t) if keep_latest => fire.push(t),
            Some(t) => skipped.push((t, SkipReason::Overlap)),
            None => {}
        }
    }
    fire.extend(ahead);
    skipped.sort_by_key(|(t, _)| *t);

    // The bound. `fire` is in time order and every skipped occurrence is earlier than every
    // fired one (policies only drop older occurrences in favour of later ones), so what is cut
    // off is the tail of the schedule: the job's next occurrence becomes its first.
    let capped = fire.len() > MAX_RUNS_PER_FIRING;
    if capped {
        next = Some(fire[MAX_RUNS_PER_FIRING]);
        fire.truncate(MAX_RUNS_PER_FIRING);
    }

    let runs = fire.into_iter().map(|t| scheduled_run(job, t, now)).collect();
    let mut skip_records = crate::ledger::records_of(&skipped);
    crate::alert::arm_skips(spec.notify.as_ref(), &mut skip_records, now);
    Some(Plan {
        firing: Firing {
            tenant: job.tenant.clone(),
            job_id: job.id.clone(),
            expected_version: job.version,
            expected_next_fire_at: job.next_fire_at,
            next_fire_at: next,
            state: if next.is_some() {
                JobState::Active
            } else {
                JobState::Completed
            },
            runs,
            cancel,
            skipped: skip_records,
            at: now,
        },
        skipped,
        capped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;
    use crate::timestamp::parse;

    fn ts(s: &str) -> Timestamp {
        parse(s).unwrap()
    }

    /// A job from JSON spec fields, ACTIVE, with `next_fire_at` set.
    fn job(spec: serde_json::Value, next_fire_at: &str) -> Job {
        let spec: JobSpec = serde_json::from_value(spec).unwrap();
        Job {
            tenant: "t".into(),
            id: "j".into(),
            spec: spec.normalised(ts("2026-01-01T00:00:00Z")),
            state: JobState::Active,
            next_fire_at: Some(ts(next_fire_at)),
            version: 3,
            created_at: ts("2026-01-01T00:00:00Z"),
            updated_at: ts("2026-01-01T00:00:00Z"),
        }
    }

    fn every_minute(extra: serde_json::Value) -> serde_json::Value {
        let mut spec = serde_json::json!({
            "schedule": {"cron": "* * * * *"},
            "task": {"command": {"argv": ["true"]}},
        });
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        spec
    }

    fn fired(plan: &Plan) -> Vec<Timestamp> {
        plan.firing.runs.iter().map(|r| r.scheduled_for).collect()
    }

    #[test]
    fn nothing_due_means_no_plan() {
        let j = job(every_minute(serde_json::json!({})), "2026-12-01T10:01:00Z");
        assert_eq!(plan(&j, &[], ts("2026-12-01T10:00:30Z"), Dur::ZERO), None);
    }

    #[test]
    fn an_on_time_occurrence_fires_and_the_schedule_advances() {
        let j = job(every_minute(serde_json::json!({})), "2026-12-01T10:00:00Z");
        let p = plan(&j, &[], ts("2026-12-01T10:00:00.003Z"), Dur::ZERO).unwrap();
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:00:00Z")]);
        assert_eq!(p.firing.next_fire_at, Some(ts("2026-12-01T10:01:00Z")));
        assert_eq!(p.firing.expected_next_fire_at, j.next_fire_at);
        assert_eq!(p.firing.expected_version, 3);
        assert_eq!(p.firing.state, JobState::Active);
        assert_eq!(p.firing.runs[0].run_id.as_str(), "j@20261201T100000.000Z");
        assert!(p.skipped.is_empty());
    }

    #[test]
    fn fire_once_after_downtime_fires_one_run_for_the_missed_and_skips_the_rest() {
        let j = job(
            every_minute(serde_json::json!({"misfire": "fire_once", "overlap": "allow"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&j, &[], ts("2026-12-01T10:10:30Z"), Dur::ZERO).unwrap();
        // 10:10 is within the grace, 10:09 is the latest missed one.
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:09:00Z"), ts("2026-12-01T10:10:00Z")]);
        assert_eq!(p.skipped.len(), 9);
        assert!(p.skipped.iter().all(|(_, r)| *r == SkipReason::Misfire));
        assert_eq!(p.firing.next_fire_at, Some(ts("2026-12-01T10:11:00Z")));

        // With the default `forbid`, the catch-up itself must not overlap: one run.
        let j = job(
            every_minute(serde_json::json!({"misfire": "fire_once"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&j, &[], ts("2026-12-01T10:10:30Z"), Dur::ZERO).unwrap();
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:10:00Z")]);
        assert_eq!(p.skipped.len(), 10);
    }

    #[test]
    fn skip_drops_every_missed_occurrence() {
        let j = job(
            every_minute(serde_json::json!({"misfire": "skip"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&j, &[], ts("2026-12-01T10:10:30Z"), Dur::ZERO).unwrap();
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:10:00Z")]);
        assert_eq!(p.skipped.len(), 10);
    }

    #[test]
    fn fire_all_fires_every_missed_occurrence_up_to_the_bound() {
        let j = job(
            every_minute(serde_json::json!({"misfire": "fire_all", "overlap": "allow"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&j, &[], ts("2026-12-01T10:05:00Z"), Dur::ZERO).unwrap();
        assert_eq!(fired(&p).len(), 6);
        let j = job(
            every_minute(serde_json::json!({"misfire": "fire_all", "overlap": "allow"})),
            "2026-12-01T00:00:00Z",
        );
        let now = ts("2026-12-01T10:00:30Z");
        let p = plan(&j, &[], now, Dur::ZERO).unwrap();
        assert_eq!(p.skipped.len(), 600 - MAX_FIRE_ALL);
        // 100 missed plus the current one: more than one firing takes, so two firings.
        assert_eq!(fired(&p).len(), MAX_RUNS_PER_FIRING);
        assert!(p.still_due(now));
        let mut j = j;
        j.next_fire_at = p.firing.next_fire_at;
        let q = plan(&j, &[], now, Dur::ZERO).unwrap();
        assert_eq!(fired(&q).len(), MAX_FIRE_ALL + 1 - MAX_RUNS_PER_FIRING);
        assert!(q.skipped.is_empty() && !q.capped);
    }

    #[test]
    fn forbid_skips_while_a_run_is_active() {
        let j = job(every_minute(serde_json::json!({})), "2026-12-01T10:00:00Z");
        let active = Run::new_pending(
            "t".into(),
            "j".into(),
            ts("2026-12-01T09:59:00Z"),
            Trigger::Schedule,
            5,
            ts("2026-12-01T09:59:00Z"),
            4,
            ts("2026-12-01T09:59:00Z"),
        );
        let p = plan(&j, &[active], ts("2026-12-01T10:00:00Z"), Dur::ZERO).unwrap();
        assert!(p.firing.runs.is_empty());
        assert_eq!(p.skipped, vec![(ts("2026-12-01T10:00:00Z"), SkipReason::Overlap)]);
        assert_eq!(
            p.firing.next_fire_at,
            Some(ts("2026-12-01T10:01:00Z")),
            "the schedule still advances"
        );
    }

    #[test]
    fn replace_cancels_the_active_run_and_queue_one_keeps_one_waiting() {
        let mut running = Run::new_pending(
            "t".into(),
            "j".into(),
            ts("2026-12-01T09:59:00Z"),
            Trigger::Schedule,
            5,
            ts("2026-12-01T09:59:00Z"),
            4,
            ts("2026-12-01T09:59:00Z"),
        );
        running.state = RunState::Running;
        let j = job(
            every_minute(serde_json::json!({"overlap": "replace"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(
            &j,
            std::slice::from_ref(&running),
            ts("2026-12-01T10:00:00Z"),
            Dur::ZERO,
        )
        .unwrap();
        assert_eq!(p.firing.cancel, vec![running.run_id.clone()]);
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:00:00Z")]);

        let j = job(
            every_minute(serde_json::json!({"overlap": "queue_one"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(
            &j,
            std::slice::from_ref(&running),
            ts("2026-12-01T10:00:00Z"),
            Dur::ZERO,
        )
        .unwrap();
        assert_eq!(
            fired(&p),
            vec![ts("2026-12-01T10:00:00Z")],
            "one may wait behind the running one"
        );
        let mut waiting = running.clone();
        waiting.state = RunState::Pending;
        let p = plan(&j, &[running, waiting], ts("2026-12-01T10:00:00Z"), Dur::ZERO).unwrap();
        assert!(p.firing.runs.is_empty(), "but not two");
    }

    #[test]
    fn a_one_shot_fires_once_however_late_and_completes() {
        let j = job(
            serde_json::json!({"schedule": {"at": "2026-12-01T10:00:00Z"}, "task": {"command": {"argv": ["true"]}}, "misfire": "skip"}),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&j, &[], ts("2026-12-02T10:00:00Z"), Dur::ZERO).unwrap();
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:00:00Z")]);
        assert_eq!(p.firing.next_fire_at, None);
        assert_eq!(p.firing.state, JobState::Completed);
    }

    #[test]
    fn jitter_delays_the_start_but_not_the_nominal_time() {
        let j = job(
            every_minute(serde_json::json!({"jitter": "30s"})),
            "2026-12-01T10:00:00Z",
        );
        let p = plan(&j, &[], ts("2026-12-01T10:00:00Z"), Dur::ZERO).unwrap();
        let run = &p.firing.runs[0];
        assert_eq!(run.scheduled_for, ts("2026-12-01T10:00:00Z"));
        assert!(run.not_before >= run.scheduled_for && run.not_before < ts("2026-12-01T10:00:30Z"));
    }

    #[test]
    fn lookahead_fires_early_with_not_before_at_the_nominal_time() {
        let j = job(every_minute(serde_json::json!({})), "2026-12-01T10:01:00Z");
        let p = plan(&j, &[], ts("2026-12-01T10:00:30Z"), Dur::secs(60)).unwrap();
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:01:00Z")]);
        assert_eq!(p.firing.runs[0].not_before, ts("2026-12-01T10:01:00Z"));
    }

    #[test]
    fn a_look_ahead_fires_each_coming_occurrence_even_under_forbid() {
        let j = job(every_minute(serde_json::json!({})), "2026-12-01T10:01:00Z");
        let mut running = Run::new_pending(
            "t".into(),
            "j".into(),
            ts("2026-12-01T10:00:00Z"),
            Trigger::Schedule,
            5,
            ts("2026-12-01T10:00:00Z"),
            4,
            ts("2026-12-01T10:00:00Z"),
        );
        running.state = RunState::Running;
        let early = Run::new_pending(
            "t".into(),
            "j".into(),
            ts("2026-12-01T10:01:00Z"),
            Trigger::Schedule,
            5,
            ts("2026-12-01T10:01:00Z"),
            4,
            ts("2026-12-01T10:00:00Z"),
        );
        // A run fired ahead of its time blocks nothing; the occurrences ahead all fire.
        let p = plan(&j, &[early], ts("2026-12-01T10:00:30Z"), Dur::secs(180)).unwrap();
        let expected = ["10:01", "10:02", "10:03"].map(|m| ts(&format!("2026-12-01T{m}:00Z")));
        assert_eq!(fired(&p), expected.to_vec());
        assert!(p.skipped.is_empty());
        assert_eq!(p.firing.next_fire_at, Some(ts("2026-12-01T10:04:00Z")));
        // A run that started does not make coming occurrences skip at sweep time either: the
        // worker decides when it claims them.
        let p = plan(&j, &[running], ts("2026-12-01T10:00:30Z"), Dur::secs(60)).unwrap();
        assert_eq!(fired(&p), vec![ts("2026-12-01T10:01:00Z")]);
    }

    #[test]
    fn a_per_second_job_fires_at_most_the_bound_and_the_next_plan_goes_on_where_it_stopped() {
        let spec = serde_json::json!({
            "schedule": {"cron": "*/1 * * * * *"},
            "task": {"command": {"argv": ["true"]}},
        });
        let mut j = job(spec, "2026-12-01T10:00:01Z");
        let now = ts("2026-12-01T10:00:00.500Z");
        let p = plan(&j, &[], now, Dur::secs(600)).unwrap();
        let first = fired(&p);
        assert_eq!(first.len(), MAX_RUNS_PER_FIRING, "600 within reach, the bound fired");
        assert!(p.capped && !p.still_due(now));
        assert!(p.skipped.is_empty());
        let expected: Vec<Timestamp> = (0..MAX_RUNS_PER_FIRING as i64)
            .map(|i| ts("2026-12-01T10:00:01Z") + chrono::Duration::seconds(i))
            .collect();
        assert_eq!(first, expected, "the earliest, one a second");
        let resume = ts("2026-12-01T10:00:01Z") + chrono::Duration::seconds(MAX_RUNS_PER_FIRING as i64);
        assert_eq!(p.firing.next_fire_at, Some(resume), "the first one not fired");
        assert_eq!(p.firing.state, JobState::Active);

        // The next plan (as after the write) starts exactly there: no gap, no repeat.
        j.next_fire_at = p.firing.next_fire_at;
        let p = plan(&j, &[], now, Dur::secs(600)).unwrap();
        assert_eq!(fired(&p)[0], resume);
        assert_eq!(fired(&p).len(), MAX_RUNS_PER_FIRING);

        // Within a short horizon the bound does not bite.
        j.next_fire_at = Some(ts("2026-12-01T10:00:01Z"));
        let p = plan(&j, &[], now, Dur::secs(60)).unwrap();
        assert_eq!(fired(&p).len(), 60);
        assert!(!p.capped);
        assert_eq!(p.firing.next_fire_at, Some(ts("2026-12-01T10:01:01Z")));
    }

    #[test]
    fn a_capped_catch_up_is_still_due_and_loses_nothing() {
        // fire_all + allow after 10 minutes down: 100 missed + 60 within the grace are due.
        let spec = serde_json::json!({
            "schedule": {"every": "1s"},
            "task": {"command": {"argv": ["true"]}},
            "misfire": "fire_all",
            "overlap": "allow",
        });
        let mut j = job(spec, "2026-12-01T10:00:00Z");
        let now = ts("2026-12-01T10:10:00Z");
        let p = plan(&j, &[], now, Dur::ZERO).unwrap();
        assert_eq!(p.firing.runs.len(), MAX_RUNS_PER_FIRING);
        assert!(p.still_due(now), "the rest is due now");
        let last = *fired(&p).last().unwrap();
        j.next_fire_at = p.firing.next_fire_at;
        let q = plan(&j, &[], now, Dur::ZERO).unwrap();
        assert_eq!(fired(&q)[0], last + chrono::Duration::seconds(1));
        assert!(q.skipped.is_empty(), "what was cut off is not missed a second time");
        assert_eq!(p.skipped.len() + p.firing.runs.len() + q.firing.runs.len(), 601);
    }

    #[test]
    fn paused_jobs_do_not_fire() {
        let mut j = job(every_minute(serde_json::json!({})), "2026-12-01T10:00:00Z");
        j.state = JobState::Paused;
        assert_eq!(plan(&j, &[], ts("2026-12-01T10:00:00Z"), Dur::ZERO), None);
    }
}
