//! [`AuditStore`]: sits between the faulty store and the real one and checks, call by call,
//! the fencing rules against its own model of who holds each run — independent of the
//! store's code, so a store (or lifecycle rule) that lets a fenced-off write through is caught.
//! [`AuditWork`] does the same for a one-transaction work port, whose steps write the store
//! directly, into the same record.
//!
//! It also journals what moves a job's `next_fire_at` (creations, firings, user updates), from
//! which [`super::check`] accounts for every occurrence. Nothing here injects faults.

use async_trait::async_trait;
use futures::FutureExt;
use sked_core::alert::{Alert, AlertKey, DueAlert};
use sked_core::dependency::Wait;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::Job;
use sked_core::ledger::SkipRecord;
use sked_core::ports::{
    ClaimBatch, ClaimOutcome, Completion, Ended, Firing, JobClaim, JobFilter, JobStore, JobStoreExt, Page, PageRequest,
    Receipt, ReceiveRequest, Received, RunFilter, Settlement, StoreError, WorkError, WorkPort,
};
use sked_core::run::Run;
use sked_core::run_settings::RunSettings;
use sked_core::timestamp::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// A lease as the audit saw it granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    /// Its fencing token.
    token: u64,
    /// Until when (as last granted or renewed).
    expires_at: Timestamp,
}

/// A write that moved (or might have moved) a job's `next_fire_at`, in store order.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a journal entry, written once per store write
pub enum JobEvent {
    /// The job was created.
    Created(Job),
    /// A sweep (or the API's direct firing) wrote this firing.
    Fired {
        /// The firing as planned.
        firing: Firing,
        /// The nominal times of the runs it inserted: its runs that did not exist yet (a
        /// store inserts only those; a firing after a change of timing may plan a time the
        /// old timing fired ahead, whose run it keeps).
        inserted: BTreeSet<Timestamp>,
        /// A one-shot's plain firing on a store that leaves those unwritten
        /// ([`crate::memory::MemStore::lean`]): its answer is a run *sent*, which is the
        /// occurrence's run only once a claim (or a write that settles the firing) puts it.
        /// Until a sweep has passed it the job still reads unfired, so a later firing may plan
        /// the occurrence again: send it again (a second message of the same run), or decide
        /// otherwise (skip it), and then the run sent finds nothing to claim.
        unwritten: bool,
    },
    /// A user change replaced `before` by `after`.
    Updated {
        /// As stored before.
        before: Job,
        /// As stored after.
        after: Job,
    },
}

/// What the audit recorded.
#[derive(Debug, Default)]
pub struct AuditLog {
    /// Broken rules, in the order seen.
    pub violations: Vec<String>,
    /// Per job, the writes that moved its schedule.
    pub job_events: BTreeMap<(TenantId, JobId), Vec<JobEvent>>,
    /// Completions refused as fenced (the fence doing its job).
    pub fenced_writes: u64,
    /// Live leases by run.
    leases: BTreeMap<(TenantId, RunId), Held>,
    /// Whether the store leaves one-shots' plain firings unwritten
    /// ([`JobEvent::Fired::unwritten`]).
    pub lean_one_shots: bool,
}

impl AuditLog {
    /// A firing that took effect.
    pub fn saw_firing(&mut self, firing: &Firing, answer: &[Run]) {
        let planned: BTreeSet<&RunId> = firing.runs.iter().map(|r| &r.run_id).collect();
        let inserted: BTreeSet<Timestamp> = answer
            .iter()
            .filter(|r| planned.contains(&r.run_id))
            .map(|r| r.scheduled_for)
            .collect();
        let events = self
            .job_events
            .entry((firing.tenant.clone(), firing.job_id.clone()))
            .or_default();
        // The job's definition as last written.
        let one_shot = events.iter().rev().find_map(|e| match e {
            JobEvent::Created(job) | JobEvent::Updated { after: job, .. } => {
                Some(matches!(job.spec.schedule, sked_core::schedule::Schedule::At(_)))
            }
            JobEvent::Fired { .. } => None,
        });
        let plain = firing.runs.len() == 1
            && firing.cancel.is_empty()
            && firing.skipped.is_empty()
            && firing.state == sked_core::job::JobState::Completed
            && firing.next_fire_at.is_none();
        events.push(JobEvent::Fired {
            firing: firing.clone(),
            inserted,
            unwritten: self.lean_one_shots && plain && one_shot == Some(true),
        });
    }

    /// The answer of one claim of `batch`.
    pub fn saw_claim(&mut self, tenant: &TenantId, run_id: &RunId, batch: &ClaimBatch, outcome: &ClaimOutcome) {
        let key = (tenant.clone(), run_id.clone());
        let (worker, now) = (&batch.worker, batch.now);
        match outcome {
            ClaimOutcome::Claimed { run, token } => {
                if let Some(prev) = self.leases.get(&key).copied()
                    && prev.expires_at >= now
                {
                    self.violations.push(format!(
                        "two live leases on {run_id}: token {} until {} and {worker}'s token {token} claimed at {now}",
                        prev.token, prev.expires_at
                    ));
                }
                if run.attempt_count() > run.max_attempts {
                    self.violations.push(format!(
                        "{run_id}: attempt {} started but only {} are allowed",
                        run.attempt_count(),
                        run.max_attempts
                    ));
                }
                let expires_at = run.lease.as_ref().map_or(batch.lease_until, |l| l.expires_at);
                self.leases.insert(
                    key,
                    Held {
                        token: *token,
                        expires_at,
                    },
                );
            }
            ClaimOutcome::Terminal(_) => {
                self.leases.remove(&key);
            }
            _ => {}
        }
    }

    /// A renewal of `token`'s lease at `now` that the store accepted (`run` as it answered).
    pub fn saw_heartbeat(&mut self, run: &Run, token: u64, now: Timestamp, lease_until: Timestamp) {
        let key = (run.tenant.clone(), run.run_id.clone());
        let run_id = &run.run_id;
        match self.leases.get(&key).copied() {
            Some(held) if held.token == token && held.expires_at >= now => {
                let expires_at = run.lease.as_ref().map_or(lease_until, |l| l.expires_at);
                self.leases.insert(key, Held { token, expires_at });
            }
            other => self.violations.push(format!(
                "{run_id}: lease renewed with token {token} at {now}, but the live lease is {other:?}"
            )),
        }
    }

    /// What the store answered to a completion.
    pub fn saw_completion<T>(&mut self, done: &Completion, answer: &Result<T, StoreError>) {
        let key = (done.tenant.clone(), done.run_id.clone());
        let (run_id, token) = (&done.run_id, done.token);
        match answer {
            Ok(_) => {
                match self.leases.get(&key).copied() {
                    Some(held)
                        if held.token == token && done.only_if_expired_by.is_none_or(|t| held.expires_at < t) => {}
                    other => self.violations.push(format!(
                        "{run_id}: completion ({}) accepted from a fenced-off token {token}; the live lease is {other:?}",
                        done.result.outcome
                    )),
                }
                self.leases.remove(&key);
            }
            Err(StoreError::Fenced) => self.fenced_writes += 1,
            Err(_) => {}
        }
    }
}

/// A [`JobStore`] that checks and journals every call to the store it wraps.
pub struct AuditStore<S: ?Sized> {
    /// The real store.
    inner: Arc<S>,
    /// What was seen.
    log: Arc<Mutex<AuditLog>>,
}

impl<S: JobStore + ?Sized> AuditStore<S> {
    /// Audits `inner`.
    pub fn new(inner: Arc<S>) -> Self {
        AuditStore {
            inner,
            log: Arc::default(),
        }
    }

    /// The audit's record.
    pub fn log(&self) -> MutexGuard<'_, AuditLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job as stored now (the in-memory store answers at once).
    fn peek_job(&self, tenant: &TenantId, id: &JobId) -> Option<Job> {
        self.inner
            .get_job(tenant, id)
            .now_or_never()
            .and_then(Result::ok)
            .flatten()
    }
}

#[async_trait]
impl<S: JobStore + ?Sized> JobStore for AuditStore<S> {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        let r = self.inner.create_jobs(jobs, idempotency).await;
        if r.is_ok() {
            let mut log = self.log();
            for job in jobs {
                let stored = self.peek_job(&job.tenant, &job.id).unwrap_or_else(|| job.clone());
                log.job_events
                    .entry((job.tenant.clone(), job.id.clone()))
                    .or_default()
                    .push(JobEvent::Created(stored));
            }
        }
        r
    }

    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError> {
        self.inner.idempotency_lookup(tenant, key).await
    }

    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        self.inner.get_jobs(ids).await
    }

    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let before = self.peek_job(&job.tenant, &job.id);
        let r = self
            .inner
            .update_job(job, expected_version, expected_next_fire_at)
            .await;
        if r.is_ok()
            && let (Some(before), Some(after)) = (before, self.peek_job(&job.tenant, &job.id))
        {
            self.log()
                .job_events
                .entry((job.tenant.clone(), job.id.clone()))
                .or_default()
                .push(JobEvent::Updated { before, after });
        }
        r
    }

    async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, StoreError> {
        self.inner.list_jobs(tenant, filter, page).await
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.inner.due_jobs(horizon, limit).await
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.inner.next_due_at().await
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        let answers = self.inner.fire(firings).await?;
        let mut log = self.log();
        for (firing, answer) in firings.iter().zip(&answers) {
            if let Ok(inserted) = answer {
                log.saw_firing(firing, inserted);
            }
        }
        Ok(answers)
    }

    async fn firings_sent(&self, firings: &[Firing]) -> Result<(), StoreError> {
        self.inner.firings_sent(firings).await
    }

    fn fired_run_listing(&self) -> sked_core::ports::FiredRunListing {
        self.inner.fired_run_listing()
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        self.inner.insert_run(run).await
    }

    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        self.inner.get_run(tenant, run_id).await
    }

    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        self.inner.list_runs(tenant, filter, page).await
    }

    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError> {
        self.inner.active_runs(jobs, scheduled_by).await
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        let answers = self.inner.claim(batch).await?;
        let mut log = self.log();
        for ((tenant, run_id), answer) in batch.runs.iter().zip(&answers) {
            if let Ok(JobClaim::Claimed(outcome, _)) = answer {
                log.saw_claim(tenant, run_id, batch, outcome);
            }
        }
        Ok(answers)
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError> {
        let r = self.inner.heartbeat(tenant, run_id, token, now, lease_until).await;
        if let Ok(run) = &r {
            self.log().saw_heartbeat(run, token, now, lease_until);
        }
        r
    }

    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError> {
        let r = self.inner.complete(done).await;
        self.log().saw_completion(done, &r);
        r
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        self.inner.cancel_run(tenant, run_id, now, reason).await
    }

    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError> {
        self.inner.defer_pending(tenant, run_id, until).await
    }

    async fn take_settings(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        settings: &RunSettings,
    ) -> Result<Option<Run>, StoreError> {
        self.inner.take_settings(tenant, run_id, settings).await
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.inner.expired_leases(now, limit).await
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.inner.stale_pending(ready_before, limit).await
    }

    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        window: (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        self.inner.skip_records(tenant, job_id, window, limit).await
    }

    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError> {
        self.inner.record_skips(tenant, job_id, records).await
    }

    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        self.inner.dependents(tenant, job_id).await
    }

    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        self.inner.expired_waits(now, limit).await
    }

    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        self.inner.expire_wait(wait, now).await
    }

    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        self.inner.due_alerts(now, limit).await
    }

    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError> {
        self.inner.save_alert(key, expected, alert).await
    }
}

/// A [`WorkPort`] that checks and journals, as [`AuditStore`] does, the store writes made by
/// the steps of the one it wraps (a one-transaction port writes the store without going
/// through the audited [`JobStore`]): firings, claims, renewals and completions.
pub struct AuditWork<W: ?Sized> {
    /// The real work port.
    inner: Arc<W>,
    /// The record it shares with the [`AuditStore`] of the same store.
    log: Arc<Mutex<AuditLog>>,
}

impl<S: ?Sized> AuditStore<S> {
    /// An audit of `work`, a work port over the store this audits, recording in the same log.
    pub fn work<W: WorkPort + ?Sized>(&self, work: Arc<W>) -> AuditWork<W> {
        AuditWork {
            inner: work,
            log: self.log.clone(),
        }
    }
}

impl<W: ?Sized> AuditWork<W> {
    fn log(&self) -> MutexGuard<'_, AuditLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl<W: WorkPort + ?Sized> WorkPort for AuditWork<W> {
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError> {
        let answers = self.inner.fire(firings).await?;
        let mut log = self.log();
        for (firing, answer) in firings.iter().zip(&answers) {
            if let Ok(inserted) = answer {
                log.saw_firing(firing, inserted);
            }
        }
        Ok(answers)
    }

    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError> {
        let received = self.inner.receive(request).await?;
        let mut log = self.log();
        for r in &received {
            let Ok(JobClaim::Claimed(outcome, _)) = &r.claim else {
                continue;
            };
            // The claim's instant and lease, as the claimed run records them.
            let (now, lease_until) = match outcome {
                ClaimOutcome::Claimed { run, .. } => match (run.attempts.last(), &run.lease) {
                    (Some(attempt), Some(lease)) => (attempt.started_at, lease.expires_at),
                    _ => {
                        log.violations
                            .push(format!("{}: claimed without an attempt and a lease", run.run_id));
                        continue;
                    }
                },
                _ => (Timestamp::MIN_UTC, Timestamp::MIN_UTC),
            };
            let batch = ClaimBatch {
                runs: Vec::new(),
                worker: request.worker.clone(),
                owners: Vec::new(),
                now,
                lease_until,
                read_jobs: true,
                hold: request.hold.clone(),
                alone: false,
            };
            log.saw_claim(
                &r.delivery.dispatch.tenant,
                &r.delivery.dispatch.run_id,
                &batch,
                outcome,
            );
        }
        Ok(received)
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        receipt: &Receipt,
        lease: Dur,
    ) -> Result<(Run, Timestamp), WorkError> {
        let (run, until) = self.inner.heartbeat(tenant, run_id, token, receipt, lease).await?;
        self.log().saw_heartbeat(&run, token, until - lease.to_chrono(), until);
        Ok((run, until))
    }

    async fn complete(&self, settlement: &Settlement) -> Result<Ended, WorkError> {
        let answer = self.inner.complete(settlement).await;
        let seen: Result<(), StoreError> = match &answer {
            Ok(_) => Ok(()),
            Err(WorkError::Store(StoreError::Fenced)) => Err(StoreError::Fenced),
            Err(e) => Err(StoreError::Other(e.to_string().into())),
        };
        self.log().saw_completion(&settlement.completion, &seen);
        answer
    }
}
