//! The occurrence ledger's skip records on PostgreSQL ([`sked_core::ledger`]): the
//! `skip_records` table, written by firings (in their transaction) and pauses, read back by a
//! window of nominal times.
//! Must not: decide what was skipped — the sweep's plan does.

use crate::codec::{bad, from_json, get, ms, to_json, ts};
use crate::tx::{Tx, TxError};
use sked_core::firing::SkipReason;
use sked_core::ledger::SkipRecord;
use tokio_postgres::Row;

/// Writes `records` of a job, each replacing the one with the same `from` (SQLite's
/// `INSERT OR REPLACE`, here an upsert on the primary key).
pub(crate) fn write_skip_records(
    tx: &mut Tx,
    tenant: &str,
    job_id: &str,
    records: &[SkipRecord],
) -> Result<(), TxError> {
    for r in records {
        let alert = r.alert.as_ref().map(to_json).transpose()?;
        let alert_due = r.alert.as_ref().and_then(|a| a.due).map(ms);
        tx.execute(
            "INSERT INTO skip_records (tenant, job_id, from_ms, to_ms, count, reason, alert, alert_due)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (tenant, job_id, from_ms) DO UPDATE SET
               to_ms = excluded.to_ms, count = excluded.count, reason = excluded.reason,
               alert = excluded.alert, alert_due = excluded.alert_due",
            &[
                &tenant,
                &job_id,
                &ms(r.from),
                &ms(r.to),
                &i64::from(r.count),
                &r.reason.as_str(),
                &alert,
                &alert_due,
            ],
        )?;
    }
    Ok(())
}

/// The columns [`skip_record_of`] reads, in order.
pub(crate) const SKIP_COLS: &str = "from_ms, to_ms, count, reason, alert";

/// Up to `$5` records of job (`$1`, `$2`) reaching into `[$3, $4)`, latest `from` first (a
/// plain read; rows for [`skip_record_of`] at 0).
pub(crate) const SKIP_RECORDS_IN: &str = "SELECT from_ms, to_ms, count, reason, alert FROM skip_records
     WHERE tenant = $1 AND job_id = $2 AND from_ms < $4 AND to_ms >= $3
     ORDER BY from_ms DESC LIMIT $5";

/// A skip record from a row selected with [`SKIP_COLS`] starting at column `first`.
pub(crate) fn skip_record_of(row: &Row, first: usize) -> Result<SkipRecord, TxError> {
    let reason: &str = get(row, first + 3)?;
    let reason = SkipReason::ALL
        .into_iter()
        .find(|r| r.as_str() == reason)
        .ok_or_else(|| bad(format!("unknown skip reason {reason:?}")))?;
    Ok(SkipRecord {
        from: ts(get(row, first)?),
        to: ts(get(row, first + 1)?),
        count: u32::try_from(get::<i64>(row, first + 2)?).unwrap_or(u32::MAX),
        reason,
        alert: get::<Option<&str>>(row, first + 4)?.map(from_json).transpose()?,
    })
}
