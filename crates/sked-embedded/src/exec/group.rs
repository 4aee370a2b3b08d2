//! Signalling a payload's process group. Every payload leads a group of its own (its pid is
//! the group id), so one signal reaches it and everything it started that stayed in the group.
//!
//! What this module must not do: signal anything but a payload's group (never 0 or 1: that
//! would be the caller's own group, or init's).

use rustix::process::{Pid, Signal};

/// Sends `signal` to every process of group `pgid`; a group already gone is fine.
pub fn signal_group(pgid: i32, signal: Signal) {
    let Some(group) = Pid::from_raw(pgid).filter(|_| pgid > 1) else {
        return;
    };
    match rustix::process::kill_process_group(group, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(err) => {
            tracing::warn!(pgid, ?signal, error = %err, "failed to signal the payload's process group")
        }
    }
}
