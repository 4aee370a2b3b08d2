//! [`MemStore`]: the in-memory [`JobStore`], and the [`QuotaStore`] its transactions read.
//!
//! A real implementation of the port, not a mock: it keeps every promise of the trait doc
//! and passes the store contract suite, so simulations over it behave like SQLite or
//! DynamoDB. Every timestamp is truncated to milliseconds on write, as the durable stores
//! do. All state sits behind one std `Mutex`, never held across an `.await`; each method
//! is one critical section, which is what makes `create_jobs` and `fire` atomic.
//!
//! [`MemStore::lean`] fires one-shots as the lean DynamoDB layout does
//! ([`sked_core::unwritten_firing`]): a one-shot's plain firing writes nothing but a mark of
//! the job as stored (any later write of the job ends it), which the next sweep's `due_jobs`
//! passes (as DynamoDB's sweeper passes
//! its watermark over the due buckets it sent); from then on every read shows the job and the
//! run as if the firing had been written, and the first write that touches either puts them
//! first. Until then — the send window — the job reads as not fired yet, a change writes the
//! job alone, and a claim of the occurrence (its message is out) puts its run from the job if
//! the job still has it. Such a run is listed across jobs once written
//! ([`FiredRunListing::OnceWritten`]) and, once written, is in no index the reaper reads —
//! neither `expired_leases` nor `stale_pending` answer it — as on DynamoDB: its queue message
//! alone carries it (a worker's death shows the message again, and the next claim takes the
//! run over). The same contract (but
//! for that window), so the contract suites and the simulation check that store's semantics
//! here.

use async_trait::async_trait;
use sked_core::alert::{Alert, AlertKey, DueAlert, WebhookSecret};
use sked_core::dependency::{self, DependencyTx, Wait};
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobState};
use sked_core::ledger::SkipRecord;
use sked_core::lifecycle::{ClaimStep, ClaimTx, REPLACED, claim_batch};
use sked_core::ports::store::{
    ClaimBatch, ClaimOutcome, Completion, Ended, Firing, JobClaim, JobFilter, JobStore, Page, PageRequest, RunFilter,
    StoreError,
};
use sked_core::ports::{FiredRunListing, QuotaStore, WebhookSecrets};
use sked_core::quota::{self, Quota};
use sked_core::run::{Run, RunState};
use sked_core::run_settings::RunSettings;
use sked_core::timestamp::{Timestamp, trunc_ms};
use sked_core::unwritten_firing;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// Jobs, runs and idempotency keys in memory.
#[derive(Debug, Default)]
pub struct MemStore {
    /// Everything, behind one lock.
    state: Mutex<State>,
    /// What a test has happen just before the next `defer_pending` ([`MemStore::before_next_defer`]).
    before_defer: Mutex<Option<Interleaved>>,
}

/// A step a test interleaves into a call, on the store's state.
struct Interleaved(Box<dyn FnOnce(&mut State) + Send>);

impl std::fmt::Debug for Interleaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interleaved")
    }
}

/// The store's tables.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Jobs by (tenant, id); the BTreeMap keeps them in listing order.
    pub(super) jobs: BTreeMap<(TenantId, JobId), Job>,
    /// Runs by (tenant, run id).
    pub(super) runs: HashMap<(TenantId, RunId), Run>,
    /// `(tenant, key) → (fingerprint, job ids)`.
    idempotency: HashMap<(TenantId, String), (String, Vec<JobId>)>,
    /// Last fencing token handed out (tokens are unique store-wide, so they grow per run too).
    last_token: u64,
    /// Quotas by tenant.
    quotas: HashMap<TenantId, Quota>,
    /// Waiting `after` occurrences: (tenant, job, nominal time) → deadline.
    waits: BTreeMap<(TenantId, JobId, Timestamp), Timestamp>,
    /// Skip records by (tenant, job, from).
    skips: BTreeMap<(TenantId, JobId, Timestamp), SkipRecord>,
    /// Webhook secrets by tenant.
    webhook_secrets: HashMap<TenantId, WebhookSecret>,
    /// Whether one-shots' plain firings are left unwritten ([`MemStore::lean`]).
    pub(super) lean: bool,
    /// The jobs whose firing was left unwritten, its run not (yet) reported in the queue,
    /// with the job as stored then. Each mark holds while the job is stored exactly so: any
    /// write of the job ends it (a firing's too, which moves no version), as a write files a
    /// DynamoDB job again past the watermark.
    pub(super) unsent: HashMap<(TenantId, JobId), Job>,
    /// The jobs whose firing was left unwritten and its run sent, not yet passed by a sweep
    /// (the send window), with the job as stored then.
    pub(super) sending: HashMap<(TenantId, JobId), Job>,
    /// The jobs whose firing was left unwritten and passed by a sweep, with the job as stored
    /// then.
    pub(super) sent: HashMap<(TenantId, JobId), Job>,
    /// The runs first written from a firing left unwritten (by their claim, or by a write that
    /// settled the firing). Like DynamoDB's (`codec::KEYED`) they are in no index the reaper
    /// reads: `expired_leases` and `stale_pending` never answer them, and their queue messages
    /// alone carry them to their end.
    pub(super) carried: HashSet<(TenantId, RunId)>,
}

impl State {
    /// Writes skip records of a job, each replacing the one with the same `from`.
    fn record_skips(&mut self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) {
        for r in records {
            let mut r = r.clone();
            (r.from, r.to) = (trunc_ms(r.from), trunc_ms(r.to));
            self.skips.insert((tenant.clone(), job_id.clone(), r.from), r);
        }
    }
}

impl State {
    /// The tenant's jobs that count against `max_active_jobs`.
    fn active_jobs(&self, tenant: &TenantId) -> u64 {
        self.job_views()
            .filter(|j| &j.tenant == tenant && quota::counts_as_active(j.state))
            .count() as u64
    }

    /// The tenant's runs holding a slot of `max_concurrent_runs` at `now`.
    fn occupied_slots(&self, tenant: &TenantId, now: Timestamp) -> u64 {
        self.runs
            .values()
            .filter(|r| &r.tenant == tenant && quota::occupies_slot(r, now))
            .count() as u64
    }

    /// The tenant's runs holding concurrency `key` at `now`.
    fn key_holders(&self, tenant: &TenantId, key: &str, now: Timestamp) -> u64 {
        self.runs
            .values()
            .filter(|r| &r.tenant == tenant && r.concurrency.as_ref().is_some_and(|c| c.key == key))
            .filter(|r| quota::occupies_slot(r, now))
            .count() as u64
    }

    /// The refusal of a write that takes `tenant`'s active jobs from `before` to `after`.
    fn check_active_jobs(&self, tenant: &TenantId, before: u64, after: u64) -> Result<(), StoreError> {
        match self.quotas.get(tenant) {
            Some(q) => match quota::active_jobs_refusal(q, tenant, before, after) {
                Some(refusal) => Err(StoreError::QuotaExceeded(refusal)),
                None => Ok(()),
            },
            None => Ok(()),
        }
    }
}

/// The store's state as a step interleaved by a test sees it ([`MemStore::before_next_defer`]).
pub struct MemState<'a>(&'a mut State);

impl MemState<'_> {
    /// A job, to change in place.
    pub fn job_mut(&mut self, tenant: &TenantId, id: &JobId) -> Option<&mut Job> {
        let key = (tenant.clone(), id.clone());
        self.0.settle(&key);
        self.0.jobs.get_mut(&key)
    }

    /// A run, to change in place.
    pub fn run_mut(&mut self, tenant: &TenantId, run_id: &RunId) -> Option<&mut Run> {
        self.0.settle_job_of(tenant, run_id);
        self.0.run_mut(tenant, run_id)
    }
}

impl State {
    /// A run, to change in place.
    pub(crate) fn run_mut(&mut self, tenant: &TenantId, run_id: &RunId) -> Option<&mut Run> {
        self.runs.get_mut(&(tenant.clone(), run_id.clone()))
    }

    /// `run` as just written, with what it released if it ended ([`dependency::release`]).
    pub(crate) fn ended(&mut self, run: Run) -> Result<Ended, StoreError> {
        let released = if run.state.is_terminal() {
            dependency::release(&mut Locked(self), &run)?
        } else {
            Vec::new()
        };
        Ok(Ended { run, released })
    }
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that leaves one-shots' plain firings unwritten, as the lean DynamoDB
    /// layout does ([`unwritten_firing`]); it answers every call as [`MemStore::new`]'s does.
    pub fn lean() -> Self {
        let store = Self::default();
        store.lock().lean = true;
        store
    }

    /// Number of runs (all tenants, as read), for assertions.
    pub fn run_count(&self) -> usize {
        self.lock().run_views().count()
    }

    /// Every run (all tenants, as read), for invariant checks in simulations.
    pub fn all_runs(&self) -> Vec<Run> {
        self.lock().run_views().collect()
    }

    /// Number of runs that unwritten firings stand for, for assertions.
    pub fn unwritten_run_count(&self) -> usize {
        self.lock().unwritten_runs().count()
    }

    /// Has another caller's write land just before the next `defer_pending` takes effect (a
    /// race test): `step` changes the state first, in the same lock.
    pub fn before_next_defer(&self, step: impl FnOnce(&mut MemState<'_>) + Send + 'static) {
        let step = Box::new(move |state: &mut State| step(&mut MemState(state)));
        *self.before_defer.lock().expect("hook lock") = Some(Interleaved(step));
    }

    /// Every job (all tenants, deleted ones too, as read), for invariant checks in simulations.
    pub fn all_jobs(&self) -> Vec<Job> {
        self.lock().job_views().collect()
    }

    /// The store's state, locked (for a step of [`super::MemWork`] made with the queue's).
    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn conflict(msg: impl Into<String>) -> StoreError {
    StoreError::Conflict(msg.into())
}

fn trunc_job(job: &Job) -> Job {
    let mut j = job.clone();
    j.next_fire_at = j.next_fire_at.map(trunc_ms);
    j.created_at = trunc_ms(j.created_at);
    j.updated_at = trunc_ms(j.updated_at);
    j
}

fn trunc_run(run: &Run) -> Run {
    let mut r = run.clone();
    r.scheduled_for = trunc_ms(r.scheduled_for);
    r.not_before = trunc_ms(r.not_before);
    r.created_at = trunc_ms(r.created_at);
    r.started_at = r.started_at.map(trunc_ms);
    r.finished_at = r.finished_at.map(trunc_ms);
    for a in &mut r.attempts {
        a.started_at = trunc_ms(a.started_at);
        a.finished_at = a.finished_at.map(trunc_ms);
    }
    if let Some(l) = &mut r.lease {
        l.expires_at = trunc_ms(l.expires_at);
    }
    r
}

/// Parses a run listing cursor `<scheduled_for ms>|<run id>`.
fn parse_run_cursor(c: &str) -> Result<(i64, RunId), StoreError> {
    let (ms, id) = c
        .split_once('|')
        .ok_or_else(|| StoreError::BadCursor("malformed run cursor".into()))?;
    let ms = ms
        .parse()
        .map_err(|_| StoreError::BadCursor("malformed run cursor".into()))?;
    Ok((ms, RunId(id.to_string())))
}

#[async_trait]
impl JobStore for MemStore {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        let mut st = self.lock();
        let mut seen = std::collections::HashSet::new();
        for job in jobs {
            let key = (job.tenant.clone(), job.id.clone());
            if !seen.insert(key.clone()) {
                return Err(conflict(format!("job {} appears twice in the batch", job.id)));
            }
            if st.job_view(&key).is_some_and(|j| j.state != JobState::Deleted) {
                return Err(conflict(format!("job {} exists", job.id)));
            }
        }
        let idem = match (idempotency, jobs.first()) {
            (Some((key, fp)), Some(first)) => {
                let k = (first.tenant.clone(), key.to_string());
                if st.idempotency.contains_key(&k) {
                    return Err(conflict(format!("idempotency key {key} already recorded")));
                }
                Some((k, fp.to_string()))
            }
            _ => None,
        };
        for tenant in jobs
            .iter()
            .map(|j| &j.tenant)
            .collect::<std::collections::BTreeSet<_>>()
        {
            let before = st.active_jobs(tenant);
            let replaced = jobs
                .iter()
                .filter(|j| &j.tenant == tenant)
                .filter(|j| {
                    st.job_view(&(j.tenant.clone(), j.id.clone()))
                        .is_some_and(|old| quota::counts_as_active(old.state))
                })
                .count() as u64;
            let added = jobs
                .iter()
                .filter(|j| &j.tenant == tenant && quota::counts_as_active(j.state))
                .count() as u64;
            st.check_active_jobs(tenant, before, before - replaced + added)?;
        }
        for job in jobs {
            let key = (job.tenant.clone(), job.id.clone());
            st.settle(&key);
            st.jobs.insert(key, trunc_job(job));
        }
        if let Some((k, fp)) = idem {
            st.idempotency
                .insert(k, (fp, jobs.iter().map(|j| j.id.clone()).collect()));
        }
        Ok(())
    }

    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError> {
        Ok(self.lock().idempotency.get(&(tenant.clone(), key.to_string())).cloned())
    }

    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        let st = self.lock();
        Ok(ids.iter().map(|key| st.job_view(key)).collect())
    }

    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let key = (job.tenant.clone(), job.id.clone());
        let stored = st.job_view(&key).ok_or(StoreError::NotFound)?;
        if stored.version != expected_version {
            return Err(conflict(format!(
                "job {} is at version {}, not {expected_version}",
                job.id, stored.version
            )));
        }
        if stored.next_fire_at != expected_next_fire_at.map(trunc_ms) {
            return Err(conflict(format!("job {} was swept meanwhile", job.id)));
        }
        if !quota::counts_as_active(stored.state) && quota::counts_as_active(job.state) {
            let before = st.active_jobs(&job.tenant);
            st.check_active_jobs(&job.tenant, before, before + 1)?;
        }
        st.settle(&key);
        st.jobs.insert(key, trunc_job(job));
        Ok(())
    }

    async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, StoreError> {
        let st = self.lock();
        let after = page.cursor.as_deref().map(|c| JobId(c.to_string()));
        let mut matching = st
            .job_views()
            .filter(|j| &j.tenant == tenant)
            .filter(|j| after.as_ref().is_none_or(|a| &j.id > a))
            .filter(|j| match filter.state {
                Some(s) => j.state == s,
                None => j.state != JobState::Deleted,
            })
            .filter(|j| filter.labels.iter().all(|(k, v)| j.spec.labels.get(k) == Some(v)));
        let items: Vec<Job> = matching.by_ref().take(page.limit).collect();
        let more = matching.next().is_some();
        let next_cursor = if more {
            items.last().map(|j| j.id.0.clone())
        } else {
            None
        };
        Ok(Page { items, next_cursor })
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        let mut st = self.lock();
        st.pass_sent();
        let mut due: Vec<Job> = st
            .job_views()
            .filter(|j| j.state == JobState::Active && j.next_fire_at.is_some_and(|t| t <= horizon))
            .collect();
        due.sort_by(|a, b| (a.next_fire_at, &a.tenant, &a.id).cmp(&(b.next_fire_at, &b.tenant, &b.id)));
        due.truncate(limit);
        Ok(due)
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let st = self.lock();
        Ok(st
            .job_views()
            .filter(|j| j.state == JobState::Active)
            .filter_map(|j| j.next_fire_at)
            .min())
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        let mut st = self.lock();
        Ok(firings.iter().map(|firing| fire_locked(&mut st, firing)).collect())
    }

    fn fired_run_listing(&self) -> FiredRunListing {
        match self.lock().lean {
            true => FiredRunListing::OnceWritten,
            false => FiredRunListing::AtFiring,
        }
    }

    async fn firings_sent(&self, firings: &[Firing]) -> Result<(), StoreError> {
        let mut st = self.lock();
        for firing in firings {
            st.mark_sending(&(firing.tenant.clone(), firing.job_id.clone()));
        }
        Ok(())
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        Locked(&mut self.lock()).insert_run(run)
    }

    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        Ok(self.lock().run_view(tenant, run_id))
    }

    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        let after = page.cursor.as_deref().map(parse_run_cursor).transpose()?;
        let st = self.lock();
        // Across jobs, a run an unwritten firing shows is listed once written, as DynamoDB's
        // `list` index lists it ([`FiredRunListing::OnceWritten`]); its job's runs show it.
        let runs = match (st.lean, &filter.job_id) {
            (true, None) => Box::new(st.runs.values().cloned()) as Box<dyn Iterator<Item = Run>>,
            _ => Box::new(st.run_views()),
        };
        let mut runs: Vec<Run> = runs
            .filter(|r| &r.tenant == tenant)
            .filter(|r| filter.job_id.as_ref().is_none_or(|j| &r.job_id == j))
            .filter(|r| filter.state.is_none_or(|s| r.state == s))
            .filter(|r| filter.since.is_none_or(|t| r.scheduled_for >= t))
            .filter(|r| filter.until.is_none_or(|t| r.scheduled_for < t))
            .filter(|r| match &after {
                // Descending order: the next page holds keys strictly below the cursor.
                Some((ms, id)) => (r.scheduled_for.timestamp_millis(), &r.run_id) < (*ms, id),
                None => true,
            })
            .collect();
        runs.sort_by(|a, b| (b.scheduled_for, &b.run_id).cmp(&(a.scheduled_for, &a.run_id)));
        let more = runs.len() > page.limit;
        runs.truncate(page.limit);
        let items = runs;
        let next_cursor = if more {
            items
                .last()
                .map(|r| format!("{}|{}", r.scheduled_for.timestamp_millis(), r.run_id))
        } else {
            None
        };
        Ok(Page { items, next_cursor })
    }

    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError> {
        let st = self.lock();
        Ok(jobs
            .iter()
            .map(|(tenant, job_id)| sked_core::ports::scheduled_up_to(active_locked(&st, tenant, job_id), scheduled_by))
            .collect())
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        // The whole batch under one lock, as a transaction would make it.
        let mut st = self.lock();
        claim_batch(&mut Locked(&mut st), batch)
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError> {
        let mut st = self.lock();
        let Some(run) = st.runs.get_mut(&(tenant.clone(), run_id.clone())) else {
            return Err(st.no_stored_attempt(tenant, run_id));
        };
        run.renew_lease(token, now, lease_until)?;
        Ok(run.clone())
    }

    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError> {
        complete_locked(&mut self.lock(), done)
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        let mut st = self.lock();
        st.settle_job_of(tenant, run_id);
        let run = st
            .runs
            .get_mut(&(tenant.clone(), run_id.clone()))
            .ok_or(StoreError::NotFound)?;
        if !run.request_cancel(now, reason) {
            let run = run.clone();
            return Ok(Ended {
                run,
                released: Vec::new(),
            });
        }
        let run = run.clone();
        st.ended(run)
    }

    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError> {
        let interleaved = self.before_defer.lock().expect("hook lock").take();
        let mut st = self.lock();
        if let Some(Interleaved(step)) = interleaved {
            step(&mut st);
        }
        st.settle_job_of(tenant, run_id);
        Ok(st
            .runs
            .get_mut(&(tenant.clone(), run_id.clone()))
            .is_some_and(|run| run.defer(until)))
    }

    async fn take_settings(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        settings: &RunSettings,
    ) -> Result<Option<Run>, StoreError> {
        let mut st = self.lock();
        st.settle_job_of(tenant, run_id);
        let run = st.runs.get_mut(&(tenant.clone(), run_id.clone()));
        Ok(run.and_then(|run| run.take_settings(settings).then(|| run.clone())))
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let st = self.lock();
        let mut runs: Vec<&Run> = st
            .runs
            .values()
            .filter(|r| r.state == RunState::Running && r.lease_expired(now))
            .filter(|r| !st.carried.contains(&(r.tenant.clone(), r.run_id.clone())))
            .collect();
        runs.sort_by_key(|r| (r.lease.as_ref().map(|l| l.expires_at), r.run_id.clone()));
        Ok(runs.into_iter().take(limit).cloned().collect())
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let st = self.lock();
        // Neither a run an unwritten firing shows nor one it put (`carried`): its message was
        // out before the firing counted, and carries it.
        let mut runs: Vec<Run> = st
            .runs
            .values()
            .filter(|r| r.state == RunState::Pending && r.not_before <= ready_before)
            .filter(|r| !st.carried.contains(&(r.tenant.clone(), r.run_id.clone())))
            .cloned()
            .collect();
        runs.sort_by(|a, b| {
            (a.not_before, a.scheduled_for, &a.run_id).cmp(&(b.not_before, b.scheduled_for, &b.run_id))
        });
        runs.truncate(limit);
        Ok(runs)
    }

    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        (since, until): (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        let st = self.lock();
        let (lo, hi) = (
            (tenant.clone(), job_id.clone(), Timestamp::MIN_UTC),
            (tenant.clone(), job_id.clone(), until),
        );
        Ok(st
            .skips
            .range(lo..hi)
            .rev()
            .map(|(_, r)| r)
            .filter(|r| r.to >= since)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError> {
        self.lock().record_skips(tenant, job_id, records);
        Ok(())
    }

    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        let st = self.lock();
        Ok(dependents_locked(&st, tenant, job_id)
            .into_iter()
            .map(|j| j.id)
            .collect())
    }

    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        let st = self.lock();
        let mut waits: Vec<Wait> = st
            .waits
            .iter()
            .filter(|(_, deadline)| **deadline < now)
            .map(|((tenant, job_id, t), deadline)| Wait {
                tenant: tenant.clone(),
                job_id: job_id.clone(),
                scheduled_for: *t,
                deadline: *deadline,
            })
            .collect();
        waits.sort_by(|a, b| (a.deadline, &a.job_id).cmp(&(b.deadline, &b.job_id)));
        waits.truncate(limit);
        Ok(waits)
    }

    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        dependency::expire(&mut Locked(&mut self.lock()), wait, now)
    }

    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        let st = self.lock();
        let runs = st.runs.values().map(|r| DueAlert::Run(r.clone()));
        let skips = st.skips.iter().map(|((tenant, job_id, _), record)| DueAlert::Skipped {
            tenant: tenant.clone(),
            job_id: job_id.clone(),
            record: record.clone(),
        });
        let due: Vec<(Timestamp, DueAlert)> = runs
            .chain(skips)
            .filter_map(|d| Some((d.alert()?.due?, d)))
            .filter(|(due, _)| *due <= now)
            .collect();
        Ok(sked_core::alert::earliest_first(due, limit))
    }

    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let current = match key {
            AlertKey::Run { tenant, run_id } => st.run_mut(tenant, run_id).and_then(|r| r.alert.as_mut()),
            AlertKey::Skipped { tenant, job_id, from } => st
                .skips
                .get_mut(&(tenant.clone(), job_id.clone(), trunc_ms(*from)))
                .and_then(|r| r.alert.as_mut()),
        };
        match current {
            Some(current) if current.due == Some(trunc_ms(expected)) => {
                *current = alert.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[async_trait]
impl WebhookSecrets for MemStore {
    async fn webhook_secret(&self, tenant: &TenantId) -> Result<Option<WebhookSecret>, StoreError> {
        Ok(self.lock().webhook_secrets.get(tenant).cloned())
    }

    async fn put_webhook_secret(&self, tenant: &TenantId, secret: &WebhookSecret) -> Result<(), StoreError> {
        self.lock().webhook_secrets.insert(tenant.clone(), secret.clone());
        Ok(())
    }
}

/// [`JobStore::complete`] on the locked state.
pub(crate) fn complete_locked(st: &mut State, done: &Completion) -> Result<Ended, StoreError> {
    let Some(run) = st.runs.get_mut(&(done.tenant.clone(), done.run_id.clone())) else {
        return Err(st.no_stored_attempt(&done.tenant, &done.run_id));
    };
    run.finish_attempt(done.token, &done.result, done.next, done.only_if_expired_by)?;
    let run = run.clone();
    st.ended(run)
}

/// The tenant's live jobs whose `after` names `upstream`, in id order.
fn dependents_locked(st: &State, tenant: &TenantId, upstream: &JobId) -> Vec<Job> {
    st.jobs
        .values()
        .filter(|j| &j.tenant == tenant && j.state != JobState::Deleted)
        .filter(|j| j.spec.schedule.after().is_some_and(|a| a.jobs.contains(upstream)))
        .cloned()
        .collect()
}

/// One firing ([`JobStore::fire`]) on the locked state.
pub(crate) fn fire_locked(st: &mut State, firing: &Firing) -> Result<Vec<Run>, StoreError> {
    let key = (firing.tenant.clone(), firing.job_id.clone());
    let job = st.job_view(&key).ok_or(StoreError::NotFound)?;
    if !firing.still_applies_to(&job) {
        return Err(conflict(format!("job {} moved on", firing.job_id)));
    }
    if st.lean && unwritten_firing::can_leave_unwritten(&job, firing) {
        st.unsent.insert(key.clone(), job.clone());
        // Its run, unless one of its id is stored: then nothing is sent, as a written
        // firing would insert nothing.
        let run = unwritten_firing::due_run(&job);
        let stored = |r: &Run| st.runs.contains_key(&(r.tenant.clone(), r.run_id.clone()));
        return Ok(run.filter(|r| !stored(r)).into_iter().collect());
    }
    st.settle(&key);
    let mut released = Vec::new();
    for id in &firing.cancel {
        if let Some(run) = st.runs.get_mut(&(firing.tenant.clone(), id.clone()))
            && run.request_cancel(firing.at, REPLACED)
        {
            let run = run.clone();
            released.extend(st.ended(run)?.released);
        }
    }
    let mut inserted = Vec::new();
    for run in &firing.runs {
        let k = (run.tenant.clone(), run.run_id.clone());
        if let std::collections::hash_map::Entry::Vacant(slot) = st.runs.entry(k) {
            inserted.push(slot.insert(trunc_run(run)).clone());
        }
    }
    // The runs the cancellations released, to enqueue with the firing's.
    inserted.extend(released.into_iter().filter(|r| r.state == RunState::Pending));
    let job = st.jobs.get_mut(&key).ok_or(StoreError::NotFound)?;
    job.next_fire_at = firing.next_fire_at.map(trunc_ms);
    job.state = firing.state;
    st.record_skips(&firing.tenant, &firing.job_id, &firing.skipped);
    Ok(inserted)
}

/// The locked state as a claim's transaction.
pub(crate) struct Locked<'a>(pub(crate) &'a mut State);

impl ClaimTx for Locked<'_> {
    type Error = StoreError;

    fn job(&mut self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, StoreError> {
        Ok(self.0.job_view(&(tenant.clone(), id.clone())))
    }

    fn active_runs(&mut self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, StoreError> {
        Ok(active_locked(self.0, tenant, job_id))
    }

    fn run(&mut self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        Ok(self.0.run_view(tenant, run_id))
    }

    fn claim_run(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        owner: &WorkerId,
        batch: &ClaimBatch,
    ) -> Result<Result<ClaimOutcome, StoreError>, StoreError> {
        Ok(claim_locked(self.0, (tenant, run_id), owner, batch))
    }
}

impl DependencyTx for Locked<'_> {
    fn downstream_jobs(&mut self, tenant: &TenantId, upstream: &JobId) -> Result<Vec<Job>, StoreError> {
        Ok(dependents_locked(self.0, tenant, upstream))
    }

    fn insert_run(&mut self, run: &Run) -> Result<bool, StoreError> {
        let k = (run.tenant.clone(), run.run_id.clone());
        if self.0.run_view(&run.tenant, &run.run_id).is_some() {
            return Ok(false);
        }
        self.0.runs.insert(k, trunc_run(run));
        Ok(true)
    }

    fn put_wait(&mut self, wait: &Wait) -> Result<(), StoreError> {
        let k = (wait.tenant.clone(), wait.job_id.clone(), trunc_ms(wait.scheduled_for));
        self.0.waits.entry(k).or_insert(trunc_ms(wait.deadline));
        Ok(())
    }

    fn delete_wait(&mut self, tenant: &TenantId, job_id: &JobId, scheduled_for: Timestamp) -> Result<(), StoreError> {
        self.0
            .waits
            .remove(&(tenant.clone(), job_id.clone(), trunc_ms(scheduled_for)));
        Ok(())
    }
}

/// [`JobStore::active_runs`] of one job on the locked state.
fn active_locked(st: &State, tenant: &TenantId, job_id: &JobId) -> Vec<Run> {
    let mut runs: Vec<Run> = st
        .runs
        .values()
        .filter(|r| &r.tenant == tenant && &r.job_id == job_id && !r.state.is_terminal())
        .cloned()
        .chain(st.unwritten_run(&(tenant.clone(), job_id.clone())))
        .collect();
    runs.sort_by(|a, b| (a.scheduled_for, &a.run_id).cmp(&(b.scheduled_for, &b.run_id)));
    runs
}

/// [`JobStore::claim`] on the locked state.
fn claim_locked(
    st: &mut State,
    (tenant, run_id): (&TenantId, &RunId),
    owner: &WorkerId,
    batch: &ClaimBatch,
) -> Result<ClaimOutcome, StoreError> {
    let (now, lease_until) = (trunc_ms(batch.now), trunc_ms(batch.lease_until));
    let next_token = st.last_token + 1;
    let key = (tenant.clone(), run_id.clone());
    // A run an unwritten firing stands for is put by its claim's write.
    // Put here from a firing left unwritten, if this claim writes it.
    let first_write = st.lean && !st.runs.contains_key(&key);
    let mut run = st
        .run_view(tenant, run_id)
        .or_else(|| st.claimed_from_job(tenant, run_id))
        .ok_or(StoreError::NotFound)?;
    if let ClaimStep::Answer { outcome, changed } = run.decide_claim(now) {
        if changed {
            if first_write {
                st.carried.insert(key.clone());
            }
            st.runs.insert(key, run.clone());
            // Ended here: what it releases is enqueued by the repair pass.
            st.ended(run)?;
        }
        return Ok(outcome);
    }
    if let Some(q) = st.quotas.get(tenant)
        && quota::at_capacity(q, st.occupied_slots(tenant, now))
    {
        return Ok(ClaimOutcome::AtCapacity);
    }
    if let Some(concurrency) = &run.concurrency
        && concurrency.full(st.key_holders(tenant, &concurrency.key, now))
    {
        return Ok(ClaimOutcome::KeyAtLimit {
            key: concurrency.key.clone(),
        });
    }
    run.start_attempt(owner, now, lease_until, next_token);
    if first_write {
        st.carried.insert(key.clone());
    }
    st.runs.insert(key, run.clone());
    st.last_token = next_token;
    Ok(ClaimOutcome::Claimed { run, token: next_token })
}

#[async_trait]
impl QuotaStore for MemStore {
    async fn get_quota(&self, tenant: &TenantId) -> Result<Option<Quota>, StoreError> {
        Ok(self.lock().quotas.get(tenant).cloned())
    }

    async fn put_quota(&self, tenant: &TenantId, quota: &Quota) -> Result<(), StoreError> {
        self.lock().quotas.insert(tenant.clone(), quota.clone());
        Ok(())
    }
}
