//! [`RequestCounter`]: an SDK interceptor counting the HTTP requests sked's clients send, per
//! service and operation. It counts every attempt — a call the SDK retries counts once per
//! try, as AWS bills it — so the figures are what an account pays for.
//!
//! For DynamoDB it also estimates the capacity units each request consumes, as on-demand
//! billing counts them: a write is one WRU per started KiB of item (two in a transaction),
//! a read one RRU per started 4 KiB read (half for eventually consistent reads, two in a
//! transaction). A written item's size is DynamoDB's own measure of the item in the request
//! ([`item_size`]: attribute names and values, not the JSON around them); an `UpdateItem` or
//! `DeleteItem` is sized by its key and values, which undercounts an item the request does
//! not show whole (the table's writes are puts, the updates small). Reads are sized by the
//! answer's JSON on the wire, which overstates a little: an upper estimate — except for a
//! `Query` or `Scan` with a filter, which DynamoDB bills for every item it evaluated,
//! returned or not. Those are counted apart: [`RequestCounter::items_scanned`] sums the
//! answers' `ScannedCount`.
//!
//! It also keeps how many requests were out at once at most
//! ([`RequestCounter::most_in_flight`]: sent, no answer yet), to show what goes side by side.
//!
//! Attach one to every client [`connect`](crate::connect) builds through
//! [`AwsConfig::request_counter`](crate::AwsConfig); clones share the counts.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// `(service, operation)`, e.g. `("DynamoDB", "TransactWriteItems")`.
pub type Operation = (String, String);

/// Counts requests per service and operation; clones share one set of counts.
#[derive(Clone, Default)]
pub struct RequestCounter {
    counts: Arc<Mutex<BTreeMap<Operation, u64>>>,
    capacity: Arc<Mutex<Capacity>>,
    scanned: Arc<Mutex<u64>>,
    /// Requests sent and not yet answered, and the most there were.
    in_flight: Arc<Mutex<(u64, u64)>>,
}

/// Estimated DynamoDB capacity units consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Capacity {
    /// Read request units.
    pub read_units: f64,
    /// Write request units.
    pub write_units: f64,
}

/// How a DynamoDB read in flight is billed, from its request to its answer.
#[derive(Debug, Clone, Copy)]
struct ReadBilling {
    /// Units per started 4 KiB: 0.5 eventually consistent, 1 consistent, 2 transactional.
    per_4k: f64,
    /// A `Query` or `Scan`, whose answer says how many items it evaluated.
    scans: bool,
}

impl Storable for ReadBilling {
    type Storer = StoreReplace<Self>;
}

impl RequestCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        RequestCounter::default()
    }

    /// The counts so far.
    pub fn snapshot(&self) -> BTreeMap<Operation, u64> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// All requests so far.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }

    /// Requests of one operation so far.
    pub fn of(&self, service: &str, operation: &str) -> u64 {
        let key = (service.to_string(), operation.to_string());
        self.snapshot().get(&key).copied().unwrap_or(0)
    }

    /// DynamoDB capacity units so far (estimated; see the module docs).
    pub fn dynamodb_capacity(&self) -> Capacity {
        *self.capacity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Items DynamoDB evaluated for the `Query` and `Scan` requests so far (their answers'
    /// `ScannedCount`), those a filter dropped included.
    pub fn items_scanned(&self) -> u64 {
        *self.scanned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most requests that were out at once (sent, their answer not yet read) since the
    /// last reset. (A request whose answer never came counts as out for good.)
    pub fn most_in_flight(&self) -> u64 {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    /// Back to zero (the most in flight: to those out now).
    pub fn reset(&self) {
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.1 = in_flight.0;
        }
        *self.scanned.lock().unwrap_or_else(|e| e.into_inner()) = 0;
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).clear();
        *self.capacity.lock().unwrap_or_else(|e| e.into_inner()) = Capacity::default();
    }

    fn add_units(&self, read_units: f64, write_units: f64) {
        let mut capacity = self.capacity.lock().unwrap_or_else(|e| e.into_inner());
        capacity.read_units += read_units;
        capacity.write_units += write_units;
    }

    fn add(&self, service: &str, operation: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry((service.to_string(), operation.to_string())).or_default() += 1;
    }
}

impl std::fmt::Debug for RequestCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestCounter").field("total", &self.total()).finish()
    }
}

/// Two counters are equal when they share their counts.
impl PartialEq for RequestCounter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.counts, &other.counts)
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "sked-request-counter"
    }

    /// Runs once per attempt, just before the request goes to the HTTP client.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, operation) = match cfg.load::<Metadata>() {
            Some(meta) => (meta.service().to_string(), meta.name().to_string()),
            None => ("unknown".to_string(), "unknown".to_string()),
        };
        self.add(&service, &operation);
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.0 += 1;
            in_flight.1 = in_flight.1.max(in_flight.0);
        }
        if service == "DynamoDB" {
            let body = context.request().body().bytes().unwrap_or_default();
            let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
            self.add_units(0.0, write_units(&operation, &request));
            if let Some(per_4k) = read_billing(&operation, &request) {
                let scans = matches!(operation.as_str(), "Query" | "Scan");
                cfg.interceptor_state().store_put(ReadBilling { per_4k, scans });
            }
        }
        Ok(())
    }

    /// Runs once per answer, once its body is loaded (before deserialization it is still a
    /// stream, whose bytes are not there to measure): a DynamoDB read is billed by the size it
    /// returned.
    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.0 = in_flight.0.saturating_sub(1);
        }
        if let Some(billing) = cfg.load::<ReadBilling>().copied()
            && context.response().status().is_success()
        {
            let body = context.response().body().bytes().unwrap_or_default();
            self.add_units(billing.per_4k * started(body.len(), 4096).max(1) as f64, 0.0);
            if billing.scans {
                let answer: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
                let scanned = answer["ScannedCount"].as_u64().unwrap_or(0);
                *self.scanned.lock().unwrap_or_else(|e| e.into_inner()) += scanned;
            }
        }
        Ok(())
    }
}

/// Started `unit`-byte blocks in `bytes`.
fn started(bytes: usize, unit: usize) -> usize {
    bytes.div_ceil(unit)
}

/// The size DynamoDB bills for an item given as attribute values in the wire's JSON
/// (`{"name": {"S": "…"}, …}`): for each attribute, its name's bytes and its value's — a
/// string's UTF-8 bytes, a number about one byte per two significant digits plus one, a
/// binary's bytes (base64 on the wire), a boolean or null one byte, a list or map 3 bytes plus
/// one per element plus the elements (a map's keys counted as names), a set its members.
pub fn item_size(item: &serde_json::Value) -> usize {
    item.as_object()
        .map(|attributes| attributes.iter().map(|(name, v)| name.len() + value_size(v)).sum())
        .unwrap_or(0)
}

fn value_size(v: &serde_json::Value) -> usize {
    let Some((kind, value)) = v.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let number = |n: &str| {
        let digits = n.trim_start_matches('-').replace('.', "");
        let significant = digits.trim_start_matches('0').trim_end_matches('0').len().max(1);
        significant.div_ceil(2) + 1
    };
    let text = |t: &serde_json::Value| t.as_str().map_or(0, str::len);
    let binary = |b: &serde_json::Value| text(b) * 3 / 4;
    let members = |m: &serde_json::Value, size: &dyn Fn(&serde_json::Value) -> usize| {
        m.as_array().map_or(0, |a| a.iter().map(size).sum())
    };
    match kind.as_str() {
        "S" => text(value),
        "N" => value.as_str().map_or(1, number),
        "B" => binary(value),
        "BOOL" | "NULL" => 1,
        "SS" => members(value, &text),
        "NS" => members(value, &|n| n.as_str().map_or(1, number)),
        "BS" => members(value, &binary),
        "L" => {
            3 + value
                .as_array()
                .map_or(0, |a| a.iter().map(|e| 1 + value_size(e)).sum())
        }
        "M" => {
            3 + value
                .as_object()
                .map_or(0, |m| m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum())
        }
        _ => 0,
    }
}

/// The size of what one write names: a put's item; an update's or a delete's key and values.
fn written_size(write: &serde_json::Value) -> usize {
    if write.get("Item").is_some() {
        return item_size(&write["Item"]);
    }
    item_size(&write["Key"]) + item_size(&write["ExpressionAttributeValues"])
}

/// Write units of one DynamoDB request (0 for reads).
fn write_units(operation: &str, request: &serde_json::Value) -> f64 {
    let kib = |write: &serde_json::Value| started(written_size(write), 1024).max(1) as f64;
    match operation {
        "PutItem" | "UpdateItem" | "DeleteItem" => kib(request),
        "BatchWriteItem" => request["RequestItems"]
            .as_object()
            .map(|tables| {
                tables
                    .values()
                    .filter_map(|items| items.as_array())
                    .flatten()
                    .map(|w| kib(w.get("PutRequest").or_else(|| w.get("DeleteRequest")).unwrap_or(w)))
                    .sum()
            })
            .unwrap_or(0.0),
        // Each item of a transaction costs twice; a condition check costs like a write of it.
        "TransactWriteItems" => request["TransactItems"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item.as_object().and_then(|o| o.values().next()))
                    .map(|write| 2.0 * kib(write))
                    .sum()
            })
            .unwrap_or(0.0),
        _ => 0.0,
    }
}

/// How a DynamoDB read request is billed per started 4 KiB of its answer; `None` for writes.
fn read_billing(operation: &str, request: &serde_json::Value) -> Option<f64> {
    let consistent = request["ConsistentRead"].as_bool().unwrap_or(false);
    match operation {
        "GetItem" | "Query" | "Scan" | "BatchGetItem" => Some(if consistent { 1.0 } else { 0.5 }),
        "TransactGetItems" => Some(2.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn item_sizes_follow_dynamodb_s_rules() {
        assert_eq!(item_size(&json!({"pk": {"S": "abc"}})), 5);
        assert_eq!(item_size(&json!({"n": {"N": "123456"}})), 1 + 4);
        assert_eq!(item_size(&json!({"n": {"N": "1000"}})), 1 + 2);
        assert_eq!(item_size(&json!({"b": {"BOOL": true}, "z": {"NULL": true}})), 4);
        assert_eq!(
            item_size(&json!({"l": {"L": [{"S": "ab"}, {"N": "1"}]}})),
            1 + 3 + 3 + 3
        );
        assert_eq!(item_size(&json!({"m": {"M": {"k": {"S": "ab"}}}})), 1 + 3 + 1 + 1 + 2);
        assert_eq!(item_size(&json!({"s": {"SS": ["a", "bc"]}})), 1 + 3);
    }

    #[test]
    fn transactional_writes_cost_two_units_per_item_and_reads_follow_consistency() {
        let small = json!({"pk": {"S": "a"}});
        let transact = json!({"TransactItems": [{"Put": {"Item": small}}, {"Update": {"Key": small}}]});
        assert_eq!(write_units("TransactWriteItems", &transact), 4.0);
        assert_eq!(write_units("PutItem", &json!({"Item": small})), 1.0);
        let big = json!({"Item": {"data": {"S": "x".repeat(1500)}}});
        assert_eq!(write_units("PutItem", &big), 2.0);
        // The item, not the request around it: 1,000 bytes of item in a longer request.
        let kib = json!({"TableName": "t".repeat(200), "ConditionExpression": "x".repeat(200),
            "Item": {"data": {"S": "x".repeat(1020)}}});
        assert_eq!(write_units("PutItem", &kib), 1.0);
        assert_eq!(write_units("GetItem", &small), 0.0);
        assert_eq!(read_billing("GetItem", &json!({"ConsistentRead": true})), Some(1.0));
        assert_eq!(read_billing("Query", &json!({})), Some(0.5));
        assert_eq!(read_billing("TransactGetItems", &json!({})), Some(2.0));
        assert_eq!(read_billing("PutItem", &json!({})), None);
    }
}
