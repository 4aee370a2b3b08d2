//! [`Faulty`] over a [`JobStore`]: throttling before a call takes effect, lost replies after
//! a write took effect, conflicts on conditional writes, and interleavings.
//!
//! A firing (`fire`) is never answered with a lost reply: the sweeper reports the occurrences
//! it skipped only once it knows its write took effect, and a simulation accounts for every
//! occurrence through that report. Reads fail only before running. In a batch (firings,
//! claims) each item meets its own faults, as the items of the batch calls a store without
//! transactions makes one by one would: a firing its conflict, a claim its lost reply.

use super::{FaultKind, Faulty};
use async_trait::async_trait;
use sked_core::alert::{Alert, AlertKey, DueAlert};
use sked_core::dependency::Wait;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::Job;
use sked_core::ledger::SkipRecord;
use sked_core::ports::{
    ClaimBatch, Completion, Ended, Firing, JobClaim, JobFilter, JobStore, Page, PageRequest, RunFilter, StoreError,
};
use sked_core::run::Run;
use sked_core::run_settings::RunSettings;
use sked_core::timestamp::Timestamp;

fn injected(what: &str) -> StoreError {
    StoreError::Transient(format!("injected: {what}").into())
}

impl<P: ?Sized> Faulty<P> {
    /// Before any call: maybe interleave, maybe fail without effect.
    pub(super) async fn before(&self, op: &str) -> Result<(), StoreError> {
        self.chaos.maybe_yield().await;
        if self.cut_off() {
            return Err(injected(&format!("{op}: store unreachable")));
        }
        if self.chaos.strike(FaultKind::StoreTransient, |p| p.store_transient) {
            return Err(injected(&format!("{op} throttled")));
        }
        Ok(())
    }

    /// Before a conditional write: as [`Self::before`], or a conflict.
    async fn before_conditional(&self, op: &str) -> Result<(), StoreError> {
        self.before(op).await?;
        if self.chaos.strike(FaultKind::StoreConflict, |p| p.store_conflict) {
            return Err(StoreError::Conflict(format!("injected: {op} raced")));
        }
        Ok(())
    }

    /// After a write: maybe lose its reply.
    pub(super) fn after<T>(&self, op: &str, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_ok()
            && self
                .chaos
                .strike(FaultKind::StoreTransientAfterCommit, |p| p.store_transient_after_commit)
        {
            return Err(injected(&format!("{op} reply lost")));
        }
        result
    }

    /// Firings written as a batch of a store without transactions would be: each may meet a
    /// conflict of its own (and is then not written). `write` writes the others.
    pub(super) async fn fire_each<E, F>(
        &self,
        firings: &[Firing],
        write: F,
    ) -> Result<Vec<Result<Vec<Run>, StoreError>>, E>
    where
        F: AsyncFnOnce(&[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, E>,
    {
        let raced: Vec<bool> = firings
            .iter()
            .map(|_| self.chaos.strike(FaultKind::StoreConflict, |p| p.store_conflict))
            .collect();
        let written: Vec<Firing> = firings
            .iter()
            .zip(&raced)
            .filter(|(_, raced)| !**raced)
            .map(|(f, _)| f.clone())
            .collect();
        let mut answers = write(&written).await?.into_iter();
        Ok(raced
            .iter()
            .map(|raced| match raced {
                true => Err(StoreError::Conflict("injected: fire raced".into())),
                false => answers
                    .next()
                    .unwrap_or_else(|| Err(StoreError::Other("fire answered too few firings".into()))),
            })
            .collect())
    }
}

#[async_trait]
impl<P: JobStore + ?Sized> JobStore for Faulty<P> {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        self.before("create_jobs").await?;
        let r = self.inner.create_jobs(jobs, idempotency).await;
        self.after("create_jobs", r)
    }

    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError> {
        self.before("idempotency_lookup").await?;
        self.inner.idempotency_lookup(tenant, key).await
    }

    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        self.before("get_jobs").await?;
        self.inner.get_jobs(ids).await
    }

    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        self.before_conditional("update_job").await?;
        let r = self
            .inner
            .update_job(job, expected_version, expected_next_fire_at)
            .await;
        self.after("update_job", r)
    }

    async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, StoreError> {
        self.before("list_jobs").await?;
        self.inner.list_jobs(tenant, filter, page).await
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.before("due_jobs").await?;
        self.inner.due_jobs(horizon, limit).await
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.before("next_due_at").await?;
        self.inner.next_due_at().await
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        self.before("fire").await?;
        self.fire_each(firings, async |written: &[Firing]| self.inner.fire(written).await)
            .await
    }

    /// Forwarded without a fault (and without a draw from the seeded stream): its failure
    /// only leaves a firing unmarked, to be sent again, as a change in the send window does.
    async fn firings_sent(&self, firings: &[Firing]) -> Result<(), StoreError> {
        self.inner.firings_sent(firings).await
    }

    fn fired_run_listing(&self) -> sked_core::ports::FiredRunListing {
        self.inner.fired_run_listing()
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        self.before("insert_run").await?;
        let r = self.inner.insert_run(run).await;
        self.after("insert_run", r)
    }

    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        self.before("get_run").await?;
        self.inner.get_run(tenant, run_id).await
    }

    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        self.before("list_runs").await?;
        self.inner.list_runs(tenant, filter, page).await
    }

    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError> {
        self.before("active_runs").await?;
        self.inner.active_runs(jobs, scheduled_by).await
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        // Forwarded whole, so the checks and the claims stay one step of the inner store.
        self.before("claim").await?;
        let answers = self.inner.claim(batch).await?;
        Ok(answers.into_iter().map(|answer| self.after("claim", answer)).collect())
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError> {
        self.before("heartbeat").await?;
        let r = self.inner.heartbeat(tenant, run_id, token, now, lease_until).await;
        self.after("heartbeat", r)
    }

    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError> {
        self.before("complete").await?;
        let r = self.inner.complete(done).await;
        self.after("complete", r)
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        self.before("cancel_run").await?;
        let r = self.inner.cancel_run(tenant, run_id, now, reason).await;
        self.after("cancel_run", r)
    }

    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError> {
        self.before("defer_pending").await?;
        let r = self.inner.defer_pending(tenant, run_id, until).await;
        self.after("defer_pending", r)
    }

    async fn take_settings(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        settings: &RunSettings,
    ) -> Result<Option<Run>, StoreError> {
        self.before("take_settings").await?;
        let r = self.inner.take_settings(tenant, run_id, settings).await;
        self.after("take_settings", r)
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.before("expired_leases").await?;
        self.inner.expired_leases(now, limit).await
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.before("stale_pending").await?;
        self.inner.stale_pending(ready_before, limit).await
    }

    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        window: (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        self.before("skip_records").await?;
        self.inner.skip_records(tenant, job_id, window, limit).await
    }

    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError> {
        self.before("record_skips").await?;
        self.inner.record_skips(tenant, job_id, records).await
    }

    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        self.before("dependents").await?;
        self.inner.dependents(tenant, job_id).await
    }

    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        self.before("expired_waits").await?;
        self.inner.expired_waits(now, limit).await
    }

    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        self.before("expire_wait").await?;
        let r = self.inner.expire_wait(wait, now).await;
        self.after("expire_wait", r)
    }

    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        self.before("due_alerts").await?;
        let r = self.inner.due_alerts(now, limit).await;
        self.after("due_alerts", r)
    }

    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError> {
        self.before("save_alert").await?;
        let r = self.inner.save_alert(key, expected, alert).await;
        self.after("save_alert", r)
    }
}
