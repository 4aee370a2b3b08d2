//! [`eventually`]: waits, in real time, for something other tasks make true — a worker's claim,
//! a run's end — and gives up after a bound generous enough for a loaded 2-core machine. The
//! bound only tells a hang from slowness; the condition is checked every couple of
//! milliseconds, so a test takes no longer than its condition does.

use std::time::{Duration, Instant};

/// How long [`eventually`] waits before it gives up.
pub const EVENTUALLY_BOUND: Duration = Duration::from_secs(30);

/// Checks `check` every 2 ms until it answers `Some`, and answers that; `None` once
/// [`EVENTUALLY_BOUND`] has passed (the caller fails, saying what it saw).
pub async fn eventually<T>(mut check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + EVENTUALLY_BOUND;
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
