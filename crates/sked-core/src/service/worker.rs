//! The worker: receives dispatches, claims the runs (fenced leases; a received batch in one
//! store call, or received and claimed in one where the store holds the queue too; a
//! `queue_one` run only while no other run of its job runs, checked in the claim), runs each
//! task through the executor, heartbeats at a third of the lease,
//! enforces the timeout, and completes (acking in the same store call where it can) — or,
//! having lost its lease, stops the payload (or never starts it) and writes nothing.

use super::{Ports, start_extra_run};
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ids::{RunId, TenantId, WorkerId};
use crate::job::{Job, OnTimeout, Overlap};
use crate::lifecycle::{REPLACED, another_run_leased_until, queue_one_already_waiting};
use crate::ports::{
    AttemptResult, ClaimOutcome, Delivery, Dispatch, ExecRequest, ExecResult, Executor, JobClaim, LogKey, LogLine,
    LogSummary, LogWriter, QueueError, RunTransition, StopReason, StoreError,
};
use crate::retry::after_attempt_for;
use crate::run::{AttemptOutcome, Run, RunState, Trigger};
use crate::timestamp::{self, Timestamp};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Buffered output lines between an executor and the log writer.
const OUTPUT_BUFFER: usize = 1024;
/// Pause after a failed receive before trying again.
const RECEIVE_BACKOFF: Dur = Dur::millis(500);

/// An attempt [`Worker::claim_batch`] started: run it with [`Worker::run_claimed`].
#[derive(Debug)]
pub struct ClaimedAttempt {
    /// The delivery it came from (acked when the run ends).
    delivery: Delivery,
    /// The run's job, as read before the claim.
    job: Job,
    /// The run after the claim.
    run: Run,
    /// The attempt's fencing token.
    token: u64,
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
    /// Already dealt with (deferred, or skipped and acked).
    Done,
}

/// What a heartbeat learned.
enum Beat {
    /// The store lease now lasts until `until`; `cancel` if a cancel was asked for.
    Renewed { until: Timestamp, cancel: bool },
    /// Another attempt holds the run (or the lease ended): stop and write nothing.
    Fenced,
    /// The store could not be reached; the lease stands until it expires.
    Failed,
}

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Recorded on leases and attempts.
    pub id: WorkerId,
    /// Attempts run at once by this worker.
    pub concurrency: usize,
    /// Lease length; heartbeats every third of it.
    pub lease: Dur,
    /// TERM → KILL grace when stopping a payload.
    pub grace: Dur,
    /// The operating assumption on clocks: no process's clock is further than this from the
    /// true time. A lease's end is written by its holder's clock and judged by a claimer's,
    /// so a worker that cannot renew its lease stops its payload [`Self::lease_stop_margin`]
    /// before the lease ends by its own clock: by then no other worker can have found it
    /// ended. Default 100 ms (NTP-synchronised hosts; Amazon Time Sync is within a
    /// millisecond); one host, as the local deployment, has no skew at all.
    pub max_clock_skew: Dur,
    /// Longest single receive wait.
    pub poll_wait: Dur,
    /// Runs may be fired ahead of their time (a sweeper or API look-ahead, as on AWS): a
    /// `forbid` run then checks, when claimed, that the previous run has ended. Off where
    /// nothing fires ahead (the local deployment), which saves a read per run.
    pub fired_ahead: bool,
    /// How long a run refused for its tenant's concurrency cap waits before it is tried
    /// again (each try is one receive and one claim). Default 250 ms.
    pub capacity_retry: Dur,
}

impl WorkerConfig {
    /// Defaults for a worker named `id`: 4 at once, 15 s lease, 5 s grace.
    pub fn new(id: WorkerId) -> Self {
        WorkerConfig {
            id,
            concurrency: 4,
            lease: Dur::secs(15),
            grace: Dur::secs(5),
            max_clock_skew: Dur::millis(100),
            poll_wait: Dur::secs(1),
            fired_ahead: false,
            capacity_retry: Dur::millis(250),
        }
    }

    /// TERM → KILL grace when the lease is being lost: `grace`, but at most a fifth of the
    /// lease, so the stop fits well inside it.
    pub fn lease_lost_grace(&self) -> Dur {
        self.grace.min(Dur::millis(self.lease.as_millis() as u64 / 5))
    }

    /// How long before its lease ends (by its own clock) a worker that could not renew it
    /// asks its payload to stop: twice the clock-skew bound (the holder's clock may be that
    /// far behind, a claimer's that far ahead) plus [`Self::lease_lost_grace`], for the
    /// payload to be gone before any other worker can claim the run.
    pub fn lease_stop_margin(&self) -> Dur {
        Dur::millis(2 * self.max_clock_skew.as_millis() as u64 + self.lease_lost_grace().as_millis() as u64)
    }

    /// Whether the settings make sense together: the lease must leave room for at least one
    /// renewal (a third of it) before the stop margin, or payloads would be stopped as soon
    /// as they start.
    pub fn check(&self) -> Result<(), String> {
        let lease = self.lease.as_millis();
        if lease < 1 || 3 * self.lease_stop_margin().as_millis() > 2 * lease {
            return Err(format!(
                "a lease of {} is too short for a clock-skew bound of {} and a grace of {}: the payload would have to stop {} before the lease ends",
                self.lease,
                self.max_clock_skew,
                self.lease_lost_grace(),
                self.lease_stop_margin()
            ));
        }
        Ok(())
    }
}

/// One worker (which may run several attempts at once).
pub struct Worker {
    pub(crate) ports: Ports,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) config: WorkerConfig,
}

impl Worker {
    /// A worker over `ports`, running tasks through `executor`.
    pub fn new(ports: Ports, executor: Arc<dyn Executor>, config: WorkerConfig) -> Self {
        Worker {
            ports,
            executor,
            config,
        }
    }

    /// Works until `shutdown` is cancelled; then stops taking work, stops running payloads
    /// (their runs are retried elsewhere) and returns once they have ended.
    pub async fn run(self, shutdown: CancellationToken) {
        let this = Arc::new(self);
        let slots = Arc::new(Semaphore::new(this.config.concurrency.max(1)));
        let mut attempts = JoinSet::new();
        // While receives find work, and where the store holds the queue too, receive and
        // claim in one store call (`None` once the store has said it cannot).
        let mut busy = false;
        let mut joined = true;
        loop {
            let first = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
            };
            let mut permits = vec![first];
            while let Ok(p) = slots.clone().try_acquire_owned() {
                permits.push(p);
            }
            if busy && joined {
                match this.receive_and_claim(permits.len()).await {
                    Some(answers) if !answers.is_empty() => {
                        permits.truncate(answers.len());
                        let (worker, stop) = (this.clone(), shutdown.clone());
                        attempts.spawn(async move {
                            let claimed = worker.sort_claims(answers).await;
                            worker.run_batch(claimed, permits, stop).await;
                        });
                        while attempts.try_join_next().is_some() {}
                        continue;
                    }
                    Some(_) => busy = false,
                    None => joined = false,
                }
            }
            let received = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                r = this.ports.queue.receive(permits.len(), this.config.lease, this.config.poll_wait) => r,
            };
            let deliveries = match received {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(worker = %this.config.id, error = %e, "receive failed");
                    let clock = &this.ports.clock;
                    clock.sleep_until(clock.now() + RECEIVE_BACKOFF.to_chrono()).await;
                    continue;
                }
            };
            busy = !deliveries.is_empty();
            if busy {
                permits.truncate(deliveries.len());
                let worker = this.clone();
                let stop = shutdown.clone();
                attempts.spawn(async move { worker.handle_batch(deliveries, permits, stop).await });
            }
            while attempts.try_join_next().is_some() {}
        }
        while attempts.join_next().await.is_some() {}
    }

    /// Step-wise entry point (for simulations that drive the worker themselves instead of
    /// [`Worker::run`]): leases up to `max` ready deliveries without waiting. Hand each to
    /// [`Worker::handle`].
    pub async fn receive(&self, max: usize) -> Result<Vec<Delivery>, CoreError> {
        Ok(self.ports.queue.receive(max, self.config.lease, Dur::ZERO).await?)
    }

    /// This worker's settings.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// Claims and runs one delivered run to its end (heartbeats, timeout, completion);
    /// leaves the message for redelivery where another worker (or a later try) must take it.
    /// [`Worker::run`] does the same for a whole received batch (one claim call for all);
    /// a simulation may call this directly.
    pub async fn handle(&self, delivery: Delivery, shutdown: CancellationToken) {
        if let Err(e) = self.try_handle(&delivery, shutdown).await {
            self.unhandled(&delivery, &e);
        }
    }

    async fn try_handle(&self, delivery: &Delivery, shutdown: CancellationToken) -> Result<(), CoreError> {
        let job = match delivery.dispatch.run_id.parts() {
            Some((job_id, _)) => self.ports.store.get_job(&delivery.dispatch.tenant, &job_id).await?,
            None => None,
        };
        let Admission::Claim(job) = self.admit(delivery, job).await? else {
            return Ok(());
        };
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let lease_until = now + self.config.lease.to_chrono();
        let store = &self.ports.store;
        let claim = if job
            .as_ref()
            .is_some_and(|j| j.spec.overlap_policy() == Overlap::QueueOne)
        {
            let runs = [(tenant.clone(), run_id.clone())];
            match store.claim_many_alone(&runs, &self.config.id, now, lease_until).await {
                Ok(answers) => answers.into_iter().next().unwrap_or(Err(StoreError::NotFound)),
                Err(e) => Err(e),
            }
        } else {
            store.claim(tenant, run_id, &self.config.id, now, lease_until).await
        };
        match self.claimed(delivery, job, claim, now).await? {
            Some((job, run, token)) => self.run_attempt(delivery, &job, run, token, shutdown).await,
            None => Ok(()),
        }
    }

    /// Every delivery of one receive, as [`Worker::run`] handles them: one
    /// [`Worker::claim_batch`], then each claimed attempt in its own task, which releases its
    /// slot (`permits`, one per delivery) when it ends.
    async fn handle_batch(
        self: Arc<Self>,
        deliveries: Vec<Delivery>,
        permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
        let claimed = self.claim_batch(deliveries).await;
        self.run_batch(claimed, permits, shutdown).await;
    }

    /// Runs each claimed attempt in its own task, which releases its slot (`permits`, at
    /// least one per attempt) when it ends; the slots left over are released at once.
    async fn run_batch(
        self: &Arc<Self>,
        claimed: Vec<ClaimedAttempt>,
        permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
        let mut permits = permits.into_iter();
        let mut running = JoinSet::new();
        for attempt in claimed {
            let (worker, stop, permit) = (self.clone(), shutdown.clone(), permits.next());
            running.spawn(async move {
                worker.run_claimed(attempt, stop).await;
                drop(permit);
            });
        }
        drop(permits); // the slots of deliveries that started nothing
        while running.join_next().await.is_some() {}
    }

    /// Step-wise entry point ([`Worker::run`] uses it too): [`Worker::handle`] up to the
    /// start of the attempts, for a whole received batch — one
    /// [`JobStore::claim_many_with_jobs`](crate::ports::JobStore::claim_many_with_jobs) claims
    /// the runs and reads their jobs, except runs whose job's overlap policy is checked at
    /// claim time, which go through those checks and then one
    /// [`JobStore::claim_many`](crate::ports::JobStore::claim_many). Returns the attempts to
    /// run (hand each to [`Worker::run_claimed`]); deliveries dealt with
    /// otherwise (deferred, acked, failed for want of a job, or left for redelivery after an
    /// error) are not returned.
    pub async fn claim_batch(&self, deliveries: Vec<Delivery>) -> Vec<ClaimedAttempt> {
        // Jobs whose overlap policy is checked at claim time are held back by the store and
        // go through the checks; all others are claimed at once, in the call that reads the
        // jobs.
        let hold = self.checked_at_claim();
        let runs: Vec<(TenantId, RunId)> = deliveries
            .iter()
            .map(|d| (d.dispatch.tenant.clone(), d.dispatch.run_id.clone()))
            .collect();
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let lease_until = now + self.config.lease.to_chrono();
        match self
            .ports
            .store
            .claim_many_with_jobs(&runs, hold, &self.config.id, now, lease_until)
            .await
        {
            Ok(answers) => self.sort_claims(deliveries.into_iter().zip(answers).collect()).await,
            Err(e) => {
                let e = CoreError::from(e);
                for delivery in &deliveries {
                    self.unhandled(delivery, &e);
                }
                Vec::new()
            }
        }
    }

    /// [`JobStore::receive_and_claim`](crate::ports::JobStore::receive_and_claim) for up to
    /// `max` deliveries: `None` if the store cannot (receive from the queue instead), an
    /// empty batch if nothing is visible or the call failed (logged; the long poll comes
    /// next).
    async fn receive_and_claim(&self, max: usize) -> Option<Vec<(Delivery, Result<JobClaim, StoreError>)>> {
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let lease_until = now + self.config.lease.to_chrono();
        let hold = self.checked_at_claim();
        match self
            .ports
            .store
            .receive_and_claim(max, self.config.lease, hold, &self.config.id, now, lease_until)
            .await
        {
            Ok(answers) => answers,
            Err(e) => {
                tracing::warn!(worker = %self.config.id, error = %e, "receive and claim failed");
                Some(Vec::new())
            }
        }
    }

    /// After the claim call of a batch (the claim's answer beside each delivery): the held
    /// deliveries go through their overlap checks and a claim of their own, every answer is
    /// dealt with, and the attempts to start are returned.
    async fn sort_claims(&self, answers: Vec<(Delivery, Result<JobClaim, StoreError>)>) -> Vec<ClaimedAttempt> {
        // When a run whose job no longer exists is recorded as failed.
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let mut claimed = Vec::with_capacity(answers.len());
        let mut held = Vec::new();
        for (delivery, answer) in answers {
            let (job, claim) = match answer {
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
        claimed
    }

    /// The overlap policies checked before a claim: `queue_one` always; `forbid` and
    /// `replace` where runs may have been fired ahead of their time.
    fn checked_at_claim(&self) -> &'static [Overlap] {
        if self.config.fired_ahead {
            &[Overlap::QueueOne, Overlap::Forbid, Overlap::Replace]
        } else {
            &[Overlap::QueueOne]
        }
    }

    /// The held-back part of [`Worker::claim_batch`]: each delivery's overlap checks, then
    /// one [`JobStore::claim_many`](crate::ports::JobStore::claim_many) for those that may
    /// start; what starts goes to `claimed`.
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
        for ((delivery, held_job), admission) in held.into_iter().zip(admitted) {
            match admission {
                Ok(Admission::Claim(job)) if held_job.spec.overlap_policy() == Overlap::QueueOne => {
                    alone.push((delivery, job))
                }
                Ok(Admission::Claim(job)) => others.push((delivery, job)),
                Ok(Admission::Done) => {}
                Err(e) => self.unhandled(&delivery, &e),
            }
        }
        self.claim_admitted(alone, true, claimed).await;
        self.claim_admitted(others, false, claimed).await;
    }

    /// One claim call for deliveries admitted after their overlap checks
    /// ([`JobStore::claim_many_alone`](crate::ports::JobStore::claim_many_alone) if `alone`,
    /// else [`JobStore::claim_many`](crate::ports::JobStore::claim_many)); what starts goes to
    /// `claimed`.
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
        let runs: Vec<(TenantId, RunId)> = to_claim
            .iter()
            .map(|(d, _)| (d.dispatch.tenant.clone(), d.dispatch.run_id.clone()))
            .collect();
        let (store, worker) = (&self.ports.store, &self.config.id);
        let claims = if alone {
            store.claim_many_alone(&runs, worker, now, lease_until).await
        } else {
            store.claim_many(&runs, worker, now, lease_until).await
        };
        match claims {
            Ok(claims) => {
                for ((delivery, job), claim) in to_claim.into_iter().zip(claims) {
                    self.collect_claimed(delivery, job, claim, now, claimed).await;
                }
            }
            Err(e) => {
                let e = CoreError::from(e);
                for (delivery, _) in &to_claim {
                    self.unhandled(delivery, &e);
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
            let until = self.ports.clock.now() + self.config.lease.to_chrono();
            if let Err(e) = self.requeue(&delivery, until).await {
                self.unhandled(&delivery, &e);
            }
        }
        going_on
    }

    /// [`Worker::claimed`] for one delivery of a batch: what starts goes to `claimed`, a
    /// failure is logged (the message will be redelivered).
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
            Err(e) => self.unhandled(&delivery, &e),
        }
    }

    /// Runs an attempt [`Worker::claim_batch`] claimed to its end (heartbeats, timeout,
    /// completion), as [`Worker::handle`] does after its claim.
    pub async fn run_claimed(&self, attempt: ClaimedAttempt, shutdown: CancellationToken) {
        let ClaimedAttempt {
            delivery,
            job,
            run,
            token,
        } = attempt;
        if let Err(e) = self.run_attempt(&delivery, &job, run, token, shutdown).await {
            self.unhandled(&delivery, &e);
        }
    }

    /// Logs a delivery that could not be handled; its message will be redelivered.
    fn unhandled(&self, delivery: &Delivery, error: &CoreError) {
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        tracing::warn!(worker = %self.config.id, %tenant, %run_id, error = %error, "delivery not handled; it will be redelivered");
    }

    /// Before a claim: applies the overlap checks that happen at claim time, given the job
    /// the run id names (as read). [`Admission::Done`] when the delivery was dealt with here.
    async fn admit(&self, delivery: &Delivery, job: Option<Job>) -> Result<Admission, CoreError> {
        let store = &self.ports.store;
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        // `queue_one`: the waiting run starts only once the earlier one has ended. Runs fired
        // ahead of their time (look-ahead) met no overlap check when they were fired, so theirs
        // happens here: `forbid` skips the run if the earlier one is still going, as the
        // sweeper would have; `replace` asks the earlier ones to stop, then starts.
        let policy = job.as_ref().map(|j| j.spec.overlap_policy());
        let check_overlap = policy.is_some_and(|p| self.checked_at_claim().contains(&p));
        if let Some(job) = job.as_ref().filter(|_| check_overlap) {
            let now = self.ports.clock.now();
            let active = store.active_runs(tenant, &job.id).await?;
            if policy == Some(Overlap::Replace) {
                self.replace_earlier(&active, run_id, now).await?;
            } else if let Some(until) = another_run_leased_until(&active, run_id, now) {
                if policy == Some(Overlap::QueueOne) {
                    if queue_one_already_waiting(&active, run_id, now) {
                        let reason = "skipped: a run was already waiting for the running one (overlap: queue_one)";
                        self.skip_at_claim(delivery, now, reason).await?;
                    } else {
                        self.requeue(delivery, until).await?;
                    }
                    return Ok(Admission::Done);
                }
                let reason = "skipped: the previous run was still running (overlap: forbid)";
                if self.skip_at_claim(delivery, now, reason).await? {
                    return Ok(Admission::Done);
                }
            }
        }
        Ok(Admission::Claim(job))
    }

    /// Ends the delivery's run CANCELLED with `reason` if it is still a PENDING scheduled
    /// run (an occurrence skipped by the overlap policy at claim time), and acks the
    /// delivery; `false` (nothing done) otherwise.
    async fn skip_at_claim(&self, delivery: &Delivery, now: Timestamp, reason: &str) -> Result<bool, CoreError> {
        let store = &self.ports.store;
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        let Some(run) = store.get_run(tenant, run_id).await? else {
            return Ok(false);
        };
        if run.trigger != Trigger::Schedule || run.state != RunState::Pending {
            return Ok(false);
        }
        store
            .cancel_run(tenant, run_id, timestamp::trunc_ms(now), reason)
            .await?;
        tracing::info!(worker = %self.config.id, %tenant, %run_id, reason, "occurrence skipped at claim");
        self.ack(delivery).await?;
        Ok(true)
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
            Ok(ClaimOutcome::Claimed { run, token }) => (run, token),
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
            Ok(ClaimOutcome::NotYet(until)) => {
                self.defer(delivery, until).await?;
                return Ok(None);
            }
            // The tenant is at its concurrency cap: look again once a slot may have freed.
            Ok(ClaimOutcome::AtCapacity) => {
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
                    let result = failure_at(now, "the run's job no longer exists");
                    store
                        .complete(
                            tenant,
                            run_id,
                            token,
                            &result,
                            RunTransition::Finish(RunState::Failed),
                            None,
                        )
                        .await?;
                    self.ack(delivery).await?;
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
        for earlier in active.iter().filter(|r| r.scheduled_for < this.scheduled_for) {
            self.ports
                .store
                .cancel_run(&earlier.tenant, &earlier.run_id, at, REPLACED)
                .await?;
        }
        Ok(())
    }

    /// Runs the claimed attempt to its end and records it (unless the lease was lost).
    async fn run_attempt(
        &self,
        delivery: &Delivery,
        job: &Job,
        run: Run,
        token: u64,
        shutdown: CancellationToken,
    ) -> Result<(), CoreError> {
        let clock = self.ports.clock.clone();
        let attempt = run.attempt_count();
        let started = clock.now();
        tracing::info!(worker = %self.config.id, tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id, attempt, "attempt started");
        let key = LogKey {
            tenant: run.tenant.clone(),
            run_id: run.run_id.clone(),
            attempt,
        };
        let writer = self.ports.logs.writer(&key).await?;
        // The worker may have stalled since the claim (a paused process, a long wait for a
        // thread): once the lease is within its stop margin another worker may soon hold
        // the run, so the payload must not start at all. Nothing awaits between this check
        // and the payload's start.
        let margin = self.config.lease_stop_margin().to_chrono();
        if let Some(lease) = run.lease.as_ref().filter(|l| clock.now() >= l.expires_at - margin) {
            tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, expired_at = %timestamp::format(&lease.expires_at), "lease ended before the payload could start; nothing started, nothing recorded");
            return Ok(());
        }
        let (out_tx, out_rx) = mpsc::channel(OUTPUT_BUFFER);
        let (stop_tx, stop_rx) = watch::channel(None);
        let request = ExecRequest {
            task: job.spec.task.clone(),
            context: context_env(&run, job, token),
            grace: self.config.grace,
            lease_lost_grace: self.config.lease_lost_grace(),
        };

        // The log pump runs beside the attempt in this same future (not a spawned task), so
        // a worker driven step by step (a simulation) owns every piece of its work.
        let secrets = job
            .spec
            .task
            .env()
            .map(crate::secret::secret_values)
            .unwrap_or_default();
        let pump = pump_output(out_rx, writer, secrets);
        let execution = self.executor.execute(request, out_tx, stop_rx);
        let attempt_loop = async {
            tokio::pin!(execution);
            let beat_every = Dur::millis((self.config.lease.as_millis() / 3).max(1) as u64).to_chrono();
            // After a failed renewal, try again sooner: the lease must be renewed before its
            // stop margin, not only before it ends.
            let retry_every = Dur::millis((self.config.lease.as_millis() / 15).max(1) as u64).to_chrono();
            let deadline = started + job.spec.timeout.to_chrono();
            let mut next_beat = started + beat_every;
            // The lease as last granted by the store: once it has passed without a renewal
            // the store may hand the run to another worker, so the payload must be gone by
            // then — asked to stop the stop margin before, not only when a later heartbeat
            // hears it was fenced.
            let mut held_until = run
                .lease
                .as_ref()
                .map_or(started + self.config.lease.to_chrono(), |l| l.expires_at);
            let mut stop: Option<StopReason> = None;
            let result: ExecResult = loop {
                // `biased`: branches are tried in order, so the same inputs always take the
                // same branch (replayable simulations); the payload's end wins any tie.
                tokio::select! {
                    biased;
                    result = &mut execution => break result,
                    _ = clock.sleep_until(next_beat), if stop != Some(StopReason::LeaseLost) => {
                        next_beat = clock.now() + beat_every;
                        match self.heartbeat(delivery, &run, token).await {
                            Beat::Renewed { until, cancel } => {
                                held_until = until;
                                if cancel && stop.is_none() {
                                    stop = Some(StopReason::Cancelled);
                                    let _ = stop_tx.send(stop);
                                }
                            }
                            Beat::Fenced => {
                                stop = Some(StopReason::LeaseLost);
                                let _ = stop_tx.send(stop);
                            }
                            Beat::Failed => next_beat = clock.now() + retry_every,
                        }
                    }
                    _ = clock.sleep_until(held_until - margin), if stop != Some(StopReason::LeaseLost) => {
                        tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, "lease about to end without renewal; stopping the payload");
                        stop = Some(StopReason::LeaseLost);
                        let _ = stop_tx.send(stop);
                    }
                    _ = clock.sleep_until(deadline), if stop.is_none() => {
                        stop = Some(StopReason::Timeout);
                        let _ = stop_tx.send(stop);
                    }
                    _ = shutdown.cancelled(), if stop.is_none() => {
                        stop = Some(StopReason::Shutdown);
                        let _ = stop_tx.send(stop);
                    }
                }
            };
            (result, stop)
        };
        let ((result, stop), pumped) = tokio::join!(attempt_loop, pump);
        let summary = match pumped {
            Ok(summary) => summary,
            Err(e) => {
                tracing::warn!(run_id = %run.run_id, attempt, error = %e, "log could not be finished");
                LogSummary::default()
            }
        };
        let stopped = result.stopped.or(stop.filter(|s| *s == StopReason::LeaseLost));
        let outcome = match stopped {
            // Fenced off: another attempt may be running. Write nothing about this one.
            Some(StopReason::LeaseLost) => {
                tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, "lease lost; payload stopped, nothing recorded");
                return Ok(());
            }
            Some(StopReason::Timeout) => AttemptOutcome::TimedOut,
            Some(StopReason::Cancelled) => AttemptOutcome::Cancelled,
            Some(StopReason::Shutdown) => AttemptOutcome::WorkerLost,
            None if result.success => AttemptOutcome::Succeeded,
            None => AttemptOutcome::Failed,
        };
        let now = timestamp::trunc_ms(clock.now());
        let error = match stopped {
            Some(StopReason::Timeout) => Some(format!("timed out after {}", job.spec.timeout)),
            Some(StopReason::Cancelled) => Some("cancelled".to_string()),
            Some(StopReason::Shutdown) => Some(format!("worker {} shut down", self.config.id)),
            _ => result.error.clone(),
        };
        let attempt_result = AttemptResult {
            finished_at: now,
            outcome,
            exit_code: result.exit_code,
            http_status: result.http_status,
            error,
            log_bytes: summary.bytes,
            log_truncated: summary.truncated,
        };
        let next = match after_attempt_for(&run, &job.spec, outcome, now) {
            // Interrupted by a clean shutdown, not by a fault of the payload: the retry need
            // not wait out a backoff (it still counts as an attempt).
            RunTransition::Retry { .. } if stopped == Some(StopReason::Shutdown) => {
                RunTransition::Retry { not_before: now }
            }
            next => next,
        };
        let store = &self.ports.store;
        let (tenant, run_id) = (&run.tenant, &run.run_id);
        let completed = match next {
            // The run ends: its message goes in the same write where the store can.
            RunTransition::Finish(_) => {
                store
                    .complete_and_ack(tenant, run_id, token, &attempt_result, next, &delivery.receipt)
                    .await
            }
            // A retry is enqueued before the old message is acked (a crash in between leaves
            // the message to be redelivered, not a PENDING run without one).
            RunTransition::Retry { .. } => store
                .complete(tenant, run_id, token, &attempt_result, next, None)
                .await
                .map(|run| (run, false)),
        };
        let (finished, acked) = match completed {
            Ok(done) => done,
            Err(StoreError::Fenced) => {
                tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, "completion fenced off; nothing recorded");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        tracing::info!(worker = %self.config.id, run_id = %run.run_id, attempt, outcome = %outcome, state = %finished.state, "attempt ended");
        if matches!(next, RunTransition::Retry { .. }) {
            self.ports.queue.enqueue(&[Dispatch::from(&finished)]).await?;
        }
        if !acked {
            self.ack(delivery).await?;
        }
        if finished.state.is_terminal() {
            self.after_run(job, &finished).await?;
        }
        Ok(())
    }

    /// Renews the store lease and the queue lease.
    async fn heartbeat(&self, delivery: &Delivery, run: &Run, token: u64) -> Beat {
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let until = now + self.config.lease.to_chrono();
        match self
            .ports
            .store
            .heartbeat(&run.tenant, &run.run_id, token, now, until)
            .await
        {
            Ok(current) => {
                if let Err(e) = self.ports.queue.extend(&delivery.receipt, self.config.lease).await {
                    tracing::debug!(run_id = %run.run_id, error = %e, "queue lease not extended");
                }
                Beat::Renewed {
                    until,
                    cancel: current.cancel_requested,
                }
            }
            Err(StoreError::Fenced) => Beat::Fenced,
            Err(e) => {
                tracing::warn!(run_id = %run.run_id, error = %e, "heartbeat failed; will retry");
                Beat::Failed
            }
        }
    }

    /// Follow-ups once a run has ended: the timeout handler job, and the run `queue_one`
    /// held back.
    async fn after_run(&self, job: &Job, run: &Run) -> Result<(), CoreError> {
        if let (RunState::TimedOut, OnTimeout::RunJob(handler)) = (run.state, &job.spec.on_timeout) {
            match self.ports.store.get_job(&run.tenant, handler).await? {
                Some(handler) if handler.state != crate::job::JobState::Deleted => {
                    start_extra_run(&self.ports, &handler, Trigger::Handler).await?;
                }
                _ => tracing::warn!(run_id = %run.run_id, handler = %handler, "timeout handler job not found"),
            }
        }
        if job.spec.overlap_policy() == Overlap::QueueOne {
            let waiting: Vec<_> = self
                .ports
                .store
                .active_runs(&run.tenant, &run.job_id)
                .await?
                .iter()
                .filter(|r| r.state == RunState::Pending)
                .map(Dispatch::from)
                .collect();
            if !waiting.is_empty() {
                self.ports.queue.enqueue(&waiting).await?;
            }
        }
        Ok(())
    }

    /// Hands the run back to the queue as a message visible from `until`, and drops the one
    /// delivered: for a run that waits for another run's lease (`queue_one` behind a running
    /// run, or a duplicate message of a run another worker holds), which may take many leases. Deferring the same message instead would count each wait as a failed
    /// delivery, and a queue with a dead-letter limit (SQS's redrive) would give the run up as
    /// undeliverable. (A queue that keeps one message per run just moves it.)
    async fn requeue(&self, delivery: &Delivery, until: Timestamp) -> Result<(), CoreError> {
        let mut dispatch = delivery.dispatch.clone();
        dispatch.not_before = dispatch.not_before.max(until);
        self.ports.queue.enqueue(&[dispatch]).await?;
        self.ack(delivery).await
    }

    /// Leaves a delivery invisible until `until`, when it is worth trying again.
    async fn defer(&self, delivery: &Delivery, until: Timestamp) -> Result<(), CoreError> {
        let wait = (until - self.ports.clock.now()).num_milliseconds().max(0) as u64;
        ignore_stale(self.ports.queue.extend(&delivery.receipt, Dur::millis(wait)).await)
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), CoreError> {
        ignore_stale(self.ports.queue.ack(&delivery.receipt).await)
    }
}

/// A stale receipt means the message was already handled or superseded: nothing to do.
fn ignore_stale(result: Result<(), QueueError>) -> Result<(), CoreError> {
    match result {
        Ok(()) | Err(QueueError::StaleReceipt) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The SKED_* variables every payload gets (`SKED_RESOURCES` tells a container executor the
/// job's resource tier).
fn context_env(run: &Run, job: &Job, token: u64) -> Vec<(String, String)> {
    vec![
        ("SKED_TENANT".into(), run.tenant.to_string()),
        ("SKED_JOB_ID".into(), run.job_id.to_string()),
        ("SKED_RUN_ID".into(), run.run_id.to_string()),
        ("SKED_ATTEMPT".into(), run.attempt_count().to_string()),
        ("SKED_SCHEDULED_FOR".into(), timestamp::format(&run.scheduled_for)),
        ("SKED_FENCING_TOKEN".into(), token.to_string()),
        ("SKED_RESOURCES".into(), job.spec.resources.to_string()),
    ]
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

/// Moves output lines into the attempt's log until the executor drops its sender, each with
/// the task's `secrets` masked.
async fn pump_output(
    mut lines: mpsc::Receiver<LogLine>,
    mut writer: Box<dyn LogWriter>,
    secrets: Vec<String>,
) -> Result<LogSummary, crate::ports::LogError> {
    let mut failed = None;
    while let Some(mut line) = lines.recv().await {
        if !secrets.is_empty() {
            line.line = crate::secret::mask(&line.line, &secrets);
        }
        if failed.is_none()
            && let Err(e) = writer.append(line).await
        {
            failed = Some(e);
        }
    }
    match failed {
        Some(e) => Err(e),
        None => writer.finish().await,
    }
}
