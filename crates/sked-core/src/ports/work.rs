//! The `WorkPort`: how runs pass between the store and the queue — a firing's runs written
//! and enqueued, a worker's receive and claim, its heartbeats, and an attempt's completion
//! with the acknowledgement (and, for a retry, the new message) that goes with it.
//!
//! Two implementations, chosen when a process is wired (never by a flag on a shared handle):
//! - [`crate::work::QueueThenStore`]: any [`JobStore`] with any
//!   [`DispatchQueue`](super::DispatchQueue), one call to each in turn (DynamoDB with SQS, the
//!   in-memory ports);
//! - the SQLite adapter's, where the queue is a table of the store's database: each step is
//!   one transaction (a sweep's runs and their messages, a receive and its claims, a
//!   heartbeat and the message's lease, a completion and its ack).
//!
//! [`JobStore`]: super::JobStore

use super::queue::{Delivery, QueueError, Receipt};
use super::store::{ClaimBatch, Completion, Ended, Firing, JobClaim, StoreError};
use crate::duration::Dur;
use crate::ids::{RunId, TenantId, WorkerId};
use crate::job::{Job, Overlap};
use crate::run::Run;
use crate::timestamp::Timestamp;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// A failure of a step that touches the store and the queue.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// The store failed (or refused: [`StoreError::Fenced`] for a completion).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// What a worker asks of [`WorkPort::receive`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiveRequest {
    /// At most this many deliveries.
    pub max: usize,
    /// How long to wait for one (zero: do not wait).
    pub wait: Dur,
    /// Who claims.
    pub worker: WorkerId,
    /// The lease of each attempt started, and the visibility of each message received.
    pub lease: Dur,
    /// Runs whose job's overlap policy is one of these are held back, not claimed (see
    /// [`ClaimBatch::hold`](super::store::ClaimBatch::hold)).
    pub hold: Vec<Overlap>,
    /// Once cancelled, the receive stops waiting and answers nothing more. A receive is
    /// stopped this way, never by dropping it: once it has started to take and claim, it
    /// finishes and answers what it claimed (dropped then, its claims would be made with
    /// nobody to run them, until their leases ran out).
    pub stop: CancellationToken,
}

impl ReceiveRequest {
    /// The claim of the runs of `deliveries`, received by this request at `now`.
    pub fn claim_of(&self, deliveries: &[Delivery], now: Timestamp) -> ClaimBatch {
        ClaimBatch {
            runs: deliveries
                .iter()
                .map(|d| (d.dispatch.tenant.clone(), d.dispatch.run_id.clone()))
                .collect(),
            worker: self.worker.clone(),
            owners: Vec::new(),
            now,
            lease_until: now + self.lease.to_chrono(),
            read_jobs: true,
            hold: self.hold.clone(),
            alone: false,
        }
    }
}

/// One delivery of [`WorkPort::receive`] and its claim's answer.
#[derive(Debug)]
pub struct Received {
    /// The message, leased to this worker.
    pub delivery: Delivery,
    /// What the claim of its run did (with its job).
    pub claim: Result<JobClaim, StoreError>,
}

/// An attempt's end and the delivery it came from ([`WorkPort::complete`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// What the store records.
    pub completion: Completion,
    /// The delivery to acknowledge.
    pub receipt: Receipt,
}

/// How a worker gets and finishes work, and how a sweep hands runs over.
#[async_trait]
pub trait WorkPort: Send + Sync + 'static {
    /// Writes `firings` as [`JobStore::fire`](super::JobStore::fire) does and enqueues the
    /// runs created; answers each firing in order. A failure to enqueue after the runs were
    /// written is logged, not answered: the runs are PENDING and the repair pass enqueues
    /// them.
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError>;

    /// [`JobStore::create_fired`](super::JobStore::create_fired), then enqueues the runs
    /// inserted (a failure to enqueue is logged, as in [`WorkPort::fire`]). `None`, the
    /// default and always correct: nothing was written, and the caller creates the job and
    /// fires it apart.
    async fn create_fired(
        &self,
        job: &Job,
        idempotency: Option<(&str, &str)>,
        firing: &Firing,
    ) -> Option<Result<Vec<Run>, StoreError>> {
        let _ = (job, idempotency, firing);
        None
    }

    /// Receives up to `max` messages (waiting up to `wait` for one), leased for `lease`, and
    /// claims their runs as one [`ClaimBatch`](super::store::ClaimBatch) reading their jobs,
    /// at the instant of the receive. An empty vec when nothing came.
    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError>;

    /// Renews the lease of the attempt holding `token` until now + `lease` (the store's lease
    /// and the message's visibility). Answers the run (so the worker sees
    /// `cancel_requested`), and the instant the lease now lasts until.
    /// [`StoreError::Fenced`] if the token is not the live lease.
    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        receipt: &Receipt,
        lease: Dur,
    ) -> Result<(Run, Timestamp), WorkError>;

    /// Records an attempt's end ([`JobStore::complete`](super::JobStore::complete)), then
    /// settles its delivery: on a retry the run's new message is enqueued (due at its
    /// `not_before`), and the delivered message is acknowledged; the downstream runs the end
    /// released are enqueued. A fenced completion changes nothing (not even the message). A
    /// crash between the steps leaves the message to be redelivered, never a PENDING run
    /// without one (for long: the repair pass enqueues a released run whose message was lost).
    async fn complete(&self, settlement: &Settlement) -> Result<Ended, WorkError>;
}
