//! Backfill: re-running a job's past occurrences on request (`POST /jobs/{id}/backfill`).
//!
//! One run per nominal time of the job's schedule in `[from, to)` that has no run yet, each
//! with `scheduled_for` = that time (the id every firing of that occurrence would have, so a
//! repeated backfill, or a sweep, never creates a second), due now, at the job's priority.
//!
//! **Overlap**: under `allow` the runs start side by side, as many as workers take. Under every
//! other policy they run one after another in nominal-time order, never beside another run of
//! the job: a backfill run is held at claim time like a `queue_one` run (it waits while a run
//! of the job holds a lease, or while an earlier backfill run of the job waits), and the end of
//! each run enqueues the next. Skipping them as `forbid` skips an occurrence that meets a
//! running one would make a backfill of more than one occurrence pointless.

use super::Sked;
use crate::error::CoreError;
use crate::ids::{JobId, RunId, TenantId};
use crate::job::{Job, Overlap};
use crate::lifecycle::another_run_leased_until;
use crate::ports::{Dispatch, Event};
use crate::run::{Run, RunState, Trigger};
use crate::schedule::next::{first_fire, next_fire_after};
use crate::timestamp::{Timestamp, trunc_ms};

/// Most occurrences one backfill may cover.
pub const MAX_BACKFILL: usize = 1_000;

/// The nominal times of `job`'s schedule in `[from, to)`, in order, within the job's window.
/// `Invalid` naming `to` when there are more than [`MAX_BACKFILL`].
pub fn backfill_times(job: &Job, from: Timestamp, to: Timestamp) -> Result<Vec<Timestamp>, CoreError> {
    let spec = &job.spec;
    let window = spec.window();
    // `first_fire` answers the first occurrence strictly after its argument.
    let mut next = first_fire(
        &spec.schedule,
        &spec.dst,
        &window,
        from - chrono::Duration::milliseconds(1),
    )
    .filter(|t| *t >= from);
    let mut times = Vec::new();
    while let Some(t) = next.filter(|t| *t < to) {
        if times.len() == MAX_BACKFILL {
            return Err(CoreError::invalid(
                "to",
                format!(
                    "[from, to) holds more than {MAX_BACKFILL} occurrences of the job's schedule; backfill at most {MAX_BACKFILL} at a time"
                ),
            ));
        }
        times.push(t);
        next = next_fire_after(&spec.schedule, &spec.dst, &window, t);
    }
    Ok(times)
}

/// Whether `run`, a run of a job under `policy`, waits its turn at claim time as a backfill
/// run does (see the module header).
pub fn runs_in_turn(run: &Run, policy: Overlap) -> bool {
    run.trigger == Trigger::Backfill && policy != Overlap::Allow
}

/// For a backfill run that [`runs_in_turn`], until when it must wait, given its job's
/// `active` runs (PENDING and RUNNING, itself among them) at `now`: while an earlier backfill
/// run of the job is PENDING, for `retry_after` (that run goes first, and its end enqueues
/// this one again); while another run holds a lease, until that lease ends (then it looks
/// again: the lease may have been renewed, or its worker lost). `None`: its turn.
pub fn backfill_turn(
    active: &[Run],
    run_id: &RunId,
    now: Timestamp,
    retry_after: chrono::Duration,
) -> Option<Timestamp> {
    let this = active.iter().find(|r| &r.run_id == run_id)?;
    let behind_earlier = active.iter().any(|r| {
        r.run_id != this.run_id
            && r.trigger == Trigger::Backfill
            && r.state == RunState::Pending
            && r.scheduled_for < this.scheduled_for
    });
    if behind_earlier {
        return Some(now + retry_after);
    }
    another_run_leased_until(active, run_id, now)
}

impl Sked {
    /// Creates the runs of `id`'s occurrences in `[from, to)` that have none yet (see the
    /// module header) and enqueues them; returns their ids in nominal-time order (empty when
    /// every occurrence already has a run).
    pub async fn backfill_job(
        &self,
        tenant: &TenantId,
        id: &JobId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<RunId>, CoreError> {
        let now = trunc_ms(self.now());
        if from >= to {
            return Err(CoreError::invalid("to", "must be later than `from`"));
        }
        if to > now {
            return Err(CoreError::invalid(
                "to",
                "backfill covers past occurrences: `to` must not be later than now (the schedule fires the rest)",
            ));
        }
        let job = self.live_job(tenant, id).await?;
        let times = backfill_times(&job, from, to)?;
        if times.is_empty() {
            return Ok(Vec::new());
        }
        self.admit(tenant, times.len()).await?;
        let mut created = Vec::new();
        let count = times.len() as i64;
        for (i, t) in times.into_iter().enumerate() {
            // Due now, a millisecond apart (the last one at now), so queues that order by due
            // time hand them out in nominal-time order.
            let not_before = now - chrono::Duration::milliseconds(count - 1 - i as i64);
            let run = Run::of_job(&job, t, Trigger::Backfill, not_before, now);
            if self.ports.store.insert_run(&run).await? {
                created.push(run);
            }
        }
        if !created.is_empty() {
            let dispatches: Vec<Dispatch> = created.iter().map(Dispatch::from).collect();
            self.ports.queue.enqueue(&dispatches).await?;
            self.ports.observe(Event::Fired {
                tenant,
                runs: created.len(),
            });
        }
        tracing::info!(%tenant, job_id = %id, runs = created.len(), "backfill");
        Ok(created.into_iter().map(|r| r.run_id).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::parse;
    use chrono::Duration;

    fn job(schedule: serde_json::Value) -> Job {
        let created = parse("2026-01-01T00:00:00Z").unwrap();
        let spec: crate::job::JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": schedule,
            "task": {"command": {"argv": ["true"]}},
        }))
        .unwrap();
        Job {
            tenant: "t".into(),
            id: "j".into(),
            spec: spec.normalised(created),
            state: crate::job::JobState::Active,
            next_fire_at: None,
            version: 1,
            created_at: created,
            updated_at: created,
        }
    }

    fn ts(s: &str) -> Timestamp {
        parse(s).unwrap()
    }

    #[test]
    fn times_are_the_schedules_occurrences_from_inclusive_to_exclusive() {
        let j = job(serde_json::json!({"cron": "0 * * * *"}));
        let times = backfill_times(&j, ts("2026-11-30T01:00:00Z"), ts("2026-11-30T04:00:00Z")).unwrap();
        assert_eq!(
            times,
            vec![
                ts("2026-11-30T01:00:00Z"),
                ts("2026-11-30T02:00:00Z"),
                ts("2026-11-30T03:00:00Z")
            ]
        );
        let none = backfill_times(&j, ts("2026-11-30T01:00:01Z"), ts("2026-11-30T01:59:59Z")).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn more_than_the_bound_is_refused_naming_to() {
        let j = job(serde_json::json!({"every": "1m"}));
        let from = ts("2026-11-30T00:00:00Z");
        let ok = backfill_times(&j, from, from + Duration::minutes(MAX_BACKFILL as i64)).unwrap();
        assert_eq!(ok.len(), MAX_BACKFILL);
        match backfill_times(&j, from, from + Duration::minutes(MAX_BACKFILL as i64 + 1)) {
            Err(CoreError::Invalid(errors)) => assert_eq!(errors[0].field, "to"),
            other => panic!("expected a 422 naming `to`, got {other:?}"),
        }
    }

    #[test]
    fn a_backfill_run_waits_behind_an_earlier_backfill_run_first_then_behind_a_leased_run() {
        let now = ts("2026-12-01T00:00:00Z");
        let backfill = |minute: i64| {
            Run::new_pending(
                "t".into(),
                "j".into(),
                now - Duration::minutes(minute),
                Trigger::Backfill,
                5,
                now,
                1,
                now,
            )
        };
        let (older, newer) = (backfill(20), backfill(10));
        let wait = Duration::seconds(15);
        // Its turn: nothing else is active, or only later backfill runs.
        assert_eq!(
            backfill_turn(std::slice::from_ref(&older), &older.run_id, now, wait),
            None
        );
        assert_eq!(
            backfill_turn(&[older.clone(), newer.clone()], &older.run_id, now, wait),
            None
        );
        // Behind an earlier backfill run: for `wait` (its end wakes this one).
        assert_eq!(
            backfill_turn(&[older.clone(), newer.clone()], &newer.run_id, now, wait),
            Some(now + wait)
        );
        // Behind a leased run of the job: until its lease ends.
        let mut running = older.clone();
        running.state = RunState::Running;
        running.lease = Some(crate::run::Lease {
            owner: "w".into(),
            token: 1,
            expires_at: now + Duration::seconds(30),
        });
        assert_eq!(
            backfill_turn(&[running, newer.clone()], &newer.run_id, now, wait),
            Some(now + Duration::seconds(30))
        );
        assert!(runs_in_turn(&newer, Overlap::Forbid));
        assert!(!runs_in_turn(&newer, Overlap::Allow));
    }
}
