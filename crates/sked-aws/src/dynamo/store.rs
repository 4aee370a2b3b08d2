//! [`DynamoStore`]: the [`JobStore`] port on one DynamoDB table (layout in [`super`]).
//!
//! - Runs are read (strongly consistent), changed with sked-core's lifecycle functions, and put
//!   back on condition that their item version `rv` has not moved; a lost race re-reads and
//!   decides again. So claims, heartbeats, completions and cancels follow exactly the rules the
//!   SQLite store follows, one run at a time.
//! - `fire` is one `TransactWriteItems`: the job's update (conditional on version and
//!   `next_fire_at`), the cancelled runs' puts (conditional on `rv`) and the new runs' puts
//!   (`attribute_not_exists`). Runs that exist are left out beforehand; one created meanwhile
//!   cancels the transaction with a per-item reason, and it is retried without that run.
//! - Cross-tenant scans and listings read index copies (eventually consistent); every write
//!   that follows one is conditional, so a stale copy costs a conflict, never a wrong write.
//!
//! This module must not hold scheduling policy: that lives in sked-core.
//!
//! Why one long file: it implements every method of the `JobStore` port (jobs, firings, runs,
//! claims, listings) over the same read–decide–put loop and transaction plumbing. The worker's
//! claim and completion paths are to move to a port of their own, and their DynamoDB code with
//! them.

use super::codec::{
    Item, Reader, StoredRun, job_due_keys, job_from_item, job_item, key, ms, n, run_from_item, run_item, run_key, s,
    truncated,
};
use super::keys::*;
use super::quotas::{QuotaCache, TenantLimits};
use crate::config::AwsConfig;
use crate::error::{Failure, build_error, classify};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, KeysAndAttributes, Put, TransactWriteItem, Update};
use futures::stream::{self, StreamExt, TryStreamExt};
use sked_core::dependency::Wait;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobState, Overlap};
use sked_core::ledger::SkipRecord;
use sked_core::lifecycle::{ClaimStep, REPLACED, another_run_leased_until};
use sked_core::ports::store::{
    ClaimBatch, ClaimOutcome, Completion, Ended, Firing, JobClaim, JobFilter, JobStore, Page, PageRequest, RunFilter,
    StoreError,
};
use sked_core::ports::{Clock, JobStoreExt};
use sked_core::quota::counts_as_active;
use sked_core::run::{Run, RunState};
use sked_core::service::backfill::runs_in_turn;
use sked_core::timestamp::{Timestamp, trunc_ms};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Most items in one `TransactWriteItems`.
const MAX_TRANSACTION: usize = 100;
/// Most keys in one `BatchGetItem`.
const MAX_BATCH_GET: usize = 100;
/// How many times [`DynamoStore::batch_get`] asks for keys DynamoDB left unprocessed.
const BATCH_GET_TRIES: u32 = 8;
/// Read-modify-write attempts before a run that keeps changing is reported as transient.
pub(super) const MAX_RMW_ATTEMPTS: usize = 16;
/// Index queries in flight at once.
const PARALLEL_QUERIES: usize = 16;
/// The due watermark never passes a minute until this many minutes after it (clock skew
/// between writers and the sweeper, and index propagation, must fit in it).
const WATERMARK_MARGIN_MINUTES: i64 = 2;
/// `due_jobs` reads buckets at most this far past now (a sweeper looks ahead ≤ 15 minutes).
pub const MAX_DUE_AHEAD_MINUTES: i64 = 24 * 60;
/// Without a stored watermark (a table not made by [`crate::bootstrap`]), due queries start
/// this far back.
const DEFAULT_LOOKBACK_MINUTES: i64 = 24 * 60;
/// `next_due_at` looks this many minutes past now; beyond it, it answers `None` (callers
/// sleep their maximum and look again).
pub const NEXT_DUE_WINDOW_MINUTES: i64 = 15;

/// Jobs and runs in one DynamoDB table.
#[derive(Clone)]
pub struct DynamoStore {
    pub(super) client: Client,
    pub(super) table: String,
    pub(super) shards: u32,
    pub(super) run_retention_secs: i64,
    idempotency_retention_secs: i64,
    clock: Arc<dyn Clock>,
    pub(super) quota_cache: Arc<QuotaCache>,
}

impl std::fmt::Debug for DynamoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoStore")
            .field("table", &self.table)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

/// A key condition and filter for one query, with their placeholders.
#[derive(Debug, Clone, Default)]
pub(super) struct QuerySpec {
    index: Option<&'static str>,
    key_condition: String,
    filter: Option<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    pub(super) forward: bool,
    pub(super) consistent: bool,
}

impl QuerySpec {
    pub(super) fn new(index: Option<&'static str>, key_condition: impl Into<String>) -> Self {
        QuerySpec {
            index,
            key_condition: key_condition.into(),
            forward: true,
            ..QuerySpec::default()
        }
    }
    pub(super) fn name(mut self, placeholder: &str, attr: &str) -> Self {
        self.names.insert(placeholder.into(), attr.into());
        self
    }
    pub(super) fn value(mut self, placeholder: &str, v: AttributeValue) -> Self {
        self.values.insert(placeholder.into(), v);
        self
    }
    pub(super) fn and_filter(mut self, clause: String) -> Self {
        self.filter = Some(match self.filter {
            Some(f) => format!("{f} AND {clause}"),
            None => clause,
        });
        self
    }
}

pub(super) fn conflict(msg: impl Into<String>) -> StoreError {
    StoreError::Conflict(msg.into())
}

/// Cancellation reason codes of a cancelled transaction.
fn tx_reasons(e: &TransactWriteItemsError) -> Option<Vec<Option<String>>> {
    match e {
        TransactWriteItemsError::TransactionCanceledException(c) => Some(
            c.cancellation_reasons()
                .iter()
                .map(|r| r.code().map(str::to_string))
                .collect(),
        ),
        _ => None,
    }
}

/// The fencing token of a run's next attempt: above every token it was ever given.
fn next_token(stored: &StoredRun) -> u64 {
    stored.last_token.max(stored.run.attempts.len() as u64) + 1
}

/// Starts attempt `token` of the run: the claim's answer.
fn start(
    stored: &mut StoredRun,
    token: u64,
    worker: &WorkerId,
    now: Timestamp,
    lease_until: Timestamp,
) -> ClaimOutcome {
    stored.run.start_attempt(worker, now, lease_until, token);
    stored.last_token = token;
    ClaimOutcome::Claimed {
        run: stored.run.clone(),
        token,
    }
}

/// The range of `list` sort keys a run listing reads: `[lo, hi]`, and a key to drop (the
/// cursor's own item).
fn run_range(filter: &RunFilter, after: Option<&(i64, String)>) -> (Option<String>, Option<String>, Option<String>) {
    let lo = filter.since.map(|t| pad_ms(ms(t)));
    let mut hi = filter.until.map(|t| pad_ms(ms(t))); // items at `until` sort above it: excluded
    let mut drop = None;
    if let Some((at, id)) = after {
        let c = runs_list_sk(*at, id);
        if hi.as_ref().is_none_or(|h| c < *h) {
            hi = Some(c.clone());
        }
        drop = Some(c);
    }
    (lo, hi, drop)
}

fn parse_run_cursor(c: &str) -> Result<(i64, String), StoreError> {
    let raw = decode_cursor(c).ok_or_else(|| StoreError::BadCursor("malformed run cursor".into()))?;
    let (at, id) = raw
        .split_once('|')
        .ok_or_else(|| StoreError::BadCursor("malformed run cursor".into()))?;
    Ok((
        at.parse()
            .map_err(|_| StoreError::BadCursor("malformed run cursor".into()))?,
        id.to_string(),
    ))
}

fn run_cursor(r: &Run) -> String {
    encode_cursor(&format!("{}|{}", ms(r.scheduled_for), r.run_id))
}

/// The listing order of runs: newest nominal time first, then run id descending.
fn newest_first(a: &Run, b: &Run) -> std::cmp::Ordering {
    (b.scheduled_for, &b.run_id).cmp(&(a.scheduled_for, &a.run_id))
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
            idempotency_retention_secs: config.idempotency_retention.as_secs() as i64,
            clock,
            quota_cache: Arc::default(),
        }
    }

    // ----- plumbing -----

    pub(super) async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        self.client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map(|o| o.item)
            .map_err(|e| classify("dynamodb:GetItem", e, |_| None).into_store(|| "unexpected condition".into()))
    }

    /// Items for `keys` (strongly consistent), in no particular order; missing ones absent.
    /// Keys DynamoDB leaves unprocessed (throughput exceeded) are asked again, up to
    /// [`BATCH_GET_TRIES`] times with a doubling pause; keys still unprocessed then make the
    /// whole read a transient error — never an answer with items silently left out.
    pub(super) async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_BATCH_GET) {
            let mut pending = KeysAndAttributes::builder()
                .set_keys(Some(chunk.to_vec()))
                .consistent_read(true)
                .build()
                .map_err(build_error)?;
            let mut pause = std::time::Duration::from_millis(25);
            for tries in 1.. {
                let res = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, pending.clone())
                    .send()
                    .await
                    .map_err(|e| classify("dynamodb:BatchGetItem", e, |_| None).into_store(String::new))?;
                if let Some(mut got) = res.responses {
                    out.extend(got.remove(&self.table).unwrap_or_default());
                }
                match res.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                    Some(rest) if !rest.keys().is_empty() => {
                        if tries >= BATCH_GET_TRIES {
                            return Err(StoreError::Transient(
                                format!(
                                    "dynamodb:BatchGetItem left {} of {} keys unprocessed after {tries} tries",
                                    rest.keys().len(),
                                    chunk.len()
                                )
                                .into(),
                            ));
                        }
                        pending = rest;
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(std::time::Duration::from_millis(800));
                    }
                    _ => break,
                }
            }
        }
        Ok(out)
    }

    /// Runs query pages until `want` items passed the filter (or the range is exhausted).
    pub(super) async fn query(&self, q: &QuerySpec, want: usize) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut req = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(q.index.map(str::to_string))
                .key_condition_expression(&q.key_condition)
                .set_filter_expression(q.filter.clone())
                .set_expression_attribute_names((!q.names.is_empty()).then(|| q.names.clone()))
                .set_expression_attribute_values((!q.values.is_empty()).then(|| q.values.clone()))
                .scan_index_forward(q.forward)
                .consistent_read(q.consistent)
                .set_exclusive_start_key(start.take());
            if q.filter.is_none() {
                req = req.limit(want.saturating_sub(out.len()).clamp(1, 1000) as i32);
            }
            let page = req
                .send()
                .await
                .map_err(|e| classify("dynamodb:Query", e, |_| None).into_store(String::new))?;
            out.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(k) if out.len() < want => start = Some(k),
                _ => break,
            }
        }
        out.truncate(want);
        Ok(out)
    }

    /// Runs the same query on many partitions at once.
    pub(super) async fn query_many(&self, specs: Vec<QuerySpec>, want: usize) -> Result<Vec<Item>, StoreError> {
        let pages: Vec<Vec<Item>> = stream::iter(specs.into_iter().map(|q| async move { self.query(&q, want).await }))
            .buffered(PARALLEL_QUERIES)
            .try_collect()
            .await?;
        Ok(pages.into_iter().flatten().collect())
    }

    pub(super) async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<(), Failure> {
        self.client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("dynamodb:TransactWriteItems", e, tx_reasons))
    }

    pub(super) fn put(
        &self,
        item: Item,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut b = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition);
        for (k, v) in values {
            b = b.expression_attribute_values(k, v);
        }
        if condition.contains("#st") {
            b = b.expression_attribute_names("#st", "state");
        }
        Ok(TransactWriteItem::builder()
            .put(b.build().map_err(build_error)?)
            .build())
    }

    /// One `PutItem` on `condition`.
    async fn put_if(&self, item: Item, condition: &str, values: Vec<(&str, AttributeValue)>) -> Result<(), Failure> {
        let mut req = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition);
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        req.send()
            .await
            .map(|_| ())
            .map_err(|e| classify("dynamodb:PutItem", e, |_| None))
    }

    pub(super) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    pub(super) fn stored_run_item(&self, stored: &StoredRun) -> Result<Item, StoreError> {
        run_item(stored, self.shards, self.run_retention_secs)
    }

    pub(super) async fn load_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<StoredRun>, StoreError> {
        let Some(k) = run_key(tenant, run_id) else {
            return Ok(None);
        };
        match self.get_item(k).await? {
            Some(item) => {
                let stored = run_from_item(&item)?;
                Ok((stored.run.tenant == *tenant && stored.run.run_id == *run_id).then_some(stored))
            }
            None => Ok(None),
        }
    }

    /// The transaction write of `stored` with `rv + 1`, on condition its item still has `rv`.
    fn versioned_put(&self, stored: &StoredRun) -> Result<TransactWriteItem, StoreError> {
        let next = StoredRun {
            rv: stored.rv + 1,
            ..stored.clone()
        };
        self.put(self.stored_run_item(&next)?, "rv = :rv", vec![(":rv", n(stored.rv))])
    }

    /// Puts `stored` with `rv + 1` if its item still has version `rv`. `Ok(false)` if it moved.
    /// A run that ends here releases its downstream occurrences in the same transaction.
    async fn save_run(&self, stored: &StoredRun) -> Result<bool, StoreError> {
        Ok(self.save_run_releasing(stored).await?.is_some())
    }

    /// [`DynamoStore::save_run`], answering what the run's end released (`None`: it moved).
    async fn save_run_releasing(&self, stored: &StoredRun) -> Result<Option<Vec<Run>>, StoreError> {
        if stored.run.state.is_terminal() {
            let plan = self.plan_release(&stored.run).await?;
            if !plan.writes.is_empty() {
                let mut items = vec![self.versioned_put(stored)?];
                items.extend(plan.writes);
                return match self.transact(items).await {
                    Ok(()) => Ok(Some(plan.released)),
                    Err(Failure::Condition { .. }) => Ok(None),
                    Err(f) => Err(f.into_store(String::new)),
                };
            }
        }
        Ok(self.put_run(stored).await?.then(Vec::new))
    }

    /// The plain write of [`DynamoStore::save_run`]: one conditional `PutItem`.
    async fn put_run(&self, stored: &StoredRun) -> Result<bool, StoreError> {
        let next = StoredRun {
            rv: stored.rv + 1,
            ..stored.clone()
        };
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.stored_run_item(&next)?))
            .condition_expression("rv = :rv")
            .expression_attribute_values(":rv", n(stored.rv))
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

    /// Read-modify-write of one run: `decide` changes a fresh copy and says whether it changed
    /// and what to answer; a changed run is saved on condition of its item version, and a lost
    /// race decides again on a fresh read.
    async fn modify_run<T>(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        decide: impl FnMut(&mut StoredRun) -> Result<(bool, T), StoreError>,
    ) -> Result<T, StoreError> {
        Ok(self.modify_run_releasing(tenant, run_id, decide).await?.0)
    }

    /// [`DynamoStore::modify_run`], answering also what the run's end released.
    async fn modify_run_releasing<T>(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        mut decide: impl FnMut(&mut StoredRun) -> Result<(bool, T), StoreError>,
    ) -> Result<(T, Vec<Run>), StoreError> {
        for _ in 0..MAX_RMW_ATTEMPTS {
            let mut stored = self.load_run(tenant, run_id).await?.ok_or(StoreError::NotFound)?;
            let (changed, answer) = decide(&mut stored)?;
            if !changed {
                return Ok((answer, Vec::new()));
            }
            if let Some(released) = self.save_run_releasing(&stored).await? {
                return Ok((answer, released));
            }
        }
        Err(StoreError::Transient(
            format!("run {run_id} kept changing under {MAX_RMW_ATTEMPTS} read-modify-writes").into(),
        ))
    }

    /// The job's PENDING and RUNNING runs with their item versions, oldest nominal time
    /// first (a strongly consistent query of the job's partition).
    async fn active_stored_runs(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<StoredRun>, StoreError> {
        let mut q = QuerySpec::new(None, "#pk = :pk AND begins_with(#sk, :runs)")
            .name("#pk", PK)
            .name("#sk", SK)
            .name("#st", "state")
            .value(":pk", s(job_pk(tenant.as_str(), job_id.as_str())))
            .value(":runs", s(RUN_SK_PREFIX))
            .value(":p", s(RunState::Pending.as_str()))
            .value(":r", s(RunState::Running.as_str()))
            .and_filter("#st IN (:p, :r)".into());
        q.consistent = true;
        let items = self.query(&q, usize::MAX).await?;
        let mut runs: Vec<StoredRun> = items.iter().map(run_from_item).collect::<Result<_, _>>()?;
        runs.sort_by(|a, b| (a.run.scheduled_for, &a.run.run_id).cmp(&(b.run.scheduled_for, &b.run.run_id)));
        Ok(runs)
    }

    /// A claim of a [`ClaimBatch`] with `alone` for one run: the job's active runs are read; if none
    /// other holds a live lease, the claim is written in one transaction with a condition
    /// that each of those runs is still at the version read (so none of them was claimed
    /// meanwhile: two workers claiming two runs of the job at once each check the other's
    /// run, and at most one transaction succeeds). A lost race reads and decides again.
    async fn claim_alone(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        let Some((job_id, _)) = run_id.parts() else {
            return Err(StoreError::NotFound);
        };
        let (now, lease_until) = (trunc_ms(now), trunc_ms(lease_until));
        let limits = self.tenant_limits(tenant).await?;
        for _ in 0..MAX_RMW_ATTEMPTS {
            let active = self.active_stored_runs(tenant, &job_id).await?;
            let runs: Vec<Run> = active.iter().map(|stored| stored.run.clone()).collect();
            if let Some(until) = another_run_leased_until(&runs, run_id, now) {
                return Ok(ClaimOutcome::Leased(until));
            }
            let mut stored = match active.iter().find(|stored| &stored.run.run_id == run_id) {
                Some(stored) => stored.clone(),
                // Not active: ended (or never existed); `claim` answers that.
                None => return self.claim_run(tenant, run_id, worker, now, lease_until).await,
            };
            let token = next_token(&stored);
            let slot = match stored.run.decide_claim(now) {
                ClaimStep::Answer { .. } => return self.claim_run(tenant, run_id, worker, now, lease_until).await,
                ClaimStep::Start => match self.take_slots(&stored.run, token, now, &limits).await? {
                    Ok(writes) => writes,
                    Err(full) => return Ok(full),
                },
            };
            let outcome = start(&mut stored, token, worker, now, lease_until);
            let others: Vec<&StoredRun> = active.iter().filter(|o| &o.run.run_id != run_id).collect();
            if others.len() + slot.len() >= MAX_TRANSACTION {
                return Err(StoreError::Other(
                    format!(
                        "job {job_id} has {} active runs: too many to claim one alone",
                        others.len()
                    )
                    .into(),
                ));
            }
            let mut items = vec![self.versioned_put(&stored)?];
            for other in others {
                let k = run_key(&other.run.tenant, &other.run.run_id)
                    .ok_or_else(|| StoreError::Other(format!("run id {} names no job", other.run.run_id).into()))?;
                let check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(k))
                    .condition_expression("rv = :rv")
                    .expression_attribute_values(":rv", n(other.rv))
                    .build()
                    .map_err(build_error)?;
                items.push(TransactWriteItem::builder().condition_check(check).build());
            }
            items.extend(slot);
            match self.transact(items).await {
                Ok(()) => return Ok(outcome),
                Err(Failure::Condition { .. }) => continue,
                Err(f) => return Err(f.into_store(String::new)),
            }
        }
        Err(StoreError::Transient(
            format!("job {job_id}'s runs kept changing under {MAX_RMW_ATTEMPTS} claims").into(),
        ))
    }

    /// [`JobStore::claim`] of a run that counts against a slot pool (its tenant has a
    /// `max_concurrent_runs`, or it has a concurrency key): the attempt starts in one
    /// transaction with the slots it takes ([`super::slots`]); a lost race reads and decides
    /// again.
    async fn claim_gated(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
        limits: &TenantLimits,
    ) -> Result<ClaimOutcome, StoreError> {
        for _ in 0..MAX_RMW_ATTEMPTS {
            let mut stored = self.load_run(tenant, run_id).await?.ok_or(StoreError::NotFound)?;
            let token = next_token(&stored);
            match stored.run.decide_claim(now) {
                ClaimStep::Answer { outcome, changed } => {
                    if !changed || self.save_run(&stored).await? {
                        return Ok(outcome);
                    }
                }
                ClaimStep::Start => {
                    let slots = match self.take_slots(&stored.run, token, now, limits).await? {
                        Ok(writes) => writes,
                        Err(full) => return Ok(full),
                    };
                    let outcome = start(&mut stored, token, worker, now, lease_until);
                    let mut items = vec![self.versioned_put(&stored)?];
                    items.extend(slots);
                    match self.transact(items).await {
                        Ok(()) => return Ok(outcome),
                        Err(Failure::Condition { .. }) => {}
                        Err(f) => return Err(f.into_store(String::new)),
                    }
                }
            }
        }
        Err(StoreError::Transient(
            format!("run {run_id} or its slots kept changing under {MAX_RMW_ATTEMPTS} claims").into(),
        ))
    }

    /// Up to `limit` items of every shard's `sched` partition `partition(shard)` whose sort key
    /// starts below the instant `below_ms` (what the reaper's scans read).
    pub(super) async fn sched_below(
        &self,
        partition: fn(u32) -> String,
        below_ms: i64,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let below = pad_ms(below_ms);
        let specs = (0..self.shards)
            .map(|shard| {
                QuerySpec::new(Some(SCHED_INDEX), "#pk = :pk AND #sk < :below")
                    .name("#pk", GSI1_PK)
                    .name("#sk", GSI1_SK)
                    .value(":pk", s(partition(shard)))
                    .value(":below", s(below.clone()))
            })
            .collect();
        self.query_many(specs, limit).await
    }

    /// The due watermark: the stored minute (if any) and the minute scans start from.
    async fn watermark(&self) -> Result<(Option<i64>, i64), StoreError> {
        let item = self.get_item(key(SWEEP_PK.into(), WATERMARK_SK.into())).await?;
        let stored = item.as_ref().map(|i| Reader::new(i).n::<i64>("minute")).transpose()?;
        let now_min = epoch_minute(ms(self.now()));
        Ok((stored, stored.unwrap_or(now_min - DEFAULT_LOOKBACK_MINUTES)))
    }

    /// Moves the watermark forward to `to` if it still reads `from` (a lost race is harmless:
    /// the other writer moved it too, or lowered nothing — writers never lower it).
    async fn advance_watermark(&self, from: Option<i64>, to: i64) -> Result<(), StoreError> {
        if from.is_some_and(|f| f >= to) {
            return Ok(());
        }
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(SWEEP_PK.into(), WATERMARK_SK.into())))
            .update_expression("SET #m = :to")
            .expression_attribute_names("#m", "minute")
            .expression_attribute_values(":to", n(to));
        req = match from {
            Some(f) => req
                .condition_expression("#m = :from")
                .expression_attribute_values(":from", n(f)),
            None => req.condition_expression("attribute_not_exists(#m)"),
        };
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) => match classify("dynamodb:UpdateItem", e, |_| None) {
                Failure::Condition { .. } => Ok(()),
                f => Err(f.into_store(String::new)),
            },
        }
    }

    /// Due-index queries for `minutes` × every shard, sort keys below `below`.
    fn due_queries(&self, minutes: impl Iterator<Item = i64>, below: &str, forward: bool) -> Vec<QuerySpec> {
        let mut specs = Vec::new();
        for m in minutes {
            for shard in 0..self.shards {
                let mut q = QuerySpec::new(Some(SCHED_INDEX), "#pk = :pk AND #sk < :below")
                    .name("#pk", GSI1_PK)
                    .name("#sk", GSI1_SK)
                    .value(":pk", s(due_pk(m, shard)))
                    .value(":below", s(below));
                q.forward = forward;
                specs.push(q);
            }
        }
        specs
    }

    /// Items of `items` decoded as jobs, sorted by due time (then tenant, id).
    fn due_order(items: &[Item]) -> Result<Vec<Job>, StoreError> {
        let mut jobs: Vec<Job> = items.iter().map(job_from_item).collect::<Result<_, _>>()?;
        jobs.retain(|j| j.state == JobState::Active && j.next_fire_at.is_some());
        jobs.sort_by(|a, b| (a.next_fire_at, &a.tenant, &a.id).cmp(&(b.next_fire_at, &b.tenant, &b.id)));
        Ok(jobs)
    }

    /// The job update of a firing: new state and due keys, on condition of version and
    /// `next_fire_at`; or just that condition, when the job is left for a later transaction.
    fn firing_job_write(&self, f: &Firing, check_only: bool) -> Result<TransactWriteItem, StoreError> {
        let k = key(job_pk(f.tenant.as_str(), f.job_id.as_str()), JOB_SK.into());
        let mut names = HashMap::from([
            ("#v".to_string(), "version".to_string()),
            ("#nfa".to_string(), "next_fire_at".to_string()),
        ]);
        let mut values = HashMap::from([(":v".to_string(), n(f.expected_version))]);
        let condition = match f.expected_next_fire_at {
            Some(t) => {
                values.insert(":enfa".into(), n(ms(t)));
                "#v = :v AND #nfa = :enfa"
            }
            None => "#v = :v AND attribute_not_exists(#nfa)",
        };
        if check_only {
            let c = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(k))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values))
                .build()
                .map_err(build_error)?;
            return Ok(TransactWriteItem::builder().condition_check(c).build());
        }
        names.insert("#st".into(), "state".into());
        names.insert("#g1p".into(), GSI1_PK.into());
        names.insert("#g1s".into(), GSI1_SK.into());
        values.insert(":st".into(), s(f.state.as_str()));
        let mut set = vec!["#st = :st"];
        let mut remove = Vec::new();
        match f.next_fire_at {
            Some(t) => {
                values.insert(":nfa".into(), n(ms(t)));
                set.push("#nfa = :nfa");
            }
            None => remove.push("#nfa"),
        }
        match job_due_keys(
            f.tenant.as_str(),
            f.job_id.as_str(),
            f.state,
            f.next_fire_at,
            self.now(),
            self.shards,
        ) {
            Some((pk, sk)) => {
                values.insert(":g1p".into(), s(pk));
                values.insert(":g1s".into(), s(sk));
                set.extend(["#g1p = :g1p", "#g1s = :g1s"]);
            }
            None => remove.extend(["#g1p", "#g1s"]),
        }
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let u = Update::builder()
            .table_name(&self.table)
            .set_key(Some(k))
            .update_expression(expr)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(u).build())
    }

    /// Whether the job named by a firing exists (to tell NotFound from Conflict).
    /// One firing of [`JobStore::fire`].
    async fn fire_job(&self, firing: &Firing) -> Result<Vec<Run>, StoreError> {
        // Runs written by an earlier round of this call (chunks that committed before a later
        // one was refused): inserted by this firing, and not to be written again.
        let mut committed: Vec<Run> = Vec::new();
        let mut skip: HashSet<RunId> = HashSet::new();
        // Sweeps fire ACTIVE jobs: one that ends leaves the tenant's active jobs.
        let limits = match counts_as_active(firing.state) {
            true => TenantLimits::default(),
            false => self.tenant_limits(&firing.tenant).await?,
        };
        let ends = i64::from(!counts_as_active(firing.state));
        for _ in 0..MAX_RMW_ATTEMPTS {
            // Runs that exist are left out up front.
            let keys: Vec<Item> = firing
                .runs
                .iter()
                .filter(|r| !skip.contains(&r.run_id))
                .filter_map(|r| run_key(&r.tenant, &r.run_id))
                .collect();
            for item in self.batch_get(keys).await? {
                skip.insert(RunId(Reader::new(&item).s("run_id")?));
            }
            let mut ops: Vec<TransactWriteItem> = Vec::new();
            let mut op_runs: Vec<Option<Run>> = Vec::new(); // the new run each op inserts
            for id in &firing.cancel {
                if let Some(mut stored) = self.load_run(&firing.tenant, id).await?
                    && stored.run.request_cancel(firing.at, REPLACED)
                {
                    // A cancelled run that ended releases its downstream occurrences here too.
                    let release = match stored.run.state.is_terminal() {
                        true => Some(self.plan_release(&stored.run).await?),
                        false => None,
                    };
                    let rv = stored.rv;
                    stored.rv += 1;
                    ops.push(self.put(self.stored_run_item(&stored)?, "rv = :rv", vec![(":rv", n(rv))])?);
                    op_runs.push(None);
                    if let Some(release) = release {
                        // Answered among the firing's runs: the released PENDING ones.
                        for (write, run) in release.writes.into_iter().zip(release.writes_run) {
                            ops.push(write);
                            op_runs.push(run.filter(|r| r.state == RunState::Pending));
                        }
                    }
                }
            }
            // The ledger's records of what the plan skipped (puts that replace: a retry writes
            // them again).
            for write in self.skip_writes(&firing.tenant, &firing.job_id, &firing.skipped)? {
                ops.push(write);
                op_runs.push(None);
            }
            for run in firing.runs.iter().filter(|r| !skip.contains(&r.run_id)) {
                let stored = StoredRun {
                    run: truncated(run),
                    last_token: 0,
                    rv: 1,
                };
                ops.push(self.put(self.stored_run_item(&stored)?, "attribute_not_exists(pk)", vec![])?);
                op_runs.push(Some(stored.run));
            }
            // Everything past one transaction goes first, each chunk conditional on the job.
            let counter = self.active_jobs_write(&firing.tenant, &limits, -ends)?;
            let room = MAX_TRANSACTION - 1 - usize::from(counter.is_some());
            let split = ops.len().saturating_sub(room);
            let mut early_ops: Vec<TransactWriteItem> = ops.drain(..split).collect();
            let mut early_runs: Vec<Option<Run>> = op_runs.drain(..split).collect();
            let mut failed: Option<(Failure, Vec<Option<Run>>)> = None;
            while !early_ops.is_empty() {
                let take = early_ops.len().min(room);
                let mut chunk: Vec<TransactWriteItem> = early_ops.drain(..take).collect();
                let chunk_runs: Vec<Option<Run>> = early_runs.drain(..take).collect();
                chunk.insert(0, self.firing_job_write(firing, true)?);
                match self.transact(chunk).await {
                    Ok(()) => {
                        for run in chunk_runs.into_iter().flatten() {
                            skip.insert(run.run_id.clone());
                            committed.push(run);
                        }
                    }
                    Err(f) => {
                        failed = Some((f, chunk_runs));
                        break;
                    }
                }
            }
            if failed.is_none() {
                let mut last = vec![self.firing_job_write(firing, false)?];
                last.extend(ops);
                last.extend(counter);
                match self.transact(last).await {
                    Ok(()) => {
                        committed.extend(op_runs.into_iter().flatten());
                        return Ok(committed);
                    }
                    Err(f) => failed = Some((f, op_runs)),
                }
            }
            match failed {
                Some((Failure::Condition { failed_items, .. }, runs)) => {
                    // Item 0 of every transaction is the job's update or condition check.
                    if failed_items.contains(&0) {
                        if !self.job_exists(&firing.tenant, &firing.job_id).await? {
                            return Err(StoreError::NotFound);
                        }
                        return Err(conflict(format!("job {} moved on", firing.job_id)));
                    }
                    // A run was created (or a cancelled run changed) meanwhile: skip the
                    // former, re-read the latter, and try again.
                    for i in failed_items {
                        if let Some(Some(run)) = runs.get(i - 1) {
                            skip.insert(run.run_id.clone());
                        }
                    }
                }
                Some((f, _)) => return Err(f.into_store(String::new)),
                None => {}
            }
        }
        Err(StoreError::Transient(
            format!("firing of job {} kept racing other writers", firing.job_id).into(),
        ))
    }

    /// One claim of [`JobStore::claim`] (neither held nor alone).
    async fn claim_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        let (now, lease_until) = (trunc_ms(now), trunc_ms(lease_until));
        let limits = self.tenant_limits(tenant).await?;
        if limits.quota.max_concurrent_runs.is_some() {
            return self
                .claim_gated(tenant, run_id, worker, now, lease_until, &limits)
                .await;
        }
        // `None`: the run has a concurrency key, so its start needs a slot (a second read).
        let claimed = self
            .modify_run(tenant, run_id, |stored| match stored.run.decide_claim(now) {
                ClaimStep::Answer { outcome, changed } => Ok((changed, Some(outcome))),
                ClaimStep::Start if stored.run.concurrency.is_some() => Ok((false, None)),
                ClaimStep::Start => {
                    let token = next_token(stored);
                    Ok((true, Some(start(stored, token, worker, now, lease_until))))
                }
            })
            .await?;
        match claimed {
            Some(outcome) => Ok(outcome),
            None => {
                self.claim_gated(tenant, run_id, worker, now, lease_until, &limits)
                    .await
            }
        }
    }

    async fn job_exists(&self, tenant: &TenantId, id: &JobId) -> Result<bool, StoreError> {
        Ok(self
            .get_item(key(job_pk(tenant.as_str(), id.as_str()), JOB_SK.into()))
            .await?
            .is_some())
    }

    /// Full items for index copies (listings read keys-only copies), in the given order.
    async fn fetch_in_order(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let id = |i: &Item| {
            let r = Reader::new(i);
            (r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default())
        };
        let order: Vec<(String, String)> = keys.iter().map(id).collect();
        let mut by_key: HashMap<(String, String), Item> =
            self.batch_get(keys).await?.into_iter().map(|i| (id(&i), i)).collect();
        Ok(order.iter().filter_map(|k| by_key.remove(k)).collect())
    }
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        let Some(first) = jobs.first() else {
            return Ok(());
        };
        let now = self.now();
        let limits = self.tenant_limits(&first.tenant).await?;
        let added = jobs.iter().filter(|j| counts_as_active(j.state)).count() as i64;
        let counter = self.active_jobs_write(&first.tenant, &limits, added)?;
        let mut writes = Vec::with_capacity(jobs.len() + 2);
        for job in jobs {
            let item = job_item(job, now, self.shards)?;
            writes.push(self.put(
                item,
                "attribute_not_exists(pk) OR #st = :deleted",
                vec![(":deleted", s(JobState::Deleted.as_str()))],
            )?);
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
        let counter_index = counter.is_some().then_some(writes.len());
        writes.extend(counter);
        // The jobs' dependency edges, unconditional (after the writes that can be refused).
        for job in jobs {
            writes.extend(self.edge_writes(job)?);
        }
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
            return match self.transact(writes).await {
                Ok(()) => Ok(()),
                Err(Failure::Condition { failed_items, .. }) => Err(refusal(&failed_items).await),
                Err(f) => Err(f.into_store(String::new)),
            };
        }
        // Larger than one transaction: write in chunks (the idempotency key last), and undo
        // the chunks already written if a later one is refused. Not atomic against a reader
        // that looks in between; documented in the module header.
        let mut done = 0;
        let chunks: Vec<Vec<TransactWriteItem>> = writes.chunks(MAX_TRANSACTION).map(<[_]>::to_vec).collect();
        for chunk in chunks {
            let len = chunk.len();
            if let Err(f) = self.transact(chunk).await {
                for job in &jobs[..done.min(jobs.len())] {
                    let _ = self
                        .client
                        .delete_item()
                        .table_name(&self.table)
                        .set_key(Some(key(job_pk(job.tenant.as_str(), job.id.as_str()), JOB_SK.into())))
                        .condition_expression("version = :v AND created_at = :c")
                        .expression_attribute_values(":v", n(job.version))
                        .expression_attribute_values(":c", n(ms(job.created_at)))
                        .send()
                        .await;
                }
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
        let job_key = |(tenant, id): &(TenantId, JobId)| key(job_pk(tenant.as_str(), id.as_str()), JOB_SK.into());
        if let [one] = ids {
            // One job: a GetItem (the same read unit, a smaller request).
            let job = self
                .get_item(job_key(one))
                .await?
                .map(|i| job_from_item(&i))
                .transpose()?;
            return Ok(vec![job]);
        }
        let unique: HashSet<&(TenantId, JobId)> = ids.iter().collect();
        let items = self.batch_get(unique.into_iter().map(job_key).collect()).await?;
        let mut by_id: HashMap<(TenantId, JobId), Job> = HashMap::with_capacity(items.len());
        for item in &items {
            let job = job_from_item(item)?;
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
        let item = job_item(job, self.now(), self.shards)?;
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
        // The counter (if any) right after the job, so that index 1 names a refused quota;
        // then the job's dependency edges, unconditional.
        let counter = self.active_jobs_write(&job.tenant, &limits, delta)?;
        let edges = self.edge_writes(job)?;
        let written = match (counter, edges.is_empty()) {
            (None, true) => self.put_if(item, condition, values).await,
            // Edges have no condition: a refused item 1 is the counter.
            (counter, _) => {
                let mut items = vec![self.put(item, condition, values)?];
                items.extend(counter);
                items.extend(edges);
                self.transact(items).await
            }
        };
        match written {
            Ok(()) => Ok(()),
            Err(Failure::Condition { failed_items, .. }) if failed_items.contains(&1) => {
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
        let after = page
            .cursor
            .as_deref()
            .map(|c| decode_cursor(c).ok_or_else(|| StoreError::BadCursor("malformed job cursor".into())))
            .transpose()?;
        let cond = if after.is_some() {
            "#pk = :pk AND #sk > :after"
        } else {
            "#pk = :pk"
        };
        let mut q = QuerySpec::new(Some(LIST_INDEX), cond)
            .name("#pk", GSI2_PK)
            .name("#st", "state")
            .value(":pk", s(jobs_list_pk(tenant.as_str())));
        if let Some(a) = &after {
            q = q.name("#sk", GSI2_SK).value(":after", s(a.clone()));
        }
        q = match filter.state {
            Some(st) => q.value(":st", s(st.as_str())).and_filter("#st = :st".into()),
            None => q
                .value(":st", s(JobState::Deleted.as_str()))
                .and_filter("#st <> :st".into()),
        };
        if !filter.labels.is_empty() {
            q = q.name("#lb", "labels");
            for (i, (k, v)) in filter.labels.iter().enumerate() {
                q = q
                    .name(&format!("#l{i}"), k)
                    .value(&format!(":l{i}"), s(v.clone()))
                    .and_filter(format!("#lb.#l{i} = :l{i}"));
            }
        }
        let want = page.limit.saturating_add(1);
        let copies = self.query(&q, want).await?;
        let keys = copies.iter().map(|c| {
            let r = Reader::new(c);
            key(r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default())
        });
        let items = self.fetch_in_order(keys.collect()).await?;
        let mut jobs: Vec<Job> = items.iter().map(job_from_item).collect::<Result<_, _>>()?;
        // The full item is newer than the index copy: apply the filter again.
        jobs.retain(|j| {
            filter.state.map_or(j.state != JobState::Deleted, |st| j.state == st)
                && filter.labels.iter().all(|(k, v)| j.spec.labels.get(k) == Some(v))
        });
        let more = copies.len() > page.limit;
        jobs.truncate(page.limit);
        let next_cursor = if more {
            jobs.last().map(|j| encode_cursor(j.id.as_str()))
        } else {
            None
        };
        Ok(Page {
            items: jobs,
            next_cursor,
        })
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = self.now();
        let (stored, from) = self.watermark().await?;
        let now_min = epoch_minute(ms(now));
        let to = epoch_minute(ms(horizon)).clamp(now_min, now_min + MAX_DUE_AHEAD_MINUTES);
        let below = pad_ms(ms(horizon) + 1);
        let specs = self.due_queries(from..=to, &below, true);
        let items = self.query_many(specs, limit).await?;
        // The watermark may pass every minute found empty, up to the safety margin.
        let first_busy = items
            .iter()
            .filter_map(|i| Reader::new(i).s(GSI1_PK).ok())
            .filter_map(|pk| minute_of_due_pk(&pk))
            .min();
        let safe = epoch_minute(ms(now.min(horizon))) - WATERMARK_MARGIN_MINUTES;
        let target = first_busy.map_or(safe, |b| b.min(safe)).max(from);
        self.advance_watermark(stored, target).await?;
        let mut jobs = Self::due_order(&items)?;
        jobs.retain(|j| j.next_fire_at.is_some_and(|t| t <= horizon));
        jobs.truncate(limit);
        Ok(jobs)
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let now_min = epoch_minute(ms(self.now()));
        let (_, from) = self.watermark().await?;
        let below = "~".to_string(); // above every padded time
        // Past and current minutes may hold overdue jobs filed late: read them all.
        let items = self
            .query_many(self.due_queries(from..=now_min, &below, true), 1)
            .await?;
        if let Some(first) = Self::due_order(&items)?.first() {
            return Ok(first.next_fire_at);
        }
        // Later minutes hold only jobs due in them: the first busy minute has the answer.
        for m in now_min + 1..=now_min + NEXT_DUE_WINDOW_MINUTES {
            let items = self.query_many(self.due_queries(m..=m, &below, true), 1).await?;
            if let Some(first) = Self::due_order(&items)?.first() {
                return Ok(first.next_fire_at);
            }
        }
        Ok(None)
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        // Each firing is transactions of its own; one's failure is its own answer.
        let mut out = Vec::with_capacity(firings.len());
        for firing in firings {
            out.push(self.fire_job(firing).await);
        }
        Ok(out)
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        let stored = StoredRun {
            run: truncated(run),
            last_token: 0,
            rv: 1,
        };
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
        let after = page.cursor.as_deref().map(parse_run_cursor).transpose()?;
        let want = page.limit.saturating_add(1);
        let state_filter = |q: QuerySpec| match filter.state {
            Some(st) => q
                .name("#st", "state")
                .value(":st", s(st.as_str()))
                .and_filter("#st = :st".into()),
            None => q,
        };
        let mut runs: Vec<Run> = if let Some(job) = &filter.job_id {
            // One job: its partition of the table, strongly consistent, newest first.
            let lo = filter.since.map_or(0, ms);
            let mut hi = filter.until.map_or(MAX_PADDED_MS, |t| ms(t) - 1);
            if let Some((at, _)) = &after {
                hi = hi.min(at - 1);
            }
            if hi < lo {
                return Ok(Page {
                    items: vec![],
                    next_cursor: None,
                });
            }
            let mut q = QuerySpec::new(None, "#pk = :pk AND #sk BETWEEN :lo AND :hi")
                .name("#pk", PK)
                .name("#sk", SK)
                .value(":pk", s(job_pk(tenant.as_str(), job.as_str())))
                .value(":lo", s(run_sk(lo)))
                .value(":hi", s(run_sk(hi)));
            q.forward = false;
            q.consistent = true;
            q = state_filter(q);
            let items = self.query(&q, want).await?;
            items
                .iter()
                .map(|i| run_from_item(i).map(|s| s.run))
                .collect::<Result<_, _>>()?
        } else {
            // Every job: the tenant's sharded listing partitions, merged.
            let (lo, hi, drop) = run_range(filter, after.as_ref());
            let mut specs = Vec::new();
            for shard in 0..self.shards {
                let cond = match (&lo, &hi) {
                    (Some(_), Some(_)) => "#pk = :pk AND #sk BETWEEN :lo AND :hi",
                    (Some(_), None) => "#pk = :pk AND #sk >= :lo",
                    (None, Some(_)) => "#pk = :pk AND #sk <= :hi",
                    (None, None) => "#pk = :pk",
                };
                let mut q = QuerySpec::new(Some(LIST_INDEX), cond)
                    .name("#pk", GSI2_PK)
                    .value(":pk", s(runs_list_pk(tenant.as_str(), shard)));
                if lo.is_some() || hi.is_some() {
                    q = q.name("#sk", GSI2_SK);
                }
                if let Some(l) = &lo {
                    q = q.value(":lo", s(l.clone()));
                }
                if let Some(h) = &hi {
                    q = q.value(":hi", s(h.clone()));
                }
                q.forward = false;
                specs.push(state_filter(q));
            }
            if lo.as_ref().zip(hi.as_ref()).is_some_and(|(l, h)| l > h) {
                return Ok(Page {
                    items: vec![],
                    next_cursor: None,
                });
            }
            let mut copies = self.query_many(specs, want.saturating_add(1)).await?;
            copies.retain(|c| {
                drop.as_ref()
                    .is_none_or(|d| Reader::new(c).s(GSI2_SK).ok().as_ref() != Some(d))
            });
            copies.sort_by(|a, b| {
                let sk = |i: &Item| Reader::new(i).s(GSI2_SK).unwrap_or_default();
                sk(b).cmp(&sk(a))
            });
            copies.truncate(want);
            let keys = copies.iter().map(|c| {
                let r = Reader::new(c);
                key(r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default())
            });
            let items = self.fetch_in_order(keys.collect()).await?;
            let mut runs: Vec<Run> = items
                .iter()
                .map(|i| run_from_item(i).map(|s| s.run))
                .collect::<Result<_, _>>()?;
            runs.retain(|r| filter.state.is_none_or(|st| r.state == st));
            runs
        };
        runs.sort_by(newest_first);
        let more = runs.len() > page.limit;
        runs.truncate(page.limit);
        let next_cursor = if more { runs.last().map(run_cursor) } else { None };
        Ok(Page {
            items: runs,
            next_cursor,
        })
    }

    async fn active_runs(&self, jobs: &[(TenantId, JobId)]) -> Result<Vec<Vec<Run>>, StoreError> {
        let mut out = Vec::with_capacity(jobs.len());
        for (tenant, job_id) in jobs {
            let stored = self.active_stored_runs(tenant, job_id).await?;
            out.push(stored.into_iter().map(|stored| stored.run).collect());
        }
        Ok(out)
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        let named: Vec<Option<(TenantId, JobId)>> = batch
            .runs
            .iter()
            .map(|(tenant, run_id)| Some((tenant.clone(), run_id.parts()?.0)))
            .collect();
        let jobs: Vec<Option<Job>> = match batch.read_jobs {
            true => {
                let wanted: Vec<(TenantId, JobId)> = named.iter().flatten().cloned().collect();
                let mut read = self.get_jobs(&wanted).await?.into_iter();
                named
                    .iter()
                    .map(|n| n.as_ref().and_then(|_| read.next().flatten()))
                    .collect()
            }
            false => vec![None; batch.runs.len()],
        };
        let (now, lease_until) = (trunc_ms(batch.now), trunc_ms(batch.lease_until));
        let mut out = Vec::with_capacity(batch.runs.len());
        for ((tenant, run_id), job) in batch.runs.iter().zip(jobs) {
            if let Some(job) = job.as_ref() {
                let policy = job.spec.overlap_policy();
                // A backfill run waits its turn; where the wiring holds every policy but
                // `allow` (runs fired ahead), this costs no read.
                let held = batch.hold.contains(&policy)
                    || (policy != Overlap::Allow
                        && self
                            .load_run(tenant, run_id)
                            .await?
                            .is_some_and(|stored| runs_in_turn(&stored.run, policy)));
                if held {
                    out.push(Ok(JobClaim::Held(job.clone())));
                    continue;
                }
            }
            let outcome = match batch.alone {
                true => self.claim_alone(tenant, run_id, &batch.worker, now, lease_until).await,
                false => self.claim_run(tenant, run_id, &batch.worker, now, lease_until).await,
            };
            out.push(outcome.map(|outcome| JobClaim::Claimed(outcome, job)));
        }
        Ok(out)
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
        let (run, released) = self
            .modify_run_releasing(&done.tenant, &done.run_id, |stored| {
                stored
                    .run
                    .finish_attempt(done.token, &done.result, done.next, done.only_if_expired_by)?;
                Ok((true, stored.run.clone()))
            })
            .await?;
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

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let items = self.sched_below(running_pk, ms(now), limit).await?;
        let mut runs: Vec<Run> = items
            .iter()
            .map(|i| run_from_item(i).map(|s| s.run))
            .collect::<Result<_, _>>()?;
        runs.retain(|r| r.state == RunState::Running && r.lease_expired(now));
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
        let items = self.sched_below(pending_pk, ms(ready_before) + 1, limit).await?;
        let mut runs: Vec<Run> = items
            .iter()
            .map(|i| run_from_item(i).map(|s| s.run))
            .collect::<Result<_, _>>()?;
        runs.retain(|r| r.state == RunState::Pending && r.not_before <= ready_before);
        runs.sort_by(|a, b| {
            (a.not_before, a.scheduled_for, &a.run_id).cmp(&(b.not_before, b.scheduled_for, &b.run_id))
        });
        runs.truncate(limit);
        Ok(runs)
    }
}
