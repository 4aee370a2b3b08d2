//! [`Faulty`] over a [`Clock`]: one process's view of the time, off the true time by an
//! offset (skew) that [`Faulty::reskew`] re-draws within the plan's `max_skew_ms`.
//!
//! Sleeps re-check after waking, since the offset may change while they wait.

use super::{FaultKind, Faulty};
use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::ports::Clock;
use std::sync::atomic::Ordering;

impl<P: Clock + ?Sized> Faulty<P> {
    /// Draws a new offset in `±max_skew_ms` (a clock step by NTP, a drifting host) and counts
    /// it. Does nothing while faults are off.
    pub fn reskew(&self) {
        let max = self.chaos.plan().max_skew_ms;
        if max == 0 || !self.chaos.enabled() {
            return;
        }
        let offset = self.chaos.range(0, 2 * max) as i64 - max as i64;
        self.offset_ms.store(offset, Ordering::Relaxed);
        self.chaos.record(FaultKind::ClockSkew);
    }

    /// Puts the clock back on the true time.
    pub fn unskew(&self) {
        self.offset_ms.store(0, Ordering::Relaxed);
    }

    fn offset(&self) -> chrono::Duration {
        chrono::Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }
}

#[async_trait]
impl<P: Clock + ?Sized> Clock for Faulty<P> {
    fn now(&self) -> Timestamp {
        self.inner.now() + self.offset()
    }

    async fn sleep_until(&self, deadline: Timestamp) {
        while self.now() < deadline {
            self.inner.sleep_until(deadline - self.offset()).await;
        }
    }
}
