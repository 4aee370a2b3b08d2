//! The receive loop of [`Worker::run`]: takes free slots, receives as many deliveries (or,
//! while work keeps coming and the store holds the queue too, receives and claims them in one
//! store call), and hands each batch to a task that claims it and runs its attempts, each
//! releasing its slot when it ends.

use super::Worker;
use super::claim::ClaimedAttempt;
use crate::duration::Dur;
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
                r = this.ports.queue.receive(permits.len(), this.config.lease, this.config.poll_wait) => r,
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

    /// Every delivery of one receive, as [`Worker::run`] handles them: one
    /// [`Worker::claim_batch`], then each claimed attempt in its own task, which releases its
    /// slot (`permits`, one per delivery) when it ends.
    async fn handle_batch(
        self: Arc<Self>,
        deliveries: Vec<Delivery>,
        permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
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
