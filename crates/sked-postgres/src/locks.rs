//! The lock discipline that lets the hand-over's transactions (claims, completions,
//! heartbeats, firings, cancels, releases) run at `READ COMMITTED` and still decide as if
//! alone: what each one locks, and in which order.
//!
//! - **A run row** is locked (`SELECT … FOR UPDATE`) before anything is decided on it, by
//!   every path that writes it: two claims of one run, or a claim and a completion, decide
//!   one after the other, the second on the row the first committed (no double claim; the
//!   fencing token read is the last one written, so tokens only grow).
//! - **A job row** is locked before a firing decides on it (`still_applies_to`), so two
//!   sweeps never both fire one occurrence (a call's jobs all at once, sorted).
//! - **Advisory locks** (`pg_advisory_xact_lock`, held to the transaction's end) stand for
//!   what a claim counts rather than a row: a concurrency key's slots (`key`), a capped
//!   tenant's running attempts (`cap`), a job's other runs for a claim that must run alone
//!   (`job`), and a downstream occurrence an upstream's end decides (`occurrence`). A claim
//!   counts only in a statement after its lock is granted, so it sees every claim that held
//!   the lock before it committed. A completion takes its run's key before waking a message
//!   parked on the key, so a park and the wake that should follow it are never missed.
//!
//! Order, so that two transactions never wait for each other: rows first (a batch's runs all
//! at once, sorted by tenant and run id), then advisory locks (a batch's all at once, sorted
//! by their 64-bit number). Paths that take one lock of a kind at a time (a completion's
//! occurrences, then its key) may still meet a claim in the other order; PostgreSQL then
//! reports a deadlock (40P01) and the transaction is run again (`tx.rs`), which is rare. So
//! may a receive (its messages locked, then its runs) and a completion (its run locked, then
//! its message deleted), only when a message was delivered again while its attempt still runs.
//!
//! Advisory lock numbers are FNV-1a hashes of a text naming what is locked: stable across
//! processes and versions (every host must compute the same number), and a collision only
//! makes two unrelated claims wait for each other.
//! Must not: decide anything — `sked-core` does, on what these functions read.

use crate::codec::{JOB_COLS, RUN_COLS, RUN_KEYS_IN, RunKeys, StoredRun, get, job_from_row, run_from_row};
use crate::tx::{Tx, TxError};
use sked_core::ids::{JobId, TenantId};
use sked_core::job::Job;
use sked_core::ports::ClaimBatch;
use sked_core::timestamp::Timestamp;
use std::collections::HashMap;
use tokio_postgres::Row;

/// What a batch's lock step read, for its claims to use instead of reading again (kept in the
/// transaction, [`Tx::claims`]; empty in a transaction that did not lock a batch).
#[derive(Debug, Default)]
pub(crate) struct LockedForClaims {
    /// The batch's runs, as locked (taken by the claim that writes each).
    runs: HashMap<(String, String), StoredRun>,
    /// Each batch tenant's `max_concurrent_runs` (`None`: no cap).
    caps: HashMap<String, Option<i64>>,
    /// The runs' jobs, for a batch that reads them (`None`: it does not exist).
    jobs: HashMap<(String, String), Option<Job>>,
}

impl LockedForClaims {
    /// The run as locked, if this batch locked it and no claim has taken it yet.
    pub(crate) fn peek(&self, tenant: &str, run_id: &str) -> Option<&StoredRun> {
        self.runs.get(&(tenant.to_string(), run_id.to_string()))
    }

    /// The run as locked, for the claim that will write it.
    pub(crate) fn take(&mut self, tenant: &str, run_id: &str) -> Option<StoredRun> {
        self.runs.remove(&(tenant.to_string(), run_id.to_string()))
    }

    /// The tenant's cap, if the batch read it.
    pub(crate) fn cap(&self, tenant: &str) -> Option<Option<i64>> {
        self.caps.get(tenant).copied()
    }

    /// The job, if the batch read it (`Some(None)`: it does not exist).
    pub(crate) fn job(&self, tenant: &str, id: &str) -> Option<Option<Job>> {
        self.jobs.get(&(tenant.to_string(), id.to_string())).cloned()
    }
}

/// The run, locked until the transaction ends (`None`: it does not exist).
pub(crate) fn lock_run(tx: &mut Tx, tenant: &str, run_id: &str) -> Result<Option<StoredRun>, TxError> {
    let row = tx.query_opt(
        &format!("SELECT {RUN_COLS} FROM runs WHERE tenant = $1 AND run_id = $2 FOR UPDATE"),
        &[&tenant, &run_id],
    )?;
    row.as_ref().map(run_from_row).transpose()
}

/// The runs of `keys` (tenant, run id) that exist, locked until the transaction ends, to
/// close attempts, in one statement (rows locked in tenant and run id order): each read with
/// whether any job runs `after` its job, so that a run with no downstream job (almost every
/// one) releases nothing without another statement (`tx.no_downstream`).
pub(crate) fn lock_runs_to_end(
    tx: &mut Tx,
    keys: &[(&str, &str)],
) -> Result<HashMap<(String, String), StoredRun>, TxError> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let keys = RunKeys::of(keys.iter().copied());
    let rows = tx.query(
        &format!(
            "SELECT {RUN_COLS}, EXISTS (SELECT 1 FROM job_after a WHERE a.tenant = runs.tenant AND a.upstream = runs.job_id)
             FROM runs WHERE {RUN_KEYS_IN}
             ORDER BY tenant, run_id FOR UPDATE OF runs"
        ),
        &keys.params(),
    )?;
    let mut runs = HashMap::with_capacity(rows.len());
    for row in &rows {
        let stored = run_from_row(row)?;
        let has_downstream: bool = get(row, RUN_COLS.split(',').count())?;
        let (tenant, job_id) = (stored.run.tenant.as_str(), stored.run.job_id.as_str());
        if !has_downstream {
            tx.no_downstream.insert((tenant.to_string(), job_id.to_string()));
        }
        runs.insert((tenant.to_string(), stored.run.run_id.as_str().to_string()), stored);
    }
    Ok(runs)
}

/// The jobs of `keys` (tenant, id) that exist, locked until the transaction ends, in one
/// statement (rows locked in tenant and id order).
pub(crate) fn lock_jobs(tx: &mut Tx, keys: &[(&str, &str)]) -> Result<HashMap<(String, String), Job>, TxError> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let (tenants, ids): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    let rows = tx.query(
        &format!(
            "SELECT {JOB_COLS} FROM jobs WHERE (tenant, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
             ORDER BY tenant, id FOR UPDATE"
        ),
        &[&tenants, &ids],
    )?;
    rows.iter()
        .map(|row| {
            let job = job_from_row(row)?;
            Ok(((job.tenant.as_str().to_string(), job.id.as_str().to_string()), job))
        })
        .collect()
}

/// A lock's number: the FNV-1a hash of its name.
fn lock_number(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// The advisory lock of a tenant's concurrency `key`.
pub(crate) fn key_lock(tenant: &str, key: &str) -> i64 {
    lock_number(&format!("sked key\u{1f}{tenant}\u{1f}{key}"))
}

/// The advisory lock of a capped tenant's running attempts.
fn cap_lock(tenant: &str) -> i64 {
    lock_number(&format!("sked cap\u{1f}{tenant}"))
}

/// The advisory lock of a job's runs, for claims that must run alone.
fn job_lock(tenant: &str, job_id: &str) -> i64 {
    lock_number(&format!("sked job\u{1f}{tenant}\u{1f}{job_id}"))
}

/// The advisory lock of a downstream occurrence (`job_id` at `t`, in milliseconds).
fn occurrence_lock(tenant: &str, job_id: &str, t_ms: i64) -> i64 {
    lock_number(&format!("sked occurrence\u{1f}{tenant}\u{1f}{job_id}\u{1f}{t_ms}"))
}

/// Takes the advisory locks `numbers` (sorted and deduplicated here), in one statement.
pub(crate) fn advisory_locks(tx: &mut Tx, mut numbers: Vec<i64>) -> Result<(), TxError> {
    if numbers.is_empty() {
        return Ok(());
    }
    numbers.sort_unstable();
    numbers.dedup();
    // A function scan of `unnest` yields the array in order: the locks are taken in it.
    tx.query(
        "SELECT pg_advisory_xact_lock(n) FROM unnest($1::bigint[]) AS n",
        &[&numbers],
    )?;
    Ok(())
}

/// Locks a downstream occurrence until the transaction ends.
pub(crate) fn lock_occurrence(tx: &mut Tx, tenant: &TenantId, job_id: &JobId, t: Timestamp) -> Result<(), TxError> {
    advisory_locks(
        tx,
        vec![occurrence_lock(tenant.as_str(), job_id.as_str(), t.timestamp_millis())],
    )
}

/// Locks what the claims of `batch` decide on, in the module's order: its runs (read with
/// their tenant's cap, in one statement), then the keys of those with a concurrency key, the
/// capped tenants, and — for a batch that claims alone — the runs' jobs. What was read is kept
/// in `tx.claims` for the claims.
pub(crate) fn lock_claims(tx: &mut Tx, batch: &ClaimBatch) -> Result<(), TxError> {
    if batch.runs.is_empty() {
        return Ok(());
    }
    let keys = RunKeys::of(batch.runs.iter().map(|(t, r)| (t.as_str(), r.as_str())));
    // The rows are locked in the sort's order (the locking node is above it).
    let lock_runs = format!(
        "SELECT {RUN_COLS}, (SELECT q.max_concurrent_runs FROM tenant_quotas q WHERE q.tenant = runs.tenant)
         FROM runs WHERE {RUN_KEYS_IN}
         ORDER BY tenant, run_id FOR UPDATE OF runs"
    );
    let runs_params = keys.params();
    // The jobs are named by the runs' ids, so they are read in the same round trip (read, not
    // locked: a claim does not write its job; whether before or after the advisory locks
    // below, a job written meanwhile is seen as of one instant or the other).
    let mut jobs = None;
    let rows = if batch.read_jobs {
        let mut wanted = JobsWanted::of(batch);
        let (tenants, ids) = wanted.keys();
        let (rows, job_rows) = tx.query_pair((&lock_runs, &runs_params), (&read_jobs_sql(), &[&tenants, &ids]))?;
        wanted.found(&job_rows)?;
        jobs = Some(wanted.jobs);
        rows
    } else {
        tx.query(&lock_runs, &runs_params)?
    };
    let cap_column = RUN_COLS.split(',').count();
    let mut locked = LockedForClaims::default();
    let mut numbers = Vec::new();
    for row in &rows {
        let stored = run_from_row(row)?;
        let cap: Option<i64> = get(row, cap_column)?;
        let (tenant, run) = (stored.run.tenant.as_str(), &stored.run);
        if let Some(concurrency) = &run.concurrency {
            numbers.push(key_lock(tenant, &concurrency.key));
        }
        if cap.is_some() {
            numbers.push(cap_lock(tenant));
        }
        if batch.alone {
            numbers.push(job_lock(tenant, run.job_id.as_str()));
        }
        locked.caps.insert(tenant.to_string(), cap);
        locked
            .runs
            .insert((tenant.to_string(), run.run_id.as_str().to_string()), stored);
    }
    advisory_locks(tx, numbers)?;
    if let Some(jobs) = jobs {
        locked.jobs = jobs;
    }
    tx.claims = locked;
    Ok(())
}

/// The jobs a claim batch's runs name, and what was found of them (`None`: it does not exist).
struct JobsWanted {
    jobs: HashMap<(String, String), Option<Job>>,
}

impl JobsWanted {
    /// The jobs of the batch's runs, none found yet.
    fn of(batch: &ClaimBatch) -> Self {
        let jobs = batch
            .runs
            .iter()
            .filter_map(|(tenant, run_id)| {
                let (job_id, _) = run_id.parts()?;
                Some(((tenant.as_str().to_string(), job_id.as_str().to_string()), None))
            })
            .collect();
        JobsWanted { jobs }
    }

    /// Their keys as the arrays [`read_jobs_sql`] binds (tenants, ids).
    fn keys(&self) -> (Vec<&str>, Vec<&str>) {
        self.jobs.keys().map(|(t, j)| (t.as_str(), j.as_str())).unzip()
    }

    /// Records the jobs `rows` ([`read_jobs_sql`]'s) found.
    fn found(&mut self, rows: &[Row]) -> Result<(), TxError> {
        for row in rows {
            let job = job_from_row(row)?;
            self.jobs.insert(
                (job.tenant.as_str().to_string(), job.id.as_str().to_string()),
                Some(job),
            );
        }
        Ok(())
    }
}

/// The jobs of `$1` (tenants) and `$2` (ids) that exist.
fn read_jobs_sql() -> String {
    format!("SELECT {JOB_COLS} FROM jobs WHERE (tenant, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_numbers_are_stable_and_tell_kinds_apart() {
        // FNV-1a's published value for "a": every host must compute the same numbers.
        assert_eq!(lock_number("a"), 0xaf63_dc4c_8601_ec8c_u64 as i64);
        assert_ne!(key_lock("t", "k"), cap_lock("t"));
        assert_ne!(key_lock("t", "k"), job_lock("t", "k"));
        assert_ne!(key_lock("t1", "k"), key_lock("t", "1k"));
    }
}
