//! [`SweepLease`]: a lease item per sweeper in the sked table, so that two sweeper invocations
//! that overlap (EventBridge Scheduler ticks every minute; one sweep can outlast a tick, and
//! a tick can be delivered twice) do not both do the same work.
//!
//! Item: `pk = SWEEP`, `sk = LEASE#<n>`, `owner` (the invocation), `expires_at` (ms), `ttl`.
//! Taking it is one conditional `PutItem` — it succeeds if the item is absent, expired, or
//! already ours; releasing it is a `DeleteItem` conditional on still being ours. An invocation
//! that dies holding it blocks the next ones only until `expires_at` (the caller passes its own
//! deadline, so that is at most one Lambda timeout).
//!
//! `n` names one sweeper's work: the core sweeper scans every due-index shard itself, so the
//! sweeper function uses lease 0 for the whole sweep; a sweeper split per shard would take
//! lease `n` for shard `n`.
//!
//! Correctness never depends on this lease: firing a job is conditional on its version and
//! `next_fire_at`, and run ids are derived from the occurrence, so two sweeps at once still
//! create each run once. The lease only saves the second one's reads and failed writes.

use crate::config::AwsConfig;
use crate::dynamo::codec::{key, ms, n, s};
use crate::dynamo::keys::SWEEP_PK;
use crate::error::classify;
use aws_sdk_dynamodb::Client;
use sked_core::ports::{Clock, StoreError};
use sked_core::timestamp::Timestamp;
use std::sync::Arc;

/// Sort key prefix of the lease items.
pub const LEASE_SK_PREFIX: &str = "LEASE#";

/// Sort key of lease `n`.
pub fn lease_sk(n: u32) -> String {
    format!("{LEASE_SK_PREFIX}{n}")
}

/// Leases of the sweeper's work, in the sked table.
#[derive(Clone)]
pub struct SweepLease {
    client: Client,
    table: String,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SweepLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SweepLease")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl SweepLease {
    /// Leases in `config.table`, timed by `clock`.
    pub fn new(client: Client, config: &AwsConfig, clock: Arc<dyn Clock>) -> Self {
        SweepLease {
            client,
            table: config.table.clone(),
            clock,
        }
    }

    /// Takes lease `n` for `owner` until `until`: `true` if taken (or renewed: it was ours
    /// already), `false` if another owner holds it unexpired.
    pub async fn acquire(&self, lease: u32, owner: &str, until: Timestamp) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let mut item = key(SWEEP_PK.into(), lease_sk(lease));
        item.insert("owner".into(), s(owner));
        item.insert("expires_at".into(), n(ms(until)));
        // Let DynamoDB remove a lease left behind long ago (a day after it expired).
        item.insert("ttl".into(), n(until.timestamp() + 86_400));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR expires_at < :now OR #owner = :owner")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_values(":now", n(ms(now)))
            .expression_attribute_values(":owner", s(owner))
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(e) => match classify("dynamodb:PutItem", e, |_| None).into_store(String::new) {
                StoreError::Conflict(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    /// Gives lease `n` back if `owner` still holds it (after it expired and another owner
    /// took it, there is nothing to give back).
    pub async fn release(&self, lease: u32, owner: &str) -> Result<(), StoreError> {
        let delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(SWEEP_PK.into(), lease_sk(lease))))
            .condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_values(":owner", s(owner))
            .send()
            .await;
        match delete {
            Ok(_) => Ok(()),
            Err(e) => match classify("dynamodb:DeleteItem", e, |_| None).into_store(String::new) {
                StoreError::Conflict(_) => Ok(()),
                other => Err(other),
            },
        }
    }
}
