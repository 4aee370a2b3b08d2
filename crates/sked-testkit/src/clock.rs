//! A manual clock: time moves only when a test says so.
//!
//! [`ManualClock`] implements [`Clock`]. `sleep_until` parks on a tokio watch channel and
//! returns as soon as [`ManualClock::set`] or [`ManualClock::advance`] reaches the deadline,
//! so tests (and the in-memory queue's long poll) never depend on the wall clock.
//! It must not read the system time.

use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::duration::Dur;
use sked_core::ports::Clock;
use tokio::sync::watch;

/// A clock that stands still until it is set or advanced.
#[derive(Debug)]
pub struct ManualClock {
    /// The current instant; every change wakes the sleepers.
    now: watch::Sender<Timestamp>,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            now: watch::Sender::new(start),
        }
    }

    /// Sets the time to `t` (also backwards; sleepers whose deadline is reached wake).
    pub fn set(&self, t: Timestamp) {
        self.now.send_replace(t);
    }

    /// Moves the time forward by `dur` and returns the new time.
    pub fn advance(&self, dur: Dur) -> Timestamp {
        let mut after = self.now();
        self.now.send_modify(|t| {
            *t += dur.to_chrono();
            after = *t;
        });
        after
    }

    /// The current time (same as [`Clock::now`], without importing the trait).
    pub fn now(&self) -> Timestamp {
        *self.now.borrow()
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        ManualClock::now(self)
    }

    async fn sleep_until(&self, deadline: Timestamp) {
        let mut rx = self.now.subscribe();
        // `wait_for` checks the current value first, so a past deadline returns at once.
        // The sender lives as long as `self`, so the wait cannot fail while we borrow it.
        let _ = rx.wait_for(|t| *t >= deadline).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::timestamp::parse;
    use std::sync::Arc;
    use std::time::Duration;

    fn t0() -> Timestamp {
        parse("2026-03-01T00:00:00Z").unwrap()
    }

    #[test]
    fn set_and_advance_move_now() {
        let clock = ManualClock::new(t0());
        assert_eq!(clock.now(), t0());
        assert_eq!(clock.advance(Dur::secs(5)), t0() + chrono::Duration::seconds(5));
        assert_eq!(clock.now(), t0() + chrono::Duration::seconds(5));
        clock.set(t0());
        assert_eq!(clock.now(), t0());
    }

    #[tokio::test]
    async fn sleep_until_a_past_deadline_returns_at_once() {
        let clock = ManualClock::new(t0());
        tokio::time::timeout(Duration::from_secs(1), clock.sleep_until(t0()))
            .await
            .unwrap();
        tokio::time::timeout(
            Duration::from_secs(1),
            clock.sleep_until(t0() - chrono::Duration::seconds(1)),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn sleep_until_waits_for_the_clock_to_reach_the_deadline() {
        let clock = Arc::new(ManualClock::new(t0()));
        let deadline = t0() + chrono::Duration::seconds(10);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(deadline).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished(), "woke before the clock moved");
        clock.advance(Dur::secs(9));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished(), "woke before the deadline");
        clock.advance(Dur::secs(1));
        tokio::time::timeout(Duration::from_secs(1), sleeper)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn set_past_the_deadline_wakes_the_sleeper() {
        let clock = Arc::new(ManualClock::new(t0()));
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(t0() + chrono::Duration::hours(1)).await }
        });
        tokio::task::yield_now().await;
        clock.set(t0() + chrono::Duration::days(1));
        tokio::time::timeout(Duration::from_secs(1), sleeper)
            .await
            .unwrap()
            .unwrap();
    }
}
