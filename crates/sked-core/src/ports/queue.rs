//! The `DispatchQueue` port: hands runs that are due to workers, with a visibility lease.
//!
//! Messages carry ids only; the run itself lives in the store. Delivery is at least once:
//! duplicates are harmless because claiming a run in the store is conditional.

use crate::duration::Dur;
use crate::ids::{RunId, TenantId};
use crate::timestamp::Timestamp;
use async_trait::async_trait;

/// How long a waiting run gains one priority level. A priority-0 run that has been ready
/// for `9 × AGING_STEP` is served before a priority-9 run that just became ready, so low
/// priorities never starve.
pub const AGING_STEP: Dur = Dur::secs(5);

/// The order key of a ready message: smaller is served first.
/// `ready_at − priority × AGING_STEP`, in milliseconds.
pub fn dispatch_rank(priority: u8, ready_at: Timestamp) -> i64 {
    ready_at.timestamp_millis() - i64::from(priority.min(9)) * AGING_STEP.as_millis()
}

/// How early a queue may hand a message over: at most this long before its `not_before`.
/// Local queues deliver at `not_before` to the millisecond. SQS delays are whole seconds, and
/// an idle worker looks at its lower-priority queues about once a second (it long-polls the
/// high one), so the SQS adapter makes a message visible one to two seconds *before*
/// `not_before`, and the worker holds a delivery received early until its `not_before` before
/// claiming the run. A run then starts at its time, not up to two seconds after it — and two
/// runs of a per-second job no longer start out of step (the earlier one late enough to be
/// still running when the next one is claimed, which `forbid` then skipped).
pub const EARLY_DELIVERY: Dur = Dur::secs(2);

/// The longest a worker keeps a message it received before its run's time hidden
/// ([`DispatchQueue::extend`]) to wait for that time; a longer wait goes to a new message
/// instead. A message kept hidden counts a receive each time it shows again and keeps its
/// age, and SQS bounds both (its redrive's receive limit, a 4-day retention, 12 hours of
/// visibility); SQS also delays a message at most 15 minutes, so a run due later is sent that
/// far and hops from message to message until its time. A run fired unwritten on DynamoDB is
/// carried by its message alone, so no wait may outlive the message.
pub const LONGEST_DEFER: Dur = Dur::secs(900);

/// A run to hand to a worker once `not_before` has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// Owner of the run.
    pub tenant: TenantId,
    /// The run.
    pub run_id: RunId,
    /// 0..=9.
    pub priority: u8,
    /// Not delivered before this instant (less [`EARLY_DELIVERY`] at most).
    pub not_before: Timestamp,
}

impl From<&crate::run::Run> for Dispatch {
    /// The message of a run: due at its `not_before`, at its priority.
    fn from(run: &crate::run::Run) -> Self {
        Dispatch {
            tenant: run.tenant.clone(),
            run_id: run.run_id.clone(),
            priority: run.priority,
            not_before: run.not_before,
        }
    }
}

/// How many messages one tenant has in the queue at one priority: waiting, delayed (fired
/// ahead) and in flight (delivered, not yet acked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDepth {
    /// Owner.
    pub tenant: TenantId,
    /// 0..=9.
    pub priority: u8,
    /// Messages.
    pub messages: u64,
}

/// Identifies one delivery of a message; needed to extend or ack it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Receipt(pub String);

/// A message received by a worker, invisible to others until its visibility lease ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// What was enqueued.
    pub dispatch: Dispatch,
    /// This delivery's handle.
    pub receipt: Receipt,
    /// How many times the message has been delivered, this one included (1 on first).
    pub receive_count: u32,
}

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The receipt no longer names a live delivery (acked, expired and redelivered, or
    /// superseded by a re-enqueue).
    #[error("stale receipt")]
    StaleReceipt,
    /// A failure worth retrying (throttling, a locked database, a network blip).
    #[error("transient queue error: {0}")]
    Transient(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Anything else.
    #[error("queue error: {0}")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The dispatch queue.
///
/// Contract (checked by sked-testkit's queue suite):
/// - `receive` returns only messages with `not_before <= now` that are not leased, at most
///   `max`; each becomes invisible for `visibility` and its `receive_count` grows by one. (A
///   queue whose delays are coarse, SQS, may return one up to [`EARLY_DELIVERY`] before its
///   `not_before`; local queues never do.)
/// - Local queues serve one tenant's messages by [`dispatch_rank`] (then by enqueue order),
///   and several tenants in turns ([`crate::fairness`]): a tenant with a ready message is
///   served before any other tenant is served twice. (SQS approximates this with its fair
///   queues, the tenant as message group.)
/// - `receive` waits up to `wait` for a message to become ready (long poll) and returns an
///   empty vec when none did. `wait` zero never blocks.
/// - An unacked message becomes receivable again when its visibility lease ends.
/// - `ack` removes the delivered message; `extend` pushes its visibility to now + `visibility`.
///   Both answer [`QueueError::StaleReceipt`] when the receipt is no longer current.
/// - Local queues deduplicate by run: enqueuing a run already queued keeps one message. If
///   that message is waiting, it keeps the earlier of the two `not_before`s; if it is leased
///   (a worker is handling it, e.g. enqueuing the run's retry), it takes the new `not_before`,
///   becomes unleased, and the old receipt turns stale. Either way it takes the new priority
///   (a job's change of priority reaches its runs that have not started). (SQS may keep both
///   messages, each in its priority's queue; claiming in the store makes the second harmless.)
#[async_trait]
pub trait DispatchQueue: Send + Sync + 'static {
    /// Adds messages.
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError>;

    /// Leases up to `max` ready messages for `visibility`, waiting up to `wait` for one.
    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError>;

    /// Keeps a delivery invisible for `visibility` more, from now.
    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError>;

    /// Removes a delivered message for good.
    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError>;

    /// The messages in the queue per tenant and priority, for the `sked_queue_depth` gauge,
    /// at a cost that grows with the queue, never with the jobs or runs stored (a scrape
    /// calls it). `None` (the default): this queue cannot count itself that cheaply (SQS,
    /// whose depth CloudWatch reports).
    async fn depth(&self) -> Result<Option<Vec<QueueDepth>>, QueueError> {
        Ok(None)
    }

    /// How many times this queue delivers a message before it gives the message up (SQS's
    /// redrive `maxReceiveCount`: the next receive moves it to the dead-letter queue). `None`
    /// (the default): never. With a limit, no receive is spent on what befalls the run rather
    /// than the message: a [`Worker`](crate::service::worker::Worker) that takes a run over
    /// from a lost attempt on a redelivered message hands the run a new message, and so does
    /// a claim the store failed for now (throttled, unreachable) — so worker deaths and store
    /// outages never add up to the limit, and a message is given up only when its run cannot
    /// be read.
    fn receive_limit(&self) -> Option<u32> {
        None
    }
}
