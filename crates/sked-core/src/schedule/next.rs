//! Next-fire computation: a pure function of (schedule, previous fire time). No clock.

use super::{DstPolicy, Schedule};
use crate::timestamp::Timestamp;

/// The window a job fires within (`start_at` inclusive, `end_at` inclusive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FireWindow {
    /// No occurrence before this.
    pub start_at: Option<Timestamp>,
    /// No occurrence after this.
    pub end_at: Option<Timestamp>,
}

/// The first occurrence for a job (re)scheduled at `now`: for `at`, the instant itself (even if
/// past: it fires at once); for `every` and `cron`, the first occurrence strictly after `now`
/// (and not before `start_at`). `None` when the window has no occurrence left.
pub fn first_fire(schedule: &Schedule, dst: &DstPolicy, window: &FireWindow, now: Timestamp) -> Option<Timestamp> {
    let _ = (schedule, dst, window, now);
    todo!("schedule helper")
}

/// The occurrence after the nominal time `prev` (strictly later), within the window.
/// `None` for `at` schedules and once past `end_at`.
pub fn next_fire_after(schedule: &Schedule, dst: &DstPolicy, window: &FireWindow, prev: Timestamp) -> Option<Timestamp> {
    let _ = (schedule, dst, window, prev);
    todo!("schedule helper")
}

/// The next `count` occurrences after `now` (what `GET /jobs/{id}/preview` shows), DST applied.
pub fn preview(schedule: &Schedule, dst: &DstPolicy, window: &FireWindow, now: Timestamp, count: usize) -> Vec<Timestamp> {
    let mut out = Vec::with_capacity(count);
    let mut next = first_fire(schedule, dst, window, now);
    while let Some(t) = next {
        if out.len() == count {
            break;
        }
        out.push(t);
        next = next_fire_after(schedule, dst, window, t);
    }
    out
}
