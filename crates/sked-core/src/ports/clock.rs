//! The `Clock` port: the only way core learns the time or waits for it.

use crate::timestamp::Timestamp;
use async_trait::async_trait;

/// Time for the scheduler. Production uses [`SystemClock`]; tests drive a manual clock.
#[async_trait]
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;

    /// Returns once `now() >= deadline` (at once if already past).
    async fn sleep_until(&self, deadline: Timestamp);
}

/// The system's wall clock, with tokio timers for waiting.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        chrono::Utc::now()
    }

    async fn sleep_until(&self, deadline: Timestamp) {
        // Re-check after waking: tokio timers have millisecond granularity.
        loop {
            let left = deadline - self.now();
            if left <= chrono::Duration::zero() {
                return;
            }
            tokio::time::sleep(left.to_std().unwrap_or_default()).await;
        }
    }
}
