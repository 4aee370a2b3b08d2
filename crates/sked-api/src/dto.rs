//! Response views: how jobs, runs, attempts, log lines and pages are written on the wire
//! (the shapes clients rely on, documented in the README and the OpenAPI document).
//! Timestamps are RFC 3339 UTC with milliseconds; absent values are `null`.
//!
//! Views only borrow and reshape core types; they decide nothing. Each also describes itself
//! to the OpenAPI document (`ToSchema`), so the document and the wire cannot drift.

use serde::Serialize;
use sked_core::job::{Job, JobSpec};
use sked_core::ports::{LogLine, LogPage, Page};
use sked_core::run::{Attempt, AttemptOutcome, Run, RunState, Trigger};
use sked_core::secret;
use sked_core::timestamp::{self, Timestamp};
use std::borrow::Cow;
use utoipa::ToSchema;

fn ts(t: &Timestamp) -> String {
    timestamp::format(t)
}

fn ts_opt(t: &Option<Timestamp>) -> Option<String> {
    t.as_ref().map(timestamp::format)
}

/// `spec` as the API shows it: borrowed as is, or (only when it holds secrets) a copy whose
/// secrets read `{"secret": true}`.
fn shown_spec(spec: &JobSpec) -> Cow<'_, JobSpec> {
    match spec.task.env() {
        Some(env) if secret::has_secrets(env) => {
            let mut shown = spec.clone();
            if let Some(env) = shown.task.env_mut() {
                *env = secret::redacted(env);
            }
            Cow::Owned(shown)
        }
        _ => Cow::Borrowed(spec),
    }
}

/// A job: its normalised definition plus identity and lifecycle.
#[derive(Debug, Serialize)]
pub struct JobView<'a> {
    /// Job id.
    pub id: &'a str,
    /// The normalised definition, its fields inline; secrets as `{"secret": true}`.
    #[serde(flatten)]
    pub spec: Cow<'a, JobSpec>,
    /// `ACTIVE`, `PAUSED`, `COMPLETED` or `DELETED`.
    pub state: &'static str,
    /// The next nominal fire time.
    pub next_fire_at: Option<String>,
    /// Optimistic-lock version (`If-Match`).
    pub version: u64,
    /// Creation time.
    pub created_at: String,
    /// Last change by a user.
    pub updated_at: String,
}

/// Built from [`JobSpec`]'s schema (see [`crate::openapi::job_view`]): one list of fields.
impl utoipa::PartialSchema for JobView<'_> {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::openapi::job_view()
    }
}

impl ToSchema for JobView<'_> {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Job")
    }

    fn schemas(out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        crate::openapi::job_spec_components(out);
        out.push((
            "JobState".into(),
            <sked_core::job::JobState as utoipa::PartialSchema>::schema(),
        ));
    }
}

impl<'a> From<&'a Job> for JobView<'a> {
    fn from(job: &'a Job) -> Self {
        JobView {
            id: job.id.as_str(),
            spec: shown_spec(&job.spec),
            state: job.state.as_str(),
            next_fire_at: ts_opt(&job.next_fire_at),
            version: job.version,
            created_at: ts(&job.created_at),
            updated_at: ts(&job.updated_at),
        }
    }
}

/// One attempt of a run.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Attempt)]
pub struct AttemptView<'a> {
    /// 1-based attempt number.
    #[schema(minimum = 1)]
    pub attempt: u32,
    /// Worker that ran it.
    pub worker: &'a str,
    /// When it was claimed.
    #[schema(format = DateTime)]
    pub started_at: String,
    /// When it ended.
    #[schema(format = DateTime, required = true)]
    pub finished_at: Option<String>,
    /// `succeeded`, `failed`, `timed_out`, `cancelled`, `worker_lost`; `null` while running.
    #[schema(value_type = Option<AttemptOutcome>, required = true)]
    pub outcome: Option<&'static str>,
    /// Process exit code.
    #[schema(required = true)]
    pub exit_code: Option<i32>,
    /// HTTP response status.
    #[schema(required = true)]
    pub http_status: Option<u16>,
    /// What went wrong.
    #[schema(required = true)]
    pub error: Option<&'a str>,
    /// Bytes of log captured.
    pub log_bytes: u64,
    /// Whether the log hit its cap.
    pub log_truncated: bool,
}

impl<'a> From<&'a Attempt> for AttemptView<'a> {
    fn from(a: &'a Attempt) -> Self {
        AttemptView {
            attempt: a.attempt,
            worker: a.worker.as_str(),
            started_at: ts(&a.started_at),
            finished_at: ts_opt(&a.finished_at),
            outcome: a.outcome.map(|o| o.as_str()),
            exit_code: a.exit_code,
            http_status: a.http_status,
            error: a.error.as_deref(),
            log_bytes: a.log_bytes,
            log_truncated: a.log_truncated,
        }
    }
}

/// One run (firing) of a job with its attempts, oldest first.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Run)]
pub struct RunView<'a> {
    /// Run id: `<job id>@<nominal time as yyyymmddTHHMMSS.mmmZ>`.
    pub run_id: &'a str,
    /// Its job.
    pub job_id: &'a str,
    /// Nominal time.
    #[schema(format = DateTime)]
    pub scheduled_for: String,
    /// `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT`, `CANCELLED`.
    #[schema(value_type = RunState)]
    pub state: &'static str,
    /// `schedule`, `manual` or `handler`.
    #[schema(value_type = Trigger)]
    pub trigger: &'static str,
    /// 0..=9.
    #[schema(maximum = 9)]
    pub priority: u8,
    /// When the run was written.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// First attempt's start.
    #[schema(format = DateTime, required = true)]
    pub started_at: Option<String>,
    /// When it ended.
    #[schema(format = DateTime, required = true)]
    pub finished_at: Option<String>,
    /// Not claimed before this (jitter, backoff).
    #[schema(format = DateTime)]
    pub not_before: String,
    /// Why it ended, when not obvious from the last attempt.
    #[schema(required = true)]
    pub reason: Option<&'a str>,
    /// A cancel was asked for while running.
    pub cancel_requested: bool,
    /// The concurrency key the run counts against and its limit, copied from its job when
    /// the run was created (a change of the job reaches a run not yet started); `null` for
    /// none.
    #[schema(required = true, value_type = Option<sked_core::concurrency::Concurrency>)]
    pub concurrency: Option<&'a sked_core::concurrency::Concurrency>,
    /// Attempts, oldest first.
    pub attempts: Vec<AttemptView<'a>>,
    /// Its failure alert: the job's `notify` copied when the run was created (a change of
    /// the job reaches a run not yet started), where its delivery stands and every try;
    /// `null` when the job had no `notify`.
    #[schema(required = true)]
    pub alert: Option<AlertView<'a>>,
}

/// A run's failure alert.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RunAlert)]
pub struct AlertView<'a> {
    /// The job's `notify` when the run was created, or when it last changed before the run
    /// started.
    #[schema(value_type = sked_core::alert::Notify)]
    pub notify: &'a sked_core::alert::Notify,
    /// `idle` (the run has not ended as `notify.on` asks), `pending`, `delivered`, `gave_up`.
    #[schema(value_type = sked_core::alert::AlertState)]
    pub state: &'static str,
    /// The end it was posted for (`failed`, …), once the run ended as `on` asks.
    #[schema(required = true, value_type = Option<sked_core::alert::AlertOn>)]
    pub event: Option<&'static str>,
    /// When the next try is due, while pending.
    #[schema(format = DateTime, required = true)]
    pub next_try_at: Option<String>,
    /// Every try, oldest first: when, and the receiver's status or why there was none.
    #[schema(value_type = Vec<sked_core::alert::Delivery>)]
    pub deliveries: &'a [sked_core::alert::Delivery],
}

impl<'a> From<&'a sked_core::alert::Alert> for AlertView<'a> {
    fn from(a: &'a sked_core::alert::Alert) -> Self {
        AlertView {
            notify: &a.notify,
            state: a.state.as_str(),
            event: a.event.map(|e| e.as_str()),
            next_try_at: ts_opt(&a.due),
            deliveries: &a.deliveries,
        }
    }
}

impl<'a> From<&'a Run> for RunView<'a> {
    fn from(r: &'a Run) -> Self {
        RunView {
            run_id: r.run_id.as_str(),
            job_id: r.job_id.as_str(),
            scheduled_for: ts(&r.scheduled_for),
            state: r.state.as_str(),
            trigger: r.trigger.as_str(),
            priority: r.priority,
            created_at: ts(&r.created_at),
            started_at: ts_opt(&r.started_at),
            finished_at: ts_opt(&r.finished_at),
            not_before: ts(&r.not_before),
            reason: r.reason.as_deref(),
            cancel_requested: r.cancel_requested,
            concurrency: r.concurrency.as_ref(),
            attempts: r.attempts.iter().map(AttemptView::from).collect(),
            alert: r.alert.as_ref().map(AlertView::from),
        }
    }
}

/// A page of a listing: `{"items": [...], "next_cursor": "..." | null}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListView<T> {
    /// The items.
    pub items: Vec<T>,
    /// Pass as `?cursor=` for the next page; `null` on the last.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

impl<T> ListView<T> {
    /// Maps a core page's items into views.
    pub fn map<'a, U: 'a>(page: &'a Page<U>, f: impl Fn(&'a U) -> T) -> Self {
        ListView {
            items: page.items.iter().map(f).collect(),
            next_cursor: page.next_cursor.clone(),
        }
    }
}

/// Items without a cursor (batch creates, previews).
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemsView<T> {
    /// The items.
    pub items: Vec<T>,
}

/// A log read: `{"lines": [{ts, stream, line}], "truncated": bool}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Logs)]
pub struct LogsView<'a> {
    /// Lines, oldest first (`LogLine` serialises as `{ts, stream, line}`).
    #[schema(value_type = Vec<LogLine>)]
    pub lines: &'a [LogLine],
    /// Whether the log hit its cap.
    pub truncated: bool,
}

impl<'a> From<&'a LogPage> for LogsView<'a> {
    fn from(p: &'a LogPage) -> Self {
        LogsView {
            lines: &p.lines,
            truncated: p.truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::ports::LogStream;

    #[test]
    fn log_line_shape() {
        let line = LogLine {
            ts: timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            stream: LogStream::Stderr,
            line: "hi".into(),
        };
        let page = LogPage {
            lines: vec![line],
            truncated: false,
            cursor: 1,
        };
        let v = serde_json::to_value(LogsView::from(&page)).unwrap();
        assert_eq!(v["lines"][0]["ts"], "2026-01-01T00:00:00.000Z");
        assert_eq!(v["lines"][0]["stream"], "stderr");
        assert_eq!(v["truncated"], false);
    }
}
