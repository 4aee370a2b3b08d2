//! Key routes: `POST /v1/keys` (the only answer that holds a key's secret), `GET /v1/keys`
//! (no secrets) and `DELETE /v1/keys/{id}` (refused at once afterwards). Who may do what is
//! [`sked_core::service::keys`]'s; these handlers only read the request and write the answer.

use crate::AppState;
use crate::dto::ListView;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, JsonBody, PathId, decode, require_object};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sked_core::auth::{ApiKey, Role};
use sked_core::ids::TenantId;
use sked_core::service::keys::{Keys, NewKey};
use sked_core::timestamp;
use utoipa::ToSchema;

/// The body of `POST /v1/keys`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewKey)]
struct KeyRequest {
    /// The tenant the key acts for (the caller's when absent or null; another tenant's needs
    /// an operator key).
    tenant: Option<String>,
    /// `read`, `write`, `admin` or `operator` (an admin key makes keys up to `admin`).
    #[schema(schema_with = role_schema)]
    role: String,
    /// A label for people.
    name: String,
}

/// A key as listed: never its secret.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Key)]
pub struct KeyView {
    /// Public id.
    pub id: String,
    /// The tenant it acts for.
    pub tenant: String,
    /// What it may do.
    #[schema(schema_with = role_schema)]
    pub role: &'static str,
    /// Its label.
    pub name: String,
    /// When it was created.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When it was revoked, or `null`.
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
}

/// A key just made: the only answer that holds its secret.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CreatedKey)]
pub struct CreatedKeyView {
    /// The key as listed.
    #[serde(flatten)]
    pub view: KeyView,
    /// The secret, `sked_` and 48 hex digits; shown only here.
    #[schema(pattern = "^sked_[0-9a-f]{48}$")]
    pub key: String,
}

fn role_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    let roles: Vec<&str> = Role::ALL.iter().map(Role::as_str).collect();
    sked_core::openapi::string_enum(&roles)
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
#[utoipa::path(
    post,
    path = "/v1/keys",
    operation_id = "create_key",
    tag = "keys",
    summary = "Create an API key (admin: its tenant's; operator: any tenant's)",
    request_body(content = KeyRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The key, with its secret (shown only here)", body = CreatedKeyView),
        (status = 400, description = "Malformed: not JSON, a wrong type, an unknown or missing field (`invalid_argument`, naming it)", body = ErrorBody),
        (status = 404, description = "This deployment has no API keys (identities come from its gateway)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "An unknown role or a malformed tenant or name (`invalid_argument`, naming it)", body = ErrorBody)
    )
)]
pub async fn create(
    State(st): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let keys = keys(&st)?;
    require_object(&body, "", false)?;
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
    let body = CreatedKeyView {
        view: KeyView::from(&created.key),
        key: created.secret,
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /v1/keys`: `{"items": [keys]}` — the caller's tenant's, or every tenant's for an
/// operator.
#[utoipa::path(
    get,
    path = "/v1/keys",
    operation_id = "list_keys",
    tag = "keys",
    summary = "List keys (never their secrets)",
    responses(
        (status = 200, description = "Every key the caller may see, on one page", body = ListView<KeyView>),
        (status = 404, description = "This deployment has no API keys (identities come from its gateway)", body = ErrorBody)
    )
)]
pub async fn list(State(st): State<AppState>, Caller(caller): Caller) -> Result<Response, ApiError> {
    let listed = keys(&st)?.list(&caller).await?;
    let items: Vec<KeyView> = listed.iter().map(KeyView::from).collect();
    Ok(Json(ListView {
        items,
        next_cursor: None,
    })
    .into_response())
}

/// `DELETE /v1/keys/{id}`: the revoked key.
#[utoipa::path(
    delete,
    path = "/v1/keys/{id}",
    operation_id = "revoke_key",
    tag = "keys",
    summary = "Revoke a key (refused from now on)",
    params(("id" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "The key, revoked", body = KeyView),
        (status = 404, description = "No such key the caller may see (`not_found`)", body = ErrorBody)
    )
)]
pub async fn revoke(
    State(st): State<AppState>,
    Caller(caller): Caller,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let revoked = keys(&st)?.revoke(&caller, &id).await?;
    Ok(Json(KeyView::from(&revoked)).into_response())
}
