//! Cron expressions and time zones: parsing them (for validation and for the next-fire
//! computation) and finding matching wall-clock times.
//!
//! Parsing and matching are delegated to the `croner` crate; this module only pins the
//! dialect sked accepts (5 fields, or 6 with leading seconds; the `@` macros) and gives
//! errors people can act on. It works on *local naive* times only: turning a wall-clock time
//! into instants (and what DST does to it) belongs to [`super::dst`]. It does say which
//! [`CronKind`] an expression is (an interval or a fixed time of day), read off its text,
//! because that is what the default DST rule depends on.

use chrono::NaiveDateTime;
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// A parsed cron expression, matched against wall-clock (local naive) times.
#[derive(Debug, Clone)]
pub struct CronExpr {
    /// The parsed pattern.
    cron: Cron,
    /// Interval or fixed time of day, as written.
    kind: CronKind,
}

/// What a cron expression says about the time of day, as Debian cron reads it to decide what
/// a DST change does to it (see [`super::dst::DstPolicy::rule_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronKind {
    /// The hour, minute or seconds field is written `*` or with a step (`*/15 * * * *`,
    /// `0 */2 * * *`, `0 1-23/2 * * *`, `*/30 1-3 * * *`, `@hourly`): it means "every so
    /// often", so it keeps to the wall clock.
    Interval,
    /// Every time-of-day field is a number, list or range (`30 2 * * *`, `0 9,17 * * *`,
    /// `0 1-3 * * *`, `@daily`): it means "at these times of day".
    FixedTime,
}

impl CronKind {
    /// The kind of an expression whose fields are `fields` (5, or 6 with leading seconds,
    /// macros already expanded). Debian cron looks at the minute and hour fields; the seconds
    /// field of the 6-field form counts the same way.
    fn of_fields(fields: &[&str]) -> Self {
        // The time-of-day fields lead: (seconds,) minute, hour.
        let time_of_day = &fields[..fields.len().saturating_sub(3)];
        let every_so_often = |f: &&str| f.starts_with('*') || f.contains('/');
        if time_of_day.iter().any(every_so_often) {
            CronKind::Interval
        } else {
            CronKind::FixedTime
        }
    }
}

/// The `@` macros sked accepts, and the 5-field expression each stands for.
const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * SUN"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// Most expressions [`parsed_cron`] keeps per thread; past it, it starts afresh.
const PARSED_PER_THREAD: usize = 1024;

thread_local! {
    /// [`parsed_cron`]'s answers by expression text.
    static PARSED: RefCell<HashMap<String, Option<Arc<CronExpr>>>> = RefCell::new(HashMap::new());
}

/// [`parse_cron`] for the next-fire computation (`None`: not a valid expression), remembered
/// per thread: parsing costs ~20 µs, a step through a parsed expression well under one, and
/// the same few expressions are planned again and again (each firing, each claim that checks
/// a run's time against its job's schedule).
pub fn parsed_cron(expr: &str) -> Option<Arc<CronExpr>> {
    PARSED.with(|cache| {
        if let Some(known) = cache.borrow().get(expr) {
            return known.clone();
        }
        let parsed = parse_cron(expr).ok().map(Arc::new);
        let mut cache = cache.borrow_mut();
        if cache.len() >= PARSED_PER_THREAD {
            cache.clear();
        }
        cache.insert(expr.to_string(), parsed.clone());
        parsed
    })
}

/// Parses a cron expression: 5 fields (`minute hour day-of-month month day-of-week`), 6 fields
/// with leading seconds, or one of `@yearly @annually @monthly @weekly @daily @midnight
/// @hourly`. Month and weekday names (`JAN`, `MON-FRI`) are accepted, case-insensitively.
/// The error is a sentence for people, naming what is wrong.
pub fn parse_cron(expr: &str) -> Result<CronExpr, String> {
    let trimmed = expr.trim();
    if trimmed.is_empty() {
        return Err("cron expression is empty".into());
    }
    // croner does not know `@midnight` and passes unknown macros through to the field
    // parser, so the macros are expanded here and anything else starting with `@` refused.
    let expanded = if trimmed.starts_with('@') {
        match MACROS.iter().find(|(name, _)| name.eq_ignore_ascii_case(trimmed)) {
            Some((_, pattern)) => *pattern,
            None => {
                return Err(format!(
                    "unknown cron macro {trimmed:?}; use one of @yearly @annually @monthly @weekly @daily @midnight @hourly"
                ));
            }
        }
    } else {
        trimmed
    };
    let fields = expanded.split_whitespace().count();
    if !(5..=6).contains(&fields) {
        return Err(format!(
            "cron expression has {fields} fields; use 5 (minute hour day-of-month month day-of-week) or 6 with leading seconds"
        ));
    }
    // A list with an empty element (`,`, `1,,2`, `5,`) parses as matching nothing (or less
    // than written), and the search for a match then walks to croner's year 5000: seconds of
    // CPU for one request. Refused as the typo it is.
    if let Some(field) = expanded.split_whitespace().find(|f| f.split(',').any(str::is_empty)) {
        return Err(format!("cron field {field:?} has an empty list element"));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build();
    let kind = CronKind::of_fields(&expanded.split_whitespace().collect::<Vec<_>>());
    parser
        .parse(expanded)
        .map(|cron| CronExpr { cron, kind })
        .map_err(|e| format!("invalid cron expression {trimmed:?}: {e}"))
}

/// Parses an IANA time-zone name (`Europe/Berlin`, `UTC`), case-sensitively.
pub fn parse_timezone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>()
        .map_err(|_| format!("unknown time zone {name:?}: use an IANA name such as \"Europe/Berlin\" or \"UTC\""))
}

impl CronExpr {
    /// Interval or fixed time of day (see [`CronKind`]).
    pub fn kind(&self) -> CronKind {
        self.kind
    }

    /// The first wall-clock time strictly after `after` (compared at whole seconds) that the
    /// expression matches, or `None` if there is none (`0 0 30 2 *`) or the search gives up.
    pub fn next_local_after(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        // croner searches the wall clock of a `NaiveDateTime` as is (it never sees a time zone
        // there), so DST is entirely ours to handle. It ignores sub-second parts.
        self.cron.find_next_occurrence(&after, false).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn parsed_cron_answers_as_parse_cron_and_parses_an_expression_once() {
        let first = parsed_cron("*/15 * * * *").expect("valid");
        let again = parsed_cron("*/15 * * * *").expect("valid");
        assert!(Arc::ptr_eq(&first, &again), "parsed again");
        assert_eq!(first.kind(), parse_cron("*/15 * * * *").unwrap().kind());
        assert!(parsed_cron("61 * * * *").is_none());
        assert!(parsed_cron("61 * * * *").is_none(), "an invalid one stays invalid");
    }

    fn local(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, s)
            .unwrap()
    }

    #[test]
    fn given_five_or_six_fields_when_parsed_then_accepted() {
        for ok in [
            "0 9 * * MON-FRI",
            "*/5 * * * * *",
            "0 0 1 JAN *",
            "0 0 L * *",
            " 0 0 * * * ",
        ] {
            assert!(parse_cron(ok).is_ok(), "{ok} should parse");
        }
    }

    #[test]
    fn given_every_macro_when_parsed_then_accepted_case_insensitively() {
        for (name, _) in MACROS {
            assert!(parse_cron(name).is_ok(), "{name}");
            assert!(parse_cron(&name.to_uppercase()).is_ok(), "{name} upper case");
        }
    }

    #[test]
    fn given_bad_expressions_when_parsed_then_refused_with_a_reason() {
        for bad in [
            "",
            "* * * *",
            "1 2 3 4 5 6 7",
            "60 * * * *",
            "@fortnightly",
            "0/10 * * * *",
            "a b c d e",
        ] {
            let err = parse_cron(bad).err().unwrap_or_else(|| panic!("{bad:?} should fail"));
            assert!(!err.is_empty());
        }
        assert!(parse_cron("* * * *").unwrap_err().contains("4 fields"));
    }

    #[test]
    fn given_midnight_macro_when_matched_then_same_as_daily() {
        let from = local(2026, 5, 5, 10, 0, 0);
        let m = parse_cron("@midnight").unwrap().next_local_after(from);
        assert_eq!(m, Some(local(2026, 5, 6, 0, 0, 0)));
        assert_eq!(m, parse_cron("@daily").unwrap().next_local_after(from));
    }

    #[test]
    fn given_hour_or_minute_written_as_star_or_step_when_classified_then_interval() {
        for expr in [
            "*/15 * * * *",
            "@hourly",
            "0 * * * *",
            "0 */2 * * *",
            "0 1-23/2 * * *",
            "*/30 1-3 * * *",
            "* 2 * * *",
            "0,30 * * * *",
            "*/10 30 2 * * *",
            "0 0 */6 * * *",
        ] {
            assert_eq!(parse_cron(expr).unwrap().kind(), CronKind::Interval, "{expr}");
        }
    }

    #[test]
    fn given_fixed_hour_and_minute_when_classified_then_fixed_time() {
        for expr in [
            "30 2 * * *",
            "0 0 * * *",
            "@daily",
            "@weekly",
            "0 9 * * MON-FRI",
            "0 9,17 * * *",
            "0 1-3 * * *",
            "0 30 2 * * *",
            "15 2 */2 * *",
        ] {
            assert_eq!(parse_cron(expr).unwrap().kind(), CronKind::FixedTime, "{expr}");
        }
    }

    #[test]
    fn given_time_zone_names_when_parsed_then_only_iana_names_pass() {
        assert_eq!(parse_timezone("Europe/Berlin"), Ok(chrono_tz::Europe::Berlin));
        assert!(parse_timezone("UTC").is_ok());
        assert!(parse_timezone("Mars/Olympus").is_err());
        assert!(parse_timezone("").is_err());
    }
}
