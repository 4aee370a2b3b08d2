//! Operational routes: health, the OpenAPI document, and the JSON answers for unknown paths
//! and methods.

use crate::error::ApiError;
use axum::Json;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// The hand-written OpenAPI 3.1 description of this API.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// `GET /healthz`: the process is up and serving.
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /v1/openapi.json`.
pub async fn openapi() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], OPENAPI)
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
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/v1/jobs:batch"]["post"].is_object());
    }
}
