//! The sweep's side of the table: the due index read from its watermark (the
//! [`JobStore`](sked_core::ports::JobStore) methods `due_jobs` and `next_due_at`; buckets,
//! shards and the watermark's margin are described in [`super`]), and firings written (`fire`).
//!
//! A firing is one `TransactWriteItems`: the job's update (conditional on version and
//! `next_fire_at`), the cancelled runs' puts (conditional on `rv`) and the new runs' puts
//! (`attribute_not_exists`). A run that exists already cancels the transaction with a
//! per-item reason, and it is retried without that run (no read up front: a first firing,
//! the usual one, finds none). A firing too large for one transaction writes its excess
//! first, in transactions that each check the job's condition.

use super::codec::{Item, Reader, StoredRun, job_due_keys, job_from_item, key, ms, n, s};
use super::keys::*;
use super::plumbing::{MAX_TRANSACTION, QuerySpec};
use super::quotas::TenantLimits;
use super::runs::MAX_RMW_ATTEMPTS;
use super::store::{DynamoStore, conflict};
use crate::error::{Failure, build_error, classify};
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem, Update};
use futures::stream::{self, StreamExt};
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::lifecycle::REPLACED;
use sked_core::ports::store::{Firing, StoreError};
use sked_core::quota::counts_as_active;
use sked_core::run::{Run, RunState};
use sked_core::timestamp::Timestamp;
use std::collections::{HashMap, HashSet};

/// The due watermark never passes a minute until this many minutes after it (clock skew
/// between writers and the sweeper, and index propagation, must fit in it).
const WATERMARK_MARGIN_MINUTES: i64 = 2;
/// `due_jobs` reads buckets at most this far past now (a sweeper looks ahead ≤ 15 minutes).
pub const MAX_DUE_AHEAD_MINUTES: i64 = 24 * 60;
/// Without a stored watermark (a table not made by [`crate::bootstrap`]), due queries start
/// this far back.
const DEFAULT_LOOKBACK_MINUTES: i64 = 24 * 60;
/// Firings written at once by one `fire` call (a sweep's batch): at ~20 ms a transaction, one
/// at a time fired ~50 jobs a second.
pub const PARALLEL_FIRINGS: usize = 16;
/// `next_due_at` looks this many minutes past now; beyond it, it answers `None` (callers
/// sleep their maximum and look again).
pub const NEXT_DUE_WINDOW_MINUTES: i64 = 15;

/// One firing's answer: the runs it inserted.
type Fired = Result<Vec<Run>, StoreError>;

/// The firings of `firings` named by `alone` (indexes) in the lanes [`DynamoStore::fire_each`]
/// writes side by side, each lane in turn: a firing that keeps its job active alone; those
/// that end their job, one lane per tenant, in their order.
fn lanes(firings: &[Firing], alone: impl IntoIterator<Item = usize>) -> Vec<Vec<usize>> {
    let mut lanes: Vec<Vec<usize>> = Vec::new();
    let mut tenant_lane: HashMap<&TenantId, usize> = HashMap::new();
    for i in alone {
        let firing = &firings[i];
        if counts_as_active(firing.state) {
            lanes.push(vec![i]);
            continue;
        }
        let lane = *tenant_lane.entry(&firing.tenant).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[lane].push(i);
    }
    lanes
}

/// Whether `firing` ends its job with one run: that run is marked
/// [`ENDS_ITS_JOB`](super::codec::ENDS_ITS_JOB).
pub(super) fn ends_its_job(firing: &Firing) -> bool {
    !counts_as_active(firing.state) && firing.runs.len() == 1
}

impl DynamoStore {
    /// The body of [`JobStore::due_jobs`](sked_core::ports::JobStore::due_jobs).
    pub(super) async fn read_due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = self.now();
        let (stored, from) = self.watermark().await?;
        let now_min = epoch_minute(ms(now));
        // A job due by the horizon is filed by then: under the minute it was written (now, up
        // to a writer's clock skew) or the filing lead before it is due.
        let to = (now_min + WATERMARK_MARGIN_MINUTES)
            .max(epoch_minute(ms(horizon) - DUE_FILED_AHEAD_MS))
            .min(now_min + MAX_DUE_AHEAD_MINUTES);
        let below = pad_ms(ms(horizon) + 1);
        // A minute's shards at a time, oldest minute first, until `limit` due jobs are found:
        // a tick sends `shards` queries at once, not every bucket of its look-ahead (moto
        // serves one request at a time; a burst of ~50 made a worker's claim wait ~1 s), and
        // stops early when the first minutes hold a full batch.
        let mut items = Vec::new();
        let mut jobs = Vec::new();
        for minute in from..=to {
            // A job whose unwritten firing this process sent is fired (`super::unwritten`):
            // each shard's read takes those of the minute on top of `limit`, so that a shard
            // whose page is short was read whole and one whose page is full holds `limit`
            // jobs not sent.
            let page = self
                .query_many(
                    self.due_queries(minute..=minute, &below, true),
                    limit.saturating_add(self.sent_in(minute)),
                )
                .await?;
            self.lone_jobs.note(&page);
            let page: Vec<Item> = page.into_iter().filter(|item| !self.due_item_sent(item)).collect();
            jobs.extend(
                Self::due_in(&page)?
                    .into_iter()
                    .filter(|j| j.next_fire_at.is_some_and(|t| t <= horizon)),
            );
            items.extend(page);
            if jobs.len() >= limit {
                break;
            }
        }
        // The watermark may pass every minute found empty, up to the safety margin.
        let first_busy = items
            .iter()
            .filter_map(|i| Reader::new(i).s(GSI1_PK).ok())
            .filter_map(|pk| minute_of_due_pk(&pk))
            .min();
        let safe = epoch_minute(ms(now.min(horizon))) - WATERMARK_MARGIN_MINUTES;
        let mut target = first_busy.map_or(safe, |b| b.min(safe)).max(from);
        // A bucket holds jobs due up to the filing lead past its minute. Those before
        // `read_whole` cannot hold one due after the horizon: the queries read them whole.
        // A later one (a sweeper looking less far ahead than the lead) is passed only if it
        // holds nothing at all.
        let read_whole = epoch_minute(ms(horizon) + 1 - DUE_FILED_AHEAD_MS);
        for minute in from.max(read_whole)..target {
            let want = 1 + self.sent_in(minute);
            let found = self
                .query_many(self.due_queries(minute..=minute, "~", true), want)
                .await?;
            // Empty but for jobs sent unwritten (read whole: `want` passes them all).
            if found.iter().any(|item| !self.due_item_sent(item)) {
                target = minute;
                break;
            }
        }
        self.advance_watermark(stored, target).await?;
        // An overdue job filed in a later minute may be due before those of earlier minutes.
        Self::by_due_time(&mut jobs);
        jobs.truncate(limit);
        Ok(jobs)
    }

    /// The body of [`JobStore::next_due_at`](sked_core::ports::JobStore::next_due_at).
    pub(super) async fn read_next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let now_min = epoch_minute(ms(self.now()));
        let (_, from) = self.watermark().await?;
        let below = "~".to_string(); // above every padded time
        // Past and current minutes may hold overdue jobs filed late: read them all.
        // Each shard's read passes the jobs this process sent in any of those minutes.
        let sent = (from..=now_min).map(|m| self.sent_in(m)).max().unwrap_or(0);
        let items = self
            .query_many(self.due_queries(from..=now_min, &below, true), 1 + sent)
            .await?;
        if let Some(first) = self.due_order_unsent(items)?.first() {
            return Ok(first.next_fire_at);
        }
        // A later minute holds only jobs due in the filing lead past it: the first busy
        // minute has the answer.
        for m in now_min + 1..=now_min + NEXT_DUE_WINDOW_MINUTES {
            let items = self
                .query_many(self.due_queries(m..=m, &below, true), 1 + self.sent_in(m))
                .await?;
            if let Some(first) = self.due_order_unsent(items)?.first() {
                return Ok(first.next_fire_at);
            }
        }
        Ok(None)
    }

    /// The body of [`JobStore::fire`](sked_core::ports::JobStore::fire): the firings that can
    /// be written together first ([`super::fire_together`]); then the others, and those of
    /// a group refused, [`PARALLEL_FIRINGS`] at a time, each in transactions of its own on its
    /// job's items — one's failure is its own answer. A firing that ends its job also moves
    /// its tenant's quota counter, one item that concurrent transactions would cancel each
    /// other on: those of one tenant go one after another.
    pub(super) async fn fire_each(&self, firings: &[Firing]) -> Result<Vec<Fired>, StoreError> {
        let mut out: Vec<Option<Fired>> = firings.iter().map(|_| None).collect();
        for (i, answer) in self.fire_unwritten(firings).await? {
            out[i] = Some(answer);
        }
        let rest: Vec<usize> = (0..firings.len()).filter(|&i| out[i].is_none()).collect();
        for (i, runs) in self.fire_together(firings, &rest).await {
            out[i] = Some(Ok(runs));
        }
        let alone: Vec<usize> = (0..firings.len()).filter(|&i| out[i].is_none()).collect();
        let answered: Vec<Vec<(usize, Fired)>> = stream::iter(lanes(firings, alone))
            .map(|lane| async move {
                let mut answers = Vec::with_capacity(lane.len());
                for i in lane {
                    answers.push((i, self.fire_job(&firings[i]).await));
                }
                answers
            })
            .buffer_unordered(PARALLEL_FIRINGS)
            .collect()
            .await;
        for (i, answer) in answered.into_iter().flatten() {
            out[i] = Some(answer);
        }
        Ok(out
            .into_iter()
            .map(|answer| answer.unwrap_or_else(|| Err(StoreError::Other("a firing went unanswered".into()))))
            .collect())
    }

    /// The due watermark: the stored minute (if any) and the minute scans start from.
    pub(super) async fn watermark(&self) -> Result<(Option<i64>, i64), StoreError> {
        let item = self.get_item(key(SWEEP_PK.into(), WATERMARK_SK.into())).await?;
        let stored = item.as_ref().map(|i| Reader::new(i).n::<i64>("minute")).transpose()?;
        if let Some(minute) = stored {
            self.note_watermark(minute);
        }
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
            Ok(_) => {
                self.note_watermark(to);
                Ok(())
            }
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

    /// Items of `items` decoded as jobs, sorted by due time (then tenant, id), but those this
    /// process sent unwritten (`super::unwritten`).
    fn due_order_unsent(&self, mut items: Vec<Item>) -> Result<Vec<Job>, StoreError> {
        items.retain(|item| !self.due_item_sent(item));
        let mut jobs = Self::due_in(&items)?;
        Self::by_due_time(&mut jobs);
        Ok(jobs)
    }

    /// The ACTIVE jobs with a due time among `items`, decoded.
    fn due_in(items: &[Item]) -> Result<Vec<Job>, StoreError> {
        let mut jobs: Vec<Job> = items.iter().map(job_from_item).collect::<Result<_, _>>()?;
        jobs.retain(|j| j.state == JobState::Active && j.next_fire_at.is_some());
        Ok(jobs)
    }

    /// Sorts `jobs` by due time, then tenant and id.
    fn by_due_time(jobs: &mut [Job]) {
        jobs.sort_by(|a, b| (a.next_fire_at, &a.tenant, &a.id).cmp(&(b.next_fire_at, &b.tenant, &b.id)));
    }

    /// The job update of a firing: new state and due keys, on condition of version and
    /// `next_fire_at` (and, firing `lone`, that the job still is: `super::lone`); or just
    /// that condition, when the job is left for a later transaction.
    pub(super) fn firing_job_write(
        &self,
        f: &Firing,
        check_only: bool,
        lone: bool,
    ) -> Result<TransactWriteItem, StoreError> {
        let k = self.job_key(f.tenant.as_str(), f.job_id.as_str());
        let mut names = HashMap::from([
            ("#v".to_string(), "version".to_string()),
            ("#nfa".to_string(), "next_fire_at".to_string()),
        ]);
        let mut values = HashMap::from([(":v".to_string(), n(f.expected_version))]);
        let mut condition = match f.expected_next_fire_at {
            Some(t) => {
                values.insert(":enfa".into(), n(ms(t)));
                "#v = :v AND #nfa = :enfa"
            }
            None => "#v = :v AND attribute_not_exists(#nfa)",
        }
        .to_string();
        if lone {
            condition.push_str(" AND attribute_exists(lone)");
        }
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

    /// One firing of [`JobStore::fire`](sked_core::ports::JobStore::fire).
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
        let mut lone = self.fires_lone(firing);
        for _ in 0..MAX_RMW_ATTEMPTS {
            // Runs that exist already (rare: a firing that committed part of its runs before
            // it failed, fired again) are not read up front: each insert is conditional on
            // its absence, and the transaction's per-item reasons name the ones to leave out
            // of the next round.
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
            let (writes, runs) = self.fired_writes(firing, lone, &skip)?;
            ops.extend(writes);
            op_runs.extend(runs);
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
                chunk.insert(0, self.firing_job_write(firing, true, lone)?);
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
                let mut last = vec![self.firing_job_write(firing, false, lone)?];
                last.extend(ops);
                last.extend(counter);
                match self.transact(last).await {
                    Ok(()) => {
                        committed.extend(op_runs.into_iter().flatten());
                        self.keep_fired(firing, &committed, lone);
                        return Ok(committed);
                    }
                    Err(f) => failed = Some((f, op_runs)),
                }
            }
            match failed {
                Some((Failure::Condition { failed_items, .. }, runs)) => {
                    // Item 0 of every transaction is the job's update or condition check.
                    if failed_items.contains(&0) {
                        let Some(job) = self.job_item(&firing.tenant, &firing.job_id).await? else {
                            return Err(StoreError::NotFound);
                        };
                        // Fired lone, and the job is lone no more (a downstream came): the
                        // same firing, its runs not lone.
                        if lone && Reader::new(&job).n::<u64>("version").ok() == Some(firing.expected_version) {
                            self.lone_jobs.note(std::slice::from_ref(&job));
                            if !self.fires_lone(firing) {
                                lone = false;
                                continue;
                            }
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

    /// Keeps the runs `firing` inserted (`lone` or not), as inserted, for their messages
    /// ([`crate::run_copies`]): a worker claims from that copy instead of reading the item.
    pub(super) fn keep_fired(&self, firing: &Firing, committed: &[Run], lone: bool) {
        let fired: HashSet<&RunId> = firing.runs.iter().map(|r| &r.run_id).collect();
        for run in committed.iter().filter(|r| fired.contains(&r.run_id)) {
            self.written_runs.keep(&StoredRun {
                lone,
                ends_its_job: ends_its_job(firing),
                ..StoredRun::new(run.clone())
            });
        }
    }

    /// The item of the job named by a firing, if it exists (to tell NotFound from Conflict).
    async fn job_item(&self, tenant: &TenantId, id: &JobId) -> Result<Option<Item>, StoreError> {
        self.get_item(self.job_key(tenant.as_str(), id.as_str())).await
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A firing of `tenant`'s `job` into `state` that inserts and cancels nothing.
    pub(in crate::dynamo) fn firing(tenant: &str, job: &str, state: JobState) -> Firing {
        Firing {
            tenant: TenantId::from(tenant),
            job_id: JobId::from(job),
            expected_version: 1,
            expected_next_fire_at: None,
            next_fire_at: None,
            state,
            runs: vec![],
            cancel: vec![],
            skipped: vec![],
            at: sked_core::timestamp::from_ms(0),
        }
    }

    #[test]
    fn jobs_kept_active_fire_alone_and_a_tenants_ended_jobs_in_one_lane() {
        let ended = JobState::Completed;
        assert!(!counts_as_active(ended));
        let firings = [
            firing("a", "1", JobState::Active),
            firing("a", "2", ended),
            firing("b", "3", ended),
            firing("a", "4", JobState::Active),
            firing("a", "5", ended),
        ];
        assert_eq!(
            lanes(&firings, 0..firings.len()),
            vec![vec![0], vec![1, 4], vec![2], vec![3]]
        );
    }
}
