//! Webhook secret routes: `POST /v1/webhook-secret` makes the caller's tenant a new secret
//! for signing its failure alerts and answers it (the only time it is shown); `GET
//! /v1/webhook-secret` says when the current one was made, never the secret. Who may is
//! [`sked_core::service::alerts`]'s; these handlers only write the answer.

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::extract::Caller;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sked_core::service::alerts::WebhookSecretService;
use sked_core::timestamp;
use utoipa::ToSchema;

/// A webhook secret just made: the only answer that holds it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CreatedWebhookSecret)]
pub struct CreatedSecretView {
    /// The tenant whose alerts it signs.
    pub tenant: String,
    /// `whsec_` and 64 hex digits: the HMAC-SHA256 key of the `Sked-Signature` header.
    #[schema(pattern = "^whsec_[0-9a-f]{64}$")]
    pub secret: String,
    /// When it was made.
    #[schema(format = DateTime)]
    pub created_at: String,
}

/// Whether the tenant has a webhook secret, and since when (never the secret).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookSecret)]
pub struct SecretView {
    /// The tenant.
    pub tenant: String,
    /// When its current secret was made; `null` if it has none (alerts are not posted then,
    /// and each try records why).
    #[schema(format = DateTime, required = true)]
    pub created_at: Option<String>,
}

fn secrets(st: &AppState) -> Result<&WebhookSecretService, ApiError> {
    st.sked
        .webhook_secrets()
        .ok_or_else(|| ApiError::not_found("this deployment keeps no webhook secrets"))
}

/// `POST /v1/webhook-secret`: 201 `{"tenant", "secret", "created_at"}`.
#[utoipa::path(
    post,
    path = "/v1/webhook-secret",
    operation_id = "create_webhook_secret",
    tag = "alerts",
    summary = "Make the tenant a new webhook secret, replacing the one before (admin)",
    responses(
        (status = 201, description = "The secret (shown only here)", body = CreatedSecretView),
        (status = 404, description = "This deployment keeps no webhook secrets", body = ErrorBody)
    )
)]
pub async fn create(State(st): State<AppState>, Caller(caller): Caller) -> Result<Response, ApiError> {
    let made = secrets(&st)?.rotate(&caller).await?;
    let body = CreatedSecretView {
        tenant: caller.tenant.0.clone(),
        secret: made.secret,
        created_at: timestamp::format(&made.created_at),
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /v1/webhook-secret`: `{"tenant", "created_at"}`.
#[utoipa::path(
    get,
    path = "/v1/webhook-secret",
    operation_id = "get_webhook_secret",
    tag = "alerts",
    summary = "When the tenant's webhook secret was made (admin; never the secret)",
    responses(
        (status = 200, description = "Since when the tenant has its secret", body = SecretView),
        (status = 404, description = "This deployment keeps no webhook secrets", body = ErrorBody)
    )
)]
pub async fn get(State(st): State<AppState>, Caller(caller): Caller) -> Result<Response, ApiError> {
    let created_at = secrets(&st)?.created_at(&caller).await?;
    Ok(Json(SecretView {
        tenant: caller.tenant.0.clone(),
        created_at: created_at.as_ref().map(timestamp::format),
    })
    .into_response())
}
