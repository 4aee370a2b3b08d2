//! Retries: backoff delays and what a run does after an attempt ends.
//!
//! Jitter here is deterministic — derived from the run id and attempt — so the same run
//! always waits the same time (replayable simulations) while different runs spread out.

use crate::duration::Dur;
use crate::job::Backoff;

/// Delay before the attempt after attempt number `attempt` (1-based) failed.
pub fn todo_backoff(_b: &Backoff, _attempt: u32) -> Dur {
    todo!()
}
