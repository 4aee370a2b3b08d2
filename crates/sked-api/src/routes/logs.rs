//! `GET /v1/runs/{run_id}/logs`: an attempt's log, read at once or followed.
//!
//! Without `follow`, the answer is `{"lines": [{ts, stream, line}], "truncated": bool}`.
//! With `follow=true` it is `application/x-ndjson`: the same line objects, one per line,
//! streamed as the attempt writes them and ending when the service's stream ends (the
//! attempt has ended and its last lines were sent).

use crate::AppState;
use crate::dto::LogsView;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{PathId, QueryParams, Tenant};
use crate::params::ReadLogs;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use sked_core::ids::RunId;
use sked_core::ports::{LogLine, LogStream};
use sked_core::service::runs::LogRequest;
use std::convert::Infallible;

/// Most lines `tail` may ask for.
pub const MAX_TAIL: usize = 100_000;

/// Content type of a followed log.
pub const NDJSON: &str = "application/x-ndjson";

/// `GET /v1/runs/{run_id}/logs?attempt=&stream=stdout|stderr|both&tail=&follow=`.
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/logs",
    operation_id = "read_logs",
    tag = "logs",
    summary = "Read (or follow) an attempt's log",
    params(("run_id" = String, Path, description = "Run id: `<job id>@<nominal time>`"), ReadLogs),
    responses(
        (status = 200, description = "The log; with `follow=true` the same line objects as newline-delimited JSON, streamed until the attempt ends",
            content(
                (LogsView = "application/json"),
                (LogLine = "application/x-ndjson")
            )
        ),
        (status = 400, description = "A bad query parameter (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such run (or attempt) for this tenant (`not_found`)", body = ErrorBody)
    )
)]
pub async fn read(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow_documented::<ReadLogs>()?;
    let attempt = q.int_in("attempt", 1..=u32::MAX as usize)?.map(|a| a as u32);
    let stream = match q.one("stream")? {
        None | Some("both") => None,
        Some(s) => Some(s.parse::<LogStream>().map_err(|_| {
            ApiError::bad_request(
                Some("stream"),
                format!("stream must be stdout, stderr or both, got {s:?}"),
            )
        })?),
    };
    let tail = q.int_in("tail", 0..=MAX_TAIL)?;
    let follow = q.bool("follow")?.unwrap_or(false);
    let request = LogRequest { attempt, stream, tail };
    let run_id = RunId(id);
    if !follow {
        let page = st.sked.read_logs(&tenant, &run_id, &request).await?;
        return Ok(Json(LogsView::from(&page)).into_response());
    }
    let lines = st.sked.follow_logs(&tenant, &run_id, &request).await?;
    let body = Body::from_stream(lines.map(|line| Ok::<_, Infallible>(ndjson_line(&line))));
    Ok(([(CONTENT_TYPE, NDJSON), (CACHE_CONTROL, "no-cache")], body).into_response())
}

/// One line object followed by a newline.
fn ndjson_line(line: &LogLine) -> Bytes {
    // A LogLine has only strings and a timestamp: serialising it cannot fail.
    let mut out = serde_json::to_vec(line).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}
