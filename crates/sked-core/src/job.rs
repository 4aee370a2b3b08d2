//! Jobs: the definition a user submits ([`JobSpec`]) and what sked stores about it ([`Job`]).

use crate::alert::Notify;
use crate::concurrency::Concurrency;
use crate::duration::Dur;
use crate::ids::{JobId, TenantId};
use crate::schedule::{DstPolicy, FireWindow, Schedule};
use crate::task::Task;
use crate::timestamp::{self, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// What a user submits: everything about a job except its identity and lifecycle.
/// Serialises to the API's normalised form (defaults filled in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "utoipa", schema(max_length = 256))]
    pub name: Option<String>,
    /// Free labels for filtering (≤ 32 pairs; keys 1 to 63 of `A-Z a-z 0-9 _ . - /`, values
    /// up to 256 characters).
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(schema_with = crate::openapi::labels))]
    pub labels: BTreeMap<String, String>,
    /// When the job fires.
    pub schedule: Schedule,
    /// No occurrence before this instant.
    #[serde(default, with = "timestamp::serde_ms_opt")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<String>, format = DateTime))]
    pub start_at: Option<Timestamp>,
    /// No occurrence after this instant.
    #[serde(default, with = "timestamp::serde_ms_opt")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<String>, format = DateTime))]
    pub end_at: Option<Timestamp>,
    /// Random delay added to each run's start (not to its nominal time); < interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Dur>,
    /// DST rule for cron schedules. By default (`auto`) as Debian cron: an interval cron (hour
    /// or minute `*` or a step) fires by the wall clock, in both passes of a repeated hour and
    /// not in a skipped one; a fixed time of day fires once in a repeated hour and at the end
    /// of a skipped one. A half written (`gap`: `shift`/`skip`, `repeat`: `once`/`twice`)
    /// forces that choice. `preview` shows the effect.
    #[serde(default)]
    pub dst: DstPolicy,
    /// What runs.
    pub task: Task,
    /// 0..=9, 9 highest.
    #[serde(default = "default_priority", deserialize_with = "crate::integer::whole")]
    #[cfg_attr(feature = "utoipa", schema(maximum = 9))]
    pub priority: u8,
    /// Retries after the first attempt.
    #[serde(default = "default_max_retries", deserialize_with = "crate::integer::whole")]
    #[cfg_attr(feature = "utoipa", schema(maximum = 100))]
    pub max_retries: u32,
    /// Delay between attempts.
    #[serde(default)]
    pub backoff: Backoff,
    /// Per-attempt limit.
    #[serde(default = "default_timeout")]
    pub timeout: Dur,
    /// What a timed-out attempt leads to.
    #[serde(default)]
    pub on_timeout: OnTimeout,
    /// What a firing does while an earlier run of the job is still going.
    /// `None` on input means the default: `forbid` for recurring jobs, `allow` for `at`.
    #[serde(default)]
    pub overlap: Option<Overlap>,
    /// What happens to occurrences missed while sked was down or the job paused.
    #[serde(default)]
    pub misfire: Misfire,
    /// Resource tier (Fargate CPU/memory on AWS; informational locally).
    #[serde(default)]
    pub resources: Resources,
    /// At most `limit` runs RUNNING at once across the tenant's jobs naming `key`
    /// ([`crate::concurrency`]); none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// Ends of its runs to post to a webhook ([`crate::alert`]); none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Notify>,
}

fn default_priority() -> u8 {
    5
}
fn default_max_retries() -> u32 {
    3
}
fn default_timeout() -> Dur {
    Dur::secs(3600)
}

impl JobSpec {
    /// The effective overlap policy (see [`JobSpec::overlap`]).
    pub fn overlap_policy(&self) -> Overlap {
        self.overlap.unwrap_or(if self.schedule.is_recurring() {
            Overlap::Forbid
        } else {
            Overlap::Allow
        })
    }

    /// Whether the nominal time `t` is an occurrence of this spec's timing (schedule, window,
    /// DST rule): see [`crate::schedule::next::is_occurrence`].
    pub fn is_occurrence(&self, t: Timestamp) -> bool {
        crate::schedule::next::is_occurrence(&self.schedule, &self.dst, &self.window(), t)
    }

    /// The job's `start_at`/`end_at` window.
    pub fn window(&self) -> FireWindow {
        FireWindow {
            start_at: self.start_at,
            end_at: self.end_at,
        }
    }

    /// Attempts a run of this job may make: `max_retries + 1`.
    pub fn max_attempts(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }

    /// Fills in every default so the stored and echoed form is explicit: the overlap policy,
    /// and the anchor of an `every` schedule (the moment the job was accepted).
    pub fn normalised(mut self, now: Timestamp) -> Self {
        self.overlap = Some(self.overlap_policy());
        if let Schedule::Every {
            anchor: anchor @ None, ..
        } = &mut self.schedule
        {
            *anchor = Some(timestamp::trunc_ms(now));
        }
        // Stores keep milliseconds: an instant given finer would change once stored (and a
        // repeated create of the same job would no longer match it).
        match &mut self.schedule {
            Schedule::At(at) => *at = timestamp::trunc_ms(*at),
            Schedule::Every { anchor: Some(a), .. } => *a = timestamp::trunc_ms(*a),
            _ => {}
        }
        for t in [&mut self.start_at, &mut self.end_at].into_iter().flatten() {
            *t = timestamp::trunc_ms(*t);
        }
        self
    }
}

/// Exponential backoff between attempts: `initial · factor^(n-1)`, capped at `max`, with
/// deterministic ±`jitter` fraction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// Delay before the first retry.
    #[serde(default = "default_initial")]
    pub initial: Dur,
    /// Cap on any one delay.
    #[serde(default = "default_max_backoff")]
    pub max: Dur,
    /// Growth per retry, 1 to 10.
    #[serde(default = "default_factor")]
    #[cfg_attr(feature = "utoipa", schema(minimum = 1, maximum = 10))]
    pub factor: f64,
    /// Spread as a fraction of the delay, 0..=1 (0.2 means ±20 %).
    #[serde(default = "default_backoff_jitter")]
    #[cfg_attr(feature = "utoipa", schema(minimum = 0, maximum = 1))]
    pub jitter: f64,
}

fn default_initial() -> Dur {
    Dur::secs(10)
}
fn default_max_backoff() -> Dur {
    Dur::secs(600)
}
fn default_factor() -> f64 {
    2.0
}
fn default_backoff_jitter() -> f64 {
    0.2
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: default_initial(),
            max: default_max_backoff(),
            factor: default_factor(),
            jitter: default_backoff_jitter(),
        }
    }
}

/// What a timed-out attempt leads to: `"fail"`, `"retry"` or `{"run_job": "<id>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// The run ends TIMED_OUT.
    #[default]
    Fail,
    /// Retry like a failure (counts against `max_retries`); TIMED_OUT when none are left.
    Retry,
    /// The run ends TIMED_OUT and the named job of the same tenant is triggered once.
    RunJob(JobId),
}

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// The wire name.
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(format!("unknown {} {s:?}", stringify!($name))),
                }
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::openapi::string_enum(&[$($text),+])
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::ToSchema for $name {}
    };
}
pub(crate) use wire_enum;

wire_enum!(
    /// What a firing does while an earlier run of the same job has not ended.
    Overlap {
        /// Start another run alongside.
        Allow = "allow",
        /// Skip this occurrence (recorded).
        Forbid = "forbid",
        /// Cancel the earlier run, then start this one.
        Replace = "replace",
        /// Keep at most one run waiting; it starts when the earlier one ends.
        QueueOne = "queue_one",
    }
);

wire_enum!(
    /// What happens to occurrences missed while sked was down or the job was paused.
    Misfire {
        /// One run (for the latest missed occurrence); the others are skipped.
        FireOnce = "fire_once",
        /// A run for every missed occurrence, at most [`crate::job::MAX_FIRE_ALL`].
        FireAll = "fire_all",
        /// Skip what was missed; fire only occurrences still within the misfire grace.
        Skip = "skip",
    }
);

wire_enum!(
    /// Resource tier of a job's payload.
    Resources {
        /// 0.25 vCPU / 0.5 GB on Fargate.
        Small = "small",
        /// 0.5 vCPU / 1 GB.
        Medium = "medium",
        /// 1 vCPU / 2 GB.
        Large = "large",
        /// 2 vCPU / 4 GB.
        Xlarge = "xlarge",
    }
);

wire_enum!(
    /// A job's lifecycle state.
    JobState {
        /// Firing on its schedule.
        Active = "ACTIVE",
        /// Not firing; resumes with its misfire policy.
        Paused = "PAUSED",
        /// No occurrence left (an `at` that fired, or past `end_at`).
        Completed = "COMPLETED",
        /// Deleted: no new runs; history kept.
        Deleted = "DELETED",
    }
);

#[allow(clippy::derivable_impls)] // the enum is declared by `wire_enum!`
impl Default for Misfire {
    fn default() -> Self {
        Misfire::FireOnce
    }
}
#[allow(clippy::derivable_impls)] // the enum is declared by `wire_enum!`
impl Default for Resources {
    fn default() -> Self {
        Resources::Small
    }
}

/// Most runs `fire_all` creates for one catch-up.
pub const MAX_FIRE_ALL: usize = 100;

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Owner.
    pub tenant: TenantId,
    /// Id, unique per tenant.
    pub id: JobId,
    /// The normalised definition.
    pub spec: JobSpec,
    /// Lifecycle state.
    pub state: JobState,
    /// The next nominal fire time; `None` once nothing is left to fire.
    pub next_fire_at: Option<Timestamp>,
    /// Optimistic-lock version, bumped by every user change (not by sweeps).
    pub version: u64,
    /// When the job was created.
    pub created_at: Timestamp,
    /// When a user last changed it.
    pub updated_at: Timestamp,
}

/// Most occurrences [`Job::first_fire_after_change`] passes over (a bound on its work; the
/// occurrences it skips lie between now and the old timing's next occurrence, so a real
/// schedule needs a handful).
const MAX_ACCOUNTED_SKIPS: usize = 10_000;

impl Job {
    /// The first occurrence of `new`'s timing for this job when its schedule, window or DST
    /// rule changes to `new`'s at `now`: the first after `now`
    /// ([`first_fire`](crate::schedule::next::first_fire)), passing over the nominal times the
    /// current timing has already accounted for — its occurrences before `next_fire_at`, each
    /// fired or skipped by a sweep (all of them once `next_fire_at` is `None`).
    ///
    /// Why: the process making the change may have a clock behind the sweeper's. A sweep at
    /// 10:40:00.06 (its clock) fires 10:40:00; a change computed at 10:39:59.93 (another
    /// clock) would give back 10:40:00 as the next occurrence, and it would be fired — and
    /// accounted — a second time.
    pub fn first_fire_after_change(&self, new: &JobSpec, now: Timestamp) -> Option<Timestamp> {
        use crate::schedule::next::{first_fire, next_fire_after};
        let (old, old_window) = (&self.spec, self.spec.window());
        let accounted = |t: Timestamp| {
            self.next_fire_at.is_none_or(|until| t < until)
                && next_fire_after(
                    &old.schedule,
                    &old.dst,
                    &old_window,
                    t - chrono::Duration::milliseconds(1),
                ) == Some(t)
        };
        let window = new.window();
        let mut next = first_fire(&new.schedule, &new.dst, &window, now);
        for _ in 0..MAX_ACCOUNTED_SKIPS {
            match next {
                Some(t) if accounted(t) => next = next_fire_after(&new.schedule, &new.dst, &window, t),
                _ => break,
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::parse;

    fn ts(s: &str) -> Timestamp {
        parse(s).unwrap()
    }

    fn spec(cron: &str) -> JobSpec {
        serde_json::from_value(serde_json::json!({
            "schedule": {"cron": cron},
            "task": {"command": {"argv": ["true"]}},
        }))
        .unwrap()
    }

    /// A job on `cron` whose next unaccounted occurrence is `next`.
    fn job(cron: &str, next: Option<&str>) -> Job {
        Job {
            tenant: "t".into(),
            id: "j".into(),
            spec: spec(cron),
            state: if next.is_some() {
                JobState::Active
            } else {
                JobState::Completed
            },
            next_fire_at: next.map(ts),
            version: 1,
            created_at: ts("2026-12-01T10:00:00Z"),
            updated_at: ts("2026-12-01T10:00:00Z"),
        }
    }

    #[test]
    fn a_change_from_a_clock_behind_the_sweeper_does_not_give_back_a_fired_occurrence() {
        // Given: the sweeper fired 10:40:00 (next 10:40:30), and the change is made on a
        // clock 70 ms behind it.
        let fired = job("*/30 * * * * *", Some("2026-12-01T10:40:30Z"));
        let now = ts("2026-12-01T10:39:59.930Z");
        // Then: 10:40:00 (an occurrence of both timings, already fired) is passed over.
        assert_eq!(
            fired.first_fire_after_change(&spec("*/15 * * * * *"), now),
            Some(ts("2026-12-01T10:40:15Z"))
        );
    }

    #[test]
    fn occurrences_the_old_timing_never_had_still_fire() {
        // 10:40:00 is not an occurrence of `10 * * * * *` (second 10 of each minute):
        // nothing accounted it.
        let fired = job("10 * * * * *", Some("2026-12-01T10:40:10Z"));
        let now = ts("2026-12-01T10:39:59.930Z");
        assert_eq!(
            fired.first_fire_after_change(&spec("*/20 * * * * *"), now),
            Some(ts("2026-12-01T10:40:00Z"))
        );
        // An hourly job changed to every minute starts at the next minute, not the next hour.
        let hourly = job("0 * * * *", Some("2026-12-01T11:00:00Z"));
        assert_eq!(
            hourly.first_fire_after_change(&spec("* * * * *"), ts("2026-12-01T10:20:30Z")),
            Some(ts("2026-12-01T10:21:00Z"))
        );
    }

    #[test]
    fn a_job_with_nothing_left_to_fire_accounted_all_its_occurrences() {
        let done = job("0 10 1 12 *", None);
        let now = ts("2026-12-01T09:59:59.900Z");
        // 10:00:00 on 1 December was the old timing's last occurrence, fired.
        assert_eq!(
            done.first_fire_after_change(&spec("0 10 * * *"), now),
            Some(ts("2026-12-02T10:00:00Z"))
        );
    }

    #[test]
    fn without_skew_the_change_is_first_fire() {
        let fired = job("*/30 * * * * *", Some("2026-12-01T10:40:30Z"));
        let now = ts("2026-12-01T10:40:00.100Z");
        assert_eq!(
            fired.first_fire_after_change(&spec("*/15 * * * * *"), now),
            Some(ts("2026-12-01T10:40:15Z"))
        );
    }
}
