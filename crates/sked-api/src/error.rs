//! The API's error answer: a status and `{"error": {"code", "message", "field", "details"}}`.
//!
//! Owns the mapping from [`CoreError`] (and from malformed requests) to HTTP. It must not
//! leak internal details: store, queue and log failures are logged here with `tracing` and
//! answered with a generic message.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use sked_core::error::{BatchFieldError, CoreError, FieldError};
use sked_core::ports::{LogError, QueueError, StoreError};
use utoipa::ToSchema;

/// Every error code an answer can carry. (`resource_exhausted`: a tenant's quota, 429.)
pub const CODES: [&str; 11] = [
    "invalid_argument",
    "unauthenticated",
    "permission_denied",
    "not_found",
    "conflict",
    "unsupported",
    "payload_too_large",
    "method_not_allowed",
    "resource_exhausted",
    "unavailable",
    "internal",
];

/// An error answer's body: `{"error": {...}}`. [`ApiError::body`] writes it, so the document's
/// `Error` schema is the wire's.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody<'a> {
    /// What went wrong.
    pub error: ErrorDetail<'a>,
}

/// The inside of an [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail<'a> {
    /// Machine-readable code.
    #[schema(schema_with = code_schema)]
    pub code: &'a str,
    /// What went wrong, for people.
    pub message: &'a str,
    /// The request field at fault (`schedule.cron`, `limit`, `If-Match`…), or `null`.
    #[schema(required = true)]
    pub field: Option<&'a str>,
    /// Every problem when there are several (`[{field, message}]`, or `[{index, field,
    /// message}]` for a batch), else `null`.
    #[schema(schema_with = details_schema)]
    pub details: Option<&'a Value>,
}

fn code_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    sked_core::openapi::string_enum(&CODES)
}

fn details_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    sked_core::openapi::from_json(json!({
        "type": ["array", "null"],
        "items": {"anyOf": [
            {"$ref": "#/components/schemas/FieldError"},
            {"$ref": "#/components/schemas/BatchFieldError"}
        ]}
    }))
}

/// An error answer, ready to be sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable code: `invalid_argument`, `unauthenticated`, `permission_denied`,
    /// `not_found`, `conflict`, `unsupported`, `payload_too_large`, `resource_exhausted`,
    /// `unavailable`, `internal`, `method_not_allowed`.
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// The request field at fault (`schedule.cron`, `X-Sked-Tenant`, `limit`…), if one is.
    pub field: Option<String>,
    /// Every problem when there are several (`[{field, message}]`, or
    /// `[{index, field, message}]` for a batch), else `null`.
    pub details: Option<Value>,
    /// Whole seconds after which the same request may pass (`Retry-After`), for a 429.
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            details: None,
            retry_after: None,
        }
    }

    /// 400 `invalid_argument`: malformed JSON, query parameter or header.
    pub fn bad_request(field: Option<&str>, message: impl Into<String>) -> Self {
        ApiError {
            field: field.map(str::to_string),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
        }
    }

    /// 400 `invalid_argument` about one body field (a type error, an unknown or missing field).
    pub fn malformed(error: FieldError) -> Self {
        let field = (!error.field.is_empty()).then_some(error.field.as_str());
        let message = match field {
            Some(f) => format!("{f}: {}", error.message),
            None => error.message.clone(),
        };
        Self::bad_request(field, message)
    }

    /// 422 `invalid_argument`: the request is well formed but some fields are not valid.
    pub fn invalid(errors: Vec<FieldError>) -> Self {
        let first = errors
            .first()
            .cloned()
            .unwrap_or_else(|| FieldError::new("", "invalid request"));
        let message = match errors.len() {
            0 | 1 => format!("{}: {}", first.field, first.message),
            n => format!("{}: {} (and {} more problems)", first.field, first.message, n - 1),
        };
        ApiError {
            field: Some(first.field),
            details: Some(json!(errors)),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_argument", message)
        }
    }

    /// 422 `invalid_argument` listing each invalid batch entry's index, field and message.
    pub fn invalid_batch(mut errors: Vec<BatchFieldError>) -> Self {
        errors.sort_by_key(|e| e.index);
        let entries = {
            let mut ix: Vec<usize> = errors.iter().map(|e| e.index).collect();
            ix.dedup();
            ix.len()
        };
        let message = match errors.first() {
            Some(e) => format!(
                "{entries} invalid entries in batch; first: jobs[{}].{}: {}",
                e.index, e.field, e.message
            ),
            None => "invalid entries in batch".to_string(),
        };
        ApiError {
            field: Some("jobs".into()),
            details: Some(json!(errors)),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_argument", message)
        }
    }

    /// 401 `unauthenticated`: no credentials, or ones that are not (or no longer) valid.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }

    /// 403 `permission_denied`: valid credentials whose role may not do this.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission_denied", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 413 `payload_too_large`.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body exceeds {limit} bytes"),
        )
    }

    /// 429 `resource_exhausted`: a limit of the tenant's quota; nothing was written. With
    /// `retry_after`, sent as `Retry-After` (rounded up to whole seconds).
    pub fn resource_exhausted(message: impl Into<String>, retry_after: Option<sked_core::duration::Dur>) -> Self {
        ApiError {
            retry_after: retry_after.map(|d| d.0.as_millis().div_ceil(1000).max(1) as u64),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "resource_exhausted", message)
        }
    }

    /// 405 `method_not_allowed`.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "method not allowed on this path",
        )
    }

    /// 503 `unavailable`: a transient failure worth retrying. The cause is logged, not sent.
    fn unavailable(cause: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %cause, "transient failure answered 503");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "temporarily unavailable; retry shortly",
        )
    }

    /// 500 `internal`. The cause is logged, not sent.
    fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error answered 500");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: &self.message,
                field: self.field.as_deref(),
                details: self.details.as_ref(),
            },
        };
        // Strings and a JSON value only: serialising cannot fail.
        serde_json::to_value(body).unwrap_or_default()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status == StatusCode::UNAUTHORIZED {
            let challenge = [(axum::http::header::WWW_AUTHENTICATE, "Bearer realm=\"sked\"")];
            return (self.status, challenge, Json(self.body())).into_response();
        }
        if let Some(secs) = self.retry_after {
            let retry = [(axum::http::header::RETRY_AFTER, secs.to_string())];
            return (self.status, retry, Json(self.body())).into_response();
        }
        (self.status, Json(self.body())).into_response()
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::Invalid(errors) => ApiError::invalid(errors),
            CoreError::InvalidBatch(errors) => ApiError::invalid_batch(errors),
            CoreError::Unsupported { field, message } => ApiError {
                field: Some(field),
                ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unsupported", message)
            },
            CoreError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            CoreError::Unauthenticated(message) => ApiError::unauthenticated(message),
            CoreError::PermissionDenied(message) => ApiError::permission_denied(message),
            CoreError::Conflict(message) => ApiError::conflict(message),
            CoreError::ResourceExhausted { message, retry_after } => ApiError::resource_exhausted(message, retry_after),
            CoreError::Store(e) => e.into(),
            CoreError::Queue(e) => e.into(),
            CoreError::Logs(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiError::not_found("not found"),
            StoreError::Conflict(message) => ApiError::conflict(message),
            StoreError::QuotaExceeded(message) => ApiError::resource_exhausted(message, None),
            StoreError::BadCursor(_) => ApiError::bad_request(
                Some("cursor"),
                "cursor is not one this listing answered; pass back a next_cursor as it was given",
            ),
            StoreError::Transient(_) => ApiError::unavailable(&e),
            StoreError::Fenced | StoreError::Other(_) => ApiError::internal(&e),
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Transient(_) => ApiError::unavailable(&e),
            _ => ApiError::internal(&e),
        }
    }
}

impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::NotFound => ApiError::not_found("no log for that attempt"),
            LogError::Io(_) => ApiError::internal(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_names_first_field_and_lists_all() {
        let e = ApiError::from(CoreError::Invalid(vec![
            FieldError::new("schedule.cron", "bad cron"),
            FieldError::new("priority", "must be 0..=9"),
        ]));
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        let body = e.body();
        assert_eq!(body["error"]["field"], "schedule.cron");
        assert_eq!(body["error"]["details"][1]["field"], "priority");
    }

    #[test]
    fn transient_store_error_is_503_without_details() {
        let e = ApiError::from(CoreError::Store(StoreError::Transient(
            "db locked at /secret/path".into(),
        )));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!e.message.contains("secret"));
    }

    #[test]
    fn other_store_error_is_500_without_details() {
        let e = ApiError::from(CoreError::Store(StoreError::Other("disk /secret".into())));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.code, "internal");
        assert!(!e.message.contains("secret"));
    }
}
