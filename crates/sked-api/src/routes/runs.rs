//! Run routes: list across jobs, read one, cancel one.

use crate::AppState;
use crate::dto::{ListView, RunView};
use crate::error::ApiError;
use crate::error::ErrorBody;
use crate::extract::{PathId, QueryParams, Tenant};
use crate::params::ListRuns;
use crate::routes::jobs::RUN_STATES;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use sked_core::ids::{self, JobId, RunId};
use sked_core::ports::RunFilter;
use sked_core::run::RunState;

/// `GET /v1/runs?state=&job_id=&since=&until=&cursor=&limit=`: runs newest first
/// (`since` inclusive, `until` exclusive, on the nominal time).
#[utoipa::path(
    get,
    path = "/v1/runs",
    operation_id = "list_runs",
    tag = "runs",
    summary = "List runs across jobs, newest first",
    params(ListRuns),
    responses(
        (status = 200, description = "A page of runs", body = ListView<RunView>),
        (status = 400, description = "A bad query parameter or cursor (`invalid_argument`, naming it)", body = ErrorBody)
    )
)]
pub async fn list(State(st): State<AppState>, Tenant(tenant): Tenant, q: QueryParams) -> Result<Response, ApiError> {
    q.allow_documented::<ListRuns>()?;
    let state = q.state::<RunState>(RUN_STATES)?;
    let job_id = match q.one("job_id")? {
        Some(id) if !ids::is_valid_id(id) => {
            return Err(ApiError::bad_request(
                Some("job_id"),
                "job_id must match [A-Za-z0-9_.-]{1,128}",
            ));
        }
        id => id.map(JobId::from),
    };
    let filter = RunFilter {
        job_id,
        state,
        since: q.timestamp("since")?,
        until: q.timestamp("until")?,
    };
    let page = st.sked.list_runs(&tenant, &filter, &q.page()?).await?;
    Ok(Json(ListView::map(&page, RunView::from)).into_response())
}

/// `GET /v1/runs/{run_id}`.
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}",
    operation_id = "get_run",
    tag = "runs",
    summary = "Read a run and its attempts",
    params(("run_id" = String, Path, description = "Run id: `<job id>@<nominal time>`")),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 404, description = "No such run for this tenant (`not_found`)", body = ErrorBody)
    )
)]
pub async fn get(State(st): State<AppState>, Tenant(tenant): Tenant, PathId(id): PathId) -> Result<Response, ApiError> {
    let run = st.sked.get_run(&tenant, &RunId(id)).await?;
    Ok(Json(RunView::from(&run)).into_response())
}

/// `POST /v1/runs/{run_id}/cancel`: a PENDING run never starts; a RUNNING one is stopped by
/// its worker. Answers the run as it is now.
#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/cancel",
    operation_id = "cancel_run",
    tag = "runs",
    summary = "Cancel a run",
    params(("run_id" = String, Path, description = "Run id: `<job id>@<nominal time>`")),
    responses(
        (status = 200, description = "The run as it is now (CANCELLED, or RUNNING with `cancel_requested`)", body = RunView),
        (status = 404, description = "No such run for this tenant (`not_found`)", body = ErrorBody),
        (status = 409, description = "The run has ended already (`conflict`)", body = ErrorBody)
    )
)]
pub async fn cancel(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let run = st.sked.cancel_run(&tenant, &RunId(id)).await?;
    Ok(Json(RunView::from(&run)).into_response())
}
