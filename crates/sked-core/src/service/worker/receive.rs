//! The receive loop of [`Worker::run`]: takes free slots, receives as many deliveries (or,
//! while work keeps coming and the store holds the queue too, receives and claims them in one
//! store call), and hands each batch to a task that claims it and runs its attempts, each
//! releasing its slot when it ends. A delivery that came early (SQS: within
//! [`EARLY_DELIVERY`] of its `not_before`) keeps its slot until its time, then is claimed.

use super::Worker;
use super::claim::ClaimedAttempt;
use crate::duration::Dur;
use crate::ports::queue::EARLY_DELIVERY;
use crate::ports::{Delivery, JobClaim, StoreError};
use crate::timestamp;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Pause after a failed receive before trying again.
const RECEIVE_BACKOFF: Dur = Dur::millis(500);

impl Worker {
    /// Works until `shutdown` is cancelled; then stops taking work, stops running payloads
    /// (their runs are retried elsewhere) and returns once they have ended.
    pub async fn run(self, shutdown: CancellationToken) {
        let this = Arc::new(self);
        let slots = Arc::new(Semaphore::new(this.config.concurrency.max(1)));
        let mut attempts = JoinSet::new();
        // While receives find work, and where the store holds the queue too, receive and
        // claim in one store call (`None` once the store has said it cannot).
        let mut busy = false;
        let mut joined = true;
        loop {
            let first = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
            };
            let mut permits = vec![first];
            while let Ok(p) = slots.clone().try_acquire_owned() {
                permits.push(p);
            }
            if busy && joined {
                match this.receive_and_claim(permits.len()).await {
                    Some(answers) if !answers.is_empty() => {
                        permits.truncate(answers.len());
                        let (worker, stop) = (this.clone(), shutdown.clone());
                        attempts.spawn(async move {
                            let claimed = worker.sort_claims(answers).await;
                            worker.run_batch(claimed, permits, stop).await;
                        });
                        while attempts.try_join_next().is_some() {}
                        continue;
                    }
                    Some(_) => busy = false,
                    None => joined = false,
                }
            }
            let received = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                r = this.ports.queue.receive(permits.len(), this.receive_visibility(), this.config.poll_wait) => r,
            };
            let deliveries = match received {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(worker = %this.config.id, error = %e, "receive failed");
                    let clock = &this.ports.clock;
                    clock.sleep_until(clock.now() + RECEIVE_BACKOFF.to_chrono()).await;
                    continue;
                }
            };
            busy = !deliveries.is_empty();
            if busy {
                permits.truncate(deliveries.len());
                let worker = this.clone();
                let stop = shutdown.clone();
                attempts.spawn(async move { worker.handle_batch(deliveries, permits, stop).await });
            }
            while attempts.try_join_next().is_some() {}
        }
        while attempts.join_next().await.is_some() {}
    }

    /// How long a received message stays hidden: the lease, and the time a delivery that came
    /// early may be held before its claim ([`EARLY_DELIVERY`]), so that the claimed attempt's
    /// first heartbeat extends it before it shows again.
    fn receive_visibility(&self) -> Dur {
        Dur::millis((self.config.lease.as_millis() + EARLY_DELIVERY.as_millis()) as u64)
    }

    /// Every delivery of one receive, as [`Worker::run`] handles them: one
    /// [`Worker::claim_batch`], then each claimed attempt in its own task, which releases its
    /// slot (`permits`, one per delivery) when it ends. Deliveries received before their
    /// `not_before` (at most [`EARLY_DELIVERY`] and the clock-skew bound before it) are held
    /// until then, each in its slot, and claimed at their time — those due at the same
    /// instant in one claim, as a batch received at its time is.
    async fn handle_batch(
        self: Arc<Self>,
        deliveries: Vec<Delivery>,
        permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
        let now = self.ports.clock.now();
        let hold_up_to = now + EARLY_DELIVERY.to_chrono() + self.config.max_clock_skew.to_chrono();
        let (mut ready, mut ready_permits, mut early) = (Vec::new(), Vec::new(), Vec::new());
        for (delivery, permit) in deliveries.into_iter().zip(permits) {
            let due = delivery.dispatch.not_before;
            if due > now && due <= hold_up_to {
                early.push((delivery, permit));
            } else {
                ready.push(delivery);
                ready_permits.push(permit);
            }
        }
        early.sort_by_key(|(d, _)| d.dispatch.not_before);
        let mut groups: Vec<Vec<(Delivery, OwnedSemaphorePermit)>> = Vec::new();
        for held in early {
            match groups.last_mut() {
                Some(group) if group[0].0.dispatch.not_before == held.0.dispatch.not_before => group.push(held),
                _ => groups.push(vec![held]),
            }
        }
        let now_due = self.claim_and_run(ready, ready_permits, shutdown.clone());
        let held = futures::future::join_all(
            groups
                .into_iter()
                .map(|group| self.hold_then_run(group, shutdown.clone())),
        );
        tokio::join!(now_due, held);
    }

    /// Deliveries received before their common `not_before`: wait in their slots until then,
    /// then are claimed and run. Claimed at once instead, each run would be refused as not
    /// due yet and its message hidden until then — on SQS, whole seconds later. At shutdown
    /// they are let go: their messages come back when their visibility ends.
    async fn hold_then_run(self: &Arc<Self>, held: Vec<(Delivery, OwnedSemaphorePermit)>, shutdown: CancellationToken) {
        let due = held[0].0.dispatch.not_before;
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = self.ports.clock.sleep_until(due) => {}
        }
        let (deliveries, permits) = held.into_iter().unzip();
        self.claim_and_run(deliveries, permits, shutdown).await;
    }

    /// One [`Worker::claim_batch`] of `deliveries`, then [`Self::run_batch`].
    async fn claim_and_run(
        self: &Arc<Self>,
        deliveries: Vec<Delivery>,
        permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
        if deliveries.is_empty() {
            return;
        }
        let claimed = self.claim_batch(deliveries).await;
        self.run_batch(claimed, permits, shutdown).await;
    }

    /// Runs each claimed attempt in its own task, which releases its slot (`permits`, at
    /// least one per attempt) when it ends; the slots left over are released at once.
    pub(super) async fn run_batch(
        self: &Arc<Self>,
        claimed: Vec<ClaimedAttempt>,
        permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
        let mut permits = permits.into_iter();
        let mut running = JoinSet::new();
        for attempt in claimed {
            let (worker, stop, permit) = (self.clone(), shutdown.clone(), permits.next());
            running.spawn(async move {
                worker.run_claimed(attempt, stop).await;
                drop(permit);
            });
        }
        drop(permits); // the slots of deliveries that started nothing
        while running.join_next().await.is_some() {}
    }

    /// [`JobStore::receive_and_claim`](crate::ports::JobStore::receive_and_claim) for up to
    /// `max` deliveries: `None` if the store cannot (receive from the queue instead), an
    /// empty batch if nothing is visible or the call failed (logged; the long poll comes
    /// next).
    async fn receive_and_claim(&self, max: usize) -> Option<Vec<(Delivery, Result<JobClaim, StoreError>)>> {
        let now = timestamp::trunc_ms(self.ports.clock.now());
        let lease_until = now + self.config.lease.to_chrono();
        let hold = self.checked_at_claim();
        match self
            .ports
            .store
            .receive_and_claim(max, self.config.lease, hold, &self.config.id, now, lease_until)
            .await
        {
            Ok(answers) => answers,
            Err(e) => {
                tracing::warn!(worker = %self.config.id, error = %e, "receive and claim failed");
                Some(Vec::new())
            }
        }
    }
}
