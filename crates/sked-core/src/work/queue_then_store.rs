//! [`QueueThenStore`]: the [`WorkPort`] over any [`JobStore`] and any [`DispatchQueue`], one
//! call to each in turn — what DynamoDB with SQS and the in-memory ports use. A crash between
//! two calls is safe by the order they come in: runs are written before they are enqueued (a
//! PENDING run without a message is re-enqueued by the repair pass), a retry is enqueued
//! before the old message is acked, and an ack comes last (an unacked message is redelivered
//! and its claim answers that the run has ended).
//!
//! A queue with coarse delays (SQS) may hand a message over up to
//! [`EARLY_DELIVERY`](crate::ports::queue::EARLY_DELIVERY) before its time: such a delivery is answered `NotYet` without a store
//! call, and the worker holds it in its slot until then; with
//! [`QueueThenStore::with_early_delivery`], messages are received hidden for the lease and
//! that margin, so a held run's first heartbeat comes before it shows again.

use crate::duration::Dur;
use crate::ids::{RunId, TenantId};
use crate::job::Job;
use crate::ports::{
    ClaimOutcome, Clock, Delivery, Dispatch, DispatchQueue, Ended, Firing, JobClaim, JobStore, QueueError, Receipt,
    ReceiveRequest, Received, RunTransition, Settlement, StoreError, WorkError, WorkPort,
};
use crate::run::Run;
use crate::timestamp::{self, Timestamp};
use async_trait::async_trait;
use std::sync::Arc;

/// The store and the queue, used one after the other.
#[derive(Clone)]
pub struct QueueThenStore {
    store: Arc<dyn JobStore>,
    queue: Arc<dyn DispatchQueue>,
    clock: Arc<dyn Clock>,
    /// How much longer than the lease a received message stays hidden (see
    /// [`QueueThenStore::with_early_delivery`]).
    early_margin: Dur,
}

impl QueueThenStore {
    /// Work over `store` and `queue`, timed by `clock` (the claim's instant, the leases).
    pub fn new(store: Arc<dyn JobStore>, queue: Arc<dyn DispatchQueue>, clock: Arc<dyn Clock>) -> Self {
        QueueThenStore {
            store,
            queue,
            clock,
            early_margin: Dur::ZERO,
        }
    }

    /// For a queue that may deliver up to `margin` early ([`EARLY_DELIVERY`](crate::ports::queue::EARLY_DELIVERY) for SQS): a
    /// received message stays hidden for the lease and `margin`, so that a delivery held until
    /// its time is still hidden when its claimed attempt's first heartbeat extends it.
    pub fn with_early_delivery(mut self, margin: Dur) -> Self {
        self.early_margin = margin;
        self
    }

    /// Enqueues runs just fired; whether they reached the queue. A failure is logged, not
    /// answered: runs written are PENDING, and the repair pass enqueues them; a firing left
    /// unwritten is not reported sent ([`JobStore::firings_sent`]), and fires again.
    async fn enqueue_fired(&self, runs: impl IntoIterator<Item = &Run>) -> bool {
        let dispatches: Vec<Dispatch> = runs.into_iter().map(Dispatch::from).collect();
        if dispatches.is_empty() {
            return true;
        }
        match self.queue.enqueue(&dispatches).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, runs = dispatches.len(), "fired runs not enqueued; the repair pass will");
                false
            }
        }
    }
}

/// Deliveries whose claim failed with `error`: if the store failed for now (throttled,
/// unreachable) and `queue` gives a message up after so many receives, each run is handed to
/// a new message, visible `at` — when the delivered one would have shown again — and the
/// delivery dropped, so a store that fails for a while does not spend the messages' receives
/// (a run fired unwritten on DynamoDB has no other record the reaper reads). A claim that
/// fails otherwise (an item that cannot be read) keeps counting, and its message is given up
/// at the limit. If the queue fails too, the deliveries show again as they would have.
pub(crate) async fn hand_back(queue: &dyn DispatchQueue, deliveries: &[Delivery], error: &StoreError, at: Timestamp) {
    if !matches!(error, StoreError::Transient(_)) || queue.receive_limit().is_none() {
        return;
    }
    let dispatches: Vec<Dispatch> = deliveries
        .iter()
        .map(|d| Dispatch {
            not_before: d.dispatch.not_before.max(at),
            ..d.dispatch.clone()
        })
        .collect();
    if let Err(e) = queue.enqueue(&dispatches).await {
        tracing::debug!(error = %e, "deliveries not handed back; they show again when their visibility ends");
        return;
    }
    for delivery in deliveries {
        if let Err(e) = ignore_stale(queue.ack(&delivery.receipt).await) {
            tracing::debug!(run_id = %delivery.dispatch.run_id, error = %e, "a delivery handed back was not acked");
        }
    }
}

/// A stale receipt means the message was already handled or superseded: nothing to do.
pub(crate) fn ignore_stale(result: Result<(), QueueError>) -> Result<(), QueueError> {
    match result {
        Ok(()) | Err(QueueError::StaleReceipt) => Ok(()),
        Err(e) => Err(e),
    }
}

#[async_trait]
impl WorkPort for QueueThenStore {
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError> {
        let answers = self.store.fire(firings).await?;
        if self.enqueue_fired(answers.iter().flatten().flatten()).await
            && let Err(e) = self.store.firings_sent(firings).await
        {
            tracing::warn!(error = %e, firings = firings.len(), "fired runs sent, but not recorded as sent; they will be sent again");
        }
        Ok(answers)
    }

    async fn create_fired(
        &self,
        job: &Job,
        idempotency: Option<(&str, &str)>,
        firing: &Firing,
    ) -> Option<Result<Vec<Run>, StoreError>> {
        let answer = self.store.create_fired(job, idempotency, firing).await?;
        if let Ok(runs) = &answer {
            self.enqueue_fired(runs).await;
        }
        Some(answer)
    }

    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError> {
        // Hidden for the lease, and the time an early delivery may be held before its claim.
        let visibility = Dur::millis((request.lease.as_millis() + self.early_margin.as_millis()) as u64);
        // Dropping a receive from the queue claims nothing: what it leased shows again.
        let deliveries = tokio::select! {
            biased;
            _ = request.stop.cancelled() => return Ok(Vec::new()),
            received = self.queue.receive(request.max, visibility, request.wait) => received?,
        };
        if deliveries.is_empty() {
            return Ok(Vec::new());
        }
        let now = timestamp::trunc_ms(self.clock.now());
        // A delivery that came before its time (a queue with coarse delays, SQS) is not due:
        // answered so without asking the store, for the worker to hold until then.
        let (early, due): (Vec<Delivery>, Vec<Delivery>) =
            deliveries.into_iter().partition(|d| d.dispatch.not_before > now);
        let mut received: Vec<Received> = early
            .into_iter()
            .map(|delivery| {
                let not_yet = ClaimOutcome::NotYet(delivery.dispatch.not_before);
                Received {
                    delivery,
                    claim: Ok(JobClaim::Claimed(not_yet, None)),
                }
            })
            .collect();
        if !due.is_empty() {
            let claims = match self.store.claim(&request.claim_of(&due, now)).await {
                Ok(claims) => claims,
                Err(e) => {
                    hand_back(&*self.queue, &due, &e, now + visibility.to_chrono()).await;
                    return Err(e.into());
                }
            };
            if claims.len() != due.len() {
                return Err(StoreError::Other("claim answered another number of runs".into()).into());
            }
            received.extend(
                due.into_iter()
                    .zip(claims)
                    .map(|(delivery, claim)| Received { delivery, claim }),
            );
        }
        Ok(received)
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        receipt: &Receipt,
        lease: Dur,
    ) -> Result<(Run, Timestamp), WorkError> {
        let now = timestamp::trunc_ms(self.clock.now());
        let until = now + lease.to_chrono();
        let run = self.store.heartbeat(tenant, run_id, token, now, until).await?;
        // The message's lease follows; if it lapsed, a redelivery finds the run leased.
        if let Err(e) = self.queue.extend(receipt, lease).await {
            tracing::debug!(%run_id, error = %e, "queue lease not extended");
        }
        Ok((run, until))
    }

    async fn complete(&self, settlement: &Settlement) -> Result<Ended, WorkError> {
        let ended = self.store.complete(&settlement.completion).await?;
        let mut dispatches: Vec<Dispatch> = ended.to_enqueue().map(Dispatch::from).collect();
        if matches!(settlement.completion.next, RunTransition::Retry { .. }) {
            dispatches.push(Dispatch::from(&ended.run));
        }
        if !dispatches.is_empty() {
            self.queue.enqueue(&dispatches).await?;
        }
        ignore_stale(self.queue.ack(&settlement.receipt).await)?;
        Ok(ended)
    }
}
