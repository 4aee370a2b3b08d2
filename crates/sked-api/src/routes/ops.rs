//! Operational routes: health and readiness, the OpenAPI document ([`crate::openapi`]), and the JSON answers
//! for unknown paths and methods.

use crate::AppState;
use crate::error::ApiError;
use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

/// `GET /healthz`'s answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok`.
    #[schema(pattern = "^ok$")]
    pub status: &'static str,
}

/// `GET /healthz`: the process is up and serving.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "ops",
    summary = "Liveness (no key needed)",
    security(()),
    responses((status = 200, description = "Up", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// `GET /readyz`'s answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Ready {
    /// Always `ready`.
    #[schema(pattern = "^ready$")]
    pub status: &'static str,
}

/// `GET /readyz`: the process can reach its store (one primary-key read within 2 s); 503
/// otherwise. For readiness probes: no key needed.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "ops",
    summary = "Readiness: the store answers (no key needed)",
    security(()),
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, description = "The store did not answer (`unavailable`)", body = crate::error::ErrorBody)
    )
)]
pub async fn readyz(State(st): State<AppState>) -> Result<Json<Ready>, ApiError> {
    st.sked.ready().await?;
    Ok(Json(Ready { status: "ready" }))
}

/// `GET /v1/openapi.json`: the document generated from the code ([`crate::openapi`]).
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "get_openapi",
    tag = "ops",
    summary = "This document (OpenAPI 3.1)",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object))
)]
pub async fn openapi() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], crate::openapi::json())
}

/// Any path no route matches.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint")
}

/// A known path with a method it does not take.
pub async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

#[cfg(test)]
mod tests {
    #[test]
    fn openapi_is_json_3_1() {
        let doc: serde_json::Value = serde_json::from_str(crate::openapi::json()).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/v1/jobs:batch"]["post"].is_object());
    }
}
