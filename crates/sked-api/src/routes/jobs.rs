//! Job routes: create (single, batch, shorthand), list, read, replace (PUT), merge-patch
//! (PATCH), delete, pause, resume, trigger, backfill, preview, the job's runs and its
//! occurrence ledger (`occurrences`, `why`).
//!
//! Each handler checks the request's form (tenant, headers, query, body) before it calls the
//! service, so a malformed request never reaches the store; everything else — validation,
//! conflicts, state changes — is the service's.

use crate::AppState;
use crate::dto::{ItemsView, JobView, ListView, RunView};
use crate::error::ApiError;
use crate::error::ErrorBody;
use crate::extract::{IdempotencyKey, IfMatch, JsonBody, PathId, QueryParams, Tenant, decode, require_object};
use crate::input;
use crate::openapi::{CreateJob, JobBatch, JobPatch};
use crate::params::{DeleteJob, Idempotency, JobRuns, ListJobs, Occurrences, Preview, Version, Why};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use sked_core::ids::JobId;
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::ledger::Occurrence;
use sked_core::ports::{JobFilter, RunFilter};
use sked_core::run::RunState;
use sked_core::service::ledger::LedgerQuery;
use sked_core::timestamp;

/// Job states as the `state` parameter names them.
const JOB_STATES: &str = "ACTIVE, PAUSED, COMPLETED, DELETED";
/// Run states as the `state` parameter names them.
pub(crate) const RUN_STATES: &str = "PENDING, RUNNING, SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, SKIPPED";
/// Most fire times a preview lists.
pub const MAX_PREVIEW: usize = 100;

fn job_ok(job: &Job) -> Response {
    Json(JobView::from(job)).into_response()
}

/// `POST /v1/jobs`: 201 with the new job, or 200 with the existing one when the request
/// repeated an earlier create (same id and body, or a replayed `Idempotency-Key`).
#[utoipa::path(
    post,
    path = "/v1/jobs",
    operation_id = "create_job",
    tag = "jobs",
    summary = "Create a job (or a one-shot in the seed-style shorthand)",
    params(Idempotency),
    request_body(content = CreateJob, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = JobView, headers(("Location" = String, description = "The job's URL"))),
        (status = 200, description = "The same create again (same id and definition, or a replayed Idempotency-Key): the job as it is", body = JobView, headers(("Location" = String, description = "The job's URL"))),
        (status = 400, description = "Malformed: not JSON, a wrong type, an unknown or missing field, or a bad header (`invalid_argument`, naming the field)", body = ErrorBody),
        (status = 409, description = "A job with this id exists with another definition, or the Idempotency-Key was used for another body (`conflict`)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "Well formed but invalid, naming the field (`invalid_argument`), or not possible on this deployment (`unsupported`: container tasks locally)", body = ErrorBody),
        (status = 429, description = "The tenant's quota is used up (`resource_exhausted`); `Retry-After` says when to retry", body = ErrorBody)
    )
)]
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
#[utoipa::path(
    post,
    path = "/v1/jobs:batch",
    operation_id = "create_jobs",
    tag = "jobs",
    summary = "Create up to 1,000 jobs, all or none",
    params(Idempotency),
    request_body(content = JobBatch, content_type = "application/json"),
    responses(
        (status = 201, description = "Created, in order", body = ItemsView<JobView>),
        (status = 400, description = "Malformed: not JSON, a wrong type, an unknown or missing field, or a bad header (`invalid_argument`, naming the field)", body = ErrorBody),
        (status = 409, description = "A job id exists with another definition, or the Idempotency-Key was used for another body (`conflict`)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "Invalid entries, each listed in `details` with its index (`invalid_argument`)", body = ErrorBody),
        (status = 429, description = "The tenant's quota is used up (`resource_exhausted`); `Retry-After` says when to retry", body = ErrorBody)
    )
)]
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
#[utoipa::path(
    get,
    path = "/v1/jobs",
    operation_id = "list_jobs",
    tag = "jobs",
    summary = "List jobs, ordered by id",
    params(ListJobs),
    responses(
        (status = 200, description = "A page of jobs", body = ListView<JobView>),
        (status = 400, description = "A bad query parameter (`invalid_argument`, naming it)", body = ErrorBody)
    )
)]
pub async fn list(State(st): State<AppState>, Tenant(tenant): Tenant, q: QueryParams) -> Result<Response, ApiError> {
    q.allow_documented::<ListJobs>()?;
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
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    operation_id = "get_job",
    tag = "jobs",
    summary = "Read a job",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody)
    )
)]
pub async fn get(State(st): State<AppState>, Tenant(tenant): Tenant, PathId(id): PathId) -> Result<Response, ApiError> {
    Ok(job_ok(&st.sked.get_job(&tenant, &JobId(id)).await?))
}

/// `PUT /v1/jobs/{id}`: replaces the definition (honours `If-Match`).
#[utoipa::path(
    put,
    path = "/v1/jobs/{id}",
    operation_id = "replace_job",
    tag = "jobs",
    summary = "Replace a job's definition",
    params(("id" = String, Path, description = "Job id"), Version),
    request_body(content = JobSpec, description = "The whole definition (an `id`, if given, must be the path's)", content_type = "application/json"),
    responses(
        (status = 200, description = "The job, replaced", body = JobView),
        (status = 400, description = "Malformed: not JSON, a wrong type, an unknown or missing field, or a bad header (`invalid_argument`, naming the field)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "If-Match names another version than the job's (`conflict`)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "Well formed but invalid, naming the field (`invalid_argument`), or not possible on this deployment (`unsupported`: container tasks locally)", body = ErrorBody),
        (status = 429, description = "The change would bring a COMPLETED job back past the tenant's max_active_jobs (`resource_exhausted`)", body = ErrorBody)
    )
)]
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
#[utoipa::path(
    patch,
    path = "/v1/jobs/{id}",
    operation_id = "patch_job",
    tag = "jobs",
    summary = "Change a job with a JSON merge patch (RFC 7386)",
    params(("id" = String, Path, description = "Job id"), Version),
    request_body(content = JobPatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The job, changed", body = JobView),
        (status = 400, description = "Malformed: not a JSON object, a value of the wrong type, or an unknown field (`invalid_argument`, naming the field)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "The job changed meanwhile, or If-Match names another version (`conflict`)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "The patched job would not be valid, naming the field (`invalid_argument`, `unsupported`)", body = ErrorBody),
        (status = 429, description = "The change would bring a COMPLETED job back past the tenant's max_active_jobs (`resource_exhausted`)", body = ErrorBody)
    )
)]
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

/// `DELETE /v1/jobs/{id}?cancel_running=true&force=true`: no new runs; running attempts
/// finish unless asked to stop; a job others run `after` only with `force`. Answers the job,
/// now DELETED.
#[utoipa::path(
    delete,
    path = "/v1/jobs/{id}",
    operation_id = "delete_job",
    tag = "jobs",
    summary = "Delete a job (no new runs; history kept)",
    params(("id" = String, Path, description = "Job id"), DeleteJob),
    responses(
        (status = 200, description = "The job, now DELETED", body = JobView),
        (status = 400, description = "A bad query parameter (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "Other jobs run `after` this one and `force` was not given (`conflict`, naming them)", body = ErrorBody)
    )
)]
pub async fn delete(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow_documented::<DeleteJob>()?;
    let cancel_running = q.bool("cancel_running")?.unwrap_or(false);
    let force = q.bool("force")?.unwrap_or(false);
    Ok(job_ok(
        &st.sked.delete_job(&tenant, &JobId(id), cancel_running, force).await?,
    ))
}

/// `POST /v1/jobs/{id}/pause`.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/pause",
    operation_id = "pause_job",
    tag = "jobs",
    summary = "Pause a job",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job, PAUSED", body = JobView),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "The job cannot be paused in its state (`conflict`)", body = ErrorBody)
    )
)]
pub async fn pause(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    Ok(job_ok(&st.sked.pause_job(&tenant, &JobId(id)).await?))
}

/// `POST /v1/jobs/{id}/resume`.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/resume",
    operation_id = "resume_job",
    tag = "jobs",
    summary = "Resume a paused job (its misfire policy applies)",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job, ACTIVE", body = JobView),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "The job cannot be resumed in its state (`conflict`)", body = ErrorBody)
    )
)]
pub async fn resume(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    Ok(job_ok(&st.sked.resume_job(&tenant, &JobId(id)).await?))
}

/// `POST /v1/jobs/{id}/trigger`: 201 with the new run.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/trigger",
    operation_id = "trigger_job",
    tag = "jobs",
    summary = "Run a job once now, outside its schedule",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 201, description = "The new run", body = RunView, headers(("Location" = String, description = "The run's URL"))),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "The job cannot be triggered in its state, or a run for this instant exists (`conflict`)", body = ErrorBody),
        (status = 429, description = "The tenant's quota is used up (`resource_exhausted`); `Retry-After` says when to retry", body = ErrorBody)
    )
)]
pub async fn trigger(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let run = st.sked.trigger_job(&tenant, &JobId(id)).await?;
    let location = format!("/v1/runs/{}", run.run_id);
    Ok((StatusCode::CREATED, [(LOCATION, location)], Json(RunView::from(&run))).into_response())
}

/// The body of `POST /v1/jobs/{id}/backfill`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BackfillRequest)]
pub struct BackfillRequest {
    /// The first nominal time covered (RFC 3339), included.
    #[schema(format = DateTime)]
    from: String,
    /// The end of the range (RFC 3339), excluded; not later than now.
    #[schema(format = DateTime)]
    to: String,
}

/// `POST /v1/jobs/{id}/backfill {"from", "to"}`: 201 `{"items": [run ids created]}`.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/backfill",
    operation_id = "backfill_job",
    tag = "jobs",
    summary = "Run a job's past occurrences in [from, to) that have no run yet",
    description = "One run per nominal time of the job's schedule in `[from, to)` that has none yet, due now, in nominal-time order, at the job's priority (a repeated call creates nothing). Under `allow` the runs start side by side; under any other overlap policy one after another, never beside another run of the job.",
    params(("id" = String, Path, description = "Job id")),
    request_body(content = BackfillRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The ids of the runs created, in nominal-time order (empty when every occurrence already had one)", body = ItemsView<String>),
        (status = 400, description = "Malformed: not JSON, a wrong type, an unknown or missing field (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "`from` or `to` not an RFC 3339 time, `to` not after `from` or later than now, or more than 1000 occurrences in the range (`invalid_argument`, naming the field)", body = ErrorBody),
        (status = 429, description = "The tenant's quota is used up (`resource_exhausted`); `Retry-After` says when to retry", body = ErrorBody)
    )
)]
pub async fn backfill(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    require_object(&body, "", false)?;
    let request: BackfillRequest = decode(body, "").map_err(ApiError::malformed)?;
    let instant = |field: &str, text: &str| {
        timestamp::parse(text).map_err(|e| {
            ApiError::invalid(vec![sked_core::FieldError::new(
                field,
                format!("not an RFC 3339 time ({e}): {text:?}"),
            )])
        })
    };
    let (from, to) = (instant("from", &request.from)?, instant("to", &request.to)?);
    let created = st.sked.backfill_job(&tenant, &JobId(id), from, to).await?;
    let items: Vec<String> = created.into_iter().map(|run_id| run_id.0).collect();
    Ok((StatusCode::CREATED, Json(ItemsView { items })).into_response())
}

/// `GET /v1/jobs/{id}/preview?count=10`: `{"items": [next fire times]}`, count 1..=100.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/preview",
    operation_id = "preview_job",
    tag = "jobs",
    summary = "The next fire times of a job",
    params(("id" = String, Path, description = "Job id"), Preview),
    responses(
        (status = 200, description = "Up to `count` nominal fire times, ascending: exactly the instants the sweeper fires, the job's DST rule applied (both passes of a repeated hour are two entries)", body = ItemsView<String>),
        (status = 400, description = "A bad query parameter (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody)
    )
)]
pub async fn preview(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow_documented::<Preview>()?;
    let count = q.int_in("count", 1..=MAX_PREVIEW)?.unwrap_or(10);
    let times = st.sked.preview_job(&tenant, &JobId(id), count).await?;
    let items: Vec<String> = times.iter().map(timestamp::format).collect();
    Ok(Json(ItemsView { items }).into_response())
}

/// `GET /v1/jobs/{id}/runs?state=&cursor=&limit=`: the job's runs, newest first; 404 if
/// the job does not exist for this tenant.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/runs",
    operation_id = "list_job_runs",
    tag = "jobs",
    summary = "A job's runs, newest first",
    params(("id" = String, Path, description = "Job id"), JobRuns),
    responses(
        (status = 200, description = "A page of runs", body = ListView<RunView>),
        (status = 400, description = "A bad query parameter or cursor (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody)
    )
)]
pub async fn runs(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow_documented::<JobRuns>()?;
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

/// A page of a job's occurrence ledger.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct OccurrencesView {
    /// Newest first.
    pub items: Vec<Occurrence>,
    /// Pass as `?cursor=` for the next (older) page; `null` on the last.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// `GET /v1/jobs/{id}/occurrences?since=&until=&limit=&cursor=`: what became of each nominal
/// time of the job's schedule, newest first.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/occurrences",
    operation_id = "list_occurrences",
    tag = "jobs",
    summary = "The occurrence ledger: each nominal time fired or skipped, and why",
    params(("id" = String, Path, description = "Job id"), Occurrences),
    responses(
        (status = 200, description = "A page of occurrences, newest first: each nominal time once, fired (its run, how late it started) or skipped with its reason (`overlap`, `misfire`, `paused`, `upstream_failed`, `upstream_timeout`, `rescheduled`)", body = OccurrencesView),
        (status = 400, description = "A bad query parameter or cursor (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant (`not_found`)", body = ErrorBody)
    )
)]
pub async fn occurrences(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow_documented::<Occurrences>()?;
    let query = LedgerQuery {
        since: q.timestamp("since")?,
        until: q.timestamp("until")?,
        limit: q.int_in("limit", 1..=sked_core::ledger::MAX_PAGE)?.unwrap_or(100),
        cursor: q.one("cursor")?.filter(|c| !c.is_empty()).map(str::to_string),
    };
    let page = st.sked.occurrences(&tenant, &JobId(id), &query).await?;
    Ok(Json(OccurrencesView {
        items: page.items,
        next_cursor: page.next_cursor,
    })
    .into_response())
}

/// What became of one occurrence, in a sentence.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct WhyView {
    /// The occurrence nearest the instant asked about.
    pub occurrence: Occurrence,
    /// One sentence on what became of it.
    pub explanation: String,
}

/// `GET /v1/jobs/{id}/why?at=T`: the occurrence nearest `T`, explained.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/why",
    operation_id = "explain_occurrence",
    tag = "jobs",
    summary = "What became of the occurrence nearest an instant, in one sentence",
    params(("id" = String, Path, description = "Job id"), Why),
    responses(
        (status = 200, description = "The occurrence and its explanation", body = WhyView),
        (status = 400, description = "`at` missing or not RFC 3339 (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "No such job for this tenant, or it has no occurrence yet (`not_found`)", body = ErrorBody)
    )
)]
pub async fn why(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
    q: QueryParams,
) -> Result<Response, ApiError> {
    q.allow_documented::<Why>()?;
    // Another tenant's job is 404 whatever the query.
    let job = st.sked.get_job(&tenant, &JobId(id)).await?;
    let at = q
        .timestamp("at")?
        .ok_or_else(|| ApiError::bad_request(Some("at"), "at is required: the instant to explain (RFC 3339)"))?;
    let why = st.sked.why(&tenant, &job.id, at).await?;
    Ok(Json(WhyView {
        occurrence: why.occurrence,
        explanation: why.explanation,
    })
    .into_response())
}
