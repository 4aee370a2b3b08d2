//! Tenant routes: `GET` and `PUT /v1/tenants/{tenant}/quota` (operators only). Who may and
//! which values are valid is [`sked_core::service::quotas`]'s; these handlers only read the
//! request and write the answer.

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, JsonBody, PathId, decode};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sked_core::ids::TenantId;
use sked_core::quota::Quota;
use sked_core::service::quotas::Quotas;

/// A tenant's quota as answered: its limits inline, `null` for none.
#[derive(Debug, Serialize)]
pub struct QuotaView {
    /// The tenant.
    pub tenant: String,
    /// The limits.
    #[serde(flatten)]
    pub quota: Quota,
}

fn quotas(st: &AppState) -> Result<&Quotas, ApiError> {
    st.sked
        .quotas()
        .ok_or_else(|| ApiError::not_found("this deployment keeps no quotas"))
}

/// `GET /v1/tenants/{tenant}/quota`: the quota (`null` limits when none was set).
pub async fn get_quota(
    State(st): State<AppState>,
    Caller(caller): Caller,
    PathId(tenant): PathId,
) -> Result<Response, ApiError> {
    let tenant = TenantId(tenant);
    let quota = quotas(&st)?.get(&caller, &tenant).await?;
    Ok(Json(QuotaView {
        tenant: tenant.0,
        quota,
    })
    .into_response())
}

/// `PUT /v1/tenants/{tenant}/quota {"max_active_jobs", "max_concurrent_runs",
/// "submit_rate": {"per_second", "burst"}}`: replaces the quota (an absent limit is none).
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
    let quota: Quota = decode(body, "").map_err(ApiError::malformed)?;
    let quota = quotas.put(&caller, &tenant, quota).await?;
    Ok(Json(QuotaView {
        tenant: tenant.0,
        quota,
    })
    .into_response())
}
