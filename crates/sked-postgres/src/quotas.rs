//! Tenants' quotas on PostgreSQL: the [`QuotaStore`] of [`PgStore`] over `tenant_quotas`, and
//! the two checks the store's own transactions make with it — the active-job count (kept in
//! `tenant_usage` by a trigger on `jobs`) on a create or a reactivating update, and the count
//! of runs holding a slot on a claim. The rules are [`sked_core::quota`]'s.
//!
//! The active-job check reads inside the writer's `SERIALIZABLE` transaction. The claim's
//! counts (a capped tenant's running attempts, a concurrency key's holders) run at `READ
//! COMMITTED` after the claim took the advisory lock of the tenant's cap or of the key
//! ([`crate::locks::lock_claims`]), so racing claims from any number of connections and hosts
//! count one after the other and never pass a cap together. The counts read only the tenant's
//! (or the key's) RUNNING runs through their own partial indexes (`runs_slots`,
//! `runs_by_key`).

use crate::codec::{get, ms};
use crate::store::{PgStore, read_rows};
use crate::tx::{Tx, TxError};
use async_trait::async_trait;
use sked_core::ids::TenantId;
use sked_core::ports::{QuotaStore, StoreError};
use sked_core::quota::{self, Quota, SubmitRate};
use sked_core::timestamp::{Timestamp, trunc_ms};
use tokio_postgres::Row;

/// The tenant's quota row, selected by `tenant = $1`.
const QUOTA: &str = "SELECT max_active_jobs, max_concurrent_runs, rate_per_second, rate_burst
     FROM tenant_quotas WHERE tenant = $1";

fn quota_from_row(r: &Row) -> Result<Quota, TxError> {
    let (per_second, burst): (Option<f64>, Option<i64>) = (get(r, 2)?, get(r, 3)?);
    Ok(Quota {
        max_active_jobs: get::<Option<i64>>(r, 0)?.map(|v| v as u64),
        max_concurrent_runs: get::<Option<i64>>(r, 1)?.map(|v| v as u64),
        submit_rate: per_second.zip(burst).map(|(per_second, burst)| SubmitRate {
            per_second,
            burst: burst as u32,
        }),
    })
}

/// The tenant's quota, read in the current transaction.
pub(crate) fn load_quota(tx: &mut Tx, tenant: &str) -> Result<Option<Quota>, TxError> {
    tx.query_opt(QUOTA, &[&tenant])?
        .as_ref()
        .map(quota_from_row)
        .transpose()
}

/// The tenant's jobs that are ACTIVE or PAUSED, as the trigger counted them.
pub(crate) fn active_jobs(tx: &mut Tx, tenant: &str) -> Result<u64, TxError> {
    let n: Option<i64> = match tx.query_opt("SELECT active_jobs FROM tenant_usage WHERE tenant = $1", &[&tenant])? {
        Some(row) => Some(get(&row, 0)?),
        None => None,
    };
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// Where the tenant has a `max_active_jobs`, its active-job count before a write (to pass to
/// [`check_active_jobs`] after it); `None` where nothing is to check.
pub(crate) fn active_jobs_before(tx: &mut Tx, tenant: &str) -> Result<Option<(Quota, u64)>, TxError> {
    match load_quota(tx, tenant)? {
        Some(q) if q.max_active_jobs.is_some() => Ok(Some((q, active_jobs(tx, tenant)?))),
        _ => Ok(None),
    }
}

/// Refuses (and so rolls back) the writes of this transaction if they took the tenant past
/// its `max_active_jobs` from `before`.
pub(crate) fn check_active_jobs(tx: &mut Tx, tenant: &str, before: Option<(Quota, u64)>) -> Result<(), TxError> {
    let Some((q, before)) = before else {
        return Ok(());
    };
    let after = active_jobs(tx, tenant)?;
    match quota::active_jobs_refusal(&q, &TenantId(tenant.to_string()), before, after) {
        Some(refusal) => Err(TxError::Store(StoreError::QuotaExceeded(refusal))),
        None => Ok(()),
    }
}

/// The tenant's (`$1`) running attempts whose lease holds at `$2`.
pub(crate) const TENANT_RUNNING: &str =
    "SELECT count(*) FROM runs WHERE state = 'RUNNING' AND tenant = $1 AND lease_expires >= $2";

/// The tenant's (`$1`) running attempts holding concurrency key `$2` whose lease holds at `$3`.
pub(crate) const KEY_HOLDERS: &str = "SELECT count(*) FROM runs
     WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL
       AND tenant = $1 AND concurrency_key = $2 AND lease_expires >= $3";

/// Whether the tenant's `max_concurrent_runs` runs already hold a slot at `now`
/// ([`quota::occupies_slot`]: RUNNING with a live lease).
pub(crate) fn at_capacity(tx: &mut Tx, tenant: &str, now: Timestamp) -> Result<bool, TxError> {
    let max: Option<i64> = match tx.claims.cap(tenant) {
        // Read with the batch's runs, before the cap's lock was taken.
        Some(cap) => cap,
        None => match tx.query_opt(
            "SELECT max_concurrent_runs FROM tenant_quotas WHERE tenant = $1",
            &[&tenant],
        )? {
            Some(row) => get(&row, 0)?,
            None => None,
        },
    };
    let Some(max) = max else {
        return Ok(false);
    };
    let occupied: i64 = get(&tx.query_one(TENANT_RUNNING, &[&tenant, &lease_floor(now)])?, 0)?;
    Ok(quota::at_capacity(
        &Quota {
            max_concurrent_runs: Some(max.max(0) as u64),
            ..Quota::default()
        },
        occupied as u64,
    ))
}

/// How many of the tenant's runs hold concurrency `key` at `now`
/// ([`quota::occupies_slot`], as for the tenant's cap).
pub(crate) fn key_holders(tx: &mut Tx, tenant: &str, key: &str, now: Timestamp) -> Result<u64, TxError> {
    let held: i64 = get(&tx.query_one(KEY_HOLDERS, &[&tenant, &key, &lease_floor(now)])?, 0)?;
    Ok(held as u64)
}

/// The smallest stored `lease_expires` (whole milliseconds) of a lease live at `now`:
/// `expires >= now` is `expires >= ceil(now)`.
fn lease_floor(now: Timestamp) -> i64 {
    ms(now) + i64::from(trunc_ms(now) != now)
}

#[async_trait]
impl QuotaStore for PgStore {
    async fn get_quota(&self, tenant: &TenantId) -> Result<Option<Quota>, StoreError> {
        let rows = read_rows(self.db(), QUOTA, &[&tenant.as_str()]).await?;
        rows.first()
            .map(quota_from_row)
            .transpose()
            .map_err(TxError::into_store)
    }

    async fn put_quota(&self, tenant: &TenantId, quota: &Quota) -> Result<(), StoreError> {
        let (tenant, quota) = (tenant.0.clone(), quota.clone());
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO tenant_quotas (tenant, max_active_jobs, max_concurrent_runs, rate_per_second, rate_burst)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant) DO UPDATE SET
                   max_active_jobs = excluded.max_active_jobs, max_concurrent_runs = excluded.max_concurrent_runs,
                   rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst",
                &[
                    &tenant,
                    &quota.max_active_jobs.map(|v| v as i64),
                    &quota.max_concurrent_runs.map(|v| v as i64),
                    &quota.submit_rate.map(|r| r.per_second),
                    &quota.submit_rate.map(|r| i64::from(r.burst)),
                ],
            )?;
            Ok(())
        })
        .await
    }
}
