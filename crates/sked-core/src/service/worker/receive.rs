//! The receive loop of [`Worker::run`]: takes free slots, receives and claims as many
//! deliveries (waiting up to the poll wait), and hands the batch to a task that deals with
//! its answers ([`Worker::take_work`]'s second half) and runs each claimed attempt in a task
//! of its own, which releases its slot when it ends.

use super::Worker;
use super::claim::ClaimedAttempt;
use crate::duration::Dur;
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
            let request = this.receive_request(permits.len(), this.config.poll_wait);
            let received = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                r = this.ports.work.receive(&request) => r,
            };
            match received {
                Ok(received) => {
                    if !received.is_empty() {
                        let (worker, stop) = (this.clone(), shutdown.clone());
                        attempts.spawn(async move {
                            let claimed = worker.sort_claims(received).await;
                            worker.run_batch(claimed, permits, stop).await;
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(worker = %this.config.id, error = %e, "receive failed");
                    let clock = &this.ports.clock;
                    clock.sleep_until(clock.now() + RECEIVE_BACKOFF.to_chrono()).await;
                }
            }
            while attempts.try_join_next().is_some() {}
        }
        while attempts.join_next().await.is_some() {}
    }

    /// Runs each claimed attempt in its own task, which releases its slot (`permits`, at
    /// least one per attempt) when it ends; the slots left over are released at once.
    async fn run_batch(
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
}
