//! Failure alerts on PostgreSQL ([`sked_core::alert`]): the runs and skip records whose alert
//! is due (the partial indexes `runs_alerts_due` and `skip_records_alerts_due`, which hold only
//! pending alerts), a notifier's conditional save of one alert, and the tenants' webhook
//! secrets (`webhook_secrets`): [`WebhookSecrets`] on [`PgStore`]. An alert is otherwise
//! written with its run (`codec::RunRow`) or skip record, in the transaction that ends the run
//! or fires.
//! Must not: decide when an alert is due or retried — `sked-core` does.

use crate::codec::{RUN_COLS, get, limit_param, ms, run_from_row_at, to_json, ts};
use crate::ledger::{SKIP_COLS, skip_record_of};
use crate::store::{PgStore, read_rows};
use crate::tx::{Tx, TxError};
use async_trait::async_trait;
use sked_core::alert::{Alert, AlertKey, DueAlert, WebhookSecret};
use sked_core::ids::{JobId, TenantId};
use sked_core::ports::{StoreError, WebhookSecrets};
use sked_core::timestamp::Timestamp;

impl PgStore {
    /// [`sked_core::ports::JobStore::due_alerts`]: up to `limit` alerts due by `now`, earliest
    /// first, runs' and skip records'.
    pub(crate) async fn read_due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        let (now, n) = (ms(now), limit_param(limit));
        let runs = read_rows(
            self.db(),
            &format!(
                "SELECT alert_due, {RUN_COLS} FROM runs
                 WHERE alert_due IS NOT NULL AND alert_due <= $1 ORDER BY alert_due, run_id LIMIT $2"
            ),
            &[&now, &n],
        )
        .await?;
        let skips = read_rows(
            self.db(),
            &format!(
                "SELECT alert_due, tenant, job_id, {SKIP_COLS} FROM skip_records
                 WHERE alert_due IS NOT NULL AND alert_due <= $1 ORDER BY alert_due LIMIT $2"
            ),
            &[&now, &n],
        )
        .await?;
        let decode = || -> Result<Vec<(Timestamp, DueAlert)>, TxError> {
            let mut due = Vec::with_capacity(runs.len() + skips.len());
            for row in &runs {
                due.push((ts(get(row, 0)?), DueAlert::Run(run_from_row_at(row, 1)?.run)));
            }
            for row in &skips {
                let skipped = DueAlert::Skipped {
                    tenant: TenantId(get(row, 1)?),
                    job_id: JobId(get(row, 2)?),
                    record: skip_record_of(row, 3)?,
                };
                due.push((ts(get(row, 0)?), skipped));
            }
            Ok(due)
        };
        let due = decode().map_err(TxError::into_store)?;
        Ok(sked_core::alert::earliest_first(due, limit))
    }

    /// [`sked_core::ports::JobStore::save_alert`].
    pub(crate) async fn write_alert(
        &self,
        key: &AlertKey,
        expected: Timestamp,
        alert: &Alert,
    ) -> Result<bool, StoreError> {
        let (key, alert) = (key.clone(), alert.clone());
        self.write(move |tx| save_alert(tx, &key, expected, &alert)).await
    }
}

/// Replaces the alert kept at `key` with `alert` if its stored alert is due at `expected`.
pub(crate) fn save_alert(tx: &mut Tx, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, TxError> {
    let (json, due) = (to_json(alert)?, alert.due.map(ms));
    let n = match key {
        AlertKey::Run { tenant, run_id } => tx.execute(
            "UPDATE runs SET alert = $4, alert_due = $5
             WHERE tenant = $1 AND run_id = $2 AND alert_due = $3",
            &[&tenant.as_str(), &run_id.as_str(), &ms(expected), &json, &due],
        )?,
        AlertKey::Skipped { tenant, job_id, from } => tx.execute(
            "UPDATE skip_records SET alert = $5, alert_due = $6
             WHERE tenant = $1 AND job_id = $2 AND from_ms = $3 AND alert_due = $4",
            &[
                &tenant.as_str(),
                &job_id.as_str(),
                &ms(*from),
                &ms(expected),
                &json,
                &due,
            ],
        )?,
    };
    Ok(n == 1)
}

#[async_trait]
impl WebhookSecrets for PgStore {
    async fn webhook_secret(&self, tenant: &TenantId) -> Result<Option<WebhookSecret>, StoreError> {
        let rows = read_rows(
            self.db(),
            "SELECT secret, created_at FROM webhook_secrets WHERE tenant = $1",
            &[&tenant.as_str()],
        )
        .await?;
        let decode = |row: &tokio_postgres::Row| -> Result<WebhookSecret, TxError> {
            Ok(WebhookSecret {
                secret: get(row, 0)?,
                created_at: ts(get(row, 1)?),
            })
        };
        rows.first().map(decode).transpose().map_err(TxError::into_store)
    }

    async fn put_webhook_secret(&self, tenant: &TenantId, secret: &WebhookSecret) -> Result<(), StoreError> {
        let (tenant, secret) = (tenant.0.clone(), secret.clone());
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO webhook_secrets (tenant, secret, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at",
                &[&tenant, &secret.secret, &ms(secret.created_at)],
            )?;
            Ok(())
        })
        .await
    }
}
