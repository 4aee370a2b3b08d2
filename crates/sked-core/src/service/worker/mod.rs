//! The worker: receives dispatches and claims their runs through the work port
//! ([`crate::ports::WorkPort`]: fenced leases; a `queue_one` run only while no other run of its
//! job runs, checked in the claim), runs each task through the executor, heartbeats at a
//! third of the lease, enforces the timeout, and completes (the delivery settled with it) —
//! or, having lost its lease, stops the payload (or never starts it) and writes nothing.
//!
//! Its parts, in the order a run meets them:
//! - [`config`]: [`WorkerConfig`], and the lease arithmetic (stop margin, lease-lost grace, the
//!   long lease of long attempts).
//! - [`receive`]: the loop of [`Worker::run`]: slots, receives, one task per received batch.
//! - [`claim`]: a received batch's claim answers, with the overlap checks made at claim time
//!   ([`Worker::take_work`]).
//! - [`attempt`]: one claimed attempt run to its end: the payload, its log, heartbeats, the
//!   timeout and the lease stop margin ([`Worker::run_claimed`]).
//! - [`completion`]: what an ended attempt records: the outcome, the retry or the run's end,
//!   the ack, and the follow-ups (timeout handler, the `queue_one` run held back).
//!
//! This file holds [`Worker`] itself and the queue moves every part uses (requeue, defer,
//! ack).

mod attempt;
mod claim;
mod completion;
pub mod config;
mod receive;

pub use claim::ClaimedAttempt;
pub use config::{LongLease, WorkerConfig};

use super::Ports;
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ports::{Delivery, Executor};
use crate::timestamp::Timestamp;
use crate::work::ignore_stale;
use std::sync::Arc;

/// One worker (which may run several attempts at once).
pub struct Worker {
    pub(crate) ports: Ports,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) config: WorkerConfig,
}

impl Worker {
    /// A worker over `ports`, running tasks through `executor`.
    pub fn new(ports: Ports, executor: Arc<dyn Executor>, config: WorkerConfig) -> Self {
        Worker {
            ports,
            executor,
            config,
        }
    }

    /// This worker's settings.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// Logs a delivery that could not be handled; its message will be redelivered.
    pub(super) fn unhandled(&self, delivery: &Delivery, error: &CoreError) {
        let (tenant, run_id) = (&delivery.dispatch.tenant, &delivery.dispatch.run_id);
        tracing::warn!(worker = %self.config.id, %tenant, %run_id, error = %error, "delivery not handled; it will be redelivered");
    }

    /// A delivery whose claim failed: logged, and if the store failed for now, handed to a
    /// new message for when this one would have shown again ([`crate::work::hand_back`]).
    pub(super) async fn claim_failed(&self, delivery: &Delivery, error: &CoreError) {
        self.unhandled(delivery, error);
        if let CoreError::Store(e) = error {
            let at = self.ports.clock.now() + self.config.lease.to_chrono();
            crate::work::hand_back(&*self.ports.queue, std::slice::from_ref(delivery), e, at).await;
        }
    }

    /// Hands the run back to the queue as a message visible from `until`, and drops the one
    /// delivered: for a run that waits for another run's lease (`queue_one` behind a running
    /// run, or a duplicate message of a run another worker holds), which may take many leases. Deferring the same message instead would count each wait as a failed
    /// delivery, and a queue with a dead-letter limit (SQS's redrive) would give the run up as
    /// undeliverable. (A queue that keeps one message per run just moves it.)
    pub(super) async fn requeue(&self, delivery: &Delivery, until: Timestamp) -> Result<(), CoreError> {
        let mut dispatch = delivery.dispatch.clone();
        dispatch.not_before = dispatch.not_before.max(until);
        self.ports.queue.enqueue(&[dispatch]).await?;
        self.ack(delivery).await
    }

    /// Leaves a delivery invisible until `until`, when it is worth trying again.
    pub(super) async fn defer(&self, delivery: &Delivery, until: Timestamp) -> Result<(), CoreError> {
        let wait = (until - self.ports.clock.now()).num_milliseconds().max(0) as u64;
        Ok(ignore_stale(
            self.ports.queue.extend(&delivery.receipt, Dur::millis(wait)).await,
        )?)
    }

    pub(super) async fn ack(&self, delivery: &Delivery) -> Result<(), CoreError> {
        Ok(ignore_stale(self.ports.queue.ack(&delivery.receipt).await)?)
    }
}
