//! The DynamoDB requests the rest of [`DynamoStore`] is built from: a [`QuerySpec`] and its
//! paged, parallel queries (`query`, `query_many`, and `sched_below` over every shard of the
//! `sched` index), consistent reads (`get_item`, and `batch_get` with its retries of the keys
//! DynamoDB leaves unprocessed), and writes (`put` as a transaction's item, `put_if`, and
//! `transact`, which names the items a cancelled transaction was refused at), with the
//! request limits they keep to.
//!
//! This module must not decide anything about jobs or runs: it only speaks DynamoDB.

use super::codec::{Item, s};
use super::keys::*;
use super::store::DynamoStore;
use crate::error::{Failure, build_error, classify};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Put, TransactWriteItem};
use futures::stream::{self, StreamExt, TryStreamExt};
use sked_core::ports::store::StoreError;
use std::collections::HashMap;

/// Most items in one `TransactWriteItems`.
pub(super) const MAX_TRANSACTION: usize = 100;
/// Most keys in one `BatchGetItem`.
pub(super) const MAX_BATCH_GET: usize = 100;
/// How many times [`DynamoStore::batch_get`] asks for keys DynamoDB left unprocessed.
const BATCH_GET_TRIES: u32 = 8;
/// Index queries in flight at once.
const PARALLEL_QUERIES: usize = 16;

/// A key condition and filter for one query, with their placeholders.
#[derive(Debug, Clone, Default)]
pub(super) struct QuerySpec {
    index: Option<&'static str>,
    key_condition: String,
    filter: Option<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    pub(super) forward: bool,
    pub(super) consistent: bool,
}

impl QuerySpec {
    pub(super) fn new(index: Option<&'static str>, key_condition: impl Into<String>) -> Self {
        QuerySpec {
            index,
            key_condition: key_condition.into(),
            forward: true,
            ..QuerySpec::default()
        }
    }
    pub(super) fn name(mut self, placeholder: &str, attr: &str) -> Self {
        self.names.insert(placeholder.into(), attr.into());
        self
    }
    pub(super) fn value(mut self, placeholder: &str, v: AttributeValue) -> Self {
        self.values.insert(placeholder.into(), v);
        self
    }
    pub(super) fn and_filter(mut self, clause: String) -> Self {
        self.filter = Some(match self.filter {
            Some(f) => format!("{f} AND {clause}"),
            None => clause,
        });
        self
    }
}

/// Cancellation reason codes of a cancelled transaction.
fn tx_reasons(e: &TransactWriteItemsError) -> Option<Vec<Option<String>>> {
    match e {
        TransactWriteItemsError::TransactionCanceledException(c) => Some(
            c.cancellation_reasons()
                .iter()
                .map(|r| r.code().map(str::to_string))
                .collect(),
        ),
        _ => None,
    }
}

impl DynamoStore {
    pub(super) async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        self.client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map(|o| o.item)
            .map_err(|e| classify("dynamodb:GetItem", e, |_| None).into_store(|| "unexpected condition".into()))
    }

    /// Items for `keys` (strongly consistent), in no particular order; missing ones absent.
    /// Keys DynamoDB leaves unprocessed (throughput exceeded) are asked again, up to
    /// [`BATCH_GET_TRIES`] times with a doubling pause; keys still unprocessed then make the
    /// whole read a transient error — never an answer with items silently left out.
    pub(super) async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_BATCH_GET) {
            let mut pending = KeysAndAttributes::builder()
                .set_keys(Some(chunk.to_vec()))
                .consistent_read(true)
                .build()
                .map_err(build_error)?;
            let mut pause = std::time::Duration::from_millis(25);
            for tries in 1.. {
                let res = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, pending.clone())
                    .send()
                    .await
                    .map_err(|e| classify("dynamodb:BatchGetItem", e, |_| None).into_store(String::new))?;
                if let Some(mut got) = res.responses {
                    out.extend(got.remove(&self.table).unwrap_or_default());
                }
                match res.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                    Some(rest) if !rest.keys().is_empty() => {
                        if tries >= BATCH_GET_TRIES {
                            return Err(StoreError::Transient(
                                format!(
                                    "dynamodb:BatchGetItem left {} of {} keys unprocessed after {tries} tries",
                                    rest.keys().len(),
                                    chunk.len()
                                )
                                .into(),
                            ));
                        }
                        pending = rest;
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(std::time::Duration::from_millis(800));
                    }
                    _ => break,
                }
            }
        }
        Ok(out)
    }

    /// Runs query pages until `want` items passed the filter (or the range is exhausted).
    pub(super) async fn query(&self, q: &QuerySpec, want: usize) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut req = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(q.index.map(str::to_string))
                .key_condition_expression(&q.key_condition)
                .set_filter_expression(q.filter.clone())
                .set_expression_attribute_names((!q.names.is_empty()).then(|| q.names.clone()))
                .set_expression_attribute_values((!q.values.is_empty()).then(|| q.values.clone()))
                .scan_index_forward(q.forward)
                .consistent_read(q.consistent)
                .set_exclusive_start_key(start.take());
            if q.filter.is_none() {
                req = req.limit(want.saturating_sub(out.len()).clamp(1, 1000) as i32);
            }
            let page = req
                .send()
                .await
                .map_err(|e| classify("dynamodb:Query", e, |_| None).into_store(String::new))?;
            out.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(k) if out.len() < want => start = Some(k),
                _ => break,
            }
        }
        out.truncate(want);
        Ok(out)
    }

    /// Runs the same query on many partitions at once.
    pub(super) async fn query_many(&self, specs: Vec<QuerySpec>, want: usize) -> Result<Vec<Item>, StoreError> {
        let pages: Vec<Vec<Item>> = stream::iter(specs.into_iter().map(|q| async move { self.query(&q, want).await }))
            .buffered(PARALLEL_QUERIES)
            .try_collect()
            .await?;
        Ok(pages.into_iter().flatten().collect())
    }

    /// Writes `items` all or nothing. One item alone is sent as the single-item write it is
    /// (`PutItem`, `UpdateItem`, `DeleteItem` with the same condition): a transaction bills
    /// each item twice, and one item is atomic anyway. Its refused condition is reported as
    /// the transaction's would be: item 0.
    pub(super) async fn transact(&self, mut items: Vec<TransactWriteItem>) -> Result<(), Failure> {
        if items.len() == 1 {
            let item = items.pop().expect("one item");
            return self.write_one(item).await.map_err(|f| match f {
                Failure::Condition { error, .. } => Failure::Condition {
                    failed_items: vec![0],
                    error,
                },
                other => other,
            });
        }
        self.client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("dynamodb:TransactWriteItems", e, tx_reasons))
    }

    /// `item` as a single-item request (a lone condition check stays a transaction).
    async fn write_one(&self, item: TransactWriteItem) -> Result<(), Failure> {
        if let Some(put) = item.put {
            return self
                .client
                .put_item()
                .table_name(put.table_name)
                .set_item(Some(put.item))
                .set_condition_expression(put.condition_expression)
                .set_expression_attribute_names(put.expression_attribute_names)
                .set_expression_attribute_values(put.expression_attribute_values)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| classify("dynamodb:PutItem", e, |_| None));
        }
        if let Some(update) = item.update {
            return self
                .client
                .update_item()
                .table_name(update.table_name)
                .set_key(Some(update.key))
                .update_expression(update.update_expression)
                .set_condition_expression(update.condition_expression)
                .set_expression_attribute_names(update.expression_attribute_names)
                .set_expression_attribute_values(update.expression_attribute_values)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| classify("dynamodb:UpdateItem", e, |_| None));
        }
        if let Some(delete) = item.delete {
            return self
                .client
                .delete_item()
                .table_name(delete.table_name)
                .set_key(Some(delete.key))
                .set_condition_expression(delete.condition_expression)
                .set_expression_attribute_names(delete.expression_attribute_names)
                .set_expression_attribute_values(delete.expression_attribute_values)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| classify("dynamodb:DeleteItem", e, |_| None));
        }
        self.client
            .transact_write_items()
            .transact_items(item)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("dynamodb:TransactWriteItems", e, tx_reasons))
    }

    pub(super) fn put(
        &self,
        item: Item,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut b = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition);
        for (k, v) in values {
            b = b.expression_attribute_values(k, v);
        }
        if condition.contains("#st") {
            b = b.expression_attribute_names("#st", "state");
        }
        Ok(TransactWriteItem::builder()
            .put(b.build().map_err(build_error)?)
            .build())
    }

    /// One `PutItem` on `condition`.
    pub(super) async fn put_if(
        &self,
        item: Item,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<(), Failure> {
        let mut req = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition);
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        req.send()
            .await
            .map(|_| ())
            .map_err(|e| classify("dynamodb:PutItem", e, |_| None))
    }

    /// Up to `limit` items of every shard's `sched` partition `partition(shard)` whose sort key
    /// starts below the instant `below_ms` (what the reaper's scans read).
    pub(super) async fn sched_below(
        &self,
        partition: fn(u32) -> String,
        below_ms: i64,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let below = pad_ms(below_ms);
        let specs = (0..self.shards)
            .map(|shard| {
                QuerySpec::new(Some(SCHED_INDEX), "#pk = :pk AND #sk < :below")
                    .name("#pk", GSI1_PK)
                    .name("#sk", GSI1_SK)
                    .value(":pk", s(partition(shard)))
                    .value(":below", s(below.clone()))
            })
            .collect();
        self.query_many(specs, limit).await
    }
}
