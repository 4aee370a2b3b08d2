//! Daylight-saving rules for cron schedules: what happens to a wall-clock time that does not
//! exist (spring gap) or exists twice (autumn repeat) in the schedule's time zone.

use serde::{Deserialize, Serialize};

/// A cron job's DST rule, written `{"gap": "shift", "repeat": "once"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DstPolicy {
    /// Spring-forward gap.
    #[serde(default)]
    pub gap: DstGap,
    /// Autumn repeat.
    #[serde(default)]
    pub repeat: DstRepeat,
}

/// A fire time that falls in the spring gap (e.g. 02:30 on the night clocks jump 02:00→03:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DstGap {
    /// Fire at the first instant after the gap (02:30 → 03:00 local).
    #[default]
    Shift,
    /// Do not fire that day.
    Skip,
}

/// A fire time that occurs twice in the autumn repeat (e.g. 02:30 when 03:00→02:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DstRepeat {
    /// Fire at the first of the two instants only.
    #[default]
    Once,
    /// Fire at both instants.
    Twice,
}
