//! Daylight-saving rules for cron schedules: what happens to a wall-clock time that does not
//! exist (spring gap) or exists twice (autumn repeat) in the schedule's time zone.
//!
//! This module owns the job's DST policy (its `dst` field), how `auto` is settled for an
//! expression (Debian cron's rule, [`DstPolicy::rule_for`]), and the mapping from a wall-clock
//! time to the instants it fires at. It does not parse cron syntax (see [`super::cron`], which
//! says what [`CronKind`] an expression is) nor search occurrences (see [`super::next`]).

use super::cron::CronKind;
use crate::timestamp::Timestamp;
use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// A cron job's DST policy, written `{"gap": "shift", "repeat": "once"}`; either half left out
/// (or written `auto`) is chosen by the expression, as Debian cron does ([`DstPolicy::rule_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DstPolicy {
    /// A fire time in the spring-forward gap: `shift` (to the end of the gap), `skip`, or
    /// `auto` (default): `skip` for an interval cron (hour or minute `*` or a step), `shift`
    /// for a fixed time of day.
    #[serde(default)]
    pub gap: DstGap,
    /// A fire time in the autumn repeat: `once` (first pass), `twice` (both passes), or
    /// `auto` (default): `twice` for an interval cron (hour or minute `*` or a step), `once`
    /// for a fixed time of day.
    #[serde(default)]
    pub repeat: DstRepeat,
}

/// A fire time that falls in the spring gap (e.g. 02:30 on the night clocks jump 02:00→03:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DstGap {
    /// By the expression: `skip` for an interval cron (hour or minute `*` or a step), `shift`
    /// for a fixed time of day.
    #[default]
    Auto,
    /// Fire at the first instant after the gap (02:30 → 03:00 local).
    Shift,
    /// Do not fire that day.
    Skip,
}

/// A fire time that occurs twice in the autumn repeat (e.g. 02:30 when 03:00→02:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DstRepeat {
    /// By the expression: `twice` for an interval cron (hour or minute `*` or a step), `once`
    /// for a fixed time of day.
    #[default]
    Auto,
    /// Fire at the first of the two instants only.
    Once,
    /// Fire at both instants.
    Twice,
}

/// A DST policy with `auto` settled for one expression: what [`fire_instants`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DstRule {
    /// What a wall-clock time in a spring gap does.
    pub gap: GapRule,
    /// What a wall-clock time in an autumn repeat does.
    pub repeat: RepeatRule,
}

/// What a wall-clock time in a spring gap does (see [`DstGap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapRule {
    /// Fires at the first instant after the gap.
    Shift,
    /// Does not fire.
    Skip,
}

/// What a wall-clock time in an autumn repeat does (see [`DstRepeat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatRule {
    /// Fires at its first instant.
    Once,
    /// Fires at both instants.
    Twice,
}

impl DstRule {
    /// Debian cron's rule for an interval cron: it fires by the wall clock, so in both passes
    /// of a repeated hour, and has no fire times in a skipped one.
    pub const WALL_CLOCK: DstRule = DstRule {
        gap: GapRule::Skip,
        repeat: RepeatRule::Twice,
    };

    /// Debian cron's rule for a fixed time of day: it fires once a day, at the first pass of
    /// a repeated hour, and as soon as a skipped one is over.
    pub const ONCE_A_DAY: DstRule = DstRule {
        gap: GapRule::Shift,
        repeat: RepeatRule::Once,
    };
}

impl DstPolicy {
    /// The rule a cron of `kind` follows under this policy: each half given (`shift`, `skip`,
    /// `once`, `twice`) is kept; each `auto` half follows Debian cron — an interval cron fires
    /// by the wall clock ([`DstRule::WALL_CLOCK`]: `skip` + `twice`), a fixed time of day once
    /// a day ([`DstRule::ONCE_A_DAY`]: `shift` + `once`).
    pub fn rule_for(&self, kind: CronKind) -> DstRule {
        let by_kind = match kind {
            CronKind::Interval => DstRule::WALL_CLOCK,
            CronKind::FixedTime => DstRule::ONCE_A_DAY,
        };
        DstRule {
            gap: match self.gap {
                DstGap::Auto => by_kind.gap,
                DstGap::Shift => GapRule::Shift,
                DstGap::Skip => GapRule::Skip,
            },
            repeat: match self.repeat {
                DstRepeat::Auto => by_kind.repeat,
                DstRepeat::Once => RepeatRule::Once,
                DstRepeat::Twice => RepeatRule::Twice,
            },
        }
    }
}

/// The largest jump of a zone's UTC offset that the next-fire search allows for around a
/// transition. Real DST shifts are 30 min to 2 h; 3 h leaves a margin.
pub const MAX_DST_SHIFT: Duration = Duration::hours(3);

/// How far past a non-existent local time the search for the end of its gap goes. Ordinary
/// gaps are an hour; whole skipped days (Samoa, 2011-12-30) fit as well.
const MAX_GAP: Duration = Duration::hours(48);

/// The instants at which a cron occurrence at wall-clock time `local` fires in `tz` under
/// `rule`, earliest first: one for an ordinary time; for a time in the spring gap the first
/// instant after the gap (`shift`) or none (`skip`); for a time in the autumn repeat its first
/// instant (`once`) or both (`twice`). Sub-second parts of `local` are kept.
pub fn fire_instants(tz: &Tz, local: NaiveDateTime, rule: &DstRule) -> impl Iterator<Item = Timestamp> {
    let pair = match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => [Some(t), None],
        LocalResult::Ambiguous(first, second) => match rule.repeat {
            RepeatRule::Once => [Some(first), None],
            RepeatRule::Twice => [Some(first), Some(second)],
        },
        LocalResult::None => match rule.gap {
            GapRule::Shift => [gap_end(tz, local), None],
            GapRule::Skip => [None, None],
        },
    };
    pair.into_iter().flatten().map(|t| t.with_timezone(&Utc))
}

/// The first instant after the spring gap that `local` falls into (the transition itself,
/// e.g. 03:00 local for 02:30 on the night clocks jump 02:00→03:00). `None` if `local` is not
/// in a gap within [`MAX_GAP`].
pub fn gap_end(tz: &Tz, local: NaiveDateTime) -> Option<DateTime<Tz>> {
    let resolves = |t: NaiveDateTime| tz.from_local_datetime(&t).earliest();
    if resolves(local).is_some() {
        return None;
    }
    // Coarse steps of a minute find a wall-clock time past the gap; then step back a second
    // at a time while the earlier time still exists, to land on the gap's exact end.
    let mut minutes = 1;
    let mut after = loop {
        let t = local + Duration::minutes(minutes);
        if resolves(t).is_some() {
            break t;
        }
        if Duration::minutes(minutes) > MAX_GAP {
            return None;
        }
        minutes += 1;
    };
    for _ in 0..60 {
        let before = after - Duration::seconds(1);
        if before <= local || resolves(before).is_none() {
            break;
        }
        after = before;
    }
    resolves(after)
}

/// The autumn repeat that begins within [`MAX_DST_SHIFT`] after `after` in `tz`, if there is
/// one: the instant the clock goes back (as a time in `tz`, whose wall clock is the start of
/// the repeated span) and how far it goes back (the span's length). Found by bisecting the
/// zone's UTC offset at whole seconds; a zone changes its offset at most once in that time.
pub fn repeat_ahead(tz: &Tz, after: Timestamp) -> Option<(DateTime<Tz>, Duration)> {
    let offset_at = |t: Timestamp| tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc();
    let before = offset_at(after);
    let (mut lo, mut hi) = (after, after + MAX_DST_SHIFT);
    if offset_at(hi) >= before {
        return None;
    }
    // `lo` keeps the offset `after` has, `hi` has the smaller one; both stay whole seconds
    // apart, so `hi` ends on the (whole-second) transition when `after` is a whole second.
    while hi - lo > Duration::seconds(1) {
        let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
        if offset_at(mid) == before {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let back_by = Duration::seconds(i64::from(before - offset_at(hi)));
    Some((hi.with_timezone(tz), back_by))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Europe::Berlin;

    fn local(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    fn utc(s: &str) -> Timestamp {
        crate::timestamp::parse(s).unwrap()
    }

    fn instants(t: &str, gap: GapRule, repeat: RepeatRule) -> Vec<Timestamp> {
        fire_instants(&Berlin, local(t), &DstRule { gap, repeat }).collect()
    }

    #[test]
    fn given_ordinary_time_when_resolved_then_one_instant() {
        assert_eq!(
            instants("2026-06-01 12:00:00", GapRule::Skip, RepeatRule::Twice),
            [utc("2026-06-01T10:00:00Z")]
        );
    }

    #[test]
    fn given_time_in_spring_gap_when_shift_then_transition_instant_and_when_skip_then_none() {
        let shifted = instants("2026-03-29 02:30:00", GapRule::Shift, RepeatRule::Once);
        assert_eq!(shifted, [utc("2026-03-29T01:00:00Z")]);
        assert!(instants("2026-03-29 02:30:00", GapRule::Skip, RepeatRule::Once).is_empty());
    }

    #[test]
    fn given_time_in_autumn_repeat_when_once_then_first_and_when_twice_then_both() {
        assert_eq!(
            instants("2026-10-25 02:30:00", GapRule::Shift, RepeatRule::Once),
            [utc("2026-10-25T00:30:00Z")]
        );
        assert_eq!(
            instants("2026-10-25 02:30:00", GapRule::Shift, RepeatRule::Twice),
            [utc("2026-10-25T00:30:00Z"), utc("2026-10-25T01:30:00Z")]
        );
    }

    #[test]
    fn given_auto_halves_when_settled_then_interval_keeps_the_wall_clock_and_fixed_time_fires_once_a_day() {
        let auto = DstPolicy::default();
        assert_eq!((auto.gap, auto.repeat), (DstGap::Auto, DstRepeat::Auto));
        assert_eq!(auto.rule_for(CronKind::Interval), DstRule::WALL_CLOCK);
        assert_eq!(auto.rule_for(CronKind::FixedTime), DstRule::ONCE_A_DAY);
    }

    #[test]
    fn given_a_half_written_when_settled_then_it_is_kept_and_the_other_follows_the_expression() {
        let skip_only = DstPolicy {
            gap: DstGap::Skip,
            ..DstPolicy::default()
        };
        assert_eq!(
            skip_only.rule_for(CronKind::FixedTime),
            DstRule {
                gap: GapRule::Skip,
                repeat: RepeatRule::Once
            }
        );
        let once_only = DstPolicy {
            repeat: DstRepeat::Once,
            ..DstPolicy::default()
        };
        assert_eq!(
            once_only.rule_for(CronKind::Interval),
            DstRule {
                gap: GapRule::Skip,
                repeat: RepeatRule::Once
            }
        );
        let forced = DstPolicy {
            gap: DstGap::Shift,
            repeat: DstRepeat::Once,
        };
        assert_eq!(forced.rule_for(CronKind::Interval), DstRule::ONCE_A_DAY);
    }

    #[test]
    fn given_the_wire_form_when_read_then_missing_halves_are_auto_and_auto_is_written_back() {
        let read = |v: serde_json::Value| serde_json::from_value::<DstPolicy>(v).unwrap();
        assert_eq!(read(serde_json::json!({})), DstPolicy::default());
        assert_eq!(
            read(serde_json::json!({"gap": "auto", "repeat": "twice"})),
            DstPolicy {
                gap: DstGap::Auto,
                repeat: DstRepeat::Twice
            }
        );
        // What jobs stored before `auto` existed hold: read as the explicit choice it spells.
        assert_eq!(
            read(serde_json::json!({"gap": "shift", "repeat": "once"})),
            DstPolicy {
                gap: DstGap::Shift,
                repeat: DstRepeat::Once
            }
        );
        assert_eq!(
            serde_json::to_value(DstPolicy::default()).unwrap(),
            serde_json::json!({"gap": "auto", "repeat": "auto"})
        );
        assert!(serde_json::from_value::<DstPolicy>(serde_json::json!({"gap": "later"})).is_err());
    }

    #[test]
    fn given_gap_end_when_local_time_exists_then_none() {
        assert_eq!(gap_end(&Berlin, local("2026-03-29 03:00:00")), None);
        let end = gap_end(&Berlin, local("2026-03-29 02:00:00")).unwrap();
        assert_eq!(end.naive_local(), local("2026-03-29 03:00:00"));
    }

    #[test]
    fn given_whole_skipped_day_when_shifted_then_lands_after_it() {
        // Samoa skipped 2011-12-30 entirely.
        let end = gap_end(&chrono_tz::Pacific::Apia, local("2011-12-30 09:00:00")).unwrap();
        assert_eq!(end.naive_local(), local("2011-12-31 00:00:00"));
    }

    #[test]
    fn given_instants_when_a_repeat_begins_within_three_hours_then_its_start_and_length() {
        let (at, back_by) = repeat_ahead(&Berlin, utc("2026-10-24T23:30:00Z")).unwrap();
        assert_eq!(at.with_timezone(&Utc), utc("2026-10-25T01:00:00Z"));
        assert_eq!(at.naive_local(), local("2026-10-25 02:00:00"));
        assert_eq!(back_by, Duration::hours(1));
        // Lord Howe goes back half an hour, 02:00 → 01:30.
        let (at, back_by) = repeat_ahead(&chrono_tz::Australia::Lord_Howe, utc("2027-04-03T14:00:00Z")).unwrap();
        assert_eq!(at.naive_local(), local("2027-04-04 01:30:00"));
        assert_eq!(back_by, Duration::minutes(30));
        // Too early, already past, a spring gap, no DST at all.
        assert_eq!(repeat_ahead(&Berlin, utc("2026-10-24T21:59:59Z")), None);
        assert_eq!(repeat_ahead(&Berlin, utc("2026-10-25T01:00:00Z")), None);
        assert_eq!(repeat_ahead(&Berlin, utc("2026-03-29T00:30:00Z")), None);
        assert_eq!(repeat_ahead(&chrono_tz::UTC, utc("2026-10-25T00:30:00Z")), None);
    }
}
