//! Failure alerts in the SQLite file ([`sked_core::alert`]): the runs whose alert is due (the
//! partial index `runs_alerts_due`, which holds only pending alerts), a notifier's conditional
//! save of one run's alert, and the tenants' webhook secrets (`webhook_secrets`). A run's alert
//! is otherwise written with the run ([`super::codec::RunRow`]), in the transaction that ends
//! it.

use super::codec::{RUN_COLS, collect_runs, ms, ts};
use super::error::TxError;
use super::store::SqliteStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use sked_core::alert::{Alert, WebhookSecret};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::{StoreError, WebhookSecrets};
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;

/// Up to `limit` runs whose alert is due by `now`, earliest first.
pub(crate) fn due_alerts(conn: &Connection, now: Timestamp, limit: usize) -> Result<Vec<Run>, TxError> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs INDEXED BY runs_alerts_due
         WHERE alert_due IS NOT NULL AND alert_due <= ?1 ORDER BY alert_due, run_id LIMIT ?2"
    ))?;
    collect_runs(stmt.query(params![ms(now), limit])?)
}

/// Replaces the run's alert with `alert` if its stored alert is due at `expected`.
pub(crate) fn save_alert(
    conn: &Connection,
    (tenant, run_id): (&str, &str),
    expected: Timestamp,
    alert: &Alert,
) -> Result<bool, TxError> {
    let n = conn
        .prepare_cached(
            "UPDATE runs SET alert = ?4, alert_due = ?5
             WHERE tenant = ?1 AND run_id = ?2 AND alert_due = ?3",
        )?
        .execute(params![
            tenant,
            run_id,
            ms(expected),
            serde_json::to_string(alert)?,
            alert.due.map(ms),
        ])?;
    Ok(n == 1)
}

impl SqliteStore {
    /// [`sked_core::ports::JobStore::due_alerts`].
    pub(crate) async fn read_due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        self.read(move |conn| due_alerts(conn, now, limit)).await
    }

    /// [`sked_core::ports::JobStore::save_alert`].
    pub(crate) async fn write_alert(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        expected: Timestamp,
        alert: &Alert,
    ) -> Result<bool, StoreError> {
        let (tenant, run_id, alert) = (tenant.0.clone(), run_id.0.clone(), alert.clone());
        self.write(move |conn| save_alert(conn, (&tenant, &run_id), expected, &alert))
            .await
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
