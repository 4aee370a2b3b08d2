//! The occurrence ledger's skip records on DynamoDB ([`sked_core::ledger`]):
//!
//! | item | `pk` | `sk` | other attributes |
//! |---|---|---|---|
//! | skip record | `T#<tenant>#J#<job>` | `SKIP#<from>` | `tenant`, `job_id`, `to`, `count`, `reason`, `ttl`; `alert`, `alert_due` when its job notifies of skips |
//!
//! In the job's partition, written by a firing in its transaction (and by a pause), read by
//! one `Query` of the partition's `SKIP#` range, newest first. They expire with the runs
//! (`run_retention` after their last occurrence). A record whose alert is pending is in the
//! `sched` index under `ALERT#<shard>` beside the runs' ([`super::alerts`]).

use super::codec::{Item, Reader, alert_attributes, key, ms, n, s};
use super::keys::*;
use super::plumbing::QuerySpec;
use super::store::DynamoStore;
use aws_sdk_dynamodb::types::TransactWriteItem;
use sked_core::firing::SkipReason;
use sked_core::ids::{JobId, TenantId};
use sked_core::ledger::{OPEN_MS, SkipRecord};
use sked_core::ports::StoreError;
use sked_core::timestamp::{Timestamp, from_ms};

impl DynamoStore {
    /// The item of one skip record of a job.
    fn skip_item(&self, tenant: &TenantId, job_id: &JobId, r: &SkipRecord) -> Result<Item, StoreError> {
        let mut item = key(job_pk(tenant.as_str(), job_id.as_str()), skip_sk(ms(r.from)));
        // A pause still open expires with nothing: it closes at the resume.
        let last = if ms(r.to) >= OPEN_MS { r.from } else { r.to };
        item.extend([
            ("kind".to_string(), s("skip")),
            ("tenant".into(), s(tenant.as_str())),
            ("job_id".into(), s(job_id.as_str())),
            ("to".into(), n(ms(r.to))),
            ("count".into(), n(r.count)),
            ("reason".into(), s(r.reason.as_str())),
            (TTL.into(), n(last.timestamp() + self.run_retention_secs)),
        ]);
        if let Some(alert) = &r.alert {
            item.extend(alert_attributes(alert)?);
            if let Some(due) = alert.due {
                let (gpk, gsk) = self.skip_alert_keys(tenant, job_id, r.from, due);
                item.insert(GSI1_PK.into(), s(gpk));
                item.insert(GSI1_SK.into(), s(gsk));
            }
        }
        Ok(item)
    }

    /// The `sched` keys of a skip record's pending alert due at `due`.
    pub(super) fn skip_alert_keys(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        from: Timestamp,
        due: Timestamp,
    ) -> (String, String) {
        let subject = format!("{}#{}", job_id.as_str(), skip_sk(ms(from)));
        let shard = shard_of(&format!("{}#{subject}", tenant.as_str()), self.shards);
        (alerts_pk(shard), alerts_sk(ms(due), tenant.as_str(), &subject))
    }

    /// The writes of `records` (puts replacing a record with the same `from`).
    pub(super) fn skip_writes(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        records: &[SkipRecord],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        records
            .iter()
            .map(|r| self.put_always(self.skip_item(tenant, job_id, r)?))
            .collect()
    }

    /// [`sked_core::ports::JobStore::skip_records`]: one query of the job's `SKIP#` range below
    /// `until`, newest first, keeping those that reach `since`.
    pub(super) async fn read_skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        (since, until): (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        let mut q = QuerySpec::new(None, "#pk = :pk AND #sk BETWEEN :lo AND :hi")
            .name("#pk", PK)
            .name("#sk", SK)
            .name("#to", "to")
            .value(":pk", s(job_pk(tenant.as_str(), job_id.as_str())))
            .value(":lo", s(skip_sk(0)))
            .value(":hi", s(skip_sk((ms(until) - 1).max(0))))
            .value(":since", n(ms(since)))
            .and_filter("#to >= :since".into());
        q.consistent = true;
        q.forward = false;
        let items = self.query(&q, limit).await?;
        items.iter().map(skip_record_of).collect()
    }
}

/// A skip record from its item.
pub(super) fn skip_record_of(item: &Item) -> Result<SkipRecord, StoreError> {
    let r = Reader::new(item);
    let reason = r.s("reason")?;
    let reason = SkipReason::ALL
        .into_iter()
        .find(|known| known.as_str() == reason)
        .ok_or_else(|| StoreError::Other(format!("unknown skip reason {reason:?}").into()))?;
    let from = r.s(SK)?;
    let from: i64 = from
        .trim_start_matches(SKIP_SK_PREFIX)
        .parse()
        .map_err(|_| StoreError::Other(format!("a skip record's key {from:?}").into()))?;
    Ok(SkipRecord {
        from: from_ms(from),
        to: from_ms(r.n("to")?),
        count: r.n("count")?,
        reason,
        alert: r.opt_json("alert")?,
    })
}
