//! [`Faulty`] over a [`DispatchQueue`]: messages lost, duplicated (delivered again later),
//! delivered late, or received out of order; transient failures of any call.
//!
//! Held-back messages (late ones and the second copies of duplicated ones) are handed to the
//! real queue at the first call after their time has come, or by [`Faulty::release_due`].
//! A lost or failed enqueue is exactly what the reaper's repair pass exists for; duplicates
//! are harmless because claims are conditional.

use super::{FaultKind, Faulty, Held};
use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::ports::{Delivery, Dispatch, DispatchQueue, QueueError, Receipt};

fn injected(what: &str) -> QueueError {
    QueueError::Transient(format!("injected: {what}").into())
}

impl<P: DispatchQueue + ?Sized> Faulty<P> {
    /// Hands every held message whose time has come to the real queue.
    pub async fn release_due(&self) -> Result<(), QueueError> {
        let now = self.chaos.now();
        let due: Vec<Dispatch> = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let (due, keep): (Vec<Held>, Vec<Held>) = held.drain(..).partition(|h| h.at <= now);
            *held = keep;
            due.into_iter().map(|h| h.dispatch).collect()
        };
        if due.is_empty() {
            return Ok(());
        }
        self.inner.enqueue(&due).await
    }

    /// Messages held back, for reports.
    pub fn held_count(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn hold(&self, dispatch: &Dispatch) {
        let plan = self.chaos.plan();
        let at = self.chaos.now() + chrono::Duration::milliseconds(self.chaos.range(1, plan.queue_late_max_ms) as i64);
        self.held.lock().unwrap_or_else(|e| e.into_inner()).push(Held {
            at,
            dispatch: dispatch.clone(),
        });
    }

    async fn before_queue(&self, op: &str) -> Result<(), QueueError> {
        self.chaos.maybe_yield().await;
        self.release_due().await?;
        if self.chaos.strike(FaultKind::QueueTransient, |p| p.queue_transient) {
            return Err(injected(&format!("{op} throttled")));
        }
        Ok(())
    }
}

#[async_trait]
impl<P: DispatchQueue + ?Sized> DispatchQueue for Faulty<P> {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        self.before_queue("enqueue").await?;
        let mut now = Vec::with_capacity(items.len());
        for d in items {
            if self.chaos.strike(FaultKind::QueueLost, |p| p.queue_lost) {
                continue;
            }
            if self.chaos.strike(FaultKind::QueueLate, |p| p.queue_late) {
                self.hold(d);
                continue;
            }
            if self.chaos.strike(FaultKind::QueueDuplicated, |p| p.queue_duplicated) {
                self.hold(d);
            }
            now.push(d.clone());
        }
        if now.is_empty() {
            return Ok(());
        }
        self.inner.enqueue(&now).await
    }

    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        self.before_queue("receive").await?;
        let mut got = self.inner.receive(max, visibility, wait).await?;
        if got.len() > 1 && self.chaos.strike(FaultKind::QueueReordered, |p| p.queue_reordered) {
            self.chaos.shuffle(&mut got);
        }
        Ok(got)
    }

    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        self.before_queue("extend").await?;
        self.inner.extend(receipt, visibility).await
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        self.before_queue("ack").await?;
        self.inner.ack(receipt).await
    }

    /// Not a fault point: the depth is read for metrics only.
    async fn depth(&self) -> Result<Option<Vec<sked_core::ports::QueueDepth>>, QueueError> {
        self.inner.depth().await
    }

    fn receive_limit(&self) -> Option<u32> {
        self.inner.receive_limit()
    }
}
