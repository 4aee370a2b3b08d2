//! The receive loop of [`Worker::run`]: takes free slots, receives and claims as many
//! deliveries (waiting up to the poll wait), and hands the batch to a task that deals with
//! its answers ([`Worker::take_work`]'s second half) and runs each claimed attempt in a task
//! of its own, which releases its slot when it ends. A delivery that came early (SQS: up to
//! [`EARLY_DELIVERY`](crate::ports::queue::EARLY_DELIVERY) before its run's time) keeps its
//! slot until that time, then is claimed.

use super::Worker;
use super::claim::ClaimedAttempt;
use crate::duration::Dur;
use crate::ports::Delivery;
use crate::timestamp::Timestamp;
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
        this.ports.observe(crate::ports::Event::WorkerUp);
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
            // Not dropped at shutdown but told to stop waiting: a receive that has started to
            // claim answers what it claimed, and those runs end at once (shut down, retried).
            let request = this.receive_request(permits.len(), this.config.poll_wait, shutdown.clone());
            match this.ports.work.receive(&request).await {
                Ok(received) => {
                    if !received.is_empty() {
                        let (worker, stop) = (this.clone(), shutdown.clone());
                        attempts.spawn(async move {
                            let (claimed, early) = worker.sort_claims_holding(received, true).await;
                            worker.run_received(claimed, early, permits, stop).await;
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
        this.ports.observe(crate::ports::Event::WorkerDown);
    }

    /// The attempts a receive claimed, each in its own task, and the deliveries that came
    /// early held in their slots until their time, then claimed and run (those due at one
    /// instant in one claim, as a batch received at its time is). At shutdown the held ones
    /// are let go: their messages come back when their visibility ends.
    async fn run_received(
        self: &Arc<Self>,
        claimed: Vec<ClaimedAttempt>,
        mut early: Vec<(Delivery, Timestamp)>,
        mut permits: Vec<OwnedSemaphorePermit>,
        shutdown: CancellationToken,
    ) {
        let early_permits = permits.split_off(permits.len().saturating_sub(early.len()));
        early.sort_by_key(|(_, due)| *due);
        let mut groups: Vec<(Timestamp, Vec<Delivery>, Vec<OwnedSemaphorePermit>)> = Vec::new();
        for ((delivery, due), permit) in early.into_iter().zip(early_permits) {
            match groups.last_mut() {
                Some((at, deliveries, permits)) if *at == due => {
                    deliveries.push(delivery);
                    permits.push(permit);
                }
                _ => groups.push((due, vec![delivery], vec![permit])),
            }
        }
        let held = futures::future::join_all(groups.into_iter().map(|(due, deliveries, permits)| {
            let shutdown = shutdown.clone();
            async move {
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return,
                    _ = self.ports.clock.sleep_until(due) => {}
                }
                let claimed = self.claim_at_their_time(deliveries).await;
                self.run_batch(claimed, permits, shutdown).await;
            }
        }));
        tokio::join!(self.run_batch(claimed, permits, shutdown.clone()), held);
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
