//! Schedules: when a job fires. The types here; the pure next-fire computation in
//! [`next`], DST handling in [`dst`].
//!
//! A schedule is `at` (one instant), `every` (fixed interval from an anchor), `cron`
//! (5 or 6 fields or an `@macro`, in an IANA time zone), bounded by the job's optional
//! `start_at`/`end_at` window, or `after` (at the nominal times other jobs ran at, once they
//! ended: [`crate::dependency`]). Jitter never moves the nominal time (it names the run);
//! it only delays when the run may start.

pub mod cron;
pub mod dst;
pub mod next;

use crate::dependency::After;
use crate::duration::Dur;
use crate::timestamp::{self, Timestamp};
use serde::{Deserialize, Serialize};

pub use dst::{DstGap, DstPolicy, DstRepeat};
pub use next::{FireWindow, next_fire_after, preview};

/// When a job fires. Written `{"at": …}`, `{"every": "5m", "anchor": …}`,
/// `{"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}` or
/// `{"after": {"jobs": ["a"], "on": "success"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawSchedule", into = "RawSchedule")]
pub enum Schedule {
    /// Once, at this instant (in the past: fires at once).
    At(Timestamp),
    /// Every `interval` (≥ 1 s), at `anchor + k·interval`.
    Every {
        /// The period.
        interval: Dur,
        /// The instant the grid is laid from; the job's creation time if not given.
        anchor: Option<Timestamp>,
    },
    /// A cron expression evaluated in an IANA time zone.
    Cron {
        /// 5 fields, 6 fields (leading seconds), or a macro such as `@daily`.
        expr: String,
        /// IANA zone name; `UTC` if not given.
        timezone: String,
    },
    /// At each nominal time the upstream jobs ran at, once they ended ([`crate::dependency`]):
    /// never by the clock.
    After(After),
}

impl Schedule {
    /// Whether the schedule fires more than once by the clock (`at` and `after` do not).
    pub fn is_recurring(&self) -> bool {
        !matches!(self, Schedule::At(_) | Schedule::After(_))
    }

    /// The dependencies of an `after` schedule.
    pub fn after(&self) -> Option<&After> {
        match self {
            Schedule::After(after) => Some(after),
            _ => None,
        }
    }
}

/// The wire form of [`Schedule`]: exactly one of `at`, `every`, `cron`, `after` is set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSchedule {
    #[serde(default, with = "timestamp::serde_ms_opt", skip_serializing_if = "Option::is_none")]
    at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    every: Option<Dur>,
    #[serde(default, with = "timestamp::serde_ms_opt", skip_serializing_if = "Option::is_none")]
    anchor: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<After>,
}

impl TryFrom<RawSchedule> for Schedule {
    type Error = String;

    fn try_from(r: RawSchedule) -> Result<Self, String> {
        if let Some(after) = r.after {
            return match (r.at, r.every, r.cron, r.anchor, r.timezone) {
                (None, None, None, None, None) => Ok(Schedule::After(after)),
                _ => Err("`after` goes alone: not with `at`, `every`, `cron`, `anchor` or `timezone`".into()),
            };
        }
        match (r.at, r.every, r.cron) {
            (Some(at), None, None) if r.anchor.is_none() && r.timezone.is_none() => Ok(Schedule::At(at)),
            (None, Some(interval), None) if r.timezone.is_none() => Ok(Schedule::Every {
                interval,
                anchor: r.anchor,
            }),
            (None, None, Some(expr)) if r.anchor.is_none() => Ok(Schedule::Cron {
                expr,
                timezone: r.timezone.unwrap_or_else(|| "UTC".into()),
            }),
            (None, None, None) => Err("schedule needs one of `at`, `every`, `cron` or `after`".into()),
            (a, e, c) if [a.is_some(), e.is_some(), c.is_some()].iter().filter(|x| **x).count() > 1 => {
                Err("schedule takes exactly one of `at`, `every`, `cron` or `after`".into())
            }
            _ => Err("`anchor` goes only with `every`, `timezone` only with `cron`".into()),
        }
    }
}

impl From<Schedule> for RawSchedule {
    fn from(s: Schedule) -> Self {
        match s {
            Schedule::At(at) => RawSchedule {
                at: Some(at),
                ..Default::default()
            },
            Schedule::Every { interval, anchor } => RawSchedule {
                every: Some(interval),
                anchor,
                ..Default::default()
            },
            Schedule::Cron { expr, timezone } => RawSchedule {
                cron: Some(expr),
                timezone: Some(timezone),
                ..Default::default()
            },
            Schedule::After(after) => RawSchedule {
                after: Some(after),
                ..Default::default()
            },
        }
    }
}
