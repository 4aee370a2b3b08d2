//! [`AuditStore`]: sits between the faulty store and the real one and checks, call by call,
//! the fencing rules against its own model of who holds each run — independent of the
//! store's code, so a store (or lifecycle rule) that lets a fenced-off write through is caught.
//!
//! It also journals what moves a job's `next_fire_at` (creations, firings, user updates), from
//! which [`super::check`] accounts for every occurrence. Nothing here injects faults.

use async_trait::async_trait;
use futures::FutureExt;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::Job;
use sked_core::ports::{
    AttemptResult, ClaimOutcome, Firing, JobFilter, JobStore, Page, PageRequest, RunFilter, RunTransition, StoreError,
};
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;
use std::collections::BTreeMap;
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
    /// A sweep wrote this firing.
    Fired(Firing),
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

    async fn get_job(&self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, StoreError> {
        self.inner.get_job(tenant, id).await
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

    async fn fire(&self, firing: &Firing) -> Result<Vec<Run>, StoreError> {
        let r = self.inner.fire(firing).await;
        if r.is_ok() {
            self.log()
                .job_events
                .entry((firing.tenant.clone(), firing.job_id.clone()))
                .or_default()
                .push(JobEvent::Fired(firing.clone()));
        }
        r
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

    async fn active_runs(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, StoreError> {
        self.inner.active_runs(tenant, job_id).await
    }

    async fn claim(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        let r = self.inner.claim(tenant, run_id, worker, now, lease_until).await;
        let key = (tenant.clone(), run_id.clone());
        let mut log = self.log();
        match &r {
            Ok(ClaimOutcome::Claimed { run, token }) => {
                if let Some(prev) = log.leases.get(&key).copied()
                    && prev.expires_at >= now
                {
                    log.violations.push(format!(
                        "two live leases on {run_id}: token {} until {} and {worker}'s token {token} claimed at {now}",
                        prev.token, prev.expires_at
                    ));
                }
                if run.attempt_count() > run.max_attempts {
                    log.violations.push(format!(
                        "{run_id}: attempt {} started but only {} are allowed",
                        run.attempt_count(),
                        run.max_attempts
                    ));
                }
                let expires_at = run.lease.as_ref().map_or(lease_until, |l| l.expires_at);
                log.leases.insert(
                    key,
                    Held {
                        token: *token,
                        expires_at,
                    },
                );
            }
            Ok(ClaimOutcome::Terminal(_)) => {
                log.leases.remove(&key);
            }
            _ => {}
        }
        r
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
            let key = (tenant.clone(), run_id.clone());
            let mut log = self.log();
            match log.leases.get(&key).copied() {
                Some(held) if held.token == token && held.expires_at >= now => {
                    let expires_at = run.lease.as_ref().map_or(lease_until, |l| l.expires_at);
                    log.leases.insert(key, Held { token, expires_at });
                }
                other => log.violations.push(format!(
                    "{run_id}: lease renewed with token {token} at {now}, but the live lease is {other:?}"
                )),
            }
        }
        r
    }

    async fn complete(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        result: &AttemptResult,
        next: RunTransition,
        only_if_expired_by: Option<Timestamp>,
    ) -> Result<Run, StoreError> {
        let r = self
            .inner
            .complete(tenant, run_id, token, result, next, only_if_expired_by)
            .await;
        let key = (tenant.clone(), run_id.clone());
        let mut log = self.log();
        match &r {
            Ok(_) => {
                match log.leases.get(&key).copied() {
                    Some(held)
                        if held.token == token && only_if_expired_by.is_none_or(|t| held.expires_at < t) => {}
                    other => log.violations.push(format!(
                        "{run_id}: completion ({}) accepted from a fenced-off token {token}; the live lease is {other:?}",
                        result.outcome
                    )),
                }
                log.leases.remove(&key);
            }
            Err(StoreError::Fenced) => log.fenced_writes += 1,
            Err(_) => {}
        }
        r
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Run, StoreError> {
        self.inner.cancel_run(tenant, run_id, now, reason).await
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.inner.expired_leases(now, limit).await
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.inner.stale_pending(ready_before, limit).await
    }
}
