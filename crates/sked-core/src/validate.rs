//! Validation of a job definition: every field is checked before anything is written, and
//! each problem names its field (`schedule.cron`, `task.http.url`, `priority`, …).
//!
//! The checks are pure: they read the spec and `now`, and list *every* problem rather than
//! stopping at the first. What the deployment can run (container tasks) is not checked here;
//! the service adds that from its [`Capabilities`].
//!
//! Why one long file: the checks are 410 lines; the rest is their unit tests, one per field's
//! rules, kept beside them.

use crate::duration::Dur;
use crate::error::FieldError;
use crate::ids;
use crate::job::{Backoff, JobSpec, OnTimeout};
use crate::schedule::cron::{parse_cron, parse_timezone};
use crate::schedule::{FireWindow, Schedule, preview};
use crate::secret::Env;
use crate::task::{CommandTask, ContainerTask, HttpTask, Task};
use crate::timestamp::{self, Timestamp};
use chrono::Datelike;
use std::collections::BTreeMap;

/// The product's documented request limits (README, "What a job can say").
pub const MAX_LABELS: usize = 32;
/// Most env entries of a command or container task.
pub const MAX_ENV: usize = 64;
/// Longest label key, in characters.
pub const MAX_LABEL_KEY: usize = 63;
/// Longest label value, in characters.
pub const MAX_LABEL_VALUE: usize = 256;
/// Longest job name, in characters.
pub const MAX_NAME: usize = 256;
/// Highest priority.
pub const MAX_PRIORITY: u8 = 9;
/// Most retries after the first attempt.
pub const MAX_RETRIES: u32 = 100;
/// Shortest `every` interval and shortest timeout.
pub const MIN_INTERVAL: Dur = Dur::secs(1);
/// Longest per-attempt timeout.
pub const MAX_TIMEOUT: Dur = Dur::secs(7 * 24 * 3600);
/// Longest jitter of an `at` job.
pub const MAX_AT_JITTER: Dur = Dur::secs(3600);
/// HTTP methods an `http` task may use.
pub const HTTP_METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
/// Timestamps outside these years are refused: they are typos, stores keep epoch millis, and
/// the cron search works on instants chrono can truncate (nanoseconds of i64: up to 2262).
const YEARS: std::ops::RangeInclusive<i32> = 1970..=2200;
/// Longest `every` interval (ten years): anything longer is a typo, and instants far beyond it
/// overflow time arithmetic.
pub const MAX_INTERVAL: Dur = Dur::secs(10 * 365 * 24 * 3600);
/// Longest retry delay (`backoff.max`).
pub const MAX_BACKOFF: Dur = Dur::secs(30 * 24 * 3600);

/// What the deployment can run, for the checks that depend on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Whether `container` tasks can run (an ECS executor is configured).
    pub container_tasks: bool,
}

/// Every problem with `spec`, empty if it is valid. `now` is used for relative checks only.
pub fn validate_spec(spec: &JobSpec, now: Timestamp) -> Vec<FieldError> {
    let mut out = Problems::default();
    check_name(&mut out, spec.name.as_deref());
    check_labels(&mut out, &spec.labels);
    check_schedule(&mut out, spec, now);
    check_task(&mut out, &spec.task);
    if spec.priority > MAX_PRIORITY {
        out.add(
            "priority",
            format!("priority is {}; use 0..=9 (9 highest)", spec.priority),
        );
    }
    if spec.max_retries > MAX_RETRIES {
        out.add(
            "max_retries",
            format!("max_retries is {}; at most {MAX_RETRIES}", spec.max_retries),
        );
    }
    check_backoff(&mut out, &spec.backoff);
    if let Some(concurrency) = &spec.concurrency {
        out.0.extend(concurrency.problems());
    }
    if let Some(notify) = &spec.notify {
        out.0.extend(notify.problems());
    }
    if spec.timeout < MIN_INTERVAL || spec.timeout > MAX_TIMEOUT {
        out.add("timeout", format!("timeout is {}; use 1s to 7d", spec.timeout));
    }
    if let OnTimeout::RunJob(id) = &spec.on_timeout
        && !ids::is_valid_id(id.as_str())
    {
        out.add(
            "on_timeout.run_job",
            format!("{:?} is not a job id ([A-Za-z0-9_.-]{{1,128}})", id.as_str()),
        );
    }
    out.0
}

/// The problem with a caller-given job id, if any (field `id`).
pub fn validate_job_id(id: &str) -> Option<FieldError> {
    (!ids::is_valid_id(id)).then(|| {
        FieldError::new(
            "id",
            format!("{id:?} is not a valid job id: use 1 to 128 of A-Z a-z 0-9 _ . -"),
        )
    })
}

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<FieldError>);

impl Problems {
    /// Records a problem with `field`.
    fn add(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }
}

fn check_name(out: &mut Problems, name: Option<&str>) {
    if let Some(name) = name
        && name.chars().count() > MAX_NAME
    {
        out.add("name", format!("name is longer than {MAX_NAME} characters"));
    }
}

fn check_labels(out: &mut Problems, labels: &BTreeMap<String, String>) {
    if labels.len() > MAX_LABELS {
        out.add("labels", format!("{} labels; at most {MAX_LABELS}", labels.len()));
    }
    for (key, value) in labels {
        let key_ok = (1..=MAX_LABEL_KEY).contains(&key.chars().count())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'));
        if !key_ok {
            out.add(
                "labels",
                format!("label key {key:?} must be 1 to {MAX_LABEL_KEY} of A-Z a-z 0-9 _ . - /"),
            );
        }
        if value.chars().count() > MAX_LABEL_VALUE {
            out.add(
                "labels",
                format!("value of label {key:?} is longer than {MAX_LABEL_VALUE} characters"),
            );
        }
    }
}

/// A timestamp field outside [`YEARS`].
fn check_timestamp(out: &mut Problems, field: &str, t: Timestamp) {
    if !YEARS.contains(&t.year()) {
        out.add(
            field,
            format!("{} is outside the years 1970 to 2200", timestamp::format(&t)),
        );
    }
    // chrono keeps a leap second as a nanosecond count of a second or more; stores keep
    // milliseconds, where it would read back as another instant.
    if t.timestamp_subsec_nanos() >= 1_000_000_000 {
        out.add(field, "leap seconds (:60) are not supported");
    }
}

fn check_schedule(out: &mut Problems, spec: &JobSpec, now: Timestamp) {
    let window = spec.window();
    for (field, t) in [("start_at", spec.start_at), ("end_at", spec.end_at)] {
        if let Some(t) = t {
            check_timestamp(out, field, t);
        }
    }
    if let (Some(start), Some(end)) = (spec.start_at, spec.end_at)
        && end <= start
    {
        out.add("end_at", "end_at must be after start_at");
    }
    if let Some(end) = spec.end_at
        && spec.schedule.is_recurring()
        && end < now
    {
        out.add("end_at", format!("end_at {} is already past", timestamp::format(&end)));
    }
    match &spec.schedule {
        Schedule::At(at) => {
            check_timestamp(out, "schedule.at", *at);
            if !window.contains(*at) {
                out.add(
                    "schedule.at",
                    "`at` lies outside start_at..end_at, so the job would never fire",
                );
            }
            if let Some(jitter) = spec.jitter
                && jitter > MAX_AT_JITTER
            {
                out.add("jitter", format!("jitter is {jitter}; at most 1h for an `at` schedule"));
            }
        }
        Schedule::Every { interval, anchor } => {
            if let Some(anchor) = anchor {
                check_timestamp(out, "schedule.anchor", *anchor);
            }
            if *interval < MIN_INTERVAL {
                out.add("schedule.every", format!("interval is {interval}; at least 1s"));
            } else if *interval > MAX_INTERVAL {
                out.add("schedule.every", format!("interval is {interval}; at most 10 years"));
            } else if let Some(jitter) = spec.jitter
                && jitter >= *interval
            {
                out.add(
                    "jitter",
                    format!("jitter {jitter} must be less than the interval {interval}"),
                );
            }
        }
        Schedule::After(after) => {
            out.0.extend(crate::dependency::problems(after, None));
            for (field, given) in [
                ("start_at", spec.start_at.is_some()),
                ("end_at", spec.end_at.is_some()),
                ("jitter", spec.jitter.is_some()),
            ] {
                if given {
                    out.add(
                        field,
                        format!("{field} does not apply to an `after` schedule: its runs come when its upstreams end"),
                    );
                }
            }
        }
        Schedule::Cron { expr, timezone } => {
            let cron = parse_cron(expr).map_err(|e| out.add("schedule.cron", e)).ok();
            let tz = parse_timezone(timezone)
                .map_err(|e| out.add("schedule.timezone", e))
                .ok();
            if cron.is_some() && tz.is_some() {
                let unbounded = FireWindow::default();
                if crate::schedule::next::first_fire(&spec.schedule, &spec.dst, &unbounded, now).is_none() {
                    out.add("schedule.cron", format!("{expr:?} never matches a date"));
                } else if let Some(jitter) = spec.jitter {
                    check_cron_jitter(out, spec, &window, now, jitter);
                }
            }
        }
    }
}

/// Jitter of a cron job must stay below the gap between its first two occurrences.
fn check_cron_jitter(out: &mut Problems, spec: &JobSpec, window: &FireWindow, now: Timestamp, jitter: Dur) {
    if let [first, second] = preview(&spec.schedule, &spec.dst, window, now, 2)[..] {
        let gap = Dur::millis(u64::try_from((second - first).num_milliseconds()).unwrap_or(0));
        if jitter >= gap {
            out.add(
                "jitter",
                format!("jitter {jitter} must be less than the {gap} between occurrences"),
            );
        }
    }
}

fn check_task(out: &mut Problems, task: &Task) {
    match task {
        Task::Command(c) => check_command(out, c),
        Task::Http(h) => check_http(out, h),
        Task::Container(c) => check_container(out, c),
    }
}

fn check_command(out: &mut Problems, c: &CommandTask) {
    match c.argv.first() {
        None => out.add("task.command.argv", "argv must name a program"),
        Some(program) if program.is_empty() => out.add("task.command.argv", "argv[0] (the program) is empty"),
        Some(_) => {}
    }
    if c.argv.iter().any(|a| a.contains('\0')) {
        out.add("task.command.argv", "argv must not contain NUL bytes");
    }
    check_env(out, "task.command.env", &c.env);
    if let Some(cwd) = &c.cwd
        && (cwd.is_empty() || !cwd.starts_with('/') || cwd.contains('\0'))
    {
        out.add("task.command.cwd", format!("cwd {cwd:?} must be an absolute path"));
    }
}

fn check_env(out: &mut Problems, field: &str, env: &Env) {
    if env.len() > MAX_ENV {
        out.add(field, format!("{} variables; at most {MAX_ENV}", env.len()));
    }
    for (name, value) in env {
        let Some(value) = value.value() else {
            out.add(
                field,
                format!("{name}: {{\"secret\": true}} keeps a secret the job already has, and it has none by that name; give {{\"secret\": \"<value>\"}}"),
            );
            continue;
        };
        if name.is_empty() || name.contains(['=', '\0']) {
            out.add(
                field,
                format!("variable name {name:?} must be non-empty, without '=' or NUL"),
            );
        }
        if value.contains('\0') {
            out.add(field, format!("value of {name:?} must not contain NUL bytes"));
        }
    }
}

fn check_http(out: &mut Problems, h: &HttpTask) {
    if let Err(e) = check_url(&h.url) {
        out.add("task.http.url", e);
    }
    if !HTTP_METHODS.contains(&h.method.as_str()) {
        out.add(
            "task.http.method",
            format!("method {:?}; use one of {}", h.method, HTTP_METHODS.join(" ")),
        );
    }
    for (name, value) in &h.headers {
        if !is_header_name(name) {
            out.add("task.http.headers", format!("{name:?} is not a valid header name"));
        }
        if value.contains(['\r', '\n', '\0']) {
            out.add(
                "task.http.headers",
                format!("value of header {name:?} must not contain CR, LF or NUL"),
            );
        }
    }
    if let Some(status) = h.expect_status
        && !(100..=599).contains(&status)
    {
        out.add(
            "task.http.expect_status",
            format!("expect_status is {status}; use 100..=599"),
        );
    }
}

/// An HTTP header name: one or more RFC 9110 token characters.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks that `url` is an absolute `http://` or `https://` URL with a host (and a valid port
/// if one is given).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("url {url:?} {why}; use an absolute http:// or https:// URL"));
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse("contains whitespace or control characters");
    }
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://")) else {
        return refuse("is not http:// or https://");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, after)) if !host.is_empty() => (host, after.strip_prefix(':')),
            _ => return refuse("has a malformed IPv6 host"),
        }
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return refuse("has no host");
    }
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err())
    {
        return refuse("has an invalid port");
    }
    Ok(())
}

fn check_container(out: &mut Problems, c: &ContainerTask) {
    if c.image.trim().is_empty() {
        out.add("task.container.image", "image must not be empty");
    }
    check_env(out, "task.container.env", &c.env);
}

fn check_backoff(out: &mut Problems, b: &Backoff) {
    if b.initial.is_zero() {
        out.add("backoff.initial", "backoff.initial must be more than 0");
    }
    if b.max < b.initial {
        out.add(
            "backoff.max",
            format!("backoff.max {} is less than backoff.initial {}", b.max, b.initial),
        );
    } else if b.max > MAX_BACKOFF {
        out.add("backoff.max", format!("backoff.max is {}; at most 30 days", b.max));
    }
    if !(b.factor.is_finite() && (1.0..=10.0).contains(&b.factor)) {
        out.add("backoff.factor", format!("backoff.factor is {}; use 1 to 10", b.factor));
    }
    if !(b.jitter.is_finite() && (0.0..=1.0).contains(&b.jitter)) {
        out.add("backoff.jitter", format!("backoff.jitter is {}; use 0 to 1", b.jitter));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::OnTimeout;
    use crate::schedule::DstPolicy;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        timestamp::parse(s).unwrap()
    }

    fn now() -> Timestamp {
        ts("2026-06-01T12:00:00Z")
    }

    fn spec(value: serde_json::Value) -> JobSpec {
        serde_json::from_value(value).unwrap()
    }

    /// A valid recurring command job.
    fn base() -> JobSpec {
        spec(json!({"schedule": {"every": "5m"}, "task": {"command": {"argv": ["echo", "hi"]}}}))
    }

    fn with_task(task: serde_json::Value) -> JobSpec {
        JobSpec {
            task: serde_json::from_value(task).unwrap(),
            ..base()
        }
    }

    fn with_schedule(schedule: serde_json::Value) -> JobSpec {
        JobSpec {
            schedule: serde_json::from_value(schedule).unwrap(),
            ..base()
        }
    }

    fn fields(spec: &JobSpec) -> Vec<String> {
        validate_spec(spec, now()).into_iter().map(|e| e.field).collect()
    }

    /// Asserts that `spec` has exactly one problem, with `field`.
    fn only(spec: &JobSpec, field: &str) {
        assert_eq!(fields(spec), [field], "{spec:?}");
    }

    fn valid(spec: &JobSpec) {
        assert_eq!(validate_spec(spec, now()), [], "{spec:?}");
    }

    #[test]
    fn given_defaults_when_validated_then_no_problem() {
        valid(&base());
        valid(&with_schedule(json!({"at": "2026-01-01T00:00:00Z"})));
        valid(&with_schedule(
            json!({"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}),
        ));
    }

    #[test]
    fn given_several_problems_when_validated_then_all_are_listed() {
        let mut s = with_schedule(json!({"cron": "bad", "timezone": "Nowhere/Land"}));
        s.priority = 12;
        s.max_retries = 1000;
        s.task = serde_json::from_value(json!({"http": {"url": "ftp://x", "method": "FETCH"}})).unwrap();
        assert_eq!(
            fields(&s),
            [
                "schedule.cron",
                "schedule.timezone",
                "task.http.url",
                "task.http.method",
                "priority",
                "max_retries"
            ]
        );
    }

    #[test]
    fn given_job_id_when_checked_then_field_is_id() {
        assert_eq!(validate_job_id("backup.nightly-1"), None);
        assert_eq!(validate_job_id("a b").unwrap().field, "id");
        assert!(validate_job_id("").is_some());
        assert!(validate_job_id(&"x".repeat(129)).is_some());
    }

    #[test]
    fn given_cron_that_never_matches_then_schedule_cron() {
        let spec = with_schedule(json!({"cron": "0 0 30 2 *"}));
        let problems = validate_spec(&spec, now());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "schedule.cron");
        assert!(problems[0].message.contains("never matches"));
    }

    #[test]
    fn given_cron_when_unparsable_then_schedule_cron_with_reason() {
        valid(&with_schedule(json!({"cron": "@midnight"})));
        valid(&with_schedule(json!({"cron": "*/5 * * * * *"})));
        let problems = validate_spec(&with_schedule(json!({"cron": "* * *"})), now());
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "schedule.cron");
        assert!(problems[0].message.contains("3 fields"), "{}", problems[0].message);
    }

    #[test]
    fn given_timezone_when_unknown_then_schedule_timezone() {
        only(
            &with_schedule(json!({"cron": "@daily", "timezone": "Europe/Atlantis"})),
            "schedule.timezone",
        );
    }

    /// Inputs the fuzzer (fuzz/findings) found: each was valid and then broke something.
    #[test]
    fn given_what_the_fuzzer_found_then_each_is_refused_naming_its_field() {
        // A 253,000-year interval overflowed the sweeper's arithmetic (a panic in planning).
        only(&with_schedule(json!({"every": "2217000000h"})), "schedule.every");
        valid(&with_schedule(json!({"every": "87600h"})));
        // An empty list element made the cron search walk to year 5000 (10 s of CPU).
        for expr in [", * * * * *", "1,,2 * * * *", "5, * * * *"] {
            only(&with_schedule(json!({"cron": expr})), "schedule.cron");
        }
        // Past 2262 the cron search cannot work; a leap second reads back as another instant.
        only(&with_schedule(json!({"at": "2201-01-01T00:00:00Z"})), "schedule.at");
        only(&with_schedule(json!({"at": "2026-12-31T23:59:60.500Z"})), "schedule.at");
        // A retry delay beyond the arithmetic's range waited 0 ms.
        let mut s = with_schedule(json!({"every": "1h"}));
        s.backoff.max = Dur::secs(31 * 24 * 3600);
        only(&s, "backoff.max");
    }

    #[test]
    fn given_an_instant_finer_than_a_millisecond_then_it_is_stored_to_the_millisecond() {
        let s = with_schedule(json!({"at": "2026-12-01T10:00:00.0001Z"}));
        valid(&s);
        let now = timestamp::parse("2026-12-01T09:00:00Z").unwrap();
        let normalised = s.normalised(now);
        assert_eq!(
            normalised.schedule,
            Schedule::At(timestamp::parse("2026-12-01T10:00:00Z").unwrap())
        );
        // The same request normalised twice is the same job (a repeated create matches).
        assert_eq!(normalised.clone().normalised(now), normalised);
    }

    #[test]
    fn given_every_when_below_one_second_then_schedule_every() {
        valid(&with_schedule(json!({"every": "1s"})));
        only(&with_schedule(json!({"every": "500ms"})), "schedule.every");
        only(&with_schedule(json!({"every": 0})), "schedule.every");
    }

    #[test]
    fn given_anchor_when_absurd_then_schedule_anchor() {
        valid(&with_schedule(json!({"every": "1m", "anchor": "2020-01-01T00:00:00Z"})));
        valid(&with_schedule(json!({"every": "1m", "anchor": "2030-01-01T00:00:00Z"})));
        only(
            &with_schedule(json!({"every": "1m", "anchor": "0001-01-01T00:00:00Z"})),
            "schedule.anchor",
        );
    }

    #[test]
    fn given_window_when_end_not_after_start_then_end_at() {
        let mut s = base();
        s.start_at = Some(ts("2026-07-01T00:00:00Z"));
        s.end_at = Some(ts("2026-08-01T00:00:00Z"));
        valid(&s);
        s.end_at = s.start_at;
        only(&s, "end_at");
        s.end_at = Some(ts("2026-06-15T00:00:00Z"));
        only(&s, "end_at");
    }

    #[test]
    fn given_end_at_in_the_past_when_recurring_then_end_at_but_not_for_at() {
        let mut s = base();
        s.end_at = Some(ts("2026-05-01T00:00:00Z"));
        only(&s, "end_at");
        let mut at = with_schedule(json!({"at": "2026-04-01T00:00:00Z"}));
        at.end_at = Some(ts("2026-05-01T00:00:00Z"));
        valid(&at);
    }

    #[test]
    fn given_at_when_outside_window_then_schedule_at() {
        let mut s = with_schedule(json!({"at": "2026-04-01T00:00:00Z"}));
        s.start_at = Some(ts("2026-05-01T00:00:00Z"));
        only(&s, "schedule.at");
    }

    #[test]
    fn given_start_at_when_absurd_year_then_start_at() {
        let mut s = base();
        s.start_at = Some(ts("1900-01-01T00:00:00Z"));
        only(&s, "start_at");
    }

    #[test]
    fn given_jitter_on_every_when_not_below_interval_then_jitter() {
        let mut s = base();
        s.jitter = Some(Dur::secs(299));
        valid(&s);
        s.jitter = Some(Dur::secs(300));
        only(&s, "jitter");
    }

    #[test]
    fn given_jitter_on_cron_when_not_below_gap_then_jitter() {
        let mut s = with_schedule(json!({"cron": "0 * * * *", "timezone": "Europe/Berlin"}));
        s.jitter = Some(Dur::secs(30 * 60));
        valid(&s);
        s.jitter = Some(Dur::secs(3600));
        only(&s, "jitter");
    }

    #[test]
    fn given_jitter_on_at_when_over_an_hour_then_jitter() {
        let mut s = with_schedule(json!({"at": "2026-12-01T09:00:00Z"}));
        s.jitter = Some(Dur::secs(3600));
        valid(&s);
        s.jitter = Some(Dur::secs(3601));
        only(&s, "jitter");
    }

    #[test]
    fn given_dst_policy_when_not_cron_then_no_problem() {
        let mut s = base();
        s.dst = serde_json::from_value::<DstPolicy>(json!({"gap": "skip", "repeat": "twice"})).unwrap();
        valid(&s);
    }

    #[test]
    fn given_argv_when_empty_or_with_nul_then_task_command_argv() {
        only(&with_task(json!({"command": {"argv": []}})), "task.command.argv");
        only(&with_task(json!({"command": {"argv": [""]}})), "task.command.argv");
        only(
            &with_task(json!({"command": {"argv": ["echo", "a\u{0}b"]}})),
            "task.command.argv",
        );
    }

    #[test]
    fn given_a_secret_to_keep_when_there_is_none_then_task_command_env() {
        valid(&with_task(
            json!({"command": {"argv": ["true"], "env": {"T": {"secret": "v"}}}}),
        ));
        only(
            &with_task(json!({"command": {"argv": ["true"], "env": {"T": {"secret": true}}}})),
            "task.command.env",
        );
    }

    #[test]
    fn given_command_env_when_too_many_or_bad_names_then_task_command_env() {
        let env: BTreeMap<String, String> = (0..MAX_ENV).map(|i| (format!("V{i}"), "x".into())).collect();
        valid(&with_task(json!({"command": {"argv": ["true"], "env": env}})));
        let too_many: BTreeMap<String, String> = (0..=MAX_ENV).map(|i| (format!("V{i}"), "x".into())).collect();
        only(
            &with_task(json!({"command": {"argv": ["true"], "env": too_many}})),
            "task.command.env",
        );
        only(
            &with_task(json!({"command": {"argv": ["true"], "env": {"A=B": "x"}}})),
            "task.command.env",
        );
        only(
            &with_task(json!({"command": {"argv": ["true"], "env": {"": "x"}}})),
            "task.command.env",
        );
    }

    #[test]
    fn given_cwd_when_relative_or_empty_then_task_command_cwd() {
        valid(&with_task(json!({"command": {"argv": ["true"], "cwd": "/tmp"}})));
        only(
            &with_task(json!({"command": {"argv": ["true"], "cwd": "tmp"}})),
            "task.command.cwd",
        );
        only(
            &with_task(json!({"command": {"argv": ["true"], "cwd": ""}})),
            "task.command.cwd",
        );
    }

    #[test]
    fn given_http_url_when_not_absolute_http_then_task_http_url() {
        for ok in [
            "http://example.com",
            "https://example.com:8443/a?b#c",
            "http://user:pw@10.0.0.1/x",
            "http://[::1]:80/",
        ] {
            valid(&with_task(json!({"http": {"url": ok}})));
        }
        for bad in [
            "example.com",
            "/path",
            "ftp://example.com",
            "http://",
            "http:///x",
            "http://a b",
            "http://h:99999",
            "http://h:x",
        ] {
            only(&with_task(json!({"http": {"url": bad}})), "task.http.url");
        }
    }

    #[test]
    fn given_http_method_when_unknown_then_task_http_method() {
        for ok in HTTP_METHODS {
            valid(&with_task(json!({"http": {"url": "https://x.test", "method": ok}})));
        }
        only(
            &with_task(json!({"http": {"url": "https://x.test", "method": "get"}})),
            "task.http.method",
        );
        only(
            &with_task(json!({"http": {"url": "https://x.test", "method": "TRACE"}})),
            "task.http.method",
        );
    }

    #[test]
    fn given_http_headers_when_invalid_name_or_value_then_task_http_headers() {
        valid(&with_task(
            json!({"http": {"url": "https://x.test", "headers": {"X-Api-Key": "k"}}}),
        ));
        only(
            &with_task(json!({"http": {"url": "https://x.test", "headers": {"Bad Header": "k"}}})),
            "task.http.headers",
        );
        only(
            &with_task(json!({"http": {"url": "https://x.test", "headers": {"X": "a\r\nb"}}})),
            "task.http.headers",
        );
    }

    #[test]
    fn given_expect_status_when_out_of_range_then_task_http_expect_status() {
        valid(&with_task(
            json!({"http": {"url": "https://x.test", "expect_status": 204}}),
        ));
        only(
            &with_task(json!({"http": {"url": "https://x.test", "expect_status": 99}})),
            "task.http.expect_status",
        );
        only(
            &with_task(json!({"http": {"url": "https://x.test", "expect_status": 600}})),
            "task.http.expect_status",
        );
    }

    #[test]
    fn given_container_when_image_empty_or_env_too_big_then_named_field() {
        valid(&with_task(json!({"container": {"image": "alpine:3"}})));
        only(&with_task(json!({"container": {"image": " "}})), "task.container.image");
        let too_many: BTreeMap<String, String> = (0..=MAX_ENV).map(|i| (format!("V{i}"), "x".into())).collect();
        only(
            &with_task(json!({"container": {"image": "alpine", "env": too_many}})),
            "task.container.env",
        );
    }

    #[test]
    fn given_priority_when_over_nine_then_priority() {
        let mut s = base();
        s.priority = 9;
        valid(&s);
        s.priority = 10;
        only(&s, "priority");
    }

    #[test]
    fn given_max_retries_when_over_a_hundred_then_max_retries() {
        let mut s = base();
        s.max_retries = 100;
        valid(&s);
        s.max_retries = 101;
        only(&s, "max_retries");
    }

    #[test]
    fn given_backoff_when_out_of_range_then_each_backoff_field() {
        let mut s = base();
        s.backoff = Backoff {
            initial: Dur::ZERO,
            ..Backoff::default()
        };
        only(&s, "backoff.initial");
        s.backoff = Backoff {
            initial: Dur::secs(60),
            max: Dur::secs(30),
            ..Backoff::default()
        };
        only(&s, "backoff.max");
        for factor in [0.5, 11.0, f64::NAN, f64::INFINITY] {
            s.backoff = Backoff {
                factor,
                ..Backoff::default()
            };
            only(&s, "backoff.factor");
        }
        for jitter in [-0.1, 1.5, f64::NAN] {
            s.backoff = Backoff {
                jitter,
                ..Backoff::default()
            };
            only(&s, "backoff.jitter");
        }
        s.backoff = Backoff {
            factor: 1.0,
            jitter: 1.0,
            ..Backoff::default()
        };
        valid(&s);
    }

    #[test]
    fn given_timeout_when_outside_one_second_to_seven_days_then_timeout() {
        let mut s = base();
        for ok in [Dur::secs(1), MAX_TIMEOUT] {
            s.timeout = ok;
            valid(&s);
        }
        for bad in [Dur::millis(999), Dur::secs(7 * 24 * 3600 + 1)] {
            s.timeout = bad;
            only(&s, "timeout");
        }
    }

    #[test]
    fn given_on_timeout_run_job_when_id_invalid_then_on_timeout_run_job() {
        let mut s = base();
        s.on_timeout = OnTimeout::RunJob("cleanup.job".into());
        valid(&s);
        s.on_timeout = OnTimeout::RunJob("not valid@id".into());
        only(&s, "on_timeout.run_job");
    }

    #[test]
    fn given_labels_when_too_many_or_bad_keys_or_long_values_then_labels() {
        let mut s = base();
        s.labels = (0..MAX_LABELS)
            .map(|i| (format!("team/k.{i}-x_y"), "v".into()))
            .collect();
        valid(&s);
        s.labels = (0..=MAX_LABELS).map(|i| (format!("k{i}"), "v".into())).collect();
        only(&s, "labels");
        for bad_key in ["", "has space", &"k".repeat(64)] {
            s.labels = BTreeMap::from([(bad_key.to_string(), "v".to_string())]);
            only(&s, "labels");
        }
        s.labels = BTreeMap::from([("k".to_string(), "v".repeat(257))]);
        only(&s, "labels");
    }

    #[test]
    fn given_name_when_over_256_chars_then_name() {
        let mut s = base();
        s.name = Some("é".repeat(256));
        valid(&s);
        s.name = Some("n".repeat(257));
        only(&s, "name");
    }
}
