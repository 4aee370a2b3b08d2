//! [`SqsQueue`]: the [`DispatchQueue`] port on three SQS queues (high, normal, low) that share
//! one dead-letter queue through their redrive policy.
//!
//! - **Routing**: priority 7–9 → high, 3–6 → normal, 0–2 → low.
//! - **Delay**: a message is sent with `DelaySeconds` = whole seconds until its `not_before`,
//!   rounded down, less one: it becomes visible one to two seconds before `not_before`
//!   ([`EARLY_DELIVERY`](sked_core::ports::queue::EARLY_DELIVERY)), in time for an idle
//!   worker's next look at its queue, and the worker holds it until then. (Rounded up, as
//!   before, a message became visible up to a second late — by the fraction of a second its
//!   send happened at — and was received up to another second after that: runs of one job
//!   sent by different firings started out of step.) SQS allows at most 900 s, so a run due
//!   later than 15 minutes from now is sent with that delay, its time kept in the body: the
//!   worker that receives it early hands it to a new message, which hops on until the run's
//!   time ([`LONGEST_DEFER`](sked_core::ports::queue::LONGEST_DEFER)). (Until 2026-12-05 such a
//!   run was not enqueued, and the reaper's repair pass enqueued it once ready; a run fired
//!   unwritten is in no index that pass reads.)
//! - **Send**: `SendMessageBatch` of 10, up to [`PARALLEL_SENDS`] batches in flight at once.
//!   Every batch is sent even when one fails; the first failure is the answer (the runs whose
//!   message was not sent stay PENDING, and the repair pass sends them).
//! - **Body**: `{"tenant", "run_id", "priority", "not_before"}`, and `"copy"`: the run's item
//!   as the sender wrote it, when the sender's store kept it ([`crate::run_copies`]; the
//!   receiver's store claims from it instead of reading the item). [`decode_body`] reads one
//!   back (the DLQ handler's decoder).
//! - **Receive**: weighted with aging. Queues are tried high → normal → low, except every
//!   [`SqsQueue::AGING_EVERY`]-th receive, which starts from low, so low priorities are served
//!   however busy high is. A receive takes first what the process's long polls brought
//!   ([`crate::sqs_poller`]), then looks at each queue no poll is out on without waiting; if
//!   that finds nothing and `wait` is not zero, it waits for the polls: one per queue at a
//!   time for the whole process, each up to 20 s, never dropped — a message is received as
//!   soon as SQS hands it to its queue's poll, and a quiet process makes three requests per
//!   20 s whatever its worker loops.
//!   Messages received together are returned in [`dispatch_rank`] order.
//! - **Receipt** = `<queue>|<receipt handle>`; `extend` is `ChangeMessageVisibility`, `ack` is
//!   `DeleteMessage`, or a share of a `DeleteMessageBatch` when acks come together
//!   ([`crate::sqs_deletes`]); `receive_count` is SQS's `ApproximateReceiveCount`.
//! - **Fairness across tenants**: every message carries its tenant as `MessageGroupId`. On a
//!   standard queue that makes it an SQS *fair queue*: when one tenant (group) builds a
//!   backlog, SQS delivers the other tenants' messages first, so their dwell time stays low —
//!   the AWS counterpart of the local queue's turns ([`sked_core::fairness`]). Ordering and
//!   throughput stay those of a standard queue (it is not FIFO). moto stores and returns the
//!   group id but does not reorder by it, so the tests check the tag, not the reordering.
//! - **Duplicates**: SQS keeps every message enqueued (no dedupe by run as the local queue
//!   does); claiming in the store makes the second delivery harmless.
//!
//! This module must not read or write the store (it only hands copies to and from
//! [`RunCopies`]).

use crate::config::AwsConfig;
use crate::error::{classify, queue_error};
use crate::run_copies::RunCopies;
use crate::sqs_deletes::{Deletes, STALE_CODES};
use crate::sqs_poller::Poller;
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::queue::dispatch_rank;
use sked_core::ports::{Clock, Delivery, Dispatch, DispatchQueue, QueueError, Receipt};
use sked_core::timestamp::{self, Timestamp};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest `DelaySeconds` SQS accepts.
pub const MAX_DELAY_SECS: i64 = 900;
/// Most messages one SQS receive or batch send handles.
const SQS_BATCH: usize = 10;
/// `SendMessageBatch` requests of one enqueue in flight at once: a per-second cron's 90 runs
/// fired by a create go out in about one round trip instead of nine in a row.
const PARALLEL_SENDS: usize = 8;

/// One of the three dispatch queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Priority 7–9.
    High,
    /// Priority 3–6.
    Normal,
    /// Priority 0–2.
    Low,
}

impl Lane {
    /// The queue a run of `priority` goes to.
    pub fn for_priority(priority: u8) -> Lane {
        match priority {
            7.. => Lane::High,
            3..=6 => Lane::Normal,
            _ => Lane::Low,
        }
    }

    /// Its name in receipts.
    pub fn as_str(&self) -> &'static str {
        match self {
            Lane::High => "high",
            Lane::Normal => "normal",
            Lane::Low => "low",
        }
    }

    fn parse(s: &str) -> Option<Lane> {
        match s {
            "high" => Some(Lane::High),
            "normal" => Some(Lane::Normal),
            "low" => Some(Lane::Low),
            _ => None,
        }
    }
}

/// A message body: the run's ids, and the run's item as its sender wrote it when it has it
/// ([`RunCopies`]).
#[derive(Debug, Serialize, Deserialize)]
struct Body {
    tenant: String,
    run_id: String,
    priority: u8,
    #[serde(with = "timestamp::serde_ms")]
    not_before: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    copy: Option<serde_json::Value>,
}

impl Body {
    fn dispatch(self) -> (Dispatch, Option<serde_json::Value>) {
        let dispatch = Dispatch {
            tenant: TenantId(self.tenant),
            run_id: RunId(self.run_id),
            priority: self.priority,
            not_before: self.not_before,
        };
        (dispatch, self.copy)
    }
}

/// Decodes a message body written by [`SqsQueue`] back into its [`Dispatch`]. The DLQ handler
/// reads dead-lettered messages with it.
pub fn decode_body(body: &str) -> Result<Dispatch, serde_json::Error> {
    Ok(serde_json::from_str::<Body>(body)?.dispatch().0)
}

/// A message whose body is not a sked dispatch (someone else wrote to the queue).
#[derive(Debug, thiserror::Error)]
#[error("message {message_id} on the {lane} queue is not a sked dispatch: {problem}")]
pub struct BadMessage {
    /// SQS's message id.
    pub message_id: String,
    /// Which queue.
    pub lane: &'static str,
    /// What is wrong.
    pub problem: String,
}

/// The dispatch queue on SQS.
#[derive(Clone)]
pub struct SqsQueue {
    lanes: Lanes,
    clock: Arc<dyn Clock>,
    receives: Arc<AtomicU64>,
    poller: Arc<Poller>,
    deletes: Arc<Deletes>,
    /// The queues' redrive `maxReceiveCount` (`AwsConfig::max_receive_count`).
    receive_limit: u32,
}

/// The three queues, and the receive of one of them.
#[derive(Clone)]
pub(crate) struct Lanes {
    client: Client,
    high: String,
    normal: String,
    low: String,
    copies: Option<Arc<dyn RunCopies>>,
}

impl std::fmt::Debug for SqsQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsQueue")
            .field("high", &self.lanes.high)
            .field("normal", &self.lanes.normal)
            .field("low", &self.lanes.low)
            .finish_non_exhaustive()
    }
}

impl SqsQueue {
    /// Every this many receives, the low queue is tried first.
    pub const AGING_EVERY: u64 = 4;

    /// A queue over `config.queues`, timing delays by `clock`.
    pub fn new(client: Client, config: &AwsConfig, clock: Arc<dyn Clock>) -> Self {
        let lanes = Lanes {
            client: client.clone(),
            high: config.queues.high.clone(),
            normal: config.queues.normal.clone(),
            low: config.queues.low.clone(),
            copies: None,
        };
        SqsQueue {
            deletes: Arc::new(Deletes::new(client)),
            poller: Poller::new(lanes.clone()),
            lanes,
            clock,
            receives: Arc::new(AtomicU64::new(0)),
            receive_limit: config.max_receive_count,
        }
    }

    /// Sends each run's copy from `copies` with its message, and hands `copies` the copies
    /// received ([`crate::run_copies`]).
    pub fn with_run_copies(mut self, copies: Arc<dyn RunCopies>) -> Self {
        self.lanes.copies = Some(copies);
        self.poller = Poller::new(self.lanes.clone());
        self
    }

    /// The order to try the queues in for the next receive.
    fn order(&self) -> [Lane; 3] {
        let n = self.receives.fetch_add(1, Ordering::Relaxed);
        if n % Self::AGING_EVERY == Self::AGING_EVERY - 1 {
            [Lane::Low, Lane::Normal, Lane::High]
        } else {
            [Lane::High, Lane::Normal, Lane::Low]
        }
    }

    /// One `SendMessageBatch` of at most [`SQS_BATCH`] entries to `lane`'s queue; entries SQS
    /// refused make it an error (transient unless SQS says the sender is at fault).
    async fn send_batch(&self, lane: Lane, entries: Vec<SendMessageBatchRequestEntry>) -> Result<(), QueueError> {
        let sent = entries.len();
        let out = self
            .lanes
            .client
            .send_message_batch()
            .queue_url(self.lanes.url(lane))
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| queue_error(classify("sqs:SendMessageBatch", e, |_| None), &[]))?;
        match out.failed.first() {
            None => Ok(()),
            Some(f) => {
                let msg = format!(
                    "{} of {sent} messages not sent to the {} queue: {} {}",
                    out.failed.len(),
                    lane.as_str(),
                    f.code,
                    f.message.as_deref().unwrap_or_default()
                );
                Err(if f.sender_fault {
                    QueueError::Other(msg.into())
                } else {
                    QueueError::Transient(msg.into())
                })
            }
        }
    }

    fn parse_receipt<'a>(&'a self, receipt: &'a Receipt) -> Result<(&'a str, &'a str), QueueError> {
        let (lane, handle) = split_receipt(receipt).ok_or(QueueError::StaleReceipt)?;
        Ok((self.lanes.url(lane), handle))
    }
}

impl Lanes {
    fn url(&self, lane: Lane) -> &str {
        match lane {
            Lane::High => &self.high,
            Lane::Normal => &self.normal,
            Lane::Low => &self.low,
        }
    }

    /// Makes `deliveries` of `lane`'s queue visible again at once (`ChangeMessageVisibilityBatch`
    /// to 0, ten at a time).
    pub(crate) async fn hand_back(&self, lane: Lane, deliveries: &[Delivery]) -> Result<(), QueueError> {
        for chunk in deliveries.chunks(SQS_BATCH) {
            let entries = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, d)| {
                    let (_, handle) = split_receipt(&d.receipt)?;
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .visibility_timeout(0)
                        .build()
                        .ok()
                })
                .collect::<Vec<_>>();
            if entries.is_empty() {
                continue;
            }
            self.client
                .change_message_visibility_batch()
                .queue_url(self.url(lane))
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| queue_error(classify("sqs:ChangeMessageVisibilityBatch", e, |_| None), STALE_CODES))?;
        }
        Ok(())
    }

    /// One `ReceiveMessage` of `lane`'s queue: up to `max` messages, hidden for `visibility`
    /// seconds, waiting up to `wait_secs` for one.
    pub(crate) async fn receive_from(
        &self,
        lane: Lane,
        max: usize,
        visibility: i32,
        wait_secs: i32,
    ) -> Result<Vec<Delivery>, QueueError> {
        #[allow(deprecated)] // older servers (moto among them) know only `AttributeNames`
        let req = self
            .client
            .receive_message()
            .queue_url(self.url(lane))
            .max_number_of_messages(max.clamp(1, SQS_BATCH) as i32)
            .visibility_timeout(visibility)
            .wait_time_seconds(wait_secs)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All);
        let out = req
            .send()
            .await
            .map_err(|e| queue_error(classify("sqs:ReceiveMessage", e, |_| None), &[]))?;
        let mut deliveries = Vec::new();
        for m in out.messages.unwrap_or_default() {
            let message_id = m.message_id().unwrap_or_default().to_string();
            let bad = |problem: String| {
                QueueError::Other(Box::new(BadMessage {
                    message_id: message_id.clone(),
                    lane: lane.as_str(),
                    problem,
                }))
            };
            let body: Body = serde_json::from_str(m.body().unwrap_or_default()).map_err(|e| bad(e.to_string()))?;
            let (dispatch, copy) = body.dispatch();
            if let (Some(copies), Some(copy)) = (&self.copies, copy) {
                copies.incoming(&dispatch.tenant, &dispatch.run_id, &copy);
            }
            let handle = m.receipt_handle().ok_or_else(|| bad("no receipt handle".into()))?;
            let receive_count = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            tracing::debug!(queue = lane.as_str(), run_id = %dispatch.run_id, message_id, "received");
            deliveries.push(Delivery {
                dispatch,
                receipt: Receipt(format!("{}|{handle}", lane.as_str())),
                receive_count,
            });
        }
        Ok(deliveries)
    }
}

/// A receipt's queue and SQS receipt handle (`<queue>|<handle>`), if it is one of ours.
fn split_receipt(receipt: &Receipt) -> Option<(Lane, &str)> {
    let (lane, handle) = receipt.0.split_once('|')?;
    Some((Lane::parse(lane)?, handle))
}

/// The `DelaySeconds` of a message due in `wait_ms`: whole seconds, rounded down, less one,
/// so that it becomes visible one to two seconds before it is due (at once when that is
/// sooner): never after it, never more than
/// [`EARLY_DELIVERY`](sked_core::ports::queue::EARLY_DELIVERY) before it.
fn delay_secs(wait_ms: i64) -> i64 {
    (wait_ms.max(0) / 1000 - 1).max(0)
}

/// Whole seconds, rounded up, capped at SQS's limits for visibility timeouts.
fn visibility_secs(d: Dur) -> i32 {
    let ms = d.as_millis().max(0);
    ((ms + 999) / 1000).clamp(0, 43_200) as i32
}

#[async_trait]
impl DispatchQueue for SqsQueue {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        let now = self.clock.now();
        let mut batches: Vec<(Lane, Vec<SendMessageBatchRequestEntry>)> = Vec::new();
        for lane in [Lane::High, Lane::Normal, Lane::Low] {
            let mut entries = Vec::new();
            for d in items.iter().filter(|d| Lane::for_priority(d.priority) == lane) {
                let delay = delay_secs((d.not_before - now).num_milliseconds()).min(MAX_DELAY_SECS);
                let body = serde_json::to_string(&Body {
                    tenant: d.tenant.0.clone(),
                    run_id: d.run_id.0.clone(),
                    priority: d.priority,
                    not_before: d.not_before,
                    copy: self
                        .lanes
                        .copies
                        .as_ref()
                        .and_then(|c| c.outgoing(&d.tenant, &d.run_id)),
                })
                .map_err(|e| QueueError::Other(Box::new(e)))?;
                let entry = SendMessageBatchRequestEntry::builder()
                    .id(format!("m{}", entries.len() % SQS_BATCH))
                    .message_body(body)
                    .delay_seconds(delay as i32)
                    .message_group_id(d.tenant.as_str())
                    .build()
                    .map_err(|e| QueueError::Other(Box::new(e)))?;
                entries.push(entry);
            }
            batches.extend(entries.chunks(SQS_BATCH).map(|chunk| (lane, chunk.to_vec())));
        }
        // Every batch is sent, PARALLEL_SENDS at a time, even when one fails (so a failure
        // leaves as few runs as it can to the repair pass); the first failure is the answer.
        let results: Vec<Result<(), QueueError>> = stream::iter(batches)
            .map(|(lane, entries)| self.send_batch(lane, entries))
            .buffer_unordered(PARALLEL_SENDS)
            .collect()
            .await;
        results.into_iter().collect()
    }

    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let max = max.min(SQS_BATCH);
        let vis = visibility_secs(visibility);
        let order = self.order();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait.as_millis().max(0) as u64);
        // What the process's polls brought, then a quick look at each queue no poll is out on
        // (one out brings what the look would find), then the polls' wait.
        let mut got = self.poller.take(max, order, vis);
        for lane in order {
            if got.len() >= max {
                break;
            }
            if !self.poller.polling(lane) {
                got.extend(self.lanes.receive_from(lane, max - got.len(), vis, 0).await?);
            }
        }
        if got.is_empty() && !wait.is_zero() {
            got = self.poller.wait(max, order, vis, deadline).await?;
        }
        got.sort_by_key(|d| dispatch_rank(d.dispatch.priority, d.dispatch.not_before));
        Ok(got)
    }

    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        let (url, handle) = self.parse_receipt(receipt)?;
        self.lanes
            .client
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(handle)
            .visibility_timeout(visibility_secs(visibility))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| queue_error(classify("sqs:ChangeMessageVisibility", e, |_| None), STALE_CODES))
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        let (url, handle) = self.parse_receipt(receipt)?;
        self.deletes.ack(url, handle).await
    }

    fn receive_limit(&self) -> Option<u32> {
        Some(self.receive_limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::ports::queue::EARLY_DELIVERY;

    #[test]
    fn priorities_route_to_three_lanes() {
        let lanes: Vec<Lane> = (0..=9).map(Lane::for_priority).collect();
        assert_eq!(&lanes[..3], &[Lane::Low; 3]);
        assert_eq!(&lanes[3..7], &[Lane::Normal; 4]);
        assert_eq!(&lanes[7..], &[Lane::High; 3]);
    }

    #[test]
    fn a_message_becomes_visible_one_to_two_seconds_before_it_is_due_never_after() {
        let early = EARLY_DELIVERY.as_millis();
        for wait_ms in [
            0, 1, 999, 1_000, 1_001, 2_000, 2_300, 899_999, 900_000, 900_999, 901_999,
        ] {
            let delay_ms = delay_secs(wait_ms) * 1000;
            let ahead = wait_ms - delay_ms;
            assert!(ahead >= 0, "{wait_ms} ms: visible after it is due");
            assert!(ahead <= early, "{wait_ms} ms: visible {ahead} ms early");
            if wait_ms >= 1_000 {
                assert!(ahead >= 1_000, "{wait_ms} ms: visible only {ahead} ms early");
            }
        }
        assert_eq!(delay_secs(-5_000), 0, "overdue: at once");
        assert_eq!(delay_secs(901_999), MAX_DELAY_SECS, "the longest delay SQS takes");
    }

    #[test]
    fn visibility_rounds_up_to_whole_seconds() {
        assert_eq!(visibility_secs(Dur::millis(1)), 1);
        assert_eq!(visibility_secs(Dur::secs(30)), 30);
        assert_eq!(visibility_secs(Dur::ZERO), 0);
    }
}
