//! Failure alerts on DynamoDB ([`sked_core::alert`]): an ended run, or a firing's skip record,
//! whose alert is pending sits in the `sched` index under `ALERT#<shard>` sorted by when it is
//! due (the item carries `alert`, its JSON, and `alert_due`; [`super::codec::run_item`] and the
//! ledger's skip item write them with the run or record, so in the write that ends the run or
//! fires). A notifier's save of one alert is one `UpdateItem` conditional on `alert_due` (on a
//! run it also moves `rv`, so a versioned put of the run read before then re-reads). A tenant's webhook secret is the item `T#<tenant>#TENANT` / `WEBHOOK_SECRET`.

use super::codec::{Item, Reader, alert_attributes, key, ms, n, run_from_item, run_key, s};
use super::keys::{
    GSI1_PK, GSI1_SK, SK, SKIP_SK_PREFIX, WEBHOOK_SECRET_SK, alerts_pk, alerts_sk, job_pk, shard_of, skip_sk, tenant_pk,
};
use super::ledger::skip_record_of;
use super::store::DynamoStore;
use crate::error::classify;
use async_trait::async_trait;
use sked_core::alert::{Alert, AlertKey, AlertState, DueAlert, WebhookSecret};
use sked_core::ids::{JobId, TenantId};
use sked_core::ports::{StoreError, WebhookSecrets};
use sked_core::timestamp::Timestamp;

impl DynamoStore {
    /// [`sked_core::ports::JobStore::due_alerts`]: every shard's `ALERT#` partition up to `now`
    /// (ended runs and skip records).
    pub(super) async fn alerts_due_by(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        let items = self.sched_below(alerts_pk, ms(now) + 1, limit).await?;
        let mut due: Vec<(Timestamp, DueAlert)> = Vec::new();
        for item in &items {
            let subject = if Reader::new(item).s(SK)?.starts_with(SKIP_SK_PREFIX) {
                let r = Reader::new(item);
                DueAlert::Skipped {
                    tenant: TenantId(r.s("tenant")?),
                    job_id: JobId(r.s("job_id")?),
                    record: skip_record_of(item)?,
                }
            } else {
                DueAlert::Run(run_from_item(item)?.run)
            };
            let Some(alert) = subject.alert() else { continue };
            if let Some(at) = alert.due.filter(|d| *d <= now && alert.state == AlertState::Pending) {
                due.push((at, subject));
            }
        }
        Ok(sked_core::alert::earliest_first(due, limit))
    }

    /// [`sked_core::ports::JobStore::save_alert`].
    pub(super) async fn update_alert(
        &self,
        at: &AlertKey,
        expected: Timestamp,
        alert: &Alert,
    ) -> Result<bool, StoreError> {
        let (item_key, index_keys) = match at {
            AlertKey::Run { tenant, run_id } => {
                let Some(item_key) = run_key(tenant, run_id) else {
                    return Ok(false);
                };
                let shard = shard_of(&format!("{}#{}", tenant.as_str(), run_id.as_str()), self.shards);
                let index = alert
                    .due
                    .map(|due| (alerts_pk(shard), alerts_sk(ms(due), tenant.as_str(), run_id.as_str())));
                (item_key, index)
            }
            AlertKey::Skipped { tenant, job_id, from } => {
                let item_key = key(job_pk(tenant.as_str(), job_id.as_str()), skip_sk(ms(*from)));
                let index = alert.due.map(|due| self.skip_alert_keys(tenant, job_id, *from, due));
                (item_key, index)
            }
        };
        // A run's version moves too, so a versioned put of the run read before this re-reads.
        let versioned = matches!(at, AlertKey::Run { .. });
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_key))
            .condition_expression("alert_due = :expected")
            .expression_attribute_values(":expected", n(ms(expected)))
            .expression_attribute_names("#gpk", GSI1_PK)
            .expression_attribute_names("#gsk", GSI1_SK);
        let mut sets = Vec::new();
        if versioned {
            sets.push("rv = rv + :one".to_string());
            update = update.expression_attribute_values(":one", n(1));
        }
        for (name, value) in alert_attributes(alert)? {
            sets.push(format!("{name} = :{name}"));
            update = update.expression_attribute_values(format!(":{name}"), value);
        }
        let expression = match index_keys {
            Some((gpk, gsk)) => {
                update = update
                    .expression_attribute_values(":gpk", s(gpk))
                    .expression_attribute_values(":gsk", s(gsk));
                format!("SET {}, #gpk = :gpk, #gsk = :gsk", sets.join(", "))
            }
            None => format!("SET {} REMOVE alert_due, #gpk, #gsk", sets.join(", ")),
        };
        match update.update_expression(expression).send().await {
            Ok(_) => Ok(true),
            Err(e) => match classify("dynamodb:UpdateItem", e, |_| None).into_store(String::new) {
                StoreError::Conflict(_) => Ok(false),
                other => Err(other),
            },
        }
    }
}

fn secret_key(tenant: &TenantId) -> Item {
    key(tenant_pk(tenant.as_str()), WEBHOOK_SECRET_SK.into())
}

#[async_trait]
impl WebhookSecrets for DynamoStore {
    async fn webhook_secret(&self, tenant: &TenantId) -> Result<Option<WebhookSecret>, StoreError> {
        let Some(item) = self.get_item(secret_key(tenant)).await? else {
            return Ok(None);
        };
        let r = Reader::new(&item);
        Ok(Some(WebhookSecret {
            secret: r.s("secret")?,
            created_at: r.ts("created_at")?,
        }))
    }

    async fn put_webhook_secret(&self, tenant: &TenantId, secret: &WebhookSecret) -> Result<(), StoreError> {
        let mut item = secret_key(tenant);
        item.insert("secret".into(), s(secret.secret.clone()));
        item.insert("created_at".into(), n(ms(secret.created_at)));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| classify("dynamodb:PutItem", e, |_| None).into_store(String::new))?;
        Ok(())
    }
}
