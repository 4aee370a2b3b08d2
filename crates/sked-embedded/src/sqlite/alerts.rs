//! Failure alerts in the SQLite file ([`sked_core::alert`]): the runs and skip records whose
//! alert is due (the partial indexes `runs_alerts_due` and `skip_records_alerts_due`, which
//! hold only pending alerts), a notifier's conditional save of one alert, and the tenants'
//! webhook secrets (`webhook_secrets`). An alert is otherwise written with its run
//! ([`super::codec::RunRow`]) or skip record, in the transaction that ends the run or fires.

use super::codec::{RUN_COLS, ms, run_from_row_at, ts};
use super::error::TxError;
use super::ledger::{SKIP_COLS, skip_record_of};
use super::store::SqliteStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use sked_core::alert::{Alert, AlertKey, DueAlert, WebhookSecret};
use sked_core::ids::{JobId, TenantId};
use sked_core::ports::{StoreError, WebhookSecrets};
use sked_core::timestamp::Timestamp;

/// Up to `limit` alerts due by `now`, earliest first: runs' and skip records'.
pub(crate) fn due_alerts(conn: &Connection, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, TxError> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut due: Vec<(Timestamp, DueAlert)> = Vec::new();
    let mut runs = conn.prepare_cached(&format!(
        "SELECT alert_due, {RUN_COLS} FROM runs INDEXED BY runs_alerts_due
         WHERE alert_due IS NOT NULL AND alert_due <= ?1 ORDER BY alert_due, run_id LIMIT ?2"
    ))?;
    let mut rows = runs.query(params![ms(now), limit])?;
    while let Some(row) = rows.next()? {
        due.push((ts(row.get(0)?), DueAlert::Run(run_from_row_at(row, 1)?.run)));
    }
    let mut skips = conn.prepare_cached(&format!(
        "SELECT alert_due, tenant, job_id, {SKIP_COLS} FROM skip_records INDEXED BY skip_records_alerts_due
         WHERE alert_due IS NOT NULL AND alert_due <= ?1 ORDER BY alert_due LIMIT ?2"
    ))?;
    let mut rows = skips.query(params![ms(now), limit])?;
    while let Some(row) = rows.next()? {
        let skipped = DueAlert::Skipped {
            tenant: TenantId(row.get(1)?),
            job_id: JobId(row.get(2)?),
            record: skip_record_of(row, 3)?,
        };
        due.push((ts(row.get(0)?), skipped));
    }
    Ok(sked_core::alert::earliest_first(due, limit as usize))
}

/// Replaces the alert kept at `key` with `alert` if its stored alert is due at `expected`.
pub(crate) fn save_alert(
    conn: &Connection,
    key: &AlertKey,
    expected: Timestamp,
    alert: &Alert,
) -> Result<bool, TxError> {
    let (json, due) = (serde_json::to_string(alert)?, alert.due.map(ms));
    let n = match key {
        AlertKey::Run { tenant, run_id } => conn
            .prepare_cached(
                "UPDATE runs SET alert = ?4, alert_due = ?5
                 WHERE tenant = ?1 AND run_id = ?2 AND alert_due = ?3",
            )?
            .execute(params![tenant.as_str(), run_id.as_str(), ms(expected), json, due])?,
        AlertKey::Skipped { tenant, job_id, from } => conn
            .prepare_cached(
                "UPDATE skip_records SET alert = ?5, alert_due = ?6
                 WHERE tenant = ?1 AND job_id = ?2 AND from_ms = ?3 AND alert_due = ?4",
            )?
            .execute(params![
                tenant.as_str(),
                job_id.as_str(),
                ms(*from),
                ms(expected),
                json,
                due
            ])?,
    };
    Ok(n == 1)
}

impl SqliteStore {
    /// [`sked_core::ports::JobStore::due_alerts`].
    pub(crate) async fn read_due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        self.read(move |conn| due_alerts(conn, now, limit)).await
    }

    /// [`sked_core::ports::JobStore::save_alert`].
    pub(crate) async fn write_alert(
        &self,
        key: &AlertKey,
        expected: Timestamp,
        alert: &Alert,
    ) -> Result<bool, StoreError> {
        let (key, alert) = (key.clone(), alert.clone());
        self.write(move |conn| save_alert(conn, &key, expected, &alert)).await
    }
}

#[async_trait]
impl WebhookSecrets for SqliteStore {
    async fn webhook_secret(&self, tenant: &TenantId) -> Result<Option<WebhookSecret>, StoreError> {
        let tenant = tenant.0.clone();
        self.read(move |conn| {
            let row = conn
                .prepare_cached("SELECT secret, created_at FROM webhook_secrets WHERE tenant = ?1")?
                .query_row([&tenant], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .optional()?;
            Ok(row.map(|(secret, created_at)| WebhookSecret {
                secret,
                created_at: ts(created_at),
            }))
        })
        .await
    }

    async fn put_webhook_secret(&self, tenant: &TenantId, secret: &WebhookSecret) -> Result<(), StoreError> {
        let (tenant, secret) = (tenant.0.clone(), secret.clone());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO webhook_secrets (tenant, secret, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tenant) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at",
            )?
            .execute(params![tenant, secret.secret, ms(secret.created_at)])?;
            Ok(())
        })
        .await
    }
}
