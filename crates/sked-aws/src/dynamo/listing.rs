//! Listings on DynamoDB: the [`JobStore`](sked_core::ports::JobStore) methods `list_jobs`
//! and `list_runs`. They filter the `list` index's copies (eventually consistent; layout in
//! [`super`]) and read the page's full items with a consistent `BatchGetItem`, filtering
//! again; a run listing of one job reads the job's partition of the table instead. A
//! tenant's runs are sharded in the index, and the shards merged newest first. Cursors are
//! opaque (hex) encodings of the last item's listing position: a job id, or a run's nominal
//! time and id.

use super::codec::{Item, LISTED_STATE, RUN_STATE, Reader, key, listed_in_every_mode, ms, run_from_item, s};
use super::keys::*;
use super::plumbing::QuerySpec;
use super::store::DynamoStore;
use crate::JobKeys;
use sked_core::ids::TenantId;
use sked_core::job::{Job, JobState};
use sked_core::ports::store::{JobFilter, Page, PageRequest, RunFilter, StoreError};
use sked_core::run::{Run, RunState};
use std::collections::HashMap;

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

/// The query of one shard of a tenant's runs in the `list` index, newest first, within
/// `[lo, hi]`. A filter on a state some copies may not carry keeps the copies without one
/// (their items are filtered again).
fn runs_list_query(
    tenant: &TenantId,
    shard: u32,
    (lo, hi): (&Option<String>, &Option<String>),
    state: Option<RunState>,
) -> QuerySpec {
    let cond = match (lo, hi) {
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
    if let Some(l) = lo {
        q = q.value(":lo", s(l.clone()));
    }
    if let Some(h) = hi {
        q = q.value(":hi", s(h.clone()));
    }
    q.forward = false;
    match state {
        Some(st) if listed_in_every_mode(st) => q
            .name("#st", LISTED_STATE)
            .value(":st", s(st.as_str()))
            .and_filter("#st = :st".into()),
        Some(st) => q
            .name("#st", LISTED_STATE)
            .value(":st", s(st.as_str()))
            .and_filter("(attribute_not_exists(#st) OR #st = :st)".into()),
        None => q,
    }
}

/// The listing position (nominal time, run id) of a run's `list` sort key ([`runs_list_sk`]).
fn list_position(sort_key: &str) -> Option<(i64, String)> {
    let (at, id) = sort_key.split_once('#')?;
    Some((at.parse().ok()?, id.to_string()))
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

/// Where a tenant's jobs are read in job id order: the `list` index's partition of them, or —
/// jobs keyed by tenant shards ([`JobKeys::TenantShards`]) — the table's own shards of them,
/// read consistently, whose items are the jobs themselves.
pub(super) struct TenantJobs {
    /// One query per partition, from after `after` if given.
    pub(super) queries: Vec<QuerySpec>,
    /// The attribute holding each item's job id, the partitions' sort key.
    pub(super) sort_key: &'static str,
    /// Whether the items read are index copies (their full items still to read).
    pub(super) copies: bool,
}

impl DynamoStore {
    /// The queries of `tenant`'s jobs in id order (after `after`), without filter.
    pub(super) fn tenant_jobs(&self, tenant: &TenantId, after: Option<&str>) -> TenantJobs {
        let cond = if after.is_some() {
            "#pk = :pk AND #sk > :after"
        } else {
            "#pk = :pk"
        };
        let query = |index, pk_attr, sk_attr, pk: String| {
            let mut q = QuerySpec::new(index, cond).name("#pk", pk_attr).value(":pk", s(pk));
            if let Some(a) = after {
                q = q.name("#sk", sk_attr).value(":after", s(a));
            }
            q
        };
        let t = tenant.as_str();
        match self.job_keys {
            JobKeys::PerJob => TenantJobs {
                queries: vec![query(Some(LIST_INDEX), GSI2_PK, GSI2_SK, jobs_list_pk(t))],
                sort_key: GSI2_SK,
                copies: true,
            },
            JobKeys::TenantShards => TenantJobs {
                queries: (0..JOB_SHARDS)
                    .map(|shard| {
                        let mut q = query(None, PK, SK, jobs_pk(t, shard));
                        q.consistent = true;
                        q
                    })
                    .collect(),
                sort_key: SK,
                copies: false,
            },
        }
    }

    /// The body of [`JobStore::list_jobs`](sked_core::ports::JobStore::list_jobs).
    pub(super) async fn job_page(
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
        let TenantJobs {
            queries,
            sort_key,
            copies: index_copies,
        } = self.tenant_jobs(tenant, after.as_deref());
        let filtered = |q: QuerySpec| self.job_filter(q, filter);
        let want = page.limit.saturating_add(1);
        let mut copies = self
            .query_many(queries.into_iter().map(filtered).collect(), want)
            .await?;
        let id_of = |c: &Item| Reader::new(c).s(sort_key).unwrap_or_default();
        copies.sort_by_key(id_of);
        copies.truncate(want);
        let fetched;
        let items = if index_copies {
            let keys = copies.iter().map(|c| {
                let r = Reader::new(c);
                key(r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default())
            });
            fetched = self.fetch_in_order(keys.collect()).await?;
            &fetched
        } else {
            &copies
        };
        let mut jobs: Vec<Job> = self.jobs_shown(items).await?;
        // The full item is newer than the index copy: apply the filter again.
        jobs.retain(|j| {
            filter.state.map_or(j.state != JobState::Deleted, |st| j.state == st)
                && filter.labels.iter().all(|(k, v)| j.spec.labels.get(k) == Some(v))
        });
        let more = copies.len() > page.limit;
        jobs.truncate(page.limit);
        // A page its filter emptied (copies of jobs that no longer match: an ACTIVE one-shot
        // read for COMPLETED that was not fired) goes on from its last copy.
        let next_cursor = if more {
            jobs.last()
                .map(|j| j.id.as_str().to_string())
                .or_else(|| copies.get(page.limit.saturating_sub(1)).map(id_of))
                .map(|id| encode_cursor(&id))
        } else {
            None
        };
        Ok(Page {
            items: jobs,
            next_cursor,
        })
    }

    /// `q` filtered on a job listing's `filter` (state, labels), as the items or index copies
    /// it reads hold them.
    fn job_filter(&self, q: QuerySpec, filter: &JobFilter) -> QuerySpec {
        let q = q.name("#st", "state");
        let mut q = match filter.state {
            // A COMPLETED one-shot may be one whose firing was left unwritten: stored ACTIVE
            // (`super::unwritten`), shown so below.
            Some(JobState::Completed) if self.unwritten.is_some() => q
                .value(":st", s(JobState::Completed.as_str()))
                .value(":active", s(JobState::Active.as_str()))
                .and_filter("(#st = :st OR #st = :active)".into()),
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
        q
    }

    /// The body of [`JobStore::list_runs`](sked_core::ports::JobStore::list_runs).
    pub(super) async fn run_page(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        let after = page.cursor.as_deref().map(parse_run_cursor).transpose()?;
        let want = page.limit.saturating_add(1);
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
            // A run's state is `run_state`, or `state` on items written before it existed
            // (where both are present they are the same).
            if let Some(st) = filter.state {
                q = q
                    .name("#rs", RUN_STATE)
                    .name("#st", LISTED_STATE)
                    .value(":st", s(st.as_str()))
                    .and_filter("(#rs = :st OR #st = :st)".into());
            }
            let items = self.query(&q, want).await?;
            let mut runs: Vec<Run> = items
                .iter()
                .map(|i| run_from_item(i).map(|s| s.run))
                .collect::<Result<_, _>>()?;
            // Its one-shot's run shown but not written (`super::unwritten`), if in range.
            if let Some(shown) = self.unwritten_run_of(tenant, job).await?.map(|stored| stored.run)
                && (lo..=hi).contains(&ms(shown.scheduled_for))
                && filter.state.is_none_or(|st| st == shown.state)
            {
                runs.push(shown);
            }
            runs
        } else {
            // Every job: the tenant's sharded listing partitions, merged.
            self.tenant_runs(tenant, filter, after, want).await?
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

    /// A tenant's runs matching `filter`, newest first, below `after` (a listing position):
    /// up to `want` (and possibly more, all newer than any left), from its sharded `list`
    /// partitions merged. The page's full items are read and filtered again: a copy may pass
    /// the index's filter and its item not (an active run's copy carries no state, and a copy
    /// may be older than its item), so rounds of `want` copies are read, each below the last,
    /// until `want` match or the partitions hold no more.
    async fn tenant_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        after: Option<(i64, String)>,
        want: usize,
    ) -> Result<Vec<Run>, StoreError> {
        let mut position = after;
        let mut runs = Vec::new();
        loop {
            let (lo, hi, drop) = run_range(filter, position.as_ref());
            if lo.as_ref().zip(hi.as_ref()).is_some_and(|(l, h)| l > h) {
                return Ok(runs);
            }
            let specs = (0..self.shards)
                .map(|shard| runs_list_query(tenant, shard, (&lo, &hi), filter.state))
                .collect();
            let sort_key = |i: &Item| Reader::new(i).s(GSI2_SK).unwrap_or_default();
            let mut copies = self.query_many(specs, want.saturating_add(1)).await?;
            copies.retain(|c| drop.as_ref().is_none_or(|d| sort_key(c) != *d));
            copies.sort_by_key(|c| std::cmp::Reverse(sort_key(c)));
            copies.truncate(want);
            let more_copies = copies.len() == want;
            position = copies.last().and_then(|c| list_position(&sort_key(c)));
            let keys = copies.iter().map(|c| {
                let r = Reader::new(c);
                key(r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default())
            });
            for item in self.fetch_in_order(keys.collect()).await? {
                let run = run_from_item(&item)?.run;
                if filter.state.is_none_or(|st| run.state == st) {
                    runs.push(run);
                }
            }
            if runs.len() >= want || !more_copies || position.is_none() {
                return Ok(runs);
            }
        }
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
