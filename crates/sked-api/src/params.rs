//! The query and header parameters of each route as the OpenAPI document describes them
//! (`IntoParams`). The structs are never built: handlers read requests through
//! [`crate::extract`], and accept exactly the query parameters named here
//! ([`crate::extract::QueryParams::allow_documented`]), so the document and the handlers
//! cannot disagree on which parameters exist. The bounds written here are the extractors'
//! (`limit` 1..=[`crate::extract::MAX_LIMIT`], `count` 1..=[`crate::routes::jobs::MAX_PREVIEW`],
//! `tail` 0..=[`crate::routes::logs::MAX_TAIL`]); the document's tests check they agree.
#![allow(dead_code)] // fields exist to be described, not read

use utoipa::IntoParams;

/// `GET /v1/jobs`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListJobs {
    /// Only jobs in this state (case-insensitive): ACTIVE, PAUSED, COMPLETED or DELETED. All but
    /// DELETED when absent.
    #[param(
        pattern = "^([Aa][Cc][Tt][Ii][Vv][Ee]|[Pp][Aa][Uu][Ss][Ee][Dd]|[Cc][Oo][Mm][Pp][Ll][Ee][Tt][Ee][Dd]|[Dd][Ee][Ll][Ee][Tt][Ee][Dd])$"
    )]
    state: Option<String>,
    /// `key=value`: only jobs with that label; repeat to require several.
    #[param(style = Form, explode, inline, value_type = Option<Vec<LabelFilter>>)]
    label: Option<Vec<String>>,
    /// Opaque: a `next_cursor` this listing answered.
    cursor: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// One `label` filter: `key=value` with a non-empty key.
#[derive(utoipa::ToSchema)]
#[schema(pattern = "^[^=]+=")]
pub struct LabelFilter(String);

/// `GET /v1/runs`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListRuns {
    /// Only runs in this state (case-insensitive): PENDING, RUNNING, SUCCEEDED, FAILED,
    /// TIMED_OUT or CANCELLED.
    #[param(
        pattern = "^([Pp][Ee][Nn][Dd][Ii][Nn][Gg]|[Rr][Uu][Nn][Nn][Ii][Nn][Gg]|[Ss][Uu][Cc][Cc][Ee][Ee][Dd][Ee][Dd]|[Ff][Aa][Ii][Ll][Ee][Dd]|[Tt][Ii][Mm][Ee][Dd]_[Oo][Uu][Tt]|[Cc][Aa][Nn][Cc][Ee][Ll][Ll][Ee][Dd]|[Ss][Kk][Ii][Pp][Pp][Ee][Dd])$"
    )]
    state: Option<String>,
    /// Only this job's runs.
    #[param(pattern = "^[A-Za-z0-9_.-]{1,128}$")]
    job_id: Option<String>,
    /// Nominal time at or after this instant.
    #[param(format = DateTime)]
    since: Option<String>,
    /// Nominal time before this instant.
    #[param(format = DateTime)]
    until: Option<String>,
    /// Opaque: a `next_cursor` this listing answered.
    cursor: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// `GET /v1/jobs/{id}/runs`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobRuns {
    /// Only runs in this state (case-insensitive).
    #[param(
        pattern = "^([Pp][Ee][Nn][Dd][Ii][Nn][Gg]|[Rr][Uu][Nn][Nn][Ii][Nn][Gg]|[Ss][Uu][Cc][Cc][Ee][Ee][Dd][Ee][Dd]|[Ff][Aa][Ii][Ll][Ee][Dd]|[Tt][Ii][Mm][Ee][Dd]_[Oo][Uu][Tt]|[Cc][Aa][Nn][Cc][Ee][Ll][Ll][Ee][Dd]|[Ss][Kk][Ii][Pp][Pp][Ee][Dd])$"
    )]
    state: Option<String>,
    /// Opaque: a `next_cursor` this listing answered.
    cursor: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// `GET /v1/jobs/{id}/occurrences`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Occurrences {
    /// Occurrences at or after this instant (RFC 3339; all when absent, also those before the job was created).
    #[param(format = DateTime)]
    since: Option<String>,
    /// Occurrences before this instant (RFC 3339; now when absent).
    #[param(format = DateTime)]
    until: Option<String>,
    /// Opaque: a `next_cursor` this listing answered.
    cursor: Option<String>,
    /// Page size (100 when absent).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// `GET /v1/jobs/{id}/why`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Why {
    /// The instant asked about (RFC 3339): the occurrence nearest it is explained.
    #[param(required = true, format = DateTime)]
    at: Option<String>,
}

/// `DELETE /v1/jobs/{id}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteJob {
    /// Also stop the job's running attempts (they finish otherwise).
    cancel_running: Option<bool>,
    /// Delete it even though other jobs run `after` it (409 otherwise); their occurrences
    /// then wait for runs that never come, or give up after their `within`.
    force: Option<bool>,
}

/// `GET /v1/jobs/{id}/preview`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Preview {
    /// How many fire times (10 when absent).
    #[param(minimum = 1, maximum = 100)]
    count: Option<u32>,
}

/// `GET /v1/runs/{run_id}/logs`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReadLogs {
    /// Which attempt (the latest when absent).
    #[param(minimum = 1, maximum = 4294967295_u64)]
    attempt: Option<u32>,
    /// `stdout`, `stderr` or `both` (the default).
    #[param(inline)]
    stream: Option<StreamChoice>,
    /// Only the last N lines.
    #[param(minimum = 0, maximum = 100000)]
    tail: Option<u32>,
    /// Stream the lines as newline-delimited JSON (`application/x-ndjson`) until the attempt
    /// ends, waiting for the first attempt to start if none has.
    follow: Option<bool>,
}

/// Which of an attempt's outputs to read.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum StreamChoice {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// Both, interleaved in the order read.
    Both,
}

/// `Idempotency-Key` of the create routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct Idempotency {
    /// 1 to 255 visible ASCII characters. A create repeated with the same key answers what the
    /// first did (200 with the job), without creating another.
    #[param(rename = "Idempotency-Key", pattern = "^[!-~]{1,255}$", value_type = String, required = false)]
    idempotency_key: Option<String>,
}

/// `If-Match` of the replace routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct Version {
    /// The job's `version` (also as an entity tag: `"3"`, `W/"3"`): the change is made only if
    /// the job is still at it (409 otherwise).
    #[param(rename = "If-Match", pattern = "^(W/)?(\"[0-9]{1,19}\"|[0-9]{1,19})$", value_type = String, required = false)]
    if_match: Option<String>,
}
