//! Cron schedules: `sked_core::schedule::cron::parse_cron` and `parse_timezone` on arbitrary
//! text, and the next-fire computation (`next_fire_after`, `preview`) of every expression that
//! parses, in any time zone, under any DST policy and `start_at`/`end_at` window, from any
//! instant of years 1970 to 2200: those sked accepts in a job (validation refuses others), so
//! those its next-fire computation starts from. (Past 2262 chrono's nanosecond arithmetic,
//! which the cron search uses, ends: see fuzz/findings.)
//!
//! Checks, besides "no panic":
//! - a zone name that parses is the zone's own name (parsing is exact, case-sensitive);
//! - a next fire time is strictly after the instant asked about, a whole second, inside the
//!   window, and within the search horizon (`CRON_HORIZON_YEARS`);
//! - it is the *earliest*: asking again from one second before it gives it back;
//! - `preview` starts with it and is strictly increasing, each step again the earliest;
//! - under `gap: skip` its wall-clock time matches the expression (nothing was shifted);
//! - policies nest: what `gap: skip` fires, `gap: shift` fires too; what `repeat: once`
//!   fires, `repeat: twice` fires too;
//! - `auto` (both halves left out) fires exactly as the policy it settles to for the
//!   expression (`skip` + `twice` for an interval cron, `shift` + `once` for a fixed time),
//!   which the checks above then run under.
//!
//! Input: 8 bytes (i64 LE: the instant, in ms, folded into years 1970..=2200), 1 flag byte
//! (bit 0 gap skip, 1 repeat twice, 2 has start_at, 3 has end_at, 4 zone name from the text,
//! 5 `auto`: bits 0 and 1 ignored),
//! 2 bytes (u16 LE: index into chrono-tz's zones), 4 + 4 bytes (i32 LE: start_at and end_at as
//! seconds from the instant), then UTF-8 text: the expression, or with bit 4 `expr\nzone`.
//! Missing bytes read as zero.

#![no_main]

use chrono::{Duration, TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use sked_core::Timestamp;
use sked_core::schedule::cron::{parse_cron, parse_timezone};
use sked_core::schedule::dst::{GapRule, RepeatRule};
use sked_core::schedule::next::CRON_HORIZON_YEARS;
use sked_core::schedule::{DstGap, DstPolicy, DstRepeat, FireWindow, Schedule, next_fire_after, preview};

/// 1970-01-01T00:00:00Z and 2200-12-31T23:59:59.999Z, in ms since the epoch (the years
/// `sked_core::validate` accepts).
const MIN_MS: i64 = 0;
const MAX_MS: i64 = 7_289_654_399_999;

/// Reads fixed-size fields off the front of the input, zeros once it runs out.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
}

/// `ms` as an instant, folded into [`MIN_MS`, `MAX_MS`] (unchanged if inside).
fn instant(ms: i64) -> Timestamp {
    let (min, span) = (i128::from(MIN_MS), i128::from(MAX_MS - MIN_MS + 1));
    let folded = min + (i128::from(ms) - min).rem_euclid(span);
    Utc.timestamp_millis_opt(folded as i64).unwrap()
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let after = instant(i64::from_le_bytes(r.take()));
    let [flags] = r.take::<1>();
    let zone_index = u16::from_le_bytes(r.take()) as usize;
    let start_offset = i32::from_le_bytes(r.take());
    let end_offset = i32::from_le_bytes(r.take());
    let Ok(text) = std::str::from_utf8(r.0) else {
        return;
    };

    let (expr, zone) = if flags & 16 != 0 {
        let (expr, zone) = text.split_once('\n').unwrap_or((text, ""));
        (expr, zone.to_string())
    } else {
        let zones = &chrono_tz::TZ_VARIANTS;
        (text, zones[zone_index % zones.len()].name().to_string())
    };
    let parsed_zone = parse_timezone(&zone);
    if let Ok(tz) = &parsed_zone {
        assert_eq!(tz.name(), zone, "a zone parses only from its own name");
    }
    let parsed = parse_cron(expr);
    if let Err(e) = &parsed {
        assert!(!e.is_empty(), "an error names the problem");
    }
    let (Ok(cron), Ok(tz)) = (parsed, parsed_zone) else {
        return;
    };

    let auto = flags & 32 != 0;
    let dst = if auto {
        // The written policy `auto` settles to for this expression.
        let rule = DstPolicy::default().rule_for(cron.kind());
        DstPolicy {
            gap: match rule.gap {
                GapRule::Shift => DstGap::Shift,
                GapRule::Skip => DstGap::Skip,
            },
            repeat: match rule.repeat {
                RepeatRule::Once => DstRepeat::Once,
                RepeatRule::Twice => DstRepeat::Twice,
            },
        }
    } else {
        DstPolicy {
            gap: if flags & 1 != 0 { DstGap::Skip } else { DstGap::Shift },
            repeat: if flags & 2 != 0 {
                DstRepeat::Twice
            } else {
                DstRepeat::Once
            },
        }
    };
    // The window's ends are job timestamps too: inside the years validation accepts.
    let offset = |secs: i32| instant(after.timestamp_millis() + i64::from(secs) * 1000);
    let window = FireWindow {
        start_at: (flags & 4 != 0).then(|| offset(start_offset)),
        end_at: (flags & 8 != 0).then(|| offset(end_offset)),
    };
    let schedule = Schedule::Cron {
        expr: expr.to_string(),
        timezone: zone,
    };
    let next = |dst: &DstPolicy, prev: Timestamp| next_fire_after(&schedule, dst, &window, prev);

    let Some(first) = next(&dst, after) else {
        return;
    };
    let searched_from = window.start_at.map_or(after, |s| s.max(after));
    let horizon = searched_from + Duration::days(366 * CRON_HORIZON_YEARS + 2);
    assert!(first > after, "{first} is not after {after}");
    assert!(
        first <= horizon,
        "{first} is past the search horizon from {searched_from}"
    );

    let series = preview(&schedule, &dst, &window, after, 4);
    assert_eq!(series.first(), Some(&first), "preview starts with the next fire time");
    if auto {
        assert_eq!(
            preview(&schedule, &DstPolicy::default(), &window, after, 4),
            series,
            "auto does not fire as {dst:?}"
        );
    }
    for (i, &t) in series.iter().enumerate() {
        if i > 0 {
            assert!(t > series[i - 1], "preview goes backwards: {series:?}");
        }
        assert_eq!(t.timestamp_subsec_nanos(), 0, "{t} is not a whole second");
        assert!(window.contains(t), "{t} is outside {window:?}");
        let just_before = t - Duration::seconds(1);
        assert_eq!(
            next(&dst, just_before),
            Some(t),
            "from {just_before} the next fire is not {t}"
        );
        if dst.gap == DstGap::Skip {
            let wall = t.with_timezone(&tz).naive_local();
            assert_eq!(
                cron.next_local_after(wall - Duration::seconds(1)),
                Some(wall),
                "{t} fires at {wall} local, which {expr:?} does not match"
            );
            let shift = DstPolicy {
                gap: DstGap::Shift,
                ..dst
            };
            assert_eq!(
                next(&shift, just_before),
                Some(t),
                "gap: skip fires {t}, gap: shift not"
            );
        }
        if dst.repeat == DstRepeat::Once {
            let twice = DstPolicy {
                repeat: DstRepeat::Twice,
                ..dst
            };
            assert_eq!(
                next(&twice, just_before),
                Some(t),
                "repeat: once fires {t}, repeat: twice not"
            );
        }
    }
});
