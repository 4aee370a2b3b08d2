//! How client commands print: aligned tables and `key  value` blocks for people, or the
//! API's JSON as received with `--json`.
//!
//! Printers read the API's JSON ([`serde_json::Value`]) by field name and show `-` for
//! anything absent, so a newer server with more fields never breaks an older CLI.

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::fmt::Write as _;

/// A table of text cells, printed with left-aligned columns two spaces apart.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row (trailing spaces trimmed).
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// Prints the table on stdout.
    pub fn print(&self) {
        print!("{}", self.render());
    }
}

/// A JSON value as a table cell: strings bare, `null`/absent as `-`.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// `v[key]` as a cell.
pub fn get(v: &Value, key: &str) -> String {
    cell(v.get(key))
}

/// An RFC 3339 timestamp field, parsed.
pub fn time(v: &Value, key: &str) -> Option<DateTime<Utc>> {
    v.get(key)
        .and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// A signed duration for people: `12ms`, `1.250s`, `-3ms`.
pub fn millis(ms: i64) -> String {
    if ms.abs() < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.3}s", ms as f64 / 1000.0)
    }
}

/// A run's start lag (first `started_at` − `scheduled_for`), if it has started.
pub fn start_lag_ms(run: &Value) -> Option<i64> {
    Some((time(run, "started_at")? - time(run, "scheduled_for")?).num_milliseconds())
}

/// One line saying when a job fires: `cron "0 9 * * *" Europe/Berlin`, `every 5m`, `at …`.
pub fn schedule_summary(job: &Value) -> String {
    let Some(s) = job.get("schedule") else {
        return "-".into();
    };
    if let Some(expr) = s.get("cron").and_then(Value::as_str) {
        let tz = s.get("timezone").and_then(Value::as_str).unwrap_or("UTC");
        return format!("cron \"{expr}\" {tz}");
    }
    if let Some(every) = s.get("every") {
        return format!("every {}", cell(Some(every)));
    }
    if let Some(at) = s.get("at") {
        return format!("at {}", cell(Some(at)));
    }
    cell(Some(s))
}

/// One line saying what a job runs: the argv, the HTTP call, or the image.
pub fn task_summary(job: &Value) -> String {
    let Some(task) = job.get("task") else { return "-".into() };
    if let Some(argv) = task.pointer("/command/argv").and_then(Value::as_array) {
        return argv
            .iter()
            .map(|a| shell_word(&cell(Some(a))))
            .collect::<Vec<_>>()
            .join(" ");
    }
    if let Some(http) = task.get("http") {
        return format!(
            "{} {}",
            http.get("method").and_then(Value::as_str).unwrap_or("GET"),
            get(http, "url")
        );
    }
    if let Some(c) = task.get("container") {
        return format!("container {}", get(c, "image"));
    }
    cell(Some(task))
}

/// A word as a shell would need it written: bare if it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Prints jobs as a table.
pub fn print_jobs(jobs: &[Value]) {
    let mut t = Table::new(&["ID", "STATE", "NEXT FIRE", "SCHEDULE", "PRI", "TASK"]);
    for j in jobs {
        t.row(vec![
            get(j, "id"),
            get(j, "state"),
            get(j, "next_fire_at"),
            schedule_summary(j),
            get(j, "priority"),
            task_summary(j),
        ]);
    }
    t.print();
}

/// Prints one job as `key  value` lines.
pub fn print_job(job: &Value) {
    let mut t = Table::default();
    for key in [
        "id",
        "name",
        "state",
        "next_fire_at",
        "version",
        "created_at",
        "updated_at",
    ] {
        if job.get(key).is_some_and(|v| !v.is_null()) {
            t.row(vec![key.into(), get(job, key)]);
        }
    }
    t.row(vec!["schedule".into(), schedule_summary(job)]);
    t.row(vec!["task".into(), task_summary(job)]);
    for key in [
        "priority",
        "max_retries",
        "timeout",
        "on_timeout",
        "overlap",
        "misfire",
        "jitter",
        "start_at",
        "end_at",
    ] {
        if job.get(key).is_some_and(|v| !v.is_null()) {
            t.row(vec![key.into(), get(job, key)]);
        }
    }
    if let Some(labels) = job.get("labels").and_then(Value::as_object).filter(|l| !l.is_empty()) {
        let text = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", cell(Some(v))))
            .collect::<Vec<_>>()
            .join(",");
        t.row(vec!["labels".into(), text]);
    }
    t.print();
}

/// The last attempt's exit code or HTTP status, as a cell.
fn last_exit(run: &Value) -> String {
    let Some(last) = run.get("attempts").and_then(Value::as_array).and_then(|a| a.last()) else {
        return "-".into();
    };
    match (
        last.get("exit_code").filter(|v| !v.is_null()),
        last.get("http_status").filter(|v| !v.is_null()),
    ) {
        (Some(code), _) => cell(Some(code)),
        (None, Some(status)) => format!("http {}", cell(Some(status))),
        (None, None) => last.get("outcome").map(|o| cell(Some(o))).unwrap_or_else(|| "-".into()),
    }
}

/// Prints runs as a table.
pub fn print_runs(runs: &[Value]) {
    let mut t = Table::new(&[
        "RUN ID",
        "STATE",
        "SCHEDULED FOR",
        "STARTED",
        "LAG",
        "ATTEMPTS",
        "LAST EXIT",
    ]);
    for r in runs {
        let attempts = r.get("attempts").and_then(Value::as_array).map_or(0, Vec::len);
        t.row(vec![
            get(r, "run_id"),
            get(r, "state"),
            get(r, "scheduled_for"),
            get(r, "started_at"),
            start_lag_ms(r).map_or_else(|| "-".into(), millis),
            attempts.to_string(),
            last_exit(r),
        ]);
    }
    t.print();
}

/// Prints one run: its fields, the start lag, then its attempts as a table.
pub fn print_run(run: &Value) {
    let mut t = Table::default();
    for key in [
        "run_id",
        "job_id",
        "state",
        "scheduled_for",
        "created_at",
        "started_at",
        "finished_at",
        "reason",
    ] {
        if key == "reason" && run.get(key).is_none_or(Value::is_null) {
            continue;
        }
        t.row(vec![key.into(), get(run, key)]);
    }
    if let Some(lag) = start_lag_ms(run) {
        t.row(vec!["start_lag".into(), millis(lag)]);
    }
    t.print();
    let attempts = run
        .get("attempts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if attempts.is_empty() {
        return;
    }
    println!();
    let mut t = Table::new(&[
        "ATTEMPT",
        "WORKER",
        "STARTED",
        "FINISHED",
        "OUTCOME",
        "EXIT",
        "HTTP",
        "LOG BYTES",
        "ERROR",
    ]);
    for a in &attempts {
        t.row(vec![
            get(a, "attempt"),
            get(a, "worker"),
            get(a, "started_at"),
            get(a, "finished_at"),
            get(a, "outcome"),
            get(a, "exit_code"),
            get(a, "http_status"),
            get(a, "log_bytes"),
            get(a, "error"),
        ]);
    }
    t.print();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(&["ID", "STATE"]);
        t.row(vec!["a-long-id".into(), "ACTIVE".into()]);
        t.row(vec!["b".into(), "-".into()]);
        assert_eq!(t.render(), "ID         STATE\na-long-id  ACTIVE\nb          -\n");
    }

    #[test]
    fn summaries_read_the_wire_shapes() {
        let job = json!({"schedule": {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"},
                         "task": {"command": {"argv": ["echo", "hi"]}}});
        assert_eq!(schedule_summary(&job), "cron \"0 9 * * MON-FRI\" Europe/Berlin");
        assert_eq!(task_summary(&job), "echo hi");
        let job = json!({"task": {"command": {"argv": ["sh", "-c", "echo it's; true"]}}});
        assert_eq!(task_summary(&job), r#"sh -c 'echo it'\''s; true'"#);
        let job = json!({"schedule": {"every": "5m"}, "task": {"http": {"url": "http://x/"}}});
        assert_eq!(schedule_summary(&job), "every 5m");
        assert_eq!(task_summary(&job), "GET http://x/");
    }

    #[test]
    fn start_lag_is_started_minus_scheduled() {
        let run = json!({"scheduled_for": "2026-01-01T00:00:00.000Z", "started_at": "2026-01-01T00:00:01.250Z"});
        assert_eq!(start_lag_ms(&run), Some(1250));
        assert_eq!(millis(1250), "1.250s");
        assert_eq!(millis(12), "12ms");
        assert_eq!(
            start_lag_ms(&json!({"scheduled_for": "2026-01-01T00:00:00.000Z", "started_at": null})),
            None
        );
    }
}
