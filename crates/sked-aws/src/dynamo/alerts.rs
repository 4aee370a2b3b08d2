//! Failure alerts on DynamoDB ([`sked_core::alert`]): an ended run whose alert is pending sits
//! in the `sched` index under `ALERT#<shard>` sorted by when it is due (the run's item carries
//! `alert`, its JSON, and `alert_due`; [`super::codec::run_item`] writes them with the run, so
//! in the write that ends it). A notifier's save of one run's alert is one `UpdateItem`
//! conditional on `alert_due` (and it moves `rv`, so a versioned put of the run read before
//! then re-reads). A tenant's webhook secret is the item `T#<tenant>#TENANT` / `WEBHOOK_SECRET`.

use super::codec::{Item, Reader, alert_attributes, key, ms, n, run_from_item, run_key, s};
use super::keys::{GSI1_PK, GSI1_SK, WEBHOOK_SECRET_SK, alerts_pk, alerts_sk, tenant_pk};
use super::store::DynamoStore;
use crate::error::classify;
use async_trait::async_trait;
use sked_core::alert::{Alert, AlertState, WebhookSecret};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::{StoreError, WebhookSecrets};
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;

impl DynamoStore {
    /// [`sked_core::ports::JobStore::due_alerts`]: every shard's `ALERT#` partition up to `now`.
    pub(super) async fn alerts_due_by(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let items = self.sched_below(alerts_pk, ms(now) + 1, limit).await?;
        let mut runs: Vec<(Timestamp, Run)> = items
            .iter()
            .map(|i| run_from_item(i).map(|s| s.run))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter_map(|r| {
                let alert = r.alert.as_ref()?;
                let due = alert.due.filter(|d| *d <= now && alert.state == AlertState::Pending)?;
                Some((due, r))
            })
            .collect();
        runs.sort_by(|a, b| (a.0, &a.1.run_id).cmp(&(b.0, &b.1.run_id)));
        Ok(runs.into_iter().take(limit).map(|(_, r)| r).collect())
    }

    /// [`sked_core::ports::JobStore::save_alert`].
    pub(super) async fn update_alert(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        expected: Timestamp,
        alert: &Alert,
    ) -> Result<bool, StoreError> {
        let Some(key) = run_key(tenant, run_id) else {
            return Ok(false);
        };
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .condition_expression("alert_due = :expected")
            .expression_attribute_values(":expected", n(ms(expected)))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_names("#gpk", GSI1_PK)
            .expression_attribute_names("#gsk", GSI1_SK);
        let mut sets = vec!["rv = rv + :one".to_string()];
        for (name, value) in alert_attributes(alert)? {
            sets.push(format!("{name} = :{name}"));
            update = update.expression_attribute_values(format!(":{name}"), value);
        }
        let expression = match alert.due {
            Some(due) => {
                let shard = super::keys::shard_of(&format!("{}#{}", tenant.as_str(), run_id.as_str()), self.shards);
                update = update
                    .expression_attribute_values(":gpk", s(alerts_pk(shard)))
                    .expression_attribute_values(":gsk", s(alerts_sk(ms(due), tenant.as_str(), run_id.as_str())));
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
