//! Validation of a job definition: every field is checked before anything is written, and
//! each problem names its field (`schedule.cron`, `task.http.url`, `priority`, …).
//!
//! The checks are pure: they read the spec and `now`, and list *every* problem rather than
//! stopping at the first. What the deployment can run (container tasks) is not checked here;
//! the service adds that from its [`Capabilities`].

use crate::duration::Dur;
use crate::error::FieldError;
use crate::ids;
use crate::job::{Backoff, JobSpec, OnTimeout};
use crate::schedule::cron::{parse_cron, parse_timezone};
use crate::schedule::{FireWindow, Schedule, preview};
use crate::task::{CommandTask, ContainerTask, HttpTask, Task};
use crate::timestamp::{self, Timestamp};
use chrono::Datelike;
use std::collections::BTreeMap;

/// Limits from SPEC §5.
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
/// Timestamps outside these years are refused (they are typos, and stores keep epoch millis).
const YEARS: std::ops::RangeInclusive<i32> = 1970..=9999;

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
        out.add("priority", format!("priority is {}; use 0..=9 (9 highest)", spec.priority));
    }
    if spec.max_retries > MAX_RETRIES {
        out.add("max_retries", format!("max_retries is {}; at most {MAX_RETRIES}", spec.max_retries));
    }
    check_backoff(&mut out, &spec.backoff);
    if spec.timeout < MIN_INTERVAL || spec.timeout > MAX_TIMEOUT {
        out.add("timeout", format!("timeout is {}; use 1s to 7d", spec.timeout));
    }
    if let OnTimeout::RunJob(id) = &spec.on_timeout {
        if !ids::is_valid_id(id.as_str()) {
            out.add("on_timeout.run_job", format!("{:?} is not a job id ([A-Za-z0-9_.-]{{1,128}})", id.as_str()));
        }
    }
    out.0
}

/// The problem with a caller-given job id, if any (field `id`).
pub fn validate_job_id(id: &str) -> Option<FieldError> {
    (!ids::is_valid_id(id)).then(|| {
        FieldError::new("id", format!("{id:?} is not a valid job id: use 1 to 128 of A-Z a-z 0-9 _ . -"))
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
    if let Some(name) = name {
        if name.chars().count() > MAX_NAME {
            out.add("name", format!("name is longer than {MAX_NAME} characters"));
        }
    }
}

fn check_labels(out: &mut Problems, labels: &BTreeMap<String, String>) {
    if labels.len() > MAX_LABELS {
        out.add("labels", format!("{} labels; at most {MAX_LABELS}", labels.len()));
    }
    for (key, value) in labels {
        let key_ok = (1..=MAX_LABEL_KEY).contains(&key.chars().count())
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'));
        if !key_ok {
            out.add("labels", format!("label key {key:?} must be 1 to {MAX_LABEL_KEY} of A-Z a-z 0-9 _ . - /"));
        }
        if value.chars().count() > MAX_LABEL_VALUE {
            out.add("labels", format!("value of label {key:?} is longer than {MAX_LABEL_VALUE} characters"));
        }
    }
}

/// A timestamp field outside [`YEARS`].
fn check_timestamp(out: &mut Problems, field: &str, t: Timestamp) {
    if !YEARS.contains(&t.year()) {
        out.add(field, format!("{} is outside the years 1970 to 9999", timestamp::format(&t)));
    }
}

fn check_schedule(out: &mut Problems, spec: &JobSpec, now: Timestamp) {
    let window = spec.window();
    for (field, t) in [("start_at", spec.start_at), ("end_at", spec.end_at)] {
        if let Some(t) = t {
            check_timestamp(out, field, t);
        }
    }
    if let (Some(start), Some(end)) = (spec.start_at, spec.end_at) {
        if end <= start {
            out.add("end_at", "end_at must be after start_at");
        }
    }
    if let Some(end) = spec.end_at {
        if spec.schedule.is_recurring() && end < now {
            out.add("end_at", format!("end_at {} is already past", timestamp::format(&end)));
        }
    }
    match &spec.schedule {
        Schedule::At(at) => {
            check_timestamp(out, "schedule.at", *at);
            if !window.contains(*at) {
                out.add("schedule.at", "`at` lies outside start_at..end_at, so the job would never fire");
            }
            if let Some(jitter) = spec.jitter {
                if jitter > MAX_AT_JITTER {
                    out.add("jitter", format!("jitter is {jitter}; at most 1h for an `at` schedule"));
                }
            }
        }
        Schedule::Every { interval, anchor } => {
            if let Some(anchor) = anchor {
                check_timestamp(out, "schedule.anchor", *anchor);
            }
            if *interval < MIN_INTERVAL {
                out.add("schedule.every", format!("interval is {interval}; at least 1s"));
            } else if let Some(jitter) = spec.jitter {
                if jitter >= *interval {
                    out.add("jitter", format!("jitter {jitter} must be less than the interval {interval}"));
                }
            }
        }
        Schedule::Cron { expr, timezone } => {
            let cron = parse_cron(expr).map_err(|e| out.add("schedule.cron", e)).ok();
            let tz = parse_timezone(timezone).map_err(|e| out.add("schedule.timezone", e)).ok();
            if let (Some(_), Some(_), Some(jitter)) = (cron, tz, spec.jitter) {
                check_cron_jitter(out, spec, &window, now, jitter);
            }
        }
    }
}

/// Jitter of a cron job must stay below the gap between its first two occurrences.
fn check_cron_jitter(out: &mut Problems, spec: &JobSpec, window: &FireWindow, now: Timestamp, jitter: Dur) {
    if let [first, second] = preview(&spec.schedule, &spec.dst, window, now, 2)[..] {
        let gap = Dur::millis(u64::try_from((second - first).num_milliseconds()).unwrap_or(0));
        if jitter >= gap {
            out.add("jitter", format!("jitter {jitter} must be less than the {gap} between occurrences"));
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
    if let Some(cwd) = &c.cwd {
        if cwd.is_empty() || !cwd.starts_with('/') || cwd.contains('\0') {
            out.add("task.command.cwd", format!("cwd {cwd:?} must be an absolute path"));
        }
    }
}

fn check_env(out: &mut Problems, field: &str, env: &BTreeMap<String, String>) {
    if env.len() > MAX_ENV {
        out.add(field, format!("{} variables; at most {MAX_ENV}", env.len()));
    }
    for (name, value) in env {
        if name.is_empty() || name.contains(['=', '\0']) {
            out.add(field, format!("variable name {name:?} must be non-empty, without '=' or NUL"));
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
        out.add("task.http.method", format!("method {:?}; use one of {}", h.method, HTTP_METHODS.join(" ")));
    }
    for (name, value) in &h.headers {
        if !is_header_name(name) {
            out.add("task.http.headers", format!("{name:?} is not a valid header name"));
        }
        if value.contains(['\r', '\n', '\0']) {
            out.add("task.http.headers", format!("value of header {name:?} must not contain CR, LF or NUL"));
        }
    }
    if let Some(status) = h.expect_status {
        if !(100..=599).contains(&status) {
            out.add("task.http.expect_status", format!("expect_status is {status}; use 100..=599"));
        }
    }
}

/// An HTTP header name: one or more RFC 9110 token characters.
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks that `url` is an absolute `http://` or `https://` URL with a host (and a valid port
/// if one is given).
fn check_url(url: &str) -> Result<(), String> {
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
    if let Some(port) = port {
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err() {
            return refuse("has an invalid port");
        }
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
        out.add("backoff.max", format!("backoff.max {} is less than backoff.initial {}", b.max, b.initial));
    }
    if !(b.factor.is_finite() && (1.0..=10.0).contains(&b.factor)) {
        out.add("backoff.factor", format!("backoff.factor is {}; use 1 to 10", b.factor));
    }
    if !(b.jitter.is_finite() && (0.0..=1.0).contains(&b.jitter)) {
        out.add("backoff.jitter", format!("backoff.jitter is {}; use 0 to 1", b.jitter));
    }
}
