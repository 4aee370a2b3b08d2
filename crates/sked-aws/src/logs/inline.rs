//! [`InlineLogs`]: small finished logs kept as one item of the DynamoDB table instead of an
//! S3 object — a write of a few WRU where a PUT costs $5 per million, read back by one
//! `GetItem`.
//!
//! The item: `pk` = `T#<tenant>#LOG#<run_id>`, `sk` = `ATTEMPT#<attempt>`, `lines` (the same
//! JSON lines an S3 object holds), `truncated`, `bytes`, and `ttl` (written + the logs'
//! retention, so DynamoDB's TTL removes it when the bucket's lifecycle rule would have removed
//! the object). Each log has a partition of its own: nothing else lives there, and no index
//! sees it. Also read here: a log folded into its run's item (`logs`, [`super::folded`]).

use super::store::call_error;
use crate::dynamo::codec::{FOLDED_LOGS, Item, key, n, run_key, s};
use crate::dynamo::keys::{TTL, log_pk, log_sk};
use crate::error::classify;
use aws_sdk_dynamodb::types::AttributeValue;
use sked_core::ports::{LogError, LogKey};

/// A small finished log, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InlineLog {
    /// JSON lines, one record per line.
    pub body: Vec<u8>,
    /// Bytes of line text kept.
    pub bytes: u64,
    /// Whether lines were dropped at the cap.
    pub truncated: bool,
}

/// The table's log items.
#[derive(Debug, Clone)]
pub(crate) struct InlineLogs {
    /// DynamoDB.
    pub client: aws_sdk_dynamodb::Client,
    /// The table.
    pub table: String,
    /// How long an item is kept.
    pub retention_days: u32,
}

fn item_key(log: &LogKey) -> Item {
    key(log_pk(log.tenant.as_str(), log.run_id.as_str()), log_sk(log.attempt))
}

impl InlineLogs {
    /// Writes `log` as `key`'s item (a retried finish writes the same item again).
    pub async fn put(&self, key_of: &LogKey, log: InlineLog) -> Result<(), LogError> {
        let lines = String::from_utf8(log.body).map_err(|e| LogError::Io(Box::new(e)))?;
        let expires = chrono::Utc::now().timestamp() + i64::from(self.retention_days) * 86_400;
        let mut item = item_key(key_of);
        item.insert("lines".into(), s(lines));
        item.insert("bytes".into(), n(log.bytes));
        item.insert("truncated".into(), AttributeValue::Bool(log.truncated));
        item.insert(TTL.into(), n(expires));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| call_error(classify("dynamodb:PutItem", e, |_| None)))?;
        Ok(())
    }

    /// `key`'s JSON lines folded into its run's item ([`super::folded`]), or `None` (strongly
    /// consistent: whoever saw the run end sees them).
    pub async fn get_folded(&self, key_of: &LogKey) -> Result<Option<Vec<u8>>, LogError> {
        let Some(run) = run_key(&key_of.tenant, &key_of.run_id) else {
            return Ok(None);
        };
        let got = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(run))
            .consistent_read(true)
            .projection_expression("#l.#a")
            .expression_attribute_names("#l", FOLDED_LOGS)
            .expression_attribute_names("#a", key_of.attempt.to_string())
            .send()
            .await
            .map_err(|e| call_error(classify("dynamodb:GetItem", e, |_| None)))?;
        Ok(got
            .item
            .and_then(|mut item| item.remove(FOLDED_LOGS))
            .and_then(|v| v.as_m().ok().and_then(|m| m.get(&key_of.attempt.to_string()).cloned()))
            .and_then(|v| v.as_s().ok().map(|s| s.clone().into_bytes())))
    }

    /// `key`'s JSON lines, or `None` when it has no item (strongly consistent: a log finished
    /// before its run ended is seen by whoever saw the run end).
    pub async fn get(&self, key_of: &LogKey) -> Result<Option<Vec<u8>>, LogError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item_key(key_of)))
            .consistent_read(true)
            .projection_expression("#l")
            .expression_attribute_names("#l", "lines")
            .send()
            .await
            .map_err(|e| call_error(classify("dynamodb:GetItem", e, |_| None)))?;
        Ok(got
            .item
            .and_then(|mut item| item.remove("lines"))
            .and_then(|v| v.as_s().ok().map(|s| s.clone().into_bytes())))
    }
}
