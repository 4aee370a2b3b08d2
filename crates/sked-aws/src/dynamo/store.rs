//! [`DynamoStore`]: the [`JobStore`] port on one DynamoDB table (layout in [`super`]).
//!
//! Here: the store (its table, shards, retentions and clock) and the port's `impl`, with the
//! bodies short enough to read in place — jobs (create with their idempotency key, read,
//! update), runs (insert, read, heartbeat, complete, cancel, defer), the reaper's scans and
//! the ledger's and dependencies' entry points. The methods whose DynamoDB code is a concept
//! of its own call into the modules beside this one: `claim`, `firing` (the due index and
//! firings), `listing`; all of them write runs through `runs` (the read–decide–put loop) and
//! speak DynamoDB through `plumbing` (module map in [`super`]).
//!
//! Cross-tenant scans and listings read index copies (eventually consistent); every write
//! that follows one is conditional, so a stale copy costs a conflict, never a wrong write.
//!
//! This module must not hold scheduling policy: that lives in sked-core.

use super::codec::{Item, JobLayout, Reader, RunLayout, StoredRun, job_item, key, ms, n, run_from_item, s, truncated};
use super::keys::*;
use super::lone::{LONE, LoneJobs, named_in_batch};
use super::plumbing::MAX_TRANSACTION;
use super::quotas::{QuotaCache, TenantLimits};
use super::undo_create::WrittenPart;
use super::unwritten::{SETTLED, UnwrittenFirings, settled_attribute};
use super::written_runs::WrittenRuns;
use crate::config::{AwsConfig, JobKeys, RunListedState};
use crate::error::{Failure, classify};
use crate::logs::{FoldedLogs, InlineLog};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use sked_core::alert::{Alert, AlertKey, DueAlert};
use sked_core::dependency::Wait;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ledger::SkipRecord;
use sked_core::ports::store::{
    ClaimBatch, Completion, Ended, FiredRunListing, Firing, JobClaim, JobFilter, JobStore, Page, PageRequest,
    RunFilter, RunTransition, StoreError,
};
use sked_core::ports::{Clock, JobStoreExt, LogKey};
use sked_core::quota::counts_as_active;
use sked_core::run::{Run, RunState};
use sked_core::run_settings::RunSettings;
use sked_core::timestamp::{Timestamp, trunc_ms};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

// Defined in `firing`, beside the due queries they bound; public here, as they were before.
pub use super::firing::{MAX_DUE_AHEAD_MINUTES, NEXT_DUE_WINDOW_MINUTES};

/// Jobs and runs in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoStore {
    pub(super) client: Client,
    pub(super) table: String,
    pub(super) shards: u32,
    pub(super) run_retention_secs: i64,
    /// Which run items carry `state` (`codec::LISTED_STATE`).
    run_listed_state: RunListedState,
    idempotency_retention_secs: i64,
    clock: Arc<dyn Clock>,
    pub(super) quota_cache: Arc<QuotaCache>,
    pub(super) written_runs: Arc<WrittenRuns>,
    /// The jobs this process read lone ([`LoneJobs`]).
    pub(super) lone_jobs: Arc<LoneJobs>,
    /// Small finished logs this process's log writer handed over ([`FoldedLogs`]).
    folded_logs: Option<Arc<FoldedLogs>>,
    /// One-shots' firings left unwritten, if this store leaves them so
    /// ([`AwsConfig::unwritten_one_shots`], `super::unwritten`).
    pub(super) unwritten: Option<Arc<UnwrittenFirings>>,
    /// Where job items are keyed ([`AwsConfig::job_keys`]).
    pub(super) job_keys: JobKeys,
}

impl std::fmt::Debug for DynamoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoStore")
            .field("table", &self.table)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

/// Writes a finished log its completion did not fold as an item of its own; a failure is the
/// log's, not the completion's (as a writer's `finish` failing is).
async fn keep_log_alone(folded: &FoldedLogs, key: &LogKey, log: InlineLog) {
    if let Err(e) = folded.write_own_item(key, log).await {
        tracing::warn!(run_id = %key.run_id, attempt = key.attempt, error = %e, "log could not be finished");
    }
}

pub(super) fn conflict(msg: impl Into<String>) -> StoreError {
    StoreError::Conflict(msg.into())
}

impl DynamoStore {
    /// A store over `config.table`, reading time from `clock` (due-index filing and the
    /// sweeper's watermark; never a run's or job's own times, which callers pass in).
    pub fn new(client: Client, config: &AwsConfig, clock: Arc<dyn Clock>) -> Self {
        DynamoStore {
            client,
            table: config.table.clone(),
            shards: config.shards.max(1),
            run_retention_secs: config.run_retention.as_secs() as i64,
            run_listed_state: config.run_listed_state,
            idempotency_retention_secs: config.idempotency_retention.as_secs() as i64,
            clock,
            quota_cache: Arc::default(),
            written_runs: Arc::default(),
            lone_jobs: Arc::default(),
            folded_logs: None,
            unwritten: config.unwritten_one_shots.then(Arc::default),
            job_keys: config.job_keys,
        }
    }

    /// The primary key of a job's item.
    pub(super) fn job_key(&self, tenant: &str, job: &str) -> Item {
        let (pk, sk) = job_item_key(self.job_keys, tenant, job);
        key(pk, sk)
    }

    /// This store, writing the small finished logs `folded` holds into the completions that
    /// end their runs (the same process's log store hands them over).
    pub fn with_folded_logs(mut self, folded: Arc<FoldedLogs>) -> Self {
        self.folded_logs = Some(folded);
        self
    }

    /// How this store lays out job items.
    pub(super) fn job_layout(&self) -> JobLayout {
        JobLayout {
            shards: self.shards,
            keys: self.job_keys,
            run_retention_secs: self.run_retention_secs,
        }
    }

    /// How this store lays out run items.
    pub(super) fn run_layout(&self) -> RunLayout {
        RunLayout {
            shards: self.shards,
            retention_secs: self.run_retention_secs,
            listed_state: self.run_listed_state,
        }
    }

    pub(super) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The writes of a create of `jobs` (`create_jobs`) and the counter's index among them:
    /// each job's put, the idempotency key's, the tenant's active-jobs counter (if `limits`
    /// count it), then the jobs' dependency edges. With `lone`, each job no other of the batch
    /// names is written lone, on condition its item does not exist (`lone`); else on condition
    /// it does not exist or is DELETED.
    pub(super) fn create_writes(
        &self,
        jobs: &[Job],
        idempotency: Option<(&str, &str)>,
        limits: &TenantLimits,
        lone: bool,
        now: Timestamp,
    ) -> Result<(Vec<TransactWriteItem>, Option<usize>), StoreError> {
        let Some(first) = jobs.first() else {
            return Ok((Vec::new(), None));
        };
        let named = named_in_batch(jobs);
        let added = jobs.iter().filter(|j| counts_as_active(j.state)).count() as i64;
        let mut writes = Vec::with_capacity(jobs.len() + 2);
        for job in jobs {
            let mut item = job_item(job, now, &self.job_layout())?;
            writes.push(match lone && !named.contains(&(&job.tenant, &job.id)) {
                true => {
                    item.insert(LONE.into(), AttributeValue::Bool(true));
                    self.put(item, "attribute_not_exists(pk)", vec![])?
                }
                false => self.put(
                    item,
                    "attribute_not_exists(pk) OR #st = :deleted",
                    vec![(":deleted", s(JobState::Deleted.as_str()))],
                )?,
            });
        }
        if let Some((k, fingerprint)) = idempotency {
            let mut item = key(idem_pk(first.tenant.as_str(), k), IDEM_SK.into());
            item.extend([
                ("kind".to_string(), s("idempotency")),
                ("fingerprint".into(), s(fingerprint)),
                (
                    "job_ids".into(),
                    AttributeValue::L(jobs.iter().map(|j| s(j.id.as_str())).collect()),
                ),
                ("created_at".into(), n(ms(first.created_at))),
                (
                    TTL.into(),
                    n(first.created_at.timestamp() + self.idempotency_retention_secs),
                ),
            ]);
            writes.push(self.put(item, "attribute_not_exists(pk)", vec![])?);
        }
        // Last, so that its index tells a refusal of the quota from a conflict.
        let counter = self.active_jobs_write(&first.tenant, limits, added)?;
        let counter_index = counter.is_some().then_some(writes.len());
        writes.extend(counter);
        // The jobs' dependency edges, unconditional (after the writes that can be refused).
        for job in jobs {
            writes.extend(self.edge_writes(job)?);
        }
        Ok((writes, counter_index))
    }
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        let Some(first) = jobs.first() else {
            return Ok(());
        };
        self.end_lone_upstreams(jobs).await?;
        let now = self.now();
        let limits = self.tenant_limits(&first.tenant).await?;
        let added = jobs.iter().filter(|j| counts_as_active(j.state)).count() as i64;
        let writes_of = |lone: bool| self.create_writes(jobs, idempotency, &limits, lone, now);
        let (writes, counter_index) = writes_of(false)?;
        let describe = |failed: &[usize]| match failed.first() {
            Some(&i) if i < jobs.len() => format!("job {} exists", jobs[i].id),
            Some(_) => format!(
                "idempotency key {} already recorded",
                idempotency.map(|(k, _)| k).unwrap_or_default()
            ),
            None => "conflict".into(),
        };
        let refusal = async |failed: &[usize]| {
            if failed.iter().any(|i| Some(*i) == counter_index) {
                self.active_jobs_refused(&first.tenant, &limits, added).await
            } else {
                conflict(describe(failed))
            }
        };
        if writes.len() <= MAX_TRANSACTION {
            // Lone first; a job whose item exists (DELETED, or a conflict) makes the batch
            // go again as before, not lone.
            match self.transact(writes_of(true)?.0).await {
                Ok(()) => {
                    // Written lone: a firing by this process (a direct one) marks its runs so.
                    let named = named_in_batch(jobs);
                    let lone = jobs.iter().filter(|j| !named.contains(&(&j.tenant, &j.id)));
                    self.lone_jobs.note_written(lone);
                    return Ok(());
                }
                Err(Failure::Condition { failed_items, .. }) if failed_items.iter().any(|&i| i < jobs.len()) => {}
                Err(Failure::Condition { failed_items, .. }) => return Err(refusal(&failed_items).await),
                Err(f) => return Err(f.into_store(String::new)),
            }
            return match self.transact(writes).await {
                Ok(()) => Ok(()),
                Err(Failure::Condition { failed_items, .. }) => Err(refusal(&failed_items).await),
                Err(f) => Err(f.into_store(String::new)),
            };
        }
        // Larger than one transaction: write in chunks, and undo what the chunks already
        // written wrote if a later one is refused (`undo_create`). Not atomic against a
        // reader that looks in between; documented in the module header.
        let mut done = 0;
        let chunks: Vec<Vec<TransactWriteItem>> = writes.chunks(MAX_TRANSACTION).map(<[_]>::to_vec).collect();
        for chunk in chunks {
            let len = chunk.len();
            if let Err(f) = self.transact(chunk).await {
                self.undo_written_part(WrittenPart {
                    jobs,
                    committed: done,
                    idempotency,
                    counter: counter_index.map(|index| (index, &limits, added)),
                })
                .await;
                return Err(match f {
                    Failure::Condition { failed_items, .. } => {
                        refusal(&failed_items.iter().map(|i| i + done).collect::<Vec<_>>()).await
                    }
                    f => f.into_store(String::new),
                });
            }
            done += len;
        }
        Ok(())
    }

    async fn create_fired(
        &self,
        job: &Job,
        idempotency: Option<(&str, &str)>,
        firing: &Firing,
    ) -> Option<Result<Vec<Run>, StoreError>> {
        self.write_created_fired(job, idempotency, firing).await
    }

    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key_name: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError> {
        let Some(item) = self
            .get_item(key(idem_pk(tenant.as_str(), key_name), IDEM_SK.into()))
            .await?
        else {
            return Ok(None);
        };
        let r = Reader::new(&item);
        let ids = r.string_list("job_ids")?.into_iter().map(JobId).collect();
        Ok(Some((r.s("fingerprint")?, ids)))
    }

    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        let job_key = |(tenant, id): &(TenantId, JobId)| self.job_key(tenant.as_str(), id.as_str());
        if let [one] = ids {
            // One job: a GetItem (the same read unit, a smaller request).
            let item = self.get_item(job_key(one)).await?;
            self.lone_jobs.note(item.as_slice());
            return Ok(vec![self.jobs_shown(item.as_slice()).await?.pop()]);
        }
        let unique: HashSet<&(TenantId, JobId)> = ids.iter().collect();
        let items = self.batch_get(unique.into_iter().map(job_key).collect()).await?;
        self.lone_jobs.note(&items);
        let mut by_id: HashMap<(TenantId, JobId), Job> = HashMap::with_capacity(items.len());
        for job in self.jobs_shown(&items).await? {
            by_id.insert((job.tenant.clone(), job.id.clone()), job);
        }
        Ok(ids.iter().map(|id| by_id.get(id).cloned()).collect())
    }

    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        self.end_lone_upstreams(std::slice::from_ref(job)).await?;
        // Where firings may be left unwritten (`super::unwritten`).
        let change = self
            .prepare_change(&job.tenant, &job.id, expected_version, expected_next_fire_at)
            .await?;
        let expected_next_fire_at = change.expected_next_fire_at;
        let mut item = job_item(job, self.now(), &self.job_layout())?;
        if let Some(settled) = settled_attribute(change.settled) {
            item.insert(SETTLED.into(), settled);
        }
        let run_absent = change.run_absent.map(|k| self.absent_check(k)).transpose()?;
        // A sweep moves `next_fire_at` without bumping the version: a user change must not
        // undo it.
        let mut values = vec![(":v", n(expected_version))];
        let condition = match expected_next_fire_at {
            Some(t) => {
                values.push((":nfa", n(ms(t))));
                "attribute_exists(pk) AND version = :v AND next_fire_at = :nfa"
            }
            None => "attribute_exists(pk) AND version = :v AND attribute_not_exists(next_fire_at)",
        };
        // A counted tenant's change of the job's place in `active_jobs` goes with the count.
        let limits = self.tenant_limits(&job.tenant).await?;
        let delta = match limits.counting {
            true => match self.get_job(&job.tenant, &job.id).await? {
                Some(current) => i64::from(counts_as_active(job.state)) - i64::from(counts_as_active(current.state)),
                None => 0,
            },
            false => 0,
        };
        let counted = self.active_jobs_write(&job.tenant, &limits, delta)?.is_some();
        // The job's put, then the counter (if any), so that index 1 names a refused quota;
        // then the job's dependency edges, unconditional; last, the check that no item holds
        // a run a claim may be putting. A job read lone at this version stays lone, on
        // condition its item still is (`lone`); refused, it goes again as before.
        let write = async |lone: bool| {
            let (mut item, mut condition) = (item.clone(), condition.to_string());
            if lone {
                item.insert(LONE.into(), AttributeValue::Bool(true));
                condition.push_str(" AND attribute_exists(lone)");
            }
            let counter = self.active_jobs_write(&job.tenant, &limits, delta)?;
            let edges = self.edge_writes(job)?;
            Ok::<_, StoreError>(match (counter, edges.is_empty(), run_absent.clone()) {
                (None, true, None) => self.put_if(item, &condition, values.clone()).await,
                (counter, _, check) => {
                    let mut items = vec![self.put(item, &condition, values.clone())?];
                    items.extend(counter);
                    items.extend(edges);
                    items.extend(check);
                    self.transact(items).await
                }
            })
        };
        let counter_refused = |failed: &[usize]| counted && failed.contains(&1);
        let lone = match self.lone_jobs.at(&job.tenant, &job.id, expected_version) {
            true => Some(write(true).await?),
            false => None,
        };
        let written = match lone {
            // Refused on the job's own condition (not the counter's): as before.
            Some(Err(Failure::Condition { failed_items, .. })) if !counter_refused(&failed_items) => {
                write(false).await?
            }
            Some(done) => done,
            None => write(false).await?,
        };
        match written {
            Ok(()) => Ok(()),
            Err(Failure::Condition { failed_items, .. }) if counter_refused(&failed_items) => {
                Err(self.active_jobs_refused(&job.tenant, &limits, delta).await)
            }
            Err(Failure::Condition { .. }) => match self.get_job(&job.tenant, &job.id).await? {
                None => Err(StoreError::NotFound),
                Some(current) => Err(conflict(format!(
                    "job {} is at version {} (expected {expected_version}) or was swept meanwhile",
                    job.id, current.version
                ))),
            },
            Err(f) => Err(f.into_store(String::new)),
        }
    }

    async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, StoreError> {
        self.job_page(tenant, filter, page).await
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.read_due_jobs(horizon, limit).await
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.read_next_due_at().await
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        self.fire_each(firings).await
    }

    /// Marks sent the firings left unwritten (`super::unwritten`); written ones need nothing.
    async fn firings_sent(&self, firings: &[Firing]) -> Result<(), StoreError> {
        self.mark_sent(firings);
        Ok(())
    }

    /// A one-shot's run left unwritten is listed across jobs once written (`super::unwritten`:
    /// the `list` index holds run items).
    fn fired_run_listing(&self) -> FiredRunListing {
        match self.unwritten {
            Some(_) => FiredRunListing::OnceWritten,
            None => FiredRunListing::AtFiring,
        }
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        // A run an unwritten firing shows exists (`super::unwritten`).
        if self.unwritten.is_some() && self.shown_run(&run.tenant, &run.run_id, false).await?.is_some() {
            return Ok(false);
        }
        let stored = StoredRun::new(truncated(run));
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.stored_run_item(&stored)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) => match classify("dynamodb:PutItem", e, |_| None) {
                Failure::Condition { .. } => Ok(false),
                f => Err(f.into_store(String::new)),
            },
        }
    }

    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        Ok(self.load_run(tenant, run_id).await?.map(|s| s.run))
    }

    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        self.run_page(tenant, filter, page).await
    }

    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError> {
        let mut out = Vec::with_capacity(jobs.len());
        for (tenant, job_id) in jobs {
            let stored = self.active_stored_runs(tenant, job_id, scheduled_by).await?;
            out.push(stored.into_iter().map(|stored| stored.run).collect());
        }
        Ok(out)
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        self.claim_batch(batch).await
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError> {
        let lease_until = trunc_ms(lease_until);
        self.modify_run(tenant, run_id, |stored| {
            stored.run.renew_lease(token, now, lease_until)?;
            Ok((true, stored.run.clone()))
        })
        .await
    }

    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError> {
        // The attempt's small finished log, handed over by this process's log writer: kept in
        // the write that ends the run; a run that goes on keeps it as its own item, first.
        let mut held = self
            .folded_logs
            .as_ref()
            .and_then(|folded| Some((folded, folded.take(&done.tenant, &done.run_id)?)));
        if !matches!(done.next, RunTransition::Finish(_))
            && let Some((folded, (key, log))) = held.take()
        {
            keep_log_alone(folded, &key, log).await;
        }
        let fold = held
            .as_ref()
            .map(|(_, (key, log))| (key.attempt, String::from_utf8_lossy(&log.body).into_owned()));
        let answer = self
            .modify_run_releasing(&done.tenant, &done.run_id, |stored| {
                stored
                    .run
                    .finish_attempt(done.token, &done.result, done.next, done.only_if_expired_by)?;
                if let Some((attempt, lines)) = &fold {
                    stored.logs.insert(*attempt, lines.clone());
                }
                Ok((true, stored.run.clone()))
            })
            .await;
        if answer.is_err()
            && let Some((folded, (key, log))) = held
        {
            keep_log_alone(folded, &key, log).await;
        }
        let (run, released) = answer?;
        Ok(Ended { run, released })
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        let (run, released) = self
            .modify_run_releasing(tenant, run_id, |stored| {
                let changed = stored.run.request_cancel(now, reason);
                Ok((changed, stored.run.clone()))
            })
            .await?;
        Ok(Ended { run, released })
    }

    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError> {
        let until = trunc_ms(until);
        match self
            .modify_run(tenant, run_id, |stored| {
                let changed = stored.run.defer(until);
                Ok((changed, changed))
            })
            .await
        {
            Err(StoreError::NotFound) => Ok(false),
            answer => answer,
        }
    }

    async fn take_settings(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        settings: &RunSettings,
    ) -> Result<Option<Run>, StoreError> {
        let mut taken = None;
        let written = self
            .modify_run(tenant, run_id, |stored| {
                let changed = stored.run.take_settings(settings);
                taken = changed.then(|| stored.run.clone());
                Ok((changed, changed))
            })
            .await;
        match written {
            Ok(_) => Ok(taken),
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let mut runs = self.running_runs_expired_by(now, limit).await?;
        runs.sort_by(|a, b| {
            let exp = |r: &Run| r.lease.as_ref().map(|l| l.expires_at);
            (exp(a), &a.run_id).cmp(&(exp(b), &b.run_id))
        });
        runs.truncate(limit);
        Ok(runs)
    }

    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        window: (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        self.read_skip_records(tenant, job_id, window, limit).await
    }

    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError> {
        let writes = self.skip_writes(tenant, job_id, records)?;
        for chunk in writes.chunks(MAX_TRANSACTION) {
            self.transact(chunk.to_vec())
                .await
                .map_err(|f| f.into_store(String::new))?;
        }
        Ok(())
    }

    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        self.dependent_ids(tenant, job_id).await
    }

    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        self.waits_expired_by(now, limit).await
    }

    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        self.expire(wait, now).await
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let mut runs = self.pending_runs_ready_by(ready_before, limit).await?;
        // Runs last written before 2026-12-04 are filed in `sched` under `PENDING#<shard>`.
        let filed_before = self.sched_below(pending_pk, ms(ready_before) + 1, limit).await?;
        for item in &filed_before {
            let run = run_from_item(item)?.run;
            if run.state == RunState::Pending && run.not_before <= ready_before {
                runs.push(run);
            }
        }
        runs.sort_by(|a, b| {
            (a.not_before, a.scheduled_for, &a.run_id).cmp(&(b.not_before, b.scheduled_for, &b.run_id))
        });
        runs.truncate(limit);
        Ok(runs)
    }

    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        self.alerts_due_by(now, limit).await
    }

    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError> {
        self.update_alert(key, expected, alert).await
    }
}
