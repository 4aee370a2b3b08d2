//! Tenant routes: `GET` and `PUT /v1/tenants/{tenant}/quota` (operators only). Who may and
//! which values are valid is [`sked_core::service::quotas`]'s; these handlers only read the
//! request and write the answer.

use crate::AppState;
use crate::error::ApiError;
use crate::error::ErrorBody;
use crate::extract::{Caller, JsonBody, PathId, decode, require_object};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sked_core::ids::TenantId;
use sked_core::quota::{Quota, SubmitRate};
use sked_core::service::quotas::Quotas;
use utoipa::ToSchema;

/// A tenant's quota as answered: the tenant and its limits, `null` for none.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaView {
    /// The tenant.
    pub tenant: String,
    /// Most jobs ACTIVE or PAUSED at once.
    pub max_active_jobs: Option<u64>,
    /// Most runs RUNNING at once, across every worker.
    pub max_concurrent_runs: Option<u64>,
    /// Most submissions (jobs created, runs triggered) per second, with a burst.
    pub submit_rate: Option<SubmitRate>,
}

impl QuotaView {
    fn new(tenant: TenantId, quota: Quota) -> Self {
        QuotaView {
            tenant: tenant.0,
            max_active_jobs: quota.max_active_jobs,
            max_concurrent_runs: quota.max_concurrent_runs,
            submit_rate: quota.submit_rate,
        }
    }
}

fn quotas(st: &AppState) -> Result<&Quotas, ApiError> {
    st.sked
        .quotas()
        .ok_or_else(|| ApiError::not_found("this deployment keeps no quotas"))
}

/// `GET /v1/tenants/{tenant}/quota`: the quota (`null` limits when none was set).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/quota",
    operation_id = "get_quota",
    tag = "tenants",
    summary = "Read a tenant's quota (operators only)",
    params(("tenant" = String, Path, description = "Tenant id", pattern = "^[A-Za-z0-9_.-]{1,128}$")),
    responses(
        (status = 200, description = "The quota; `null` limits are none", body = QuotaView),
        (status = 404, description = "This deployment keeps no quotas", body = ErrorBody),
        (status = 422, description = "A malformed tenant id (`invalid_argument`, naming `tenant`)", body = ErrorBody)
    )
)]
pub async fn get_quota(
    State(st): State<AppState>,
    Caller(caller): Caller,
    PathId(tenant): PathId,
) -> Result<Response, ApiError> {
    let tenant = TenantId(tenant);
    let quota = quotas(&st)?.get(&caller, &tenant).await?;
    Ok(Json(QuotaView::new(tenant, quota)).into_response())
}

/// `PUT /v1/tenants/{tenant}/quota {"max_active_jobs", "max_concurrent_runs",
/// "submit_rate": {"per_second", "burst"}}`: replaces the quota (an absent limit is none).
#[utoipa::path(
    put,
    path = "/v1/tenants/{tenant}/quota",
    operation_id = "put_quota",
    tag = "tenants",
    summary = "Replace a tenant's quota (operators only)",
    params(("tenant" = String, Path, description = "Tenant id", pattern = "^[A-Za-z0-9_.-]{1,128}$")),
    request_body(content = Quota, content_type = "application/json"),
    responses(
        (status = 200, description = "The quota as stored", body = QuotaView),
        (status = 400, description = "Malformed: not JSON, a wrong type, an unknown field (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "This deployment keeps no quotas", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "A limit out of range or a malformed tenant id (`invalid_argument`, naming it)", body = ErrorBody)
    )
)]
pub async fn put_quota(
    State(st): State<AppState>,
    Caller(caller): Caller,
    PathId(tenant): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let tenant = TenantId(tenant);
    let quotas = quotas(&st)?;
    // Who may comes before what was sent: a caller who may not learns nothing of the body.
    Quotas::may_manage(&caller)?;
    require_object(&body, "", false)?;
    if let Some(rate) = body.get("submit_rate") {
        require_object(rate, "submit_rate", true)?;
    }
    let quota: Quota = decode(body, "").map_err(ApiError::malformed)?;
    let quota = quotas.put(&caller, &tenant, quota).await?;
    Ok(Json(QuotaView::new(tenant, quota)).into_response())
}
