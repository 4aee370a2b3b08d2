//! A received batch's claim ([`Worker::take_work`]): the receive claims the runs and reads
//! their jobs ([`crate::ports::WorkPort::receive`]), except runs whose job's overlap policy is
//! checked at claim time (`queue_one` always; `forbid` and `replace` where runs are fired
//! ahead), backfill runs that take turns ([`crate::service::backfill`]), and runs of paused
//! jobs (a scheduled one is skipped), which are held back, checked, and claimed in a second
//! batch — `queue_one` and backfill runs on condition
//! that no other run of their job is running. Every answer is dealt with here
//! (acked, deferred, requeued, failed for want of a job); what may start is returned as
//! [`ClaimedAttempt`]s.

use super::Worker;
use crate::duration::Dur;
use crate::error::CoreError;
use crate::firing::{SkipReason, replaced_by_newer};
use crate::ids::RunId;
use crate::job::{Job, JobState, Overlap};
use crate::ledger::{RESCHEDULED, SKIPPED_AT_CLAIM};
use crate::lifecycle::{JOB_DELETED, REPLACED, another_run_leased_until, queue_one_already_waiting, retimed_away};
use crate::paused::{self, PARKED_RECHECK};
use crate::ports::CLAIM_CHECK_HORIZON;
use crate::ports::queue::{EARLY_DELIVERY, LONGEST_DEFER};
use crate::ports::{
    AttemptResult, ClaimBatch, ClaimOutcome, Completion, Delivery, Event, JobClaim, JobStoreExt, Outcome,
    ReceiveRequest, Received, RunTransition, Settlement, StoreError,
};
use crate::run::{AttemptOutcome, Run, RunState, Trigger};
use crate::service::backfill::{backfill_turn, runs_in_turn};
use crate::service::paused::{end_dropped, end_unstarted};
use crate::timestamp::{self, Timestamp};
use tokio_util::sync::CancellationToken;

/// An attempt [`Worker::take_work`] started: run it with [`Worker::run_claimed`].
#[derive(Debug)]
pub struct ClaimedAttempt {
    /// The delivery it came from (acked when the run ends).
    pub(super) delivery: Delivery,
    /// The run's job, as read before the claim.
    pub(super) job: Job,
    /// The run after the claim.
    pub(super) run: Run,
    /// The attempt's fencing token.
    pub(super) token: u64,
}

impl ClaimedAttempt {
    /// The claimed run (RUNNING, its last attempt the new one).
    pub fn run(&self) -> &Run {
        &self.run
    }
}

/// What a delivery needs before its claim.
#[allow(clippy::large_enum_variant)] // a return value, moved once; boxing would only add an allocation
enum Admission {
    /// Claim it; the job as read (`None` if the run id names no existing job).
    Claim(Option<Job>),
    /// Claim it only if no other run of its job holds a lease, checked in the claim itself
    /// (`queue_one`, a backfill run's turn); the job as read.
    ClaimAlone(Option<Job>),
    /// Already dealt with (deferred, or skipped and acked).
    Done,
}

impl Worker {
    /// Receives up to `max` deliveries (waiting up to `wait` for one) and claims them up to
    /// the start of their attempts: [`WorkPort::receive`](crate::ports::WorkPort::receive)
    /// claims the runs and reads their jobs, except runs whose job's overlap policy is checked
    /// at claim time, which go through those checks and then a claim of their own. Returns
    /// the attempts to run (hand each to [`Worker::run_claimed`]); deliveries dealt with
    /// otherwise (deferred, acked, failed for want of a job, or left for redelivery after an
    /// error) are not returned. [`Worker::run`] calls it in its loop; a simulation that drives
    /// the worker itself calls it with `wait` zero.
    pub async fn take_work(&self, max: usize, wait: Dur) -> Result<Vec<ClaimedAttempt>, CoreError> {
        let request = self.receive_request(max, wait, CancellationToken::new());
        let received = self.ports.work.receive(&request).await?;
        Ok(self.sort_claims(received).await)
    }

    /// What [`Worker::take_work`] asks of the work port; it stops waiting once `stop` is
    /// cancelled.
    pub(super) fn receive_request(&self, max: usize, wait: Dur, stop: CancellationToken) -> ReceiveRequest {
        ReceiveRequest {
            max,
            wait,
            worker: self.config.id.clone(),
            lease: self.config.lease,
            hold: self.checked_at_claim().to_vec(),
            stop,
        }
    }

    /// After the claim call of a batch (the claim's answer beside each delivery): the held
    /// deliveries go through their overlap checks and a claim of their own, every answer is
    /// dealt with, and the attempts to start are returned.
    pub(super) async fn sort_claims(&self, answers: Vec<Received>) -> Vec<ClaimedAttempt> {
        self.sort_claims_holding(answers, false).await.0
    }

    /// [`Worker::sort_claims`], and with `hold_early`, the deliveries that came early (a
    /// queue with coarse delays may hand a run over up to [`EARLY_DELIVERY`] before its time;
    /// this worker's clock may be behind by the skew bound) are not deferred but returned with
    /// their time, for [`Worker::run`] to hold in their slots and claim then — deferring one
    /// would hide its message past its time (on SQS, whole seconds).
    pub(super) async fn sort_claims_holding(
        &self,
        answers: Vec<Received>,
        hold_early: bool,
    ) -> (Vec<ClaimedAttempt>, Vec<(Delivery, Timestamp)>) {
        // When a run whose job no longer exists is recorded as failed.
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let hold_until = now + EARLY_DELIVERY.to_chrono() + self.config.max_clock_skew.to_chrono();
        let mut claimed = Vec::with_capacity(answers.len());
        let (mut held, mut early) = (Vec::new(), Vec::new());
        for Received { delivery, claim } in answers {
            let (job, claim) = match claim {
                Ok(JobClaim::Claimed(ClaimOutcome::NotYet(due), _)) if hold_early && due <= hold_until => {
                    early.push((delivery, due));
                    continue;
                }
                Ok(JobClaim::Held(job)) => {
                    held.push((delivery, job));
                    continue;
                }
                Ok(JobClaim::Claimed(outcome, job)) => (job, Ok(outcome)),
                Err(e) => (None, Err(e)),
            };
            self.collect_claimed(delivery, job, claim, now, &mut claimed).await;
        }
        if !held.is_empty() {
            self.claim_held(held, &mut claimed).await;
        }
        (claimed, early)
    }

    /// Deliveries that came before their time, now that it has come: claimed as a receive
    /// at this time would claim them; what starts is returned.
    pub(super) async fn claim_at_their_time(&self, deliveries: Vec<Delivery>) -> Vec<ClaimedAttempt> {
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let request = self.receive_request(deliveries.len(), Dur::ZERO, CancellationToken::new());
        let batch = request.claim_of(&deliveries, now);
        match self.ports.store.claim(&batch).await {
            Ok(claims) => {
                let answers = deliveries
                    .into_iter()
                    .zip(claims)
                    .map(|(delivery, claim)| Received { delivery, claim })
                    .collect();
                self.sort_claims(answers).await
            }
            Err(e) => {
                let e = CoreError::from(e);
                for delivery in &deliveries {
                    self.claim_failed(delivery, &e).await;
                }
                Vec::new()
            }
        }
    }

    /// The overlap policies checked before a claim: `queue_one` always; `forbid` and
    /// `replace` where runs may have been fired ahead of their time.
    pub(super) fn checked_at_claim(&self) -> &'static [Overlap] {
        if self.config.fired_ahead {
            &[Overlap::QueueOne, Overlap::Forbid, Overlap::Replace]
        } else {
            &[Overlap::QueueOne]
        }
    }

    /// The held-back part of [`Worker::take_work`]: each delivery's overlap checks, then one
    /// claim batch for those that may start (one more for `queue_one` runs, claimed alone);
    /// what starts goes to `claimed`.
    async fn claim_held(&self, held: Vec<(Delivery, Job)>, claimed: &mut Vec<ClaimedAttempt>) {
        let held = self.one_queue_one_run_per_job(held).await;
        let admitted = futures::future::join_all(
            held.iter()
                .map(|(delivery, job)| self.admit(delivery, Some(job.clone()))),
        )
        .await;
        // `queue_one` runs are claimed only if no other run of their job is running, checked
        // again in the claim itself: the check above may be stale by then (another worker,
        // or another batch of this one, may have just claimed a run of the job).
        let (mut alone, mut others) = (Vec::new(), Vec::new());
        for ((delivery, _), admission) in held.into_iter().zip(admitted) {
            match admission {
                Ok(Admission::ClaimAlone(job)) => alone.push((delivery, job)),
                Ok(Admission::Claim(job)) => others.push((delivery, job)),
                Ok(Admission::Done) => {}
                Err(e) => self.claim_failed(&delivery, &e).await,
            }
        }
        self.claim_admitted(alone, true, claimed).await;
        self.claim_admitted(others, false, claimed).await;
    }

    /// One [`JobStore::claim`](crate::ports::JobStore::claim) for deliveries admitted after
    /// their overlap checks (their jobs are known; `alone` for `queue_one` runs); what starts
    /// goes to `claimed`.
    async fn claim_admitted(
        &self,
        to_claim: Vec<(Delivery, Option<Job>)>,
        alone: bool,
        claimed: &mut Vec<ClaimedAttempt>,
    ) {
        if to_claim.is_empty() {
            return;
        }
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let lease_until = now + self.config.lease.to_chrono();
        let batch = ClaimBatch {
            runs: to_claim
                .iter()
                .map(|(d, _)| (d.dispatch.tenant.clone(), d.dispatch.run_id.clone()))
                .collect(),
            worker: self.config.id.clone(),
            owners: Vec::new(),
            now,
            lease_until,
            read_jobs: false,
            hold: Vec::new(),
            alone,
        };
        match self.ports.store.claim(&batch).await {
            Ok(claims) => {
                for ((delivery, job), claim) in to_claim.into_iter().zip(claims) {
                    let claim = claim.and_then(|answer| match answer {
                        JobClaim::Claimed(outcome, _) => Ok(outcome),
                        JobClaim::Held(_) => Err(StoreError::Other("a claim without hold held a run".into())),
                    });
                    self.collect_claimed(delivery, job, claim, now, claimed).await;
                }
            }
            Err(e) => {
                let e = CoreError::from(e);
                for (delivery, _) in &to_claim {
                    self.claim_failed(delivery, &e).await;
                }
            }
        }
    }

    /// Of the held deliveries of one `queue_one` job, only the earliest run may go on to its
    /// overlap check: checked side by side, none would see another running, and all would
    /// start. The others are handed back to the queue for one lease (by then the first is
    /// running and they wait their turn; its end enqueues them again at once).
    async fn one_queue_one_run_per_job(&self, mut held: Vec<(Delivery, Job)>) -> Vec<(Delivery, Job)> {
        held.sort_by_key(|(d, _)| d.dispatch.not_before);
        let mut first_of_job = std::collections::HashSet::new();
        let mut going_on = Vec::with_capacity(held.len());
        for (delivery, job) in held {
            let queue_one = job.spec.overlap_policy() == Overlap::QueueOne;
            if !queue_one || first_of_job.insert((job.tenant.clone(), job.id.clone())) {
                going_on.push((delivery, job));
                continue;
            }
            if let Err(e) = self.wait_behind_first_of_job(&delivery, &job).await {
                self.claim_failed(&delivery, &e).await;
            }
        }
        going_on
    }

    /// A `queue_one` delivery behind another of its job in one batch waits: for a lease (by
    /// then the first is running, and its end enqueues this one again), or, for a backfill
    /// run, for as long as the run ahead may take, with its `not_before` moved along (see
    /// [`Worker::backfill_admission`]): many backfill runs wait behind one another, and the
    /// end of each wakes the next.
    async fn wait_behind_first_of_job(&self, delivery: &Delivery, job: &Job) -> Result<(), CoreError> {
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let now = self.ports.clock.now();
        let backfill = self
            .ports
            .store
            .get_run(tenant, run_id)
            .await?
            .is_some_and(|run| runs_in_turn(&run, job.spec.overlap_policy()));
        if !backfill {
            return self.requeue(delivery, now + self.config.lease.to_chrono()).await;
        }
        let until = timestamp::trunc_ms(now + self.backfill_wait(job));
        self.ports.store.defer_pending(tenant, run_id, until).await?;
        self.requeue(delivery, until).await
    }

    /// [`Worker::claimed`] for one delivery of a batch: what starts goes to `claimed`, a
    /// failure is logged (the message will be redelivered, or handed on: [`Worker::claim_failed`]).
    async fn collect_claimed(
        &self,
        delivery: Delivery,
        job: Option<Job>,
        claim: Result<ClaimOutcome, StoreError>,
        now: Timestamp,
        claimed: &mut Vec<ClaimedAttempt>,
    ) {
        match self.claimed(&delivery, job, claim, now).await {
            Ok(Some((job, run, token))) => claimed.push(ClaimedAttempt {
                delivery,
                job,
                run,
                token,
            }),
            Ok(None) => {}
            Err(e) => self.claim_failed(&delivery, &e).await,
        }
    }

    /// Before a claim: applies the overlap checks that happen at claim time, given the job
    /// the run id names (as read). [`Admission::Done`] when the delivery was dealt with here.
    async fn admit(&self, delivery: &Delivery, job: Option<Job>) -> Result<Admission, CoreError> {
        let store = &self.ports.store;
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        if job.as_ref().is_some_and(|j| j.state == JobState::Deleted) {
            self.end_for_deleted_job(delivery).await?;
            return Ok(Admission::Done);
        }
        // A paused job starts nothing of its schedule, not even a run fired before the pause
        // (ahead of its time, or due and still queued): such a run waits for the resume, or
        // ends if the misfire policy would drop it then; a manual or backfill run, or a retry,
        // goes on.
        if let Some(job) = job.as_ref().filter(|j| j.state == JobState::Paused)
            && self.wait_for_resume(delivery, job).await?
        {
            return Ok(Admission::Done);
        }
        // A run fired ahead before a change of the job's timing dropped its time starts
        // nothing: the change ends such runs, and this catches any it missed.
        if job.as_ref().is_some_and(|j| retimed_away(j, run_id))
            && self
                .skip_at_claim(delivery, self.ports.clock.now(), RESCHEDULED, SkipReason::Rescheduled)
                .await?
        {
            return Ok(Admission::Done);
        }
        // `queue_one`: the waiting run starts only once the earlier one has ended. Runs fired
        // ahead of their time (look-ahead) met no overlap check when they were fired, so theirs
        // happens here: `forbid` skips the run if the earlier one is still going, as the
        // sweeper would have; `replace` asks the earlier ones to stop, then starts.
        let policy = job.as_ref().map(|j| j.spec.overlap_policy());
        // Every held run but those of `allow` jobs (a backfill run is held under any other).
        let check_overlap = policy.is_some_and(|p| p != Overlap::Allow);
        if let Some(job) = job.as_ref().filter(|_| check_overlap) {
            let now = self.ports.clock.now();
            // Runs fired ahead beyond now play no part (CLAIM_CHECK_HORIZON).
            let active = store
                .active_runs_due(tenant, &job.id, now + CLAIM_CHECK_HORIZON.to_chrono())
                .await?;
            let in_turn = active
                .iter()
                .find(|r| &r.run_id == run_id)
                .is_some_and(|r| policy.is_some_and(|p| runs_in_turn(r, p)));
            if in_turn {
                return self.backfill_admission(delivery, job, &active, now).await;
            }
            if !policy.is_some_and(|p| self.checked_at_claim().contains(&p)) {
                return Ok(Admission::Claim(Some(job.clone())));
            }
            if policy == Some(Overlap::QueueOne) {
                if let Some(until) = another_run_leased_until(&active, run_id, now) {
                    if queue_one_already_waiting(&active, run_id, now) {
                        let reason = format!(
                            "{SKIPPED_AT_CLAIM}a run was already waiting for the running one (overlap: queue_one)"
                        );
                        self.skip_at_claim(delivery, now, &reason, SkipReason::Overlap).await?;
                    } else {
                        self.requeue(delivery, until).await?;
                    }
                    return Ok(Admission::Done);
                }
                return Ok(Admission::ClaimAlone(Some(job.clone())));
            }
            if policy == Some(Overlap::Replace) {
                self.replace_earlier(&active, run_id, now).await?;
            } else if another_run_leased_until(&active, run_id, now).is_some() {
                let reason = format!("{SKIPPED_AT_CLAIM}the previous run was still running (overlap: forbid)");
                if self.skip_at_claim(delivery, now, &reason, SkipReason::Overlap).await? {
                    return Ok(Admission::Done);
                }
            }
        }
        Ok(Admission::Claim(job))
    }

    /// A backfill run's turn ([`crate::service::backfill`]): claimed alone when it has come;
    /// else the run is deferred and its delivery requeued until the lease of the run in the
    /// way ends (checked again then, as its worker may have died), or, behind an earlier
    /// backfill run, for as long as that one may take — the end of each backfill run enqueues
    /// the next at once. The run's `not_before` moves with its message, so the repair pass
    /// does not take a waiting run for a lost one.
    async fn backfill_admission(
        &self,
        delivery: &Delivery,
        job: &Job,
        active: &[Run],
        now: Timestamp,
    ) -> Result<Admission, CoreError> {
        let run_id = &delivery.dispatch.run_id;
        let Some(until) = backfill_turn(active, run_id, now, self.backfill_wait(job)) else {
            return Ok(Admission::ClaimAlone(Some(job.clone())));
        };
        let until = timestamp::trunc_ms(until);
        self.ports
            .store
            .defer_pending(&delivery.dispatch.tenant, run_id, until)
            .await?;
        self.requeue(delivery, until).await?;
        Ok(Admission::Done)
    }

    /// How long a backfill run waits behind an earlier one of its job before it looks again:
    /// as long as that one's attempt may take (the end of each wakes the next sooner).
    fn backfill_wait(&self, job: &Job) -> chrono::Duration {
        job.spec.timeout.to_chrono() + self.config.lease.to_chrono()
    }

    /// A delivery of a PAUSED job's run: a run of its schedule never tried does not start
    /// ([`crate::paused`]). Not yet due, its delivery waits for its time; due, the job's
    /// runs that came due meanwhile are decided as a resume now would: this one and those
    /// waiting end if its policies drop them (CANCELLED, `paused` or `overlap`; `rescheduled`
    /// at a time a change of the job's timing dropped), and this one, if kept, waits for the
    /// resume — deferred, with its delivery, by [`PARKED_RECHECK`] (the resume starts it
    /// sooner, and a resume that came while this was decided is seen once the deferral is
    /// written). `false` (nothing done) for any other run.
    async fn wait_for_resume(&self, delivery: &Delivery, job: &Job) -> Result<bool, CoreError> {
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let now = timestamp::trunc_ms(self.ports.clock.now());
        // The job's runs due by now (not those fired further ahead: a per-second job paused
        // has hundreds).
        let runs = self.ports.store.active_runs_due(tenant, &job.id, now).await?;
        let Some(this) = runs.iter().find(|r| &r.run_id == run_id) else {
            return match self.ports.store.get_run(tenant, run_id).await? {
                Some(run) if run.is_untried_occurrence() && run.scheduled_for > now => {
                    self.requeue(delivery, run.not_before).await?;
                    Ok(true)
                }
                _ => Ok(false),
            };
        };
        if !this.is_untried_occurrence() {
            return Ok(false);
        }
        let mut decision = paused::decide(job, job.updated_at, &runs, now);
        let kept = decision.keep.iter().any(|r| &r.run_id == run_id);
        decision.end_only_waiting_and(run_id, now);
        end_dropped(&self.ports, job, &decision, now).await?;
        if kept {
            let mut until = now + PARKED_RECHECK.to_chrono();
            self.ports.store.defer_pending(tenant, run_id, until).await?;
            // A resume written since the job was read started its kept runs before this
            // deferral: the run would wait out the deferral. The job read again after it
            // tells — resumed, the run is due again now; still paused, any resume comes after
            // the deferral and starts the run itself.
            let job_now = self.ports.store.get_job(tenant, &job.id).await?;
            if job_now.is_some_and(|j| j.state != JobState::Paused) {
                until = now;
                self.ports.store.defer_pending(tenant, run_id, until).await?;
            }
            self.requeue(delivery, until).await?;
        } else {
            self.ack(delivery).await?;
        }
        Ok(true)
    }

    /// Ends the delivery's run CANCELLED with `reason` if it is still a PENDING scheduled
    /// run (an occurrence skipped at claim time, `why`) — for a change of the job's timing,
    /// one never tried (a retry goes on) — and acks the delivery; `false` (nothing done)
    /// otherwise.
    async fn skip_at_claim(
        &self,
        delivery: &Delivery,
        now: Timestamp,
        reason: &str,
        why: SkipReason,
    ) -> Result<bool, CoreError> {
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let Some(run) = self.ports.store.get_run(tenant, run_id).await? else {
            return Ok(false);
        };
        let skippable = match why {
            SkipReason::Rescheduled => run.is_untried_occurrence(),
            _ => run.trigger == Trigger::Schedule && run.state == RunState::Pending,
        };
        if !skippable {
            return Ok(false);
        }
        end_unstarted(&self.ports, &run, timestamp::trunc_ms(now), reason, why).await?;
        self.ack(delivery).await?;
        Ok(true)
    }

    /// A delivery of a DELETED job's run: the job starts nothing more. A run waiting to start
    /// ends CANCELLED as the delete ends it (a step after the delete's write, which this
    /// catches if it failed or raced the run's firing), and the delivery is acked. A running
    /// one is left to its worker (a delete stops those only when asked to) while its lease
    /// holds: the delivery is handed back for when the lease ends, since a run fired unwritten
    /// is in no index the reaper reads and its message is all that finds it if that worker
    /// dies. One whose worker is gone is asked to stop and claimed, which ends it.
    async fn end_for_deleted_job(&self, delivery: &Delivery) -> Result<(), CoreError> {
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let store = &self.ports.store;
        let now = timestamp::trunc_ms(self.ports.clock.now());
        match store.get_run(tenant, run_id).await? {
            Some(run) if run.state == RunState::Pending => {
                let ended = store.cancel_run(tenant, run_id, now, JOB_DELETED).await?;
                crate::service::enqueue_released(&self.ports, &ended).await;
                let ended = ended.run;
                if ended.state == RunState::Cancelled && ended.reason.as_deref() == Some(JOB_DELETED) {
                    tracing::info!(worker = %self.config.id, %tenant, job_id = %ended.job_id, %run_id, "run cancelled at claim: its job was deleted");
                    if let Some(outcome) = Outcome::of(ended.state) {
                        self.ports.observe(Event::Finished { tenant, outcome });
                    }
                }
            }
            Some(run) if run.state == RunState::Running => return self.leave_running(delivery, &run, now).await,
            _ => {}
        }
        self.ack(delivery).await
    }

    /// [`Worker::end_for_deleted_job`] for a RUNNING run: handed back for its lease's end
    /// while the lease holds; else asked to stop and claimed, which ends it (its delivery
    /// acked), or handed back for the end of the lease of whoever took it over meanwhile.
    async fn leave_running(&self, delivery: &Delivery, run: &Run, now: Timestamp) -> Result<(), CoreError> {
        if let Some(lease) = run.lease.as_ref().filter(|_| !run.lease_expired(now)) {
            return self.requeue(delivery, lease.expires_at).await;
        }
        let (tenant, run_id) = (&run.tenant, &run.run_id);
        let store = &self.ports.store;
        store.cancel_run(tenant, run_id, now, JOB_DELETED).await?;
        let lease_until = now + self.config.lease.to_chrono();
        match store
            .claim_one(tenant, run_id, &self.config.id, now, lease_until)
            .await?
        {
            ClaimOutcome::Leased(until) => return self.requeue(delivery, until).await,
            // Not expected (it was asked to stop): looked at again when this lease ends.
            ClaimOutcome::Claimed { .. } => return self.requeue(delivery, lease_until).await,
            ClaimOutcome::Terminal(ended) => {
                if let Some(outcome) = Outcome::of(ended.state) {
                    self.ports.observe(Event::Finished { tenant, outcome });
                }
            }
            ClaimOutcome::NotYet(_) | ClaimOutcome::AtCapacity | ClaimOutcome::KeyAtLimit { .. } => {}
        }
        self.ack(delivery).await
    }

    /// An attempt that took a run over from a lost one, claimed on a message delivered
    /// before (the lost attempt's, shown again when its lease ended): on a queue that gives a
    /// message up after so many receives, the run is handed a new message, due when this
    /// attempt's lease ends, and the delivered one is dropped — else each worker death taken
    /// over this way would count toward the limit, and the message be given up while the run
    /// still had attempts left (on DynamoDB, a run fired unwritten is found by its message
    /// alone). The new message is not this worker's to keep hidden: it shows at each lease's
    /// end, finds the run leased and is handed on (`ClaimOutcome::Leased`), until the run
    /// ends; the attempt's heartbeats extend a receipt that has gone stale, which changes
    /// nothing. If the queue fails, the attempt goes on with the delivered message. (Other
    /// redeliveries — a delivery deferred, or handed back unwanted by a process's poll — keep
    /// their message: each is followed by a claim, not repeated without end.)
    async fn renew_spent_message(&self, delivery: &Delivery, run: &Run) {
        let took_over = run
            .attempts
            .iter()
            .rev()
            .nth(1)
            .is_some_and(|lost| lost.outcome == Some(AttemptOutcome::WorkerLost));
        if !took_over || delivery.receive_count <= 1 || self.ports.queue.receive_limit().is_none() {
            return;
        }
        let Some(lease) = run.lease.as_ref() else {
            return;
        };
        if let Err(e) = self.requeue(delivery, lease.expires_at).await {
            let (tenant, run_id) = (&run.tenant, &run.run_id);
            tracing::warn!(worker = %self.config.id, %tenant, %run_id, error = %e, "a run taken over by a redelivered message was not handed a new one");
        }
    }

    /// After a claim made at `now`: the attempt to run (with its job), or `None` once the
    /// delivery was dealt with (acked, deferred, or its run failed for want of a job).
    async fn claimed(
        &self,
        delivery: &Delivery,
        job: Option<Job>,
        claim: Result<ClaimOutcome, StoreError>,
        now: Timestamp,
    ) -> Result<Option<(Job, Run, u64)>, CoreError> {
        let store = &self.ports.store;
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let (run, token) = match claim {
            Ok(ClaimOutcome::Claimed { run, token }) => {
                self.renew_spent_message(delivery, &run).await;
                (run, token)
            }
            Ok(ClaimOutcome::Terminal(_)) | Err(StoreError::NotFound) => {
                self.ack(delivery).await?;
                return Ok(None);
            }
            // Another worker holds the run: look again when its lease ends (if that worker
            // died, this message takes the run over then). With a new message, not the same
            // one deferred: a run that lasts many leases would otherwise have this message
            // redelivered every lease until a queue with a dead-letter limit gave it up.
            Ok(ClaimOutcome::Leased(until)) => {
                self.requeue(delivery, until).await?;
                return Ok(None);
            }
            // Not due yet: hidden until then, or handed to a new message for a longer wait
            // (LONGEST_DEFER).
            Ok(ClaimOutcome::NotYet(until)) if until - now > LONGEST_DEFER.to_chrono() => {
                self.requeue(delivery, until).await?;
                return Ok(None);
            }
            Ok(ClaimOutcome::NotYet(until)) => {
                self.defer(delivery, until).await?;
                return Ok(None);
            }
            // The tenant is at its concurrency cap, or the run's concurrency key at its limit
            // (and this queue cannot park the message on the key): look again once a slot
            // may have freed.
            Ok(ClaimOutcome::AtCapacity | ClaimOutcome::KeyAtLimit { .. }) => {
                self.requeue(delivery, now + self.config.capacity_retry.to_chrono())
                    .await?;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let job = match job {
            Some(job) if job.id == run.job_id => job,
            _ => match store.get_job(tenant, &run.job_id).await? {
                Some(job) => job,
                None => {
                    let settlement = Settlement {
                        completion: Completion {
                            tenant: tenant.clone(),
                            run_id: run_id.clone(),
                            token,
                            result: failure_at(now, "the run's job no longer exists"),
                            next: RunTransition::Finish(RunState::Failed),
                            only_if_expired_by: None,
                        },
                        receipt: delivery.receipt.clone(),
                    };
                    let failed = self.ports.work.complete(&settlement).await?;
                    crate::service::report_released(&self.ports, &failed.released);
                    let failed = failed.run;
                    tracing::warn!(worker = %self.config.id, %tenant, job_id = %run.job_id, %run_id, attempt = run.attempt_count(), "run failed: its job no longer exists");
                    if let Some(outcome) = Outcome::of(failed.state) {
                        self.ports.observe(Event::Finished { tenant, outcome });
                    }
                    return Ok(None);
                }
            },
        };
        Ok(Some((job, run, token)))
    }

    /// `replace` for a run fired ahead: once `run_id` (a scheduled run among the job's
    /// `active` runs) is due, every earlier active run of the job is asked to stop — a
    /// PENDING one ends CANCELLED, a RUNNING one gets `cancel_requested` and its worker stops
    /// it — as the sweeper's firing plan does for runs fired at their time.
    async fn replace_earlier(&self, active: &[Run], run_id: &RunId, now: Timestamp) -> Result<(), CoreError> {
        let Some(this) = active.iter().find(|r| &r.run_id == run_id) else {
            return Ok(());
        };
        if this.trigger != Trigger::Schedule || this.state != RunState::Pending || this.not_before > now {
            return Ok(());
        }
        let at = timestamp::trunc_ms(now);
        for earlier in active
            .iter()
            .filter(|r| r.scheduled_for < this.scheduled_for && replaced_by_newer(r))
        {
            let ended = self
                .ports
                .store
                .cancel_run(&earlier.tenant, &earlier.run_id, at, REPLACED)
                .await?;
            crate::service::enqueue_released(&self.ports, &ended).await;
            let ended = ended.run;
            if let Some(outcome) = Outcome::of(ended.state) {
                self.ports.observe(Event::Finished {
                    tenant: &ended.tenant,
                    outcome,
                });
            }
        }
        Ok(())
    }
}

fn failure_at(now: Timestamp, error: &str) -> AttemptResult {
    AttemptResult {
        finished_at: now,
        outcome: AttemptOutcome::Failed,
        exit_code: None,
        http_status: None,
        error: Some(error.to_string()),
        log_bytes: 0,
        log_truncated: false,
    }
}
