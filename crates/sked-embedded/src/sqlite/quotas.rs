//! Tenants' quotas in the SQLite file: the [`QuotaStore`] of [`SqliteStore`] over
//! `tenant_quotas`, and the two checks the store's own transactions make with it — the
//! active-job count (kept in `tenant_usage` by triggers on `jobs`) on a create or a
//! reactivating update, and the count of runs holding a slot on a claim. The rules are
//! [`sked_core::quota`]'s; both checks read inside the writer's `BEGIN IMMEDIATE`
//! transaction, so concurrent writers (threads or processes) are decided one after another.

use super::codec::ms;
use super::error::TxError;
use super::store::SqliteStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use sked_core::ids::TenantId;
use sked_core::ports::{QuotaStore, StoreError};
use sked_core::quota::{self, Quota, SubmitRate};
use sked_core::timestamp::{Timestamp, trunc_ms};

/// The tenant's quota, read in the current transaction.
pub(crate) fn load_quota(conn: &Connection, tenant: &str) -> Result<Option<Quota>, TxError> {
    let row = conn
        .prepare_cached(
            "SELECT max_active_jobs, max_concurrent_runs, rate_per_second, rate_burst
             FROM tenant_quotas WHERE tenant = ?1",
        )?
        .query_row([tenant], |r| {
            let (per_second, burst): (Option<f64>, Option<i64>) = (r.get(2)?, r.get(3)?);
            Ok(Quota {
                max_active_jobs: r.get::<_, Option<i64>>(0)?.map(|v| v as u64),
                max_concurrent_runs: r.get::<_, Option<i64>>(1)?.map(|v| v as u64),
                submit_rate: per_second.zip(burst).map(|(per_second, burst)| SubmitRate {
                    per_second,
                    burst: burst as u32,
                }),
            })
        })
        .optional()?;
    Ok(row)
}

/// The tenant's jobs that are ACTIVE or PAUSED, as the triggers counted them.
pub(crate) fn active_jobs(conn: &Connection, tenant: &str) -> Result<u64, TxError> {
    let n: Option<i64> = conn
        .prepare_cached("SELECT active_jobs FROM tenant_usage WHERE tenant = ?1")?
        .query_row([tenant], |r| r.get(0))
        .optional()?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// Where the tenant has a `max_active_jobs`, its active-job count before a write (to pass to
/// [`check_active_jobs`] after it); `None` where nothing is to check.
pub(crate) fn active_jobs_before(conn: &Connection, tenant: &str) -> Result<Option<(Quota, u64)>, TxError> {
    match load_quota(conn, tenant)? {
        Some(q) if q.max_active_jobs.is_some() => Ok(Some((q, active_jobs(conn, tenant)?))),
        _ => Ok(None),
    }
}

/// Refuses (and so rolls back) the writes of this transaction if they took the tenant past
/// its `max_active_jobs` from `before`.
pub(crate) fn check_active_jobs(conn: &Connection, tenant: &str, before: Option<(Quota, u64)>) -> Result<(), TxError> {
    let Some((q, before)) = before else {
        return Ok(());
    };
    let after = active_jobs(conn, tenant)?;
    match quota::active_jobs_refusal(&q, &TenantId(tenant.to_string()), before, after) {
        Some(refusal) => Err(TxError::Store(StoreError::QuotaExceeded(refusal))),
        None => Ok(()),
    }
}

/// Whether the tenant's `max_concurrent_runs` runs already hold a slot at `now`
/// ([`quota::occupies_slot`]: RUNNING with a live lease).
pub(crate) fn at_capacity(conn: &Connection, tenant: &str, now: Timestamp) -> Result<bool, TxError> {
    let max: Option<Option<i64>> = conn
        .prepare_cached("SELECT max_concurrent_runs FROM tenant_quotas WHERE tenant = ?1")?
        .query_row([tenant], |r| r.get(0))
        .optional()?;
    let Some(max) = max.flatten() else {
        return Ok(false);
    };
    let now_ms = lease_floor(now);
    let occupied: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM runs INDEXED BY runs_leases
             WHERE state = 'RUNNING' AND lease_expires >= ?2 AND tenant = ?1",
        )?
        .query_row(params![tenant, now_ms], |r| r.get(0))?;
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
pub(crate) fn key_holders(conn: &Connection, tenant: &str, key: &str, now: Timestamp) -> Result<u64, TxError> {
    let held: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM runs INDEXED BY runs_by_key
             WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL
               AND tenant = ?1 AND concurrency_key = ?2 AND lease_expires >= ?3",
        )?
        .query_row(params![tenant, key, lease_floor(now)], |r| r.get(0))?;
    Ok(held as u64)
}

/// The smallest stored `lease_expires` (whole milliseconds) of a lease live at `now`:
/// `expires >= now` is `expires >= ceil(now)`.
fn lease_floor(now: Timestamp) -> i64 {
    ms(now) + i64::from(trunc_ms(now) != now)
}

#[async_trait]
impl QuotaStore for SqliteStore {
    async fn get_quota(&self, tenant: &TenantId) -> Result<Option<Quota>, StoreError> {
        let tenant = tenant.0.clone();
        self.read(move |conn| load_quota(conn, &tenant)).await
    }

    async fn put_quota(&self, tenant: &TenantId, quota: &Quota) -> Result<(), StoreError> {
        let (tenant, quota) = (tenant.0.clone(), quota.clone());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO tenant_quotas (tenant, max_active_jobs, max_concurrent_runs, rate_per_second, rate_burst)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant) DO UPDATE SET
                   max_active_jobs = excluded.max_active_jobs, max_concurrent_runs = excluded.max_concurrent_runs,
                   rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst",
            )?
            .execute(params![
                tenant,
                quota.max_active_jobs.map(|v| v as i64),
                quota.max_concurrent_runs.map(|v| v as i64),
                quota.submit_rate.map(|r| r.per_second),
                quota.submit_rate.map(|r| i64::from(r.burst)),
            ])?;
            Ok(())
        })
        .await
    }
}
