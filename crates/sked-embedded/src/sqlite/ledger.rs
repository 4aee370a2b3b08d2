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
        "INSERT OR REPLACE INTO skip_records (tenant, job_id, from_ms, to_ms, count, reason, alert, alert_due)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for r in records {
        stmt.execute(params![
            tenant,
            job_id,
            ms(r.from),
            ms(r.to),
            i64::from(r.count),
            r.reason.as_str(),
            r.alert.as_ref().map(serde_json::to_string).transpose()?,
            r.alert.as_ref().and_then(|a| a.due).map(ms),
        ])?;
    }
    Ok(())
}

/// The columns [`skip_record_of`] reads, in order.
pub(crate) const SKIP_COLS: &str = "from_ms, to_ms, count, reason, alert";

/// A skip record from a row selected with [`SKIP_COLS`] starting at column `first`.
pub(crate) fn skip_record_of(row: &rusqlite::Row<'_>, first: usize) -> Result<SkipRecord, TxError> {
    let reason: String = row.get(first + 3)?;
    let reason = SkipReason::ALL
        .into_iter()
        .find(|r| r.as_str() == reason)
        .ok_or_else(|| TxError::Store(StoreError::Other(format!("unknown skip reason {reason:?}").into())))?;
    Ok(SkipRecord {
        from: ts(row.get(first)?),
        to: ts(row.get(first + 1)?),
        count: u32::try_from(row.get::<_, i64>(first + 2)?).unwrap_or(u32::MAX),
        reason,
        alert: row
            .get::<_, Option<String>>(first + 4)?
            .map(|a| serde_json::from_str(&a))
            .transpose()?,
    })
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
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SKIP_COLS} FROM skip_records
         WHERE tenant = ?1 AND job_id = ?2 AND from_ms < ?4 AND to_ms >= ?3
         ORDER BY from_ms DESC LIMIT ?5"
    ))?;
    let mut rows = stmt.query(params![tenant, job_id, since, until, limit])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(skip_record_of(row, 0)?);
    }
    Ok(out)
}
