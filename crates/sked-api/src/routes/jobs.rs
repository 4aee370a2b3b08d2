//! Job routes: create (single, batch, shorthand), list, read, replace (PUT), merge-patch
//! (PATCH), delete, pause, resume, trigger, preview and the job's runs.
//!
//! Each handler checks the request's form (tenant, headers, query, body) before it calls the
//! service, so a malformed request never reaches the store; everything else — validation,
//! conflicts, state changes — is the service's.

use crate::AppState;
use crate::dto::{ItemsView, JobView, ListView, RunView};
use crate::error::ApiError;
use crate::extract::{IdempotencyKey, IfMatch, JsonBody, PathId, QueryParams, Tenant};
use crate::input;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use sked_core::ids::JobId;
use sked_core::job::{Job, JobState};
use sked_core::ports::{JobFilter, RunFilter};
use sked_core::run::RunState;
use sked_core::timestamp;

/// Job states as the `state` parameter names them.
const JOB_STATES: &str = "ACTIVE, PAUSED, COMPLETED, DELETED";
/// Run states as the `state` parameter names them.
pub(crate) const RUN_STATES: &str = "PENDING, RUNNING, SUCCEEDED, FAILED, TIMED_OUT, CANCELLED";
/// Most fire times a preview lists.
pub const MAX_PREVIEW: usize = 100;

fn job_ok(job: &Job) -> Response {
    Json(JobView::from(job)).into_response()
}

/// `POST /v1/jobs`: 201 with the new job, or 200 with the existing one when the request
/// repeated an earlier create (same id and body, or a replayed `Idempotency-Key`).
pub async fn create(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let new = input::new_job(body, st.sked.ports().clock.now())?;
    let created = st.sked.create_job(&tenant, new, key.as_deref()).await?;
    let status = if created.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let location = format!("/v1/jobs/{}", created.job.id);
    Ok((status, [(LOCATION, location)], Json(JobView::from(&created.job))).into_response())
}

/// `POST /v1/jobs:batch` `{"jobs": [...]}`: 201 `{"items": [jobs in order]}`, all or none.
pub async fn create_batch(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let jobs = input::batch(body, st.sked.ports().clock.now())?;
    let created = st.sked.create_jobs(&tenant, jobs, key.as_deref()).await?;
    let items: Vec<JobView> = created.iter().map(JobView::from).collect();
    Ok((StatusCode::CREATED, Json(ItemsView { items })).into_response())
}

/// `GET /v1/jobs?state=&label=k=v&cursor=&limit=`: jobs ordered by id.
pub async fn list(State(st): State<AppState>, Tenant(tenant): Tenant, q: QueryParams) -> Result<Response, ApiError> {
    q.allow(&["state", "label", "cursor", "limit"])?;
    let state = q.state::<JobState>(JOB_STATES)?;
    let mut labels = Vec::new();
    for pair in q.all("label") {
        match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => labels.push((k.to_string(), v.to_string())),
            _ => {
                return Err(ApiError::bad_request(
                    Some("label"),
                    format!("label must be key=value, got {pair:?}"),
                ));
            }
        }
    }
    let page = st
        .sked
        .list_jobs(&tenant, &JobFilter { state, labels }, &q.page()?)
        .await?;
    Ok(Json(ListView::map(&page, JobView::from)).into_response())
}

/// `GET /v1/jobs/{id}`.
pub async fn get(State(st): State<AppState>, Tenant(tenant): Tenant, PathId(id): PathId) -> Result<Response, ApiError> {
    Ok(job_ok(&st.sked.get_job(&tenant, &JobId(id)).await?))
}

/// `PUT /v1/jobs/{id}`: replaces the definition (honours `If-Match`).
pub async fn replace(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    IfMatch(if_version): IfMatch,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let id = JobId(id);
    let spec = input::replacement(body, &id)?;
    Ok(job_ok(&st.sked.replace_job(&tenant, &id, spec, if_version).await?))
}

/// `PATCH /v1/jobs/{id}`: a JSON merge patch (RFC 7386) of the current definition, replaced
/// only if the job is still at the version read (or at `If-Match`, when given).
pub async fn patch(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    IfMatch(if_version): IfMatch,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let id = JobId(id);
    let current = st.sked.get_job(&tenant, &id).await?;
    if let Some(v) = if_version
        && v != current.version
    {
        return Err(ApiError::conflict(format!(
            "job {id} is at version {}, not {v}",
            current.version
        )));
    }
    let spec = input::patched(&current.spec, &body, &id)?;
    let job = st
        .sked
        .replace_job(&tenant, &id, spec, Some(if_version.unwrap_or(current.version)))
        .await?;
    Ok(job_ok(&job))
}

/// `DELETE /v1/jobs/{id}?cancel_running=true`: no new runs; running attempts finish unless
/// asked to stop. Answers the job, now DELETED.
pub async fn delete(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow(&["cancel_running"])?;
    let cancel_running = q.bool("cancel_running")?.unwrap_or(false);
    Ok(job_ok(&st.sked.delete_job(&tenant, &JobId(id), cancel_running).await?))
}

/// `POST /v1/jobs/{id}/pause`.
pub async fn pause(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    Ok(job_ok(&st.sked.pause_job(&tenant, &JobId(id)).await?))
}

/// `POST /v1/jobs/{id}/resume`.
pub async fn resume(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    Ok(job_ok(&st.sked.resume_job(&tenant, &JobId(id)).await?))
}

/// `POST /v1/jobs/{id}/trigger`: 201 with the new run.
pub async fn trigger(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let run = st.sked.trigger_job(&tenant, &JobId(id)).await?;
    let location = format!("/v1/runs/{}", run.run_id);
    Ok((StatusCode::CREATED, [(LOCATION, location)], Json(RunView::from(&run))).into_response())
}

/// `GET /v1/jobs/{id}/preview?count=10`: `{"items": [next fire times]}`, count 1..=100.
pub async fn preview(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow(&["count"])?;
    let count = q.int_in("count", 1..=MAX_PREVIEW)?.unwrap_or(10);
    let times = st.sked.preview_job(&tenant, &JobId(id), count).await?;
    let items: Vec<String> = times.iter().map(timestamp::format).collect();
    Ok(Json(ItemsView { items }).into_response())
}

/// `GET /v1/jobs/{id}/runs?state=&cursor=&limit=`: the job's runs, newest first; 404 if
/// the job does not exist for this tenant.
pub async fn runs(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow(&["state", "cursor", "limit"])?;
    let state = q.state::<RunState>(RUN_STATES)?;
    let page_request = q.page()?;
    let job = st.sked.get_job(&tenant, &JobId(id)).await?;
    let filter = RunFilter {
        job_id: Some(job.id),
        state,
        ..RunFilter::default()
    };
    let page = st.sked.list_runs(&tenant, &filter, &page_request).await?;
    Ok(Json(ListView::map(&page, RunView::from)).into_response())
}
