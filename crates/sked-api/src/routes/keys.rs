//! Key routes: `POST /v1/keys` (the only answer that holds a key's secret), `GET /v1/keys`
//! (no secrets) and `DELETE /v1/keys/{id}` (refused at once afterwards). Who may do what is
//! [`sked_core::service::keys`]'s; these handlers only read the request and write the answer.

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, JsonBody, PathId, decode};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sked_core::auth::{ApiKey, Role};
use sked_core::ids::TenantId;
use sked_core::service::keys::{Keys, NewKey};
use sked_core::timestamp;

/// The body of `POST /v1/keys`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRequest {
    /// The tenant the key acts for (the caller's when absent).
    tenant: Option<String>,
    /// `read`, `write`, `admin` or `operator`.
    role: String,
    /// A label for people.
    name: String,
}

/// A key as listed: never its secret.
#[derive(Debug, Serialize)]
pub struct KeyView {
    /// Public id.
    pub id: String,
    /// The tenant it acts for.
    pub tenant: String,
    /// What it may do.
    pub role: &'static str,
    /// Its label.
    pub name: String,
    /// When it was created.
    pub created_at: String,
    /// When it was revoked, or `null`.
    pub revoked_at: Option<String>,
}

impl From<&ApiKey> for KeyView {
    fn from(k: &ApiKey) -> Self {
        KeyView {
            id: k.id.clone(),
            tenant: k.tenant.0.clone(),
            role: k.role.as_str(),
            name: k.name.clone(),
            created_at: timestamp::format(&k.created_at),
            revoked_at: k.revoked_at.as_ref().map(timestamp::format),
        }
    }
}

fn keys(st: &AppState) -> Result<&Keys, ApiError> {
    match &st.auth {
        crate::auth::Auth::Keys(keys) => Ok(keys),
        crate::auth::Auth::Injected => Err(ApiError::not_found(
            "this deployment has no API keys: identities come from its gateway",
        )),
    }
}

/// `POST /v1/keys {"tenant", "role", "name"}`: 201 `{"id", "key", "tenant", "role", "name",
/// "created_at"}`.
pub async fn create(
    State(st): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let keys = keys(&st)?;
    let request: KeyRequest = decode(body, "").map_err(ApiError::malformed)?;
    let role: Role = request
        .role
        .parse()
        .map_err(|e: String| ApiError::invalid(vec![sked_core::FieldError::new("role", e)]))?;
    let new = NewKey {
        tenant: request.tenant.map_or_else(|| caller.tenant.clone(), TenantId),
        role,
        name: request.name,
    };
    let created = keys.create(&caller, new).await?;
    let mut body = serde_json::to_value(KeyView::from(&created.key)).unwrap_or_default();
    body["key"] = serde_json::Value::String(created.secret);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /v1/keys`: `{"items": [keys]}` — the caller's tenant's, or every tenant's for an
/// operator.
pub async fn list(State(st): State<AppState>, Caller(caller): Caller) -> Result<Response, ApiError> {
    let listed = keys(&st)?.list(&caller).await?;
    let items: Vec<KeyView> = listed.iter().map(KeyView::from).collect();
    Ok(Json(serde_json::json!({ "items": items, "next_cursor": null })).into_response())
}

/// `DELETE /v1/keys/{id}`: the revoked key.
pub async fn revoke(
    State(st): State<AppState>,
    Caller(caller): Caller,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let revoked = keys(&st)?.revoke(&caller, &id).await?;
    Ok(Json(KeyView::from(&revoked)).into_response())
}
