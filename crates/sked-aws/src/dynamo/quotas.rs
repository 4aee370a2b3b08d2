//! Tenants' quotas on DynamoDB: the [`QuotaStore`] of [`DynamoStore`], and the items that
//! its create, update, fire and claim transactions add to hold them (the rules are
//! [`sked_core::quota`]'s).
//!
//! A tenant's own partition, `T#<tenant>#TENANT`, holds:
//! - `QUOTA`: the quota (JSON in `quota`) and, once the tenant has had a `max_active_jobs`,
//!   `active_jobs`: its jobs ACTIVE or PAUSED. Every write that changes that number (a create,
//!   an update that pauses, resumes, deletes or revives, a firing that completes a job) adds
//!   `ADD active_jobs :delta` to its own transaction, on condition that the count stays within
//!   the limit — so two creates at once cannot pass it together.
//! - `SLOT#<i>` for `i` < `max_concurrent_runs`: the tenant's slot pool ([`super::slots`]); a
//!   claim with none free answers `AtCapacity`.
//!
//! A tenant without a quota costs its writes one read of `QUOTA` per [`QUOTA_CACHE_MS`] per
//! process and nothing else: no item shared by all of a tenant's writes unless it has a limit
//! that needs one (DynamoDB refuses concurrent transactions on one item, and one partition
//! takes ~1,000 writes/s).
//!
//! Operating limits (DynamoDB only; SQLite decides every write on the stored quota):
//! - A changed quota reaches other processes within [`QUOTA_CACHE_MS`].
//! - When a tenant's first `max_active_jobs` is set, its active jobs are counted from the
//!   `list` index (eventually consistent): jobs created in that same second by a process that
//!   has not yet seen the quota can be missing from the count. The count is exact from then on
//!   (it is kept even if the limit is removed later, so it never needs counting again).

use super::codec::{Item, Reader, key, n, s};
use super::keys::{QUOTA_SK, tenant_pk};
use super::store::DynamoStore;
use crate::error::{Failure, build_error, classify};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use sked_core::ids::TenantId;
use sked_core::job::JobState;
use sked_core::ports::{QuotaStore, StoreError};
use sked_core::quota::{Quota, active_jobs_refusal};
use sked_core::timestamp::Timestamp;
use std::collections::HashMap;
use std::sync::Mutex;

/// How long a process trusts the quota it last read for a tenant.
pub const QUOTA_CACHE_MS: i64 = 1_000;

/// What a tenant's writes need to know of its quota.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct TenantLimits {
    /// The quota (no limits when none was set).
    pub quota: Quota,
    /// Whether `active_jobs` is kept for the tenant.
    pub counting: bool,
}

/// The tenants' limits this process read lately.
#[derive(Debug, Default)]
pub(super) struct QuotaCache {
    entries: Mutex<HashMap<TenantId, (Timestamp, TenantLimits)>>,
}

impl QuotaCache {
    fn fresh(&self, tenant: &TenantId, now: Timestamp) -> Option<TenantLimits> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (read_at, limits) = entries.get(tenant)?;
        let age = (now - *read_at).num_milliseconds();
        (0..QUOTA_CACHE_MS).contains(&age).then(|| limits.clone())
    }

    fn keep(&self, tenant: &TenantId, now: Timestamp, limits: TenantLimits) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(tenant.clone(), (now, limits));
    }

    fn forget(&self, tenant: &TenantId) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).remove(tenant);
    }
}

fn quota_key(tenant: &TenantId) -> Item {
    key(tenant_pk(tenant.as_str()), QUOTA_SK.into())
}

impl DynamoStore {
    /// The tenant's limits, as read at most [`QUOTA_CACHE_MS`] ago.
    pub(super) async fn tenant_limits(&self, tenant: &TenantId) -> Result<TenantLimits, StoreError> {
        let now = self.now();
        if let Some(limits) = self.quota_cache.fresh(tenant, now) {
            return Ok(limits);
        }
        let limits = self.read_limits(tenant).await?;
        self.quota_cache.keep(tenant, now, limits.clone());
        Ok(limits)
    }

    async fn read_limits(&self, tenant: &TenantId) -> Result<TenantLimits, StoreError> {
        let Some(item) = self.get_item(quota_key(tenant)).await? else {
            return Ok(TenantLimits::default());
        };
        let r = Reader::new(&item);
        Ok(TenantLimits {
            quota: r.json("quota")?,
            counting: r.opt_n::<i64>("active_jobs")?.is_some(),
        })
    }

    /// The counter update of a write that changes the tenant's active jobs by `delta`, when the
    /// tenant is counted; `QuotaExceeded` at once when `delta` alone passes the limit.
    pub(super) fn active_jobs_write(
        &self,
        tenant: &TenantId,
        limits: &TenantLimits,
        delta: i64,
    ) -> Result<Option<TransactWriteItem>, StoreError> {
        if !limits.counting || delta == 0 {
            return Ok(None);
        }
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(quota_key(tenant)))
            .update_expression("ADD active_jobs :delta")
            .expression_attribute_values(":delta", n(delta));
        if let (Some(max), Ok(adding)) = (limits.quota.max_active_jobs, u64::try_from(delta)) {
            let Some(room) = max.checked_sub(adding) else {
                return Err(StoreError::QuotaExceeded(
                    active_jobs_refusal(&limits.quota, tenant, 0, adding).unwrap_or_default(),
                ));
            };
            update = update
                .condition_expression("active_jobs <= :room")
                .expression_attribute_values(":room", n(room));
        }
        Ok(Some(
            TransactWriteItem::builder()
                .update(update.build().map_err(build_error)?)
                .build(),
        ))
    }

    /// The refusal of a write whose `active_jobs` condition failed, with the count as it is.
    pub(super) async fn active_jobs_refused(&self, tenant: &TenantId, limits: &TenantLimits, delta: i64) -> StoreError {
        let before = match self.get_item(quota_key(tenant)).await {
            Ok(Some(item)) => Reader::new(&item)
                .opt_n::<u64>("active_jobs")
                .ok()
                .flatten()
                .unwrap_or(0),
            Ok(None) => 0,
            Err(e) => return e,
        };
        let after = before.saturating_add(delta.max(0) as u64);
        StoreError::QuotaExceeded(
            active_jobs_refusal(&limits.quota, tenant, before, after)
                .unwrap_or_else(|| format!("tenant {tenant} is at its max_active_jobs")),
        )
    }

    /// The tenant's jobs ACTIVE or PAUSED, counted where its jobs are listed (the `list`
    /// index, or the table's shards of them: `listing::TenantJobs`).
    async fn count_active_jobs(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let queries = self.tenant_jobs(tenant, None).queries.into_iter().map(|q| {
            q.name("#st", "state")
                .value(":active", s(JobState::Active.as_str()))
                .value(":paused", s(JobState::Paused.as_str()))
                .and_filter("#st IN (:active, :paused)".into())
        });
        Ok(self.query_many(queries.collect(), usize::MAX).await?.len() as u64)
    }

    async fn update_quota_item(
        &self,
        tenant: &TenantId,
        quota_json: &str,
        start_count: Option<u64>,
    ) -> Result<(), Failure> {
        let req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(quota_key(tenant)))
            .expression_attribute_names("#quota", "quota")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":quota", s(quota_json))
            .expression_attribute_values(":kind", s("quota"));
        let req = match start_count {
            None => req.update_expression("SET #quota = :quota, #kind = :kind"),
            Some(count) => req
                .update_expression("SET #quota = :quota, #kind = :kind, active_jobs = :count")
                .condition_expression("attribute_not_exists(active_jobs)")
                .expression_attribute_values(":count", n(count)),
        };
        req.send()
            .await
            .map(|_| ())
            .map_err(|e| classify("dynamodb:UpdateItem", e, |_| None))
    }
}

#[async_trait]
impl QuotaStore for DynamoStore {
    async fn get_quota(&self, tenant: &TenantId) -> Result<Option<Quota>, StoreError> {
        self.get_item(quota_key(tenant))
            .await?
            .map(|item| Reader::new(&item).json("quota").map_err(StoreError::from))
            .transpose()
    }

    async fn put_quota(&self, tenant: &TenantId, quota: &Quota) -> Result<(), StoreError> {
        let quota_json = serde_json::to_string(quota).map_err(|e| StoreError::Other(Box::new(e)))?;
        let current = self.read_limits(tenant).await?;
        let start_count = match (quota.max_active_jobs, current.counting) {
            (Some(_), false) => Some(self.count_active_jobs(tenant).await?),
            _ => None,
        };
        match self.update_quota_item(tenant, &quota_json, start_count).await {
            Ok(()) => {}
            // Another writer started the count meanwhile: keep its count.
            Err(Failure::Condition { .. }) => self
                .update_quota_item(tenant, &quota_json, None)
                .await
                .map_err(|f| f.into_store(String::new))?,
            Err(f) => return Err(f.into_store(String::new)),
        }
        self.quota_cache.forget(tenant);
        Ok(())
    }
}
