//! Run routes: list across jobs, read one, cancel one.

use crate::AppState;
use crate::dto::{ListView, RunView};
use crate::error::ApiError;
use crate::extract::{PathId, QueryParams, Tenant};
use crate::routes::jobs::RUN_STATES;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use sked_core::ids::{self, JobId, RunId};
use sked_core::ports::RunFilter;
use sked_core::run::RunState;

/// `GET /v1/runs?state=&job_id=&since=&until=&cursor=&limit=`: runs newest first
/// (`since` inclusive, `until` exclusive, on the nominal time).
pub async fn list(State(st): State<AppState>, Tenant(tenant): Tenant, q: QueryParams) -> Result<Response, ApiError> {
    q.allow(&["state", "job_id", "since", "until", "cursor", "limit"])?;
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
pub async fn get(State(st): State<AppState>, Tenant(tenant): Tenant, PathId(id): PathId) -> Result<Response, ApiError> {
    let run = st.sked.get_run(&tenant, &RunId(id)).await?;
    Ok(Json(RunView::from(&run)).into_response())
}

/// `POST /v1/runs/{run_id}/cancel`: a PENDING run never starts; a RUNNING one is stopped by
/// its worker. Answers the run as it is now.
pub async fn cancel(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let run = st.sked.cancel_run(&tenant, &RunId(id)).await?;
    Ok(Json(RunView::from(&run)).into_response())
}
