//! Next-fire computation: a pure function of (schedule, previous fire time). No clock.
//!
//! - `at` fires once, at its instant, if that lies inside the window.
//! - `every` fires on the grid `anchor + k·interval` (any integer `k`), at millisecond
//!   precision.
//! - `cron` fires at whole seconds. Occurrences are found on the *wall clock* of the schedule's
//!   time zone (croner matching, [`super::cron`]) and each is mapped to instants by the job's
//!   DST policy, settled for the expression ([`super::dst::DstPolicy::rule_for`]: by default
//!   an interval cron fires by the wall clock, in both passes of a repeated hour and never in
//!   a gap; a fixed time of day fires once, shifted out of a gap). Near a transition
//!   wall-clock order and instant order can disagree (the autumn repeat, several gap times
//!   shifted to one instant). The search walks the wall clock on from the previous fire and
//!   takes the first instant after it, so a shifted instant fires once; under a `twice` rule
//!   it also looks at the second pass of a repeat just ahead, whose wall-clock times can lie
//!   behind the previous fire's, and the earlier of the two is next. Each fire is a distinct
//!   UTC instant, so the two passes of a repeated wall-clock time are two occurrences with
//!   two run ids.
//!
//! Every search is bounded ([`CRON_HORIZON_YEARS`]): a schedule with no future occurrence
//! answers `None`.
//!
//! Why one long file: the code is 230 lines; the rest is its unit tests, kept beside the rules
//! they pin (every schedule kind, windows, DST passes).

use super::cron::{CronExpr, parse_timezone, parsed_cron};
use super::dst::{DstRule, RepeatRule, fire_instants, gap_end, repeat_ahead};
use super::{DstPolicy, Schedule};
use crate::duration::Dur;
use crate::timestamp::{self, Timestamp};
use chrono::{Duration, DurationRound, NaiveDateTime, TimeZone};
use chrono_tz::Tz;
use std::sync::Arc;

/// How far past the previous fire time a cron search looks before answering `None`. Long
/// enough for the rarest real schedules (29 February on a given weekday recurs after up to
/// 40 years).
pub const CRON_HORIZON_YEARS: i64 = 50;

/// The window a job fires within (`start_at` inclusive, `end_at` inclusive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FireWindow {
    /// No occurrence before this.
    pub start_at: Option<Timestamp>,
    /// No occurrence after this.
    pub end_at: Option<Timestamp>,
}

impl FireWindow {
    /// Whether `t` lies inside the window (both ends inclusive).
    pub fn contains(&self, t: Timestamp) -> bool {
        self.start_at.is_none_or(|s| t >= s) && self.end_at.is_none_or(|e| t <= e)
    }

    /// `t` if it lies inside the window.
    fn keep(&self, t: Option<Timestamp>) -> Option<Timestamp> {
        t.filter(|t| self.contains(*t))
    }

    /// The instant occurrences must be strictly after: `after`, or just before `start_at` if
    /// that is later (so an occurrence exactly at `start_at` counts).
    fn lower_bound(&self, after: Timestamp) -> Timestamp {
        match self.start_at {
            Some(s) if s - Duration::milliseconds(1) > after => s - Duration::milliseconds(1),
            _ => after,
        }
    }
}

/// The first occurrence for a job (re)scheduled at `now`: for `at`, the instant itself (even if
/// past: it fires at once); for `every` and `cron`, the first occurrence strictly after `now`
/// (and not before `start_at`). `None` when the window has no occurrence left.
pub fn first_fire(schedule: &Schedule, dst: &DstPolicy, window: &FireWindow, now: Timestamp) -> Option<Timestamp> {
    Plan::new(schedule, dst, window).first(now)
}

/// The occurrence after the nominal time `prev` (strictly later), within the window.
/// `None` for `at` schedules and once past `end_at`.
pub fn next_fire_after(
    schedule: &Schedule,
    dst: &DstPolicy,
    window: &FireWindow,
    prev: Timestamp,
) -> Option<Timestamp> {
    Plan::new(schedule, dst, window).after(prev)
}

/// Whether the nominal time `t` is one of the schedule's occurrences (within the window):
/// its `at`, or the occurrence that follows the instant just before `t`. A schedule that
/// never fires by the clock (`after`: its nominal times are its upstreams') has nothing to
/// check `t` against: every `t` is taken for one.
pub fn is_occurrence(schedule: &Schedule, dst: &DstPolicy, window: &FireWindow, t: Timestamp) -> bool {
    match Plan::new(schedule, dst, window) {
        Plan::At(at, window) => window.keep(Some(at)) == Some(t),
        Plan::Never => true,
        plan => plan.after(t - chrono::Duration::milliseconds(1)) == Some(t),
    }
}

/// The next `count` occurrences after `now` (what `GET /jobs/{id}/preview` shows), DST applied.
pub fn preview(
    schedule: &Schedule,
    dst: &DstPolicy,
    window: &FireWindow,
    now: Timestamp,
    count: usize,
) -> Vec<Timestamp> {
    // One plan for the whole series: parsing a cron expression costs far more than a step.
    let plan = Plan::new(schedule, dst, window);
    let mut out = Vec::with_capacity(count.min(1024));
    let mut next = plan.first(now);
    while let Some(t) = next {
        if out.len() == count {
            break;
        }
        out.push(t);
        next = plan.after(t);
    }
    out
}

/// A schedule made ready to step through: its cron expression and zone parsed (the
/// expression remembered per thread: [`parsed_cron`]).
enum Plan<'a> {
    /// Fires once, at this instant, if inside the window.
    At(Timestamp, &'a FireWindow),
    /// The `anchor + k·interval` grid; no anchor means "from the instant asked about".
    Every(Dur, Option<Timestamp>, &'a FireWindow),
    /// A valid cron schedule, with the job's DST policy settled for its expression.
    Cron(Arc<CronExpr>, Tz, DstRule, &'a FireWindow),
    /// An invalid cron schedule (validation refuses these), or an `after` schedule: never
    /// fires by the clock.
    Never,
}

impl<'a> Plan<'a> {
    fn new(schedule: &Schedule, dst: &'a DstPolicy, window: &'a FireWindow) -> Self {
        match schedule {
            Schedule::At(at) => Plan::At(*at, window),
            Schedule::Every { interval, anchor } => Plan::Every(*interval, *anchor, window),
            Schedule::Cron { expr, timezone } => match (parsed_cron(expr), parse_timezone(timezone)) {
                (Some(cron), Ok(tz)) => {
                    let rule = dst.rule_for(cron.kind());
                    Plan::Cron(cron, tz, rule, window)
                }
                _ => Plan::Never,
            },
            // Fires when its upstreams end, never by the clock.
            Schedule::After(_) => Plan::Never,
        }
    }

    /// See [`first_fire`].
    fn first(&self, now: Timestamp) -> Option<Timestamp> {
        match self {
            Plan::At(at, window) => window.keep(Some(*at)),
            _ => self.after(now),
        }
    }

    /// See [`next_fire_after`].
    fn after(&self, prev: Timestamp) -> Option<Timestamp> {
        match self {
            Plan::At(..) | Plan::Never => None,
            Plan::Every(interval, anchor, window) => {
                // A stored job always has its anchor (see `JobSpec::normalised`); without one
                // the grid is laid from `prev` (the moment asked about).
                let anchor = anchor.unwrap_or_else(|| timestamp::trunc_ms(prev));
                window.keep(every_after(*interval, anchor, window.lower_bound(prev)))
            }
            Plan::Cron(cron, tz, rule, window) => {
                window.keep(next_cron_instant(cron, tz, rule, window.lower_bound(prev)))
            }
        }
    }
}

/// The smallest `anchor + k·interval` strictly after `after` (at millisecond precision).
/// `None` for a zero interval or on overflow.
fn every_after(interval: Dur, anchor: Timestamp, after: Timestamp) -> Option<Timestamp> {
    let step = i128::from(interval.as_millis());
    if step <= 0 {
        return None;
    }
    let anchor_ms = i128::from(anchor.timestamp_millis());
    // Strictly after `after` means at or after its next whole millisecond.
    let bound = i128::from(timestamp::trunc_ms(after).timestamp_millis()) + 1;
    let k = (bound - anchor_ms + step - 1).div_euclid(step);
    let ms = i64::try_from(anchor_ms + k * step).ok()?;
    chrono::DateTime::from_timestamp_millis(ms)
}

/// The earliest instant strictly after `after` that an occurrence of `cron` in `tz` fires at,
/// under `rule`. Works at whole seconds.
pub fn next_cron_instant(cron: &CronExpr, tz: &Tz, rule: &DstRule, after: Timestamp) -> Option<Timestamp> {
    // Occurrences are whole seconds, so "after `after`" is "after its whole second".
    let after = after.duration_trunc(Duration::seconds(1)).ok()?;
    let in_wall_order = first_in_wall_clock_order(cron, tz, rule, after);
    let second_pass = match rule.repeat {
        RepeatRule::Twice => first_in_second_pass(cron, tz, after),
        RepeatRule::Once => None,
    };
    [in_wall_order, second_pass].into_iter().flatten().min()
}

/// The first instant after `after` found by walking the wall clock on from `after`'s. Wall-clock
/// order is instant order, with one exception: a `twice` rule fires the second pass of an autumn
/// repeat, where a wall-clock time at or before `after`'s can fire after `after` (02:10 CET
/// follows 02:50 CEST). [`first_in_second_pass`] covers that.
fn first_in_wall_clock_order(cron: &CronExpr, tz: &Tz, rule: &DstRule, after: Timestamp) -> Option<Timestamp> {
    let from = after.with_timezone(tz).naive_local();
    let horizon = from.checked_add_signed(Duration::days(366 * CRON_HORIZON_YEARS))?;
    let mut cursor: NaiveDateTime = from;
    while let Some(wall) = cron.next_local_after(cursor) {
        if wall > horizon {
            break;
        }
        // `fire_instants` answers in instant order: the first one after `after` is the answer
        // (a wall-clock time whose instants are all past, or none, is passed over).
        if let Some(t) = fire_instants(tz, wall, rule).find(|t| *t > after) {
            return Some(t);
        }
        // Every wall-clock time in a spring gap fires at the same instant (or not at all):
        // step over the rest of the gap instead of visiting each of its seconds.
        cursor = match gap_end(tz, wall) {
            Some(end) => end.naive_local() - Duration::seconds(1),
            None => wall,
        };
    }
    None
}

/// Under a `twice` rule, the first fire in the second pass of an autumn repeat that begins
/// within [`MAX_DST_SHIFT`](super::dst::MAX_DST_SHIFT) after `after`: the first wall-clock time of the repeated span that
/// matches, at its second instant. Those instants all come after `after`, whatever their wall
/// clock; later wall-clock times are [`first_in_wall_clock_order`]'s.
fn first_in_second_pass(cron: &CronExpr, tz: &Tz, after: Timestamp) -> Option<Timestamp> {
    let (back_at, back_by) = repeat_ahead(tz, after)?;
    let repeat_from = back_at.naive_local();
    let wall = cron.next_local_after(repeat_from - Duration::seconds(1))?;
    if wall >= repeat_from + back_by {
        return None;
    }
    tz.from_local_datetime(&wall)
        .latest()
        .map(|t| t.with_timezone(&chrono::Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{DstGap, DstRepeat};

    fn utc(s: &str) -> Timestamp {
        timestamp::parse(s).unwrap()
    }

    fn utcs(all: &[&str]) -> Vec<Timestamp> {
        all.iter().map(|s| utc(s)).collect()
    }

    fn cron(expr: &str, timezone: &str) -> Schedule {
        Schedule::Cron {
            expr: expr.into(),
            timezone: timezone.into(),
        }
    }

    fn every(interval: &str, anchor: Option<&str>) -> Schedule {
        Schedule::Every {
            interval: interval.parse().unwrap(),
            anchor: anchor.map(utc),
        }
    }

    fn policy(gap: DstGap, repeat: DstRepeat) -> DstPolicy {
        DstPolicy { gap, repeat }
    }

    /// The next `count` fire times of `schedule` after `now`, with no window.
    fn fires(schedule: &Schedule, dst: DstPolicy, now: &str, count: usize) -> Vec<Timestamp> {
        preview(schedule, &dst, &FireWindow::default(), utc(now), count)
    }

    fn strictly_increasing(v: &[Timestamp]) -> bool {
        v.windows(2).all(|w| w[0] < w[1])
    }

    #[test]
    fn occurrences_are_the_times_the_schedule_fires_within_its_window() {
        let dst = DstPolicy::default();
        let open = FireWindow::default();
        let grid = every("120s", Some("2026-12-01T10:00:00Z"));
        assert!(is_occurrence(&grid, &dst, &open, utc("2026-12-01T10:04:00Z")));
        assert!(!is_occurrence(&grid, &dst, &open, utc("2026-12-01T10:03:00Z")));
        assert!(!is_occurrence(&grid, &dst, &open, utc("2026-12-01T10:04:00.001Z")));
        let nightly = cron("30 2 * * *", "Europe/Berlin");
        // The spring gap's 02:30 fires at 03:00 local (01:00 UTC) by default: that is the time.
        assert!(is_occurrence(&nightly, &dst, &open, utc("2026-03-29T01:00:00Z")));
        assert!(is_occurrence(&nightly, &dst, &open, utc("2026-03-30T00:30:00Z")));
        assert!(!is_occurrence(&nightly, &dst, &open, utc("2026-03-30T01:30:00Z")));
        let once = Schedule::At(utc("2026-12-01T10:00:00Z"));
        assert!(is_occurrence(&once, &dst, &open, utc("2026-12-01T10:00:00Z")));
        assert!(!is_occurrence(&once, &dst, &open, utc("2026-12-01T10:00:01Z")));
        let until_10_03 = FireWindow {
            start_at: None,
            end_at: Some(utc("2026-12-01T10:03:00Z")),
        };
        assert!(is_occurrence(&grid, &dst, &until_10_03, utc("2026-12-01T10:02:00Z")));
        assert!(!is_occurrence(&grid, &dst, &until_10_03, utc("2026-12-01T10:04:00Z")));
        let after = Schedule::After(serde_json::from_value(serde_json::json!({"jobs": ["up"]})).unwrap());
        assert!(is_occurrence(&after, &dst, &open, utc("2026-12-01T10:03:17Z")));
    }

    // --- DST: Europe/Berlin, spring 2026-03-29 02:00 → 03:00 ---

    #[test]
    fn given_berlin_spring_gap_when_shift_then_0230_fires_at_0300_local() {
        let got = fires(
            &cron("30 2 * * *", "Europe/Berlin"),
            DstPolicy::default(),
            "2026-03-28T12:00:00Z",
            2,
        );
        assert_eq!(got, utcs(&["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]));
    }

    #[test]
    fn given_berlin_spring_gap_when_skip_then_that_night_does_not_fire() {
        let dst = policy(DstGap::Skip, DstRepeat::Once);
        let got = fires(&cron("30 2 * * *", "Europe/Berlin"), dst, "2026-03-28T12:00:00Z", 2);
        assert_eq!(got, utcs(&["2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"]));
    }

    #[test]
    fn given_every_30_minutes_across_berlin_gap_when_shift_then_shifted_times_fire_once() {
        let got = fires(
            &cron("*/30 * * * *", "Europe/Berlin"),
            policy(DstGap::Shift, DstRepeat::Once),
            "2026-03-29T00:00:00Z",
            4,
        );
        // 01:30 CET, then 02:00, 02:30 (gap) and 03:00 CEST are one instant, then 03:30 CEST.
        assert_eq!(
            got,
            utcs(&[
                "2026-03-29T00:30:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:30:00Z",
                "2026-03-29T02:00:00Z"
            ])
        );
        assert!(strictly_increasing(&got));
    }

    #[test]
    fn given_every_30_minutes_across_berlin_gap_when_skip_then_real_times_only() {
        let dst = policy(DstGap::Skip, DstRepeat::Once);
        let got = fires(&cron("*/30 * * * *", "Europe/Berlin"), dst, "2026-03-29T00:00:00Z", 3);
        assert_eq!(
            got,
            utcs(&["2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"])
        );
    }

    #[test]
    fn given_every_second_across_berlin_gap_when_shift_then_one_fire_at_the_gap_end() {
        let s = cron("* * * * * *", "Europe/Berlin");
        let got = fires(&s, policy(DstGap::Shift, DstRepeat::Once), "2026-03-29T00:59:58Z", 3);
        assert_eq!(
            got,
            utcs(&["2026-03-29T00:59:59Z", "2026-03-29T01:00:00Z", "2026-03-29T01:00:01Z"])
        );
        let skipped = fires(&s, policy(DstGap::Skip, DstRepeat::Once), "2026-03-29T00:59:58Z", 3);
        assert_eq!(skipped, got);
    }

    // --- DST: Europe/Berlin, autumn 2026-10-25 03:00 → 02:00 ---

    #[test]
    fn given_berlin_autumn_repeat_when_once_then_first_instant_only() {
        let got = fires(
            &cron("30 2 * * *", "Europe/Berlin"),
            DstPolicy::default(),
            "2026-10-24T12:00:00Z",
            2,
        );
        assert_eq!(got, utcs(&["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]));
    }

    #[test]
    fn given_berlin_autumn_repeat_when_twice_then_both_instants_an_hour_apart() {
        let dst = policy(DstGap::Shift, DstRepeat::Twice);
        let got = fires(&cron("30 2 * * *", "Europe/Berlin"), dst, "2026-10-24T12:00:00Z", 3);
        assert_eq!(
            got,
            utcs(&["2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"])
        );
    }

    #[test]
    fn given_every_30_minutes_across_berlin_repeat_when_forced_once_then_second_pass_is_not_fired() {
        let got = fires(
            &cron("*/30 * * * *", "Europe/Berlin"),
            policy(DstGap::Shift, DstRepeat::Once),
            "2026-10-24T23:00:00Z",
            4,
        );
        // 01:30 CEST, 02:00 CEST, 02:30 CEST, then 03:00 CET (02:00 and 02:30 CET are repeats).
        assert_eq!(
            got,
            utcs(&[
                "2026-10-24T23:30:00Z",
                "2026-10-25T00:00:00Z",
                "2026-10-25T00:30:00Z",
                "2026-10-25T02:00:00Z"
            ])
        );
    }

    #[test]
    fn given_every_30_minutes_across_berlin_repeat_when_twice_then_every_instant_in_order() {
        let dst = policy(DstGap::Shift, DstRepeat::Twice);
        let got = fires(&cron("*/30 * * * *", "Europe/Berlin"), dst, "2026-10-24T23:00:00Z", 6);
        let want = [
            "2026-10-24T23:30:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:30:00Z",
            "2026-10-25T02:00:00Z",
        ];
        assert_eq!(got, utcs(&want));
    }

    #[test]
    fn given_prev_in_first_pass_of_repeat_when_twice_then_next_is_the_second_pass() {
        let dst = policy(DstGap::Shift, DstRepeat::Twice);
        let s = cron("*/30 * * * *", "Europe/Berlin");
        let window = FireWindow::default();
        // 02:30 CEST → 02:00 CET, an earlier wall-clock time but a later instant.
        assert_eq!(
            next_fire_after(&s, &dst, &window, utc("2026-10-25T00:30:00Z")),
            Some(utc("2026-10-25T01:00:00Z"))
        );
        // From the middle of the second pass.
        assert_eq!(
            next_fire_after(&s, &dst, &window, utc("2026-10-25T01:10:00Z")),
            Some(utc("2026-10-25T01:30:00Z"))
        );
    }

    // --- DST by default (no `dst` given): Debian cron's rule ---

    #[test]
    fn given_every_15_minutes_across_berlin_repeat_by_default_then_both_passes_fire_by_the_wall_clock() {
        let got = fires(
            &cron("*/15 * * * *", "Europe/Berlin"),
            DstPolicy::default(),
            "2027-10-30T23:40:00Z",
            10,
        );
        // 01:45 CEST; 02:00..02:45 CEST; 02:00..02:45 CET; 03:00 CET: every quarter hour of
        // real time, eight of them on the wall-clock hour 02.
        let want = [
            "2027-10-30T23:45:00Z",
            "2027-10-31T00:00:00Z",
            "2027-10-31T00:15:00Z",
            "2027-10-31T00:30:00Z",
            "2027-10-31T00:45:00Z",
            "2027-10-31T01:00:00Z",
            "2027-10-31T01:15:00Z",
            "2027-10-31T01:30:00Z",
            "2027-10-31T01:45:00Z",
            "2027-10-31T02:00:00Z",
        ];
        assert_eq!(got, utcs(&want));
    }

    #[test]
    fn given_every_15_minutes_across_berlin_gap_by_default_then_nothing_in_the_gap() {
        let got = fires(
            &cron("*/15 * * * *", "Europe/Berlin"),
            DstPolicy::default(),
            "2027-03-28T00:30:00Z",
            4,
        );
        // 01:45 CET, then 03:00 CEST: 02:00..02:45 do not exist and are not shifted.
        assert_eq!(
            got,
            utcs(&[
                "2027-03-28T00:45:00Z",
                "2027-03-28T01:00:00Z",
                "2027-03-28T01:15:00Z",
                "2027-03-28T01:30:00Z"
            ])
        );
    }

    #[test]
    fn given_every_two_hours_across_berlin_transitions_by_default_then_by_the_wall_clock() {
        let s = cron("0 */2 * * *", "Europe/Berlin");
        // Spring: 00:00 CET, (02:00 does not exist), 04:00 CEST.
        let spring = fires(&s, DstPolicy::default(), "2027-03-27T22:30:00Z", 2);
        assert_eq!(spring, utcs(&["2027-03-27T23:00:00Z", "2027-03-28T02:00:00Z"]));
        // Autumn: 00:00 CEST, 02:00 CEST, 02:00 CET, 04:00 CET.
        let autumn = fires(&s, DstPolicy::default(), "2027-10-30T21:30:00Z", 4);
        assert_eq!(
            autumn,
            utcs(&[
                "2027-10-30T22:00:00Z",
                "2027-10-31T00:00:00Z",
                "2027-10-31T01:00:00Z",
                "2027-10-31T03:00:00Z"
            ])
        );
    }

    #[test]
    fn given_minute_step_within_an_hour_range_by_default_then_an_interval() {
        let s = cron("*/30 1-3 * * *", "Europe/Berlin");
        let autumn = fires(&s, DstPolicy::default(), "2027-10-30T22:00:00Z", 8);
        // 01:00 01:30 02:00 02:30 CEST, 02:00 02:30 03:00 03:30 CET.
        let want = [
            "2027-10-30T23:00:00Z",
            "2027-10-30T23:30:00Z",
            "2027-10-31T00:00:00Z",
            "2027-10-31T00:30:00Z",
            "2027-10-31T01:00:00Z",
            "2027-10-31T01:30:00Z",
            "2027-10-31T02:00:00Z",
            "2027-10-31T02:30:00Z",
        ];
        assert_eq!(autumn, utcs(&want));
        // 01:00 01:30 CET, then 03:00 03:30 CEST, then the next night.
        let spring = fires(&s, DstPolicy::default(), "2027-03-27T23:00:00Z", 5);
        let want = [
            "2027-03-28T00:00:00Z",
            "2027-03-28T00:30:00Z",
            "2027-03-28T01:00:00Z",
            "2027-03-28T01:30:00Z",
            "2027-03-28T23:00:00Z",
        ];
        assert_eq!(spring, utcs(&want));
    }

    #[test]
    fn given_fixed_time_by_default_then_once_in_the_repeat_and_shifted_out_of_the_gap() {
        let s = cron("30 2 * * *", "Europe/Berlin");
        let spring = fires(&s, DstPolicy::default(), "2027-03-27T12:00:00Z", 2);
        assert_eq!(spring, utcs(&["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]));
        let autumn = fires(&s, DstPolicy::default(), "2027-10-30T12:00:00Z", 2);
        assert_eq!(autumn, utcs(&["2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"]));
    }

    #[test]
    fn given_every_second_through_berlin_repeat_by_default_then_every_real_second_once() {
        // Three hours of real time around the repeat, one call per fire: 10 800 of them. (The
        // search finds the second pass directly; a scan back over the repeat at every step would
        // take minutes here.)
        let s = cron("* * * * * *", "Europe/Berlin");
        let got = fires(&s, DstPolicy::default(), "2027-10-30T23:59:59Z", 3 * 3600);
        let start = utc("2027-10-31T00:00:00Z");
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, t)| *t == start + Duration::seconds(i as i64))
        );
        // 02:59:59 CEST is followed by 02:00:00 CET.
        assert_eq!(
            next_fire_after(
                &s,
                &DstPolicy::default(),
                &FireWindow::default(),
                utc("2027-10-31T00:59:59Z")
            ),
            Some(utc("2027-10-31T01:00:00Z"))
        );
    }

    #[test]
    fn given_dst_written_when_interval_cron_then_the_written_policy_wins() {
        let s = cron("*/15 * * * *", "Europe/Berlin");
        let forced = fires(&s, policy(DstGap::Shift, DstRepeat::Once), "2027-10-31T00:40:00Z", 2);
        // 02:45 CEST, then 03:00 CET: the second pass is not fired.
        assert_eq!(forced, utcs(&["2027-10-31T00:45:00Z", "2027-10-31T02:00:00Z"]));
        let fixed = cron("30 2 * * *", "Europe/Berlin");
        let twice = fires(
            &fixed,
            policy(DstGap::Skip, DstRepeat::Twice),
            "2027-03-27T12:00:00Z",
            4,
        );
        assert_eq!(
            twice,
            utcs(&[
                "2027-03-29T00:30:00Z",
                "2027-03-30T00:30:00Z",
                "2027-03-31T00:30:00Z",
                "2027-04-01T00:30:00Z"
            ])
        );
        let autumn = fires(
            &fixed,
            policy(DstGap::Skip, DstRepeat::Twice),
            "2027-10-30T12:00:00Z",
            2,
        );
        assert_eq!(autumn, utcs(&["2027-10-31T00:30:00Z", "2027-10-31T01:30:00Z"]));
    }

    // --- DST: America/New_York, 2026-03-08 02:00 → 03:00 and 2026-11-01 02:00 → 01:00 ---

    #[test]
    fn given_new_york_spring_gap_when_shift_or_skip_then_shifted_or_dropped() {
        let s = cron("30 2 * * *", "America/New_York");
        let shifted = fires(&s, DstPolicy::default(), "2026-03-07T12:00:00Z", 2);
        assert_eq!(shifted, utcs(&["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]));
        let skipped = fires(&s, policy(DstGap::Skip, DstRepeat::Once), "2026-03-07T12:00:00Z", 1);
        assert_eq!(skipped, utcs(&["2026-03-09T06:30:00Z"]));
    }

    #[test]
    fn given_new_york_autumn_repeat_when_once_or_twice_then_one_or_two_fires() {
        let s = cron("30 1 * * *", "America/New_York");
        let once = fires(&s, DstPolicy::default(), "2026-10-31T12:00:00Z", 2);
        assert_eq!(once, utcs(&["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]));
        let twice = fires(&s, policy(DstGap::Shift, DstRepeat::Twice), "2026-10-31T12:00:00Z", 3);
        assert_eq!(
            twice,
            utcs(&["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"])
        );
    }

    // --- Calendar ---

    #[test]
    fn given_feb_29_when_not_a_leap_year_then_next_leap_year() {
        let got = fires(
            &cron("0 0 29 2 *", "UTC"),
            DstPolicy::default(),
            "2026-01-01T00:00:00Z",
            2,
        );
        assert_eq!(got, utcs(&["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]));
    }

    #[test]
    fn given_day_31_when_month_is_shorter_then_it_is_skipped() {
        let s = cron("0 0 31 * *", "UTC");
        let got = next_fire_after(
            &s,
            &DstPolicy::default(),
            &FireWindow::default(),
            utc("2026-01-31T00:00:00Z"),
        );
        assert_eq!(got, Some(utc("2026-03-31T00:00:00Z")));
        let year = fires(&s, DstPolicy::default(), "2026-01-01T00:00:00Z", 7);
        let months: Vec<u32> = year.iter().map(chrono::Datelike::month).collect();
        assert_eq!(months, [1, 3, 5, 7, 8, 10, 12]);
    }

    #[test]
    fn given_impossible_date_when_computed_then_none() {
        for expr in ["0 0 30 2 *", "0 0 31 4 *"] {
            let s = cron(expr, "Europe/Berlin");
            assert_eq!(
                first_fire(
                    &s,
                    &DstPolicy::default(),
                    &FireWindow::default(),
                    utc("2026-01-01T00:00:00Z")
                ),
                None
            );
            assert!(fires(&s, DstPolicy::default(), "2026-01-01T00:00:00Z", 5).is_empty());
        }
    }

    #[test]
    fn given_weekday_names_when_friday_then_next_is_monday() {
        // 2026-05-08 is a Friday; 09:00 CEST is 07:00Z.
        let got = fires(
            &cron("0 9 * * MON-FRI", "Europe/Berlin"),
            DstPolicy::default(),
            "2026-05-08T08:00:00Z",
            2,
        );
        assert_eq!(got, utcs(&["2026-05-11T07:00:00Z", "2026-05-12T07:00:00Z"]));
    }

    #[test]
    fn given_daily_macro_in_a_zone_when_computed_then_local_midnight() {
        let got = fires(
            &cron("@daily", "Europe/Berlin"),
            DstPolicy::default(),
            "2026-06-01T12:00:00Z",
            2,
        );
        assert_eq!(got, utcs(&["2026-06-01T22:00:00Z", "2026-06-02T22:00:00Z"]));
    }

    #[test]
    fn given_six_field_seconds_cron_when_computed_then_every_five_seconds_at_whole_seconds() {
        let got = fires(
            &cron("*/5 * * * * *", "UTC"),
            DstPolicy::default(),
            "2026-06-01T12:00:03.250Z",
            3,
        );
        assert_eq!(
            got,
            utcs(&["2026-06-01T12:00:05Z", "2026-06-01T12:00:10Z", "2026-06-01T12:00:15Z"])
        );
        assert!(got.iter().all(|t| t.timestamp_subsec_millis() == 0));
    }

    #[test]
    fn given_now_on_an_occurrence_when_first_fire_then_the_next_one() {
        let s = cron("0 * * * *", "UTC");
        let got = first_fire(
            &s,
            &DstPolicy::default(),
            &FireWindow::default(),
            utc("2026-06-01T12:00:00Z"),
        );
        assert_eq!(got, Some(utc("2026-06-01T13:00:00Z")));
        let got = first_fire(
            &s,
            &DstPolicy::default(),
            &FireWindow::default(),
            utc("2026-06-01T11:59:59.999Z"),
        );
        assert_eq!(got, Some(utc("2026-06-01T12:00:00Z")));
    }

    #[test]
    fn given_invalid_cron_or_zone_when_computed_then_none() {
        let window = FireWindow::default();
        let now = utc("2026-06-01T12:00:00Z");
        assert_eq!(
            first_fire(&cron("nope", "UTC"), &DstPolicy::default(), &window, now),
            None
        );
        assert_eq!(
            first_fire(&cron("@daily", "Mars/Base"), &DstPolicy::default(), &window, now),
            None
        );
    }

    // --- Window ---

    #[test]
    fn given_end_at_when_reached_then_fires_stop_and_end_at_is_inclusive() {
        let window = FireWindow {
            start_at: None,
            end_at: Some(utc("2026-06-01T03:00:00Z")),
        };
        let s = every("1h", Some("2026-06-01T00:00:00Z"));
        let got = preview(&s, &DstPolicy::default(), &window, utc("2026-06-01T00:00:00Z"), 10);
        assert_eq!(
            got,
            utcs(&["2026-06-01T01:00:00Z", "2026-06-01T02:00:00Z", "2026-06-01T03:00:00Z"])
        );
        let c = cron("0 * * * *", "UTC");
        assert_eq!(
            next_fire_after(&c, &DstPolicy::default(), &window, utc("2026-06-01T03:00:00Z")),
            None
        );
    }

    #[test]
    fn given_start_at_when_in_the_future_then_first_fire_waits_for_it() {
        let s = every("1h", Some("2026-06-01T00:00:00Z"));
        let now = utc("2026-06-01T00:10:00Z");
        let late = FireWindow {
            start_at: Some(utc("2026-06-01T05:30:00Z")),
            end_at: None,
        };
        assert_eq!(
            first_fire(&s, &DstPolicy::default(), &late, now),
            Some(utc("2026-06-01T06:00:00Z"))
        );
        let exact = FireWindow {
            start_at: Some(utc("2026-06-01T05:00:00Z")),
            end_at: None,
        };
        assert_eq!(
            first_fire(&s, &DstPolicy::default(), &exact, now),
            Some(utc("2026-06-01T05:00:00Z"))
        );
        let c = cron("0 0 * * *", "UTC");
        assert_eq!(
            first_fire(&c, &DstPolicy::default(), &late, now),
            Some(utc("2026-06-02T00:00:00Z"))
        );
    }

    // --- at ---

    #[test]
    fn given_at_when_past_and_inside_window_then_fires_at_once_and_only_once() {
        let s = Schedule::At(utc("2026-01-01T00:00:00Z"));
        let now = utc("2026-06-01T00:00:00Z");
        assert_eq!(
            first_fire(&s, &DstPolicy::default(), &FireWindow::default(), now),
            Some(utc("2026-01-01T00:00:00Z"))
        );
        assert_eq!(
            next_fire_after(
                &s,
                &DstPolicy::default(),
                &FireWindow::default(),
                utc("2026-01-01T00:00:00Z")
            ),
            None
        );
        assert_eq!(
            preview(&s, &DstPolicy::default(), &FireWindow::default(), now, 5).len(),
            1
        );
    }

    #[test]
    fn given_at_when_outside_window_then_none() {
        let s = Schedule::At(utc("2026-01-01T00:00:00Z"));
        let window = FireWindow {
            start_at: Some(utc("2026-02-01T00:00:00Z")),
            end_at: None,
        };
        assert_eq!(
            first_fire(&s, &DstPolicy::default(), &window, utc("2025-01-01T00:00:00Z")),
            None
        );
    }

    // --- every ---

    #[test]
    fn given_anchor_in_the_past_when_first_fire_then_next_grid_point() {
        let s = every("1m", Some("2026-01-01T00:00:10Z"));
        let got = fires(&s, DstPolicy::default(), "2026-06-01T12:00:00Z", 2);
        assert_eq!(got, utcs(&["2026-06-01T12:00:10Z", "2026-06-01T12:01:10Z"]));
    }

    #[test]
    fn given_anchor_in_the_future_when_first_fire_then_grid_extends_backwards() {
        let s = every("1h", Some("2026-06-10T00:15:00Z"));
        let got = fires(&s, DstPolicy::default(), "2026-06-01T12:30:00Z", 1);
        assert_eq!(got, utcs(&["2026-06-01T13:15:00Z"]));
    }

    #[test]
    fn given_now_on_the_grid_when_first_fire_then_strictly_after() {
        let s = every("5m", Some("2026-06-01T00:00:00Z"));
        assert_eq!(
            fires(&s, DstPolicy::default(), "2026-06-01T12:00:00Z", 1),
            utcs(&["2026-06-01T12:05:00Z"])
        );
    }

    #[test]
    fn given_one_second_interval_when_previewed_then_each_second() {
        let s = every("1s", Some("2026-06-01T00:00:00Z"));
        let got = fires(&s, DstPolicy::default(), "2026-06-01T12:00:00.500Z", 3);
        assert_eq!(
            got,
            utcs(&["2026-06-01T12:00:01Z", "2026-06-01T12:00:02Z", "2026-06-01T12:00:03Z"])
        );
    }

    #[test]
    fn given_no_anchor_when_first_fire_then_one_interval_after_now() {
        let s = every("10m", None);
        assert_eq!(
            fires(&s, DstPolicy::default(), "2026-06-01T12:00:00Z", 1),
            utcs(&["2026-06-01T12:10:00Z"])
        );
    }

    #[test]
    fn given_zero_interval_when_computed_then_none_not_a_panic() {
        let s = every("0s", Some("2026-06-01T00:00:00Z"));
        assert!(fires(&s, DstPolicy::default(), "2026-06-01T12:00:00Z", 1).is_empty());
    }

    // --- preview ---

    #[test]
    fn given_count_when_previewed_then_exactly_count_increasing_times() {
        for s in [
            cron("*/7 * * * *", "Asia/Kolkata"),
            every("90s", Some("2026-01-01T00:00:00Z")),
        ] {
            let got = fires(&s, DstPolicy::default(), "2026-06-01T12:00:00Z", 10);
            assert_eq!(got.len(), 10);
            assert!(strictly_increasing(&got));
        }
        assert!(fires(&cron("@hourly", "UTC"), DstPolicy::default(), "2026-06-01T12:00:00Z", 0).is_empty());
    }

    #[test]
    fn given_a_year_of_every_15_minutes_in_berlin_when_previewed_then_no_duplicates_and_whole_days() {
        for dst in [
            DstPolicy::default(),
            policy(DstGap::Shift, DstRepeat::Once),
            policy(DstGap::Skip, DstRepeat::Twice),
        ] {
            let got = fires(
                &cron("*/15 * * * *", "Europe/Berlin"),
                dst,
                "2026-01-01T00:00:00Z",
                366 * 96,
            );
            assert!(strictly_increasing(&got));
            // Every instant is a quarter hour.
            assert!(got.iter().all(|t| t.timestamp() % 900 == 0));
        }
    }
}
