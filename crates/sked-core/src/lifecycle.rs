//! The run state machine as pure functions on a loaded [`Run`]: claim, heartbeat, complete and
//! cancel. Every store that keeps a run as one record applies these inside its own transaction
//! (read, decide, write), so the rules of a run's life (its states, retries, cancels and
//! skips) are written once, here, and unit-tested here.
//! A store whose writes are conditional expressions (DynamoDB) must keep the same rules; the
//! contract suites in sked-testkit check that they do.

use crate::attempt::{AttemptResult, ClaimOutcome, RunTransition};
use crate::ids::{JobId, RunId, TenantId, WorkerId};
use crate::job::{Job, JobState, Overlap};
use crate::ports::{ClaimBatch, JobClaim, StoreError};
use crate::run::{Attempt, AttemptOutcome, Lease, Run, RunState, Trigger};
use crate::service::backfill::runs_in_turn;
use crate::timestamp::{Timestamp, trunc_ms};

/// Error text of an attempt closed because its worker stopped renewing its lease.
pub const WORKER_LOST: &str = "worker lost";
/// Reason of a run that ended CANCELLED at claim time because a cancel was requested.
pub const CANCELLED: &str = "cancelled";
/// Reason of a run cancelled because its job was deleted (by the delete, or by the worker
/// that met it).
pub const JOB_DELETED: &str = "job deleted";
/// Reason of a run cancelled by the `replace` overlap policy.
pub const REPLACED: &str = "replaced by a newer run";

/// Until when another run among `active` (a job's PENDING and RUNNING runs; not `run_id`)
/// holds a lease live at `now`, if one does: a `queue_one` run waits that long.
pub fn another_run_leased_until(active: &[Run], run_id: &RunId, now: Timestamp) -> Option<Timestamp> {
    active
        .iter()
        .filter(|r| &r.run_id != run_id && r.state == RunState::Running)
        .filter_map(|r| r.lease.as_ref().map(|l| l.expires_at))
        .filter(|until| *until > now)
        .max()
}

/// Under `queue_one`, whether `run_id` — a scheduled run among its job's `active` runs, due at
/// `now` while another run of the job holds a lease — would be a second run waiting: an
/// earlier run of the job is already PENDING. `queue_one` keeps one run waiting behind the
/// running one, so this one is skipped, as the sweeper skips an occurrence it fires while one
/// waits. Runs reach this point without that check when they were fired ahead of their time
/// (look-ahead), or created under another overlap policy before the job was changed to
/// `queue_one`; without it they would all wait, one after another.
pub fn queue_one_already_waiting(active: &[Run], run_id: &RunId, now: Timestamp) -> bool {
    let Some(this) = active.iter().find(|r| &r.run_id == run_id) else {
        return false;
    };
    this.trigger == Trigger::Schedule
        && this.state == RunState::Pending
        && this.scheduled_for <= now
        && active
            .iter()
            .any(|r| r.run_id != this.run_id && r.state == RunState::Pending && r.scheduled_for < this.scheduled_for)
}

/// What a claim does to a loaded run.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a return value, moved once; boxing would only add an allocation
pub enum ClaimStep {
    /// Start a new attempt ([`Run::start_attempt`]); the run may already have changed (an
    /// abandoned attempt closed), and must be saved with it.
    Start,
    /// Answer this without starting an attempt; save the run first if `changed`.
    Answer {
        /// The answer.
        outcome: ClaimOutcome,
        /// Whether the run was changed (and must be saved).
        changed: bool,
    },
}

impl Run {
    /// Whether the lease ended before `now` (or there is none).
    pub fn lease_expired(&self, now: Timestamp) -> bool {
        self.lease.as_ref().is_none_or(|l| l.expires_at < now)
    }

    /// Decides a claim at `now` (see [`crate::ports::JobStore::claim`]): an expired attempt is
    /// closed as worker lost at its lease's expiry, a run with nothing left to try ends, a
    /// cancelled one ends CANCELLED, a leased or not-yet-due one is refused.
    pub fn decide_claim(&mut self, now: Timestamp) -> ClaimStep {
        let answer = |outcome, changed| ClaimStep::Answer { outcome, changed };
        if self.state.is_terminal() {
            return answer(ClaimOutcome::Terminal(self.clone()), false);
        }
        if self.state == RunState::Running {
            if let Some(lease) = self.lease.as_ref().filter(|_| !self.lease_expired(now)) {
                return answer(ClaimOutcome::Leased(lease.expires_at), false);
            }
            // Its worker vanished: close the attempt where its lease ended.
            let ended = self.close_lost_attempt();
            if self.cancel_requested || self.attempt_count() >= self.max_attempts {
                let (state, reason) = if self.cancel_requested {
                    (RunState::Cancelled, CANCELLED)
                } else {
                    (RunState::Failed, WORKER_LOST)
                };
                self.end(state, ended.unwrap_or(now), reason);
                return answer(ClaimOutcome::Terminal(self.clone()), true);
            }
            return ClaimStep::Start;
        }
        if self.cancel_requested {
            self.end(RunState::Cancelled, now, CANCELLED);
            return answer(ClaimOutcome::Terminal(self.clone()), true);
        }
        if self.not_before > now {
            return answer(ClaimOutcome::NotYet(self.not_before), false);
        }
        if self.attempt_count() >= self.max_attempts {
            // Nothing left to try (a retry was written past the limit): end it.
            self.end(RunState::Failed, now, "no attempt left");
            return answer(ClaimOutcome::Terminal(self.clone()), true);
        }
        ClaimStep::Start
    }

    /// Appends attempt n+1 for `worker` under a lease until `lease_until` with fencing `token`
    /// (which the store guarantees is greater than any earlier token of this run).
    pub fn start_attempt(&mut self, worker: &WorkerId, now: Timestamp, lease_until: Timestamp, token: u64) {
        let now = trunc_ms(now);
        self.attempts.push(Attempt {
            attempt: self.attempt_count() + 1,
            worker: worker.clone(),
            started_at: now,
            finished_at: None,
            outcome: None,
            exit_code: None,
            http_status: None,
            error: None,
            log_bytes: 0,
            log_truncated: false,
        });
        self.state = RunState::Running;
        self.started_at.get_or_insert(now);
        self.lease = Some(Lease {
            owner: worker.clone(),
            token,
            expires_at: trunc_ms(lease_until),
        });
    }

    /// Renews the lease held by `token` until `lease_until`, unless it expired before `now`.
    pub fn renew_lease(&mut self, token: u64, now: Timestamp, lease_until: Timestamp) -> Result<(), StoreError> {
        let running = self.state == RunState::Running;
        match &mut self.lease {
            Some(lease) if running && lease.token == token && lease.expires_at >= now => {
                lease.expires_at = trunc_ms(lease_until);
                Ok(())
            }
            _ => Err(StoreError::Fenced),
        }
    }

    /// Closes the attempt holding `token` with `result` and moves the run by `next` (see
    /// [`crate::ports::JobStore::complete`]). [`StoreError::Fenced`] and no change unless the
    /// token holds the lease (and, with `only_if_expired_by`, the lease expired before it).
    pub fn finish_attempt(
        &mut self,
        token: u64,
        result: &AttemptResult,
        next: RunTransition,
        only_if_expired_by: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let holds = self.state == RunState::Running
            && self
                .lease
                .as_ref()
                .is_some_and(|l| l.token == token && only_if_expired_by.is_none_or(|t| l.expires_at < t));
        if !holds {
            return Err(StoreError::Fenced);
        }
        if let RunTransition::Finish(state) = next
            && !state.is_terminal()
        {
            return Err(StoreError::Other(format!("cannot finish a run as {state}").into()));
        }
        let finished_at = trunc_ms(result.finished_at);
        if let Some(a) = self.attempts.last_mut() {
            a.finished_at = Some(finished_at);
            a.outcome = Some(result.outcome);
            a.exit_code = result.exit_code;
            a.http_status = result.http_status;
            a.error = result.error.clone();
            a.log_bytes = result.log_bytes;
            a.log_truncated = result.log_truncated;
        }
        self.lease = None;
        match next {
            RunTransition::Retry { not_before } => {
                self.state = RunState::Pending;
                self.not_before = trunc_ms(not_before);
            }
            RunTransition::Finish(state) => {
                self.state = state;
                self.finished_at = Some(finished_at);
                self.arm_alert();
            }
        }
        Ok(())
    }

    /// Asks the run to stop: PENDING ends CANCELLED at once with `reason`; RUNNING gets
    /// `cancel_requested` (its worker stops it). Returns whether the run changed.
    pub fn request_cancel(&mut self, now: Timestamp, reason: &str) -> bool {
        match self.state {
            RunState::Pending => {
                self.lease = None;
                self.end(RunState::Cancelled, now, reason);
                true
            }
            RunState::Running if !self.cancel_requested => {
                self.cancel_requested = true;
                true
            }
            _ => false,
        }
    }

    /// Moves a PENDING run's `not_before` to `until`: a run waiting its turn (a backfill run
    /// behind another run of its job) is not ready before then, so the repair pass does not
    /// take it for a run whose message was lost. Returns whether the run changed.
    pub fn defer(&mut self, until: Timestamp) -> bool {
        if self.state != RunState::Pending || self.not_before == until {
            return false;
        }
        self.not_before = until;
        true
    }

    /// Closes the open attempt as worker lost at the lease's expiry and drops the lease;
    /// returns that expiry.
    fn close_lost_attempt(&mut self) -> Option<Timestamp> {
        let expired_at = self.lease.take().map(|l| l.expires_at);
        if let Some(a) = self.attempts.last_mut().filter(|a| a.outcome.is_none()) {
            a.finished_at = expired_at.or(Some(a.started_at));
            a.outcome = Some(AttemptOutcome::WorkerLost);
            a.error = Some(WORKER_LOST.to_string());
        }
        expired_at
    }

    /// Ends the run in `state` at `at`, keeping an earlier reason if there is one.
    fn end(&mut self, state: RunState, at: Timestamp, reason: &str) {
        self.state = state;
        self.finished_at = Some(trunc_ms(at));
        self.reason.get_or_insert_with(|| reason.to_string());
        self.arm_alert();
    }
}

/// What a store's transaction offers [`claim_batch`]: reads of the job and of its active
/// runs, and the claim of one run (load, [`Run::decide_claim`], the quota's check,
/// [`Run::start_attempt`], save). `Err` is a failure of the transaction; a refusal of one run
/// (it does not exist) is the inner error.
pub trait ClaimTx {
    /// The transaction's failure.
    type Error;
    /// The job, if it exists.
    fn job(&mut self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, Self::Error>;
    /// The job's PENDING and RUNNING runs.
    fn active_runs(&mut self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, Self::Error>;
    /// The run, if it exists.
    fn run(&mut self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, Self::Error>;
    /// Called once before anything of `batch` is read: a store whose transactions do not
    /// isolate on their own (PostgreSQL at `READ COMMITTED`) locks here what the claims will
    /// decide on — the runs, and whatever the limits they check count (a concurrency key's
    /// slots, a tenant's cap, a job's other runs) — in one fixed order, so that two
    /// transactions claiming at once decide one after the other. Nothing by default.
    fn lock_claims(&mut self, batch: &ClaimBatch) -> Result<(), Self::Error> {
        let _ = batch;
        Ok(())
    }
    /// Claims one run of `batch` for `owner` as [`crate::ports::JobStore::claim`] describes.
    fn claim_run(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        owner: &WorkerId,
        batch: &ClaimBatch,
    ) -> Result<Result<ClaimOutcome, StoreError>, Self::Error>;
}

/// Whether a claim reading `job` holds its run back for the worker ([`JobClaim::Held`])
/// without reading the run: the job's overlap policy is one the worker checks at claim
/// (`hold`), or the job is PAUSED — a run of its schedule fired before the pause (ahead of
/// its time, as on AWS, or due and still queued) is skipped by the worker, not started — or
/// DELETED: its delete cancels its runs waiting to start as a step after its write, and the
/// worker ends any that step missed or raced instead of starting it.
/// (Some runs are held once read: [`held_once_read`].)
pub fn held_at_claim(job: &Job, hold: &[Overlap]) -> bool {
    matches!(job.state, JobState::Paused | JobState::Deleted) || hold.contains(&job.spec.overlap_policy())
}

/// Whether a claim reading `job` must read the run `run_id` to decide [`held_once_read`].
pub fn claim_reads_run(job: &Job, run_id: &RunId) -> bool {
    job.spec.overlap_policy() != Overlap::Allow || retimed_away(job, run_id)
}

/// Whether a claim reading `job` and its run `run` holds the run back for the worker: a
/// backfill run that waits its turn ([`crate::service::backfill::runs_in_turn`]), or a run of
/// the schedule never tried whose time the job's timing no longer has ([`retimed_away`]).
pub fn held_once_read(job: &Job, run: &Run) -> bool {
    let policy = job.spec.overlap_policy();
    (policy != Overlap::Allow && runs_in_turn(run, policy))
        || (run.is_untried_occurrence() && retimed_away(job, &run.run_id))
}

/// Whether `run_id` names a time after `job`'s last change that is not an occurrence of the
/// job's timing: for a run of the schedule, one fired ahead of its time before a change of the
/// schedule, window or DST rule dropped that time. The change itself ends such runs, as a step
/// after its write that may fail; a claim holds any it missed and the worker skips it
/// (`rescheduled`), so the old timing starts nothing once the change is written.
pub fn retimed_away(job: &Job, run_id: &RunId) -> bool {
    run_id
        .parts()
        .is_some_and(|(_, t)| t > job.updated_at && !job.spec.is_occurrence(t))
}

/// A whole [`ClaimBatch`] in one transaction: for each run, its job read (with
/// `read_jobs`), the run held back if [`held_at_claim`] or [`held_once_read`], left alone
/// while another run of its job holds a live lease (with `alone`), else claimed. The rules of
/// [`crate::ports::JobStore::claim`], written once for every store that has transactions.
pub fn claim_batch<T: ClaimTx>(tx: &mut T, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, T::Error> {
    let mut out = Vec::with_capacity(batch.runs.len());
    tx.lock_claims(batch)?;
    for (index, (tenant, run_id)) in batch.runs.iter().enumerate() {
        let job_id = run_id.parts().map(|(job_id, _)| job_id);
        let job = match &job_id {
            Some(job_id) if batch.read_jobs => tx.job(tenant, job_id)?,
            _ => None,
        };
        if let Some(job) = job.as_ref() {
            let held = held_at_claim(job, &batch.hold)
                || (claim_reads_run(job, run_id) && tx.run(tenant, run_id)?.is_some_and(|r| held_once_read(job, &r)));
            if held {
                out.push(Ok(JobClaim::Held(job.clone())));
                continue;
            }
        }
        if let Some(job_id) = job_id.as_ref().filter(|_| batch.alone) {
            let active = tx.active_runs(tenant, job_id)?;
            if let Some(until) = another_run_leased_until(&active, run_id, batch.now) {
                out.push(Ok(JobClaim::Claimed(ClaimOutcome::Leased(until), job)));
                continue;
            }
        }
        let claimed = tx.claim_run(tenant, run_id, batch.owner_of(index), batch)?;
        out.push(claimed.map(|outcome| JobClaim::Claimed(outcome, job)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::parse;

    fn t(secs: i64) -> Timestamp {
        parse("2026-12-01T00:00:00Z").unwrap() + chrono::Duration::seconds(secs)
    }

    fn pending(max_attempts: u32) -> Run {
        Run::new_pending(
            "t".into(),
            "j".into(),
            t(0),
            Trigger::Schedule,
            5,
            t(0),
            max_attempts,
            t(0),
        )
    }

    /// A run of `j` scheduled at `t(at)`, PENDING (or RUNNING with a lease to `t(at + 15)`).
    fn run_at(at: i64, trigger: Trigger, running: bool) -> Run {
        let mut run = Run::new_pending("t".into(), "j".into(), t(at), trigger, 5, t(at), 4, t(at));
        if running {
            run.start_attempt(&"w".into(), t(at), t(at + 15), 1);
        }
        run
    }

    #[test]
    fn queue_one_keeps_one_run_waiting_behind_the_running_one() {
        let running = run_at(0, Trigger::Schedule, true);
        let first = run_at(10, Trigger::Schedule, false);
        let second = run_at(20, Trigger::Schedule, false);
        let active = vec![running, first.clone(), second.clone()];
        // The earliest waiting run stays; a later one would be a second waiter.
        assert!(!queue_one_already_waiting(&active, &first.run_id, t(25)));
        assert!(queue_one_already_waiting(&active, &second.run_id, t(25)));
        // Not before its time (fired ahead), and never a manual trigger.
        assert!(!queue_one_already_waiting(&active, &second.run_id, t(15)));
        let manual = run_at(30, Trigger::Manual, false);
        let with_manual = vec![active[0].clone(), first, manual.clone()];
        assert!(!queue_one_already_waiting(&with_manual, &manual.run_id, t(35)));
    }

    fn result(outcome: AttemptOutcome, at: i64) -> AttemptResult {
        AttemptResult {
            finished_at: t(at),
            outcome,
            exit_code: Some(0),
            http_status: None,
            error: None,
            log_bytes: 3,
            log_truncated: false,
        }
    }

    /// Claims as a store would: `None` when an attempt started, else the answer.
    fn claim(run: &mut Run, now: i64, token: u64) -> Option<ClaimOutcome> {
        match run.decide_claim(t(now)) {
            ClaimStep::Start => {
                run.start_attempt(&"w".into(), t(now), t(now + 15), token);
                None
            }
            ClaimStep::Answer { outcome, .. } => Some(outcome),
        }
    }

    #[test]
    fn pending_claims_into_running_with_a_lease_then_succeeds() {
        let mut run = pending(2);
        assert_eq!(claim(&mut run, 0, 1), None);
        assert_eq!(run.state, RunState::Running);
        assert_eq!(run.started_at, Some(t(0)));
        assert_eq!(run.lease.as_ref().unwrap().expires_at, t(15));
        run.finish_attempt(
            1,
            &result(AttemptOutcome::Succeeded, 3),
            RunTransition::Finish(RunState::Succeeded),
            None,
        )
        .unwrap();
        assert_eq!(
            (run.state, run.finished_at, run.lease.clone()),
            (RunState::Succeeded, Some(t(3)), None)
        );
        assert_eq!(run.attempts[0].log_bytes, 3);
    }

    #[test]
    fn not_yet_and_leased_runs_are_refused_without_change() {
        let mut run = pending(2);
        run.not_before = t(10);
        assert_eq!(claim(&mut run, 0, 1), Some(ClaimOutcome::NotYet(t(10))));
        assert_eq!(claim(&mut run, 10, 1), None);
        assert_eq!(claim(&mut run, 12, 2), Some(ClaimOutcome::Leased(t(25))));
    }

    #[test]
    fn an_expired_lease_is_closed_as_worker_lost_and_the_next_attempt_starts() {
        let mut run = pending(2);
        assert_eq!(claim(&mut run, 0, 1), None);
        assert_eq!(claim(&mut run, 20, 2), None);
        assert_eq!(run.attempts[0].outcome, Some(AttemptOutcome::WorkerLost));
        assert_eq!(run.attempts[0].finished_at, Some(t(15)));
        assert_eq!(run.attempts.len(), 2);
        // and with no attempt left, the run ends FAILED at the lease's expiry
        let Some(ClaimOutcome::Terminal(ended)) = claim(&mut run, 40, 3) else {
            panic!()
        };
        assert_eq!((ended.state, ended.finished_at), (RunState::Failed, Some(t(35))));
    }

    #[test]
    fn writes_with_a_stale_token_are_fenced_and_change_nothing() {
        let mut run = pending(3);
        assert_eq!(claim(&mut run, 0, 1), None);
        assert_eq!(claim(&mut run, 20, 2), None);
        let before = run.clone();
        assert!(matches!(run.renew_lease(1, t(21), t(40)), Err(StoreError::Fenced)));
        let done = result(AttemptOutcome::Succeeded, 22);
        let finish = RunTransition::Finish(RunState::Succeeded);
        assert!(matches!(
            run.finish_attempt(1, &done, finish, None),
            Err(StoreError::Fenced)
        ));
        assert_eq!(run, before);
        assert!(run.renew_lease(2, t(21), t(40)).is_ok());
        assert!(
            matches!(run.renew_lease(2, t(41), t(60)), Err(StoreError::Fenced)),
            "expired lease"
        );
    }

    #[test]
    fn a_retry_returns_the_run_to_pending_until_its_backoff_passed() {
        let mut run = pending(3);
        assert_eq!(claim(&mut run, 0, 1), None);
        let retry = RunTransition::Retry { not_before: t(30) };
        run.finish_attempt(1, &result(AttemptOutcome::Failed, 2), retry, None)
            .unwrap();
        assert_eq!(
            (run.state, run.not_before, run.finished_at),
            (RunState::Pending, t(30), None)
        );
        assert_eq!(claim(&mut run, 29, 2), Some(ClaimOutcome::NotYet(t(30))));
    }

    #[test]
    fn the_reaper_form_only_closes_an_expired_lease() {
        let mut run = pending(3);
        assert_eq!(claim(&mut run, 0, 1), None);
        let lost = result(AttemptOutcome::WorkerLost, 15);
        let next = RunTransition::Retry { not_before: t(16) };
        assert!(matches!(
            run.finish_attempt(1, &lost, next, Some(t(10))),
            Err(StoreError::Fenced)
        ));
        assert!(run.finish_attempt(1, &lost, next, Some(t(16))).is_ok());
    }

    #[test]
    fn cancel_ends_pending_at_once_and_flags_running() {
        let mut run = pending(2);
        assert!(run.request_cancel(t(1), "by user"));
        assert_eq!(
            (run.state, run.reason.as_deref()),
            (RunState::Cancelled, Some("by user"))
        );
        assert!(!run.request_cancel(t(2), "again"), "terminal runs do not change");

        let mut run = pending(2);
        assert_eq!(claim(&mut run, 0, 1), None);
        assert!(run.request_cancel(t(1), "by user"));
        assert_eq!((run.state, run.cancel_requested), (RunState::Running, true));
        // its worker vanished: the next claim ends it CANCELLED
        let Some(ClaimOutcome::Terminal(ended)) = claim(&mut run, 20, 2) else {
            panic!()
        };
        assert_eq!(ended.state, RunState::Cancelled);
    }
}
