//! The occurrence ledger's skip records on SQLite ([`sked_core::ledger`]): the
//! `skip_records` table, written by firings (in their transaction) and pauses.

use super::codec::{ms, ts};
use super::error::TxError;
use rusqlite::{Connection, params};
use sked_core::firing::SkipReason;
use sked_core::ledger::SkipRecord;
use sked_core::ports::StoreError;

/// Writes `records` of a job, each replacing the one with the same `from`.
pub(crate) fn write_skip_records(
    conn: &Connection,
    tenant: &str,
    job_id: &str,
    records: &[SkipRecord],
) -> Result<(), TxError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT OR REPLACE INTO skip_records (tenant, job_id, from_ms, to_ms, count, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for r in records {
        stmt.execute(params![
            tenant,
            job_id,
            ms(r.from),
            ms(r.to),
            i64::from(r.count),
            r.reason.as_str()
        ])?;
    }
    Ok(())
}

/// Up to `limit` records of a job reaching into `[since, until)`, latest `from` first.
pub(crate) fn read_skip_records(
    conn: &Connection,
    tenant: &str,
    job_id: &str,
    (since, until): (i64, i64),
    limit: usize,
) -> Result<Vec<SkipRecord>, TxError> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut stmt = conn.prepare_cached(
        "SELECT from_ms, to_ms, count, reason FROM skip_records
         WHERE tenant = ?1 AND job_id = ?2 AND from_ms < ?4 AND to_ms >= ?3
         ORDER BY from_ms DESC LIMIT ?5",
    )?;
    let rows = stmt.query_map(params![tenant, job_id, since, until, limit], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (from, to, count, reason) = row?;
        let reason = SkipReason::ALL
            .into_iter()
            .find(|r| r.as_str() == reason)
            .ok_or_else(|| TxError::Store(StoreError::Other(format!("unknown skip reason {reason:?}").into())))?;
        out.push(SkipRecord {
            from: ts(from),
            to: ts(to),
            count: u32::try_from(count).unwrap_or(u32::MAX),
            reason,
        });
    }
    Ok(out)
}
