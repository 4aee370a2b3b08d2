//! Request extractors: the caller and its tenant (from [`crate::auth`]), `If-Match`, `Idempotency-Key`, path ids, query
//! parameters and JSON bodies — each turning a malformed request into a 400 (or 413) that
//! names what is wrong, before any service is called.
//!
//! Decoding a JSON value into a typed request ([`decode`]) keeps the field path of the first
//! problem (`schedule.at`, `task.command.argv[0]`, `priority`), including for missing and
//! unknown fields, whose names serde only gives in the message.

use crate::AppState;
use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sked_core::auth::Principal;
use sked_core::error::FieldError;
use sked_core::ids::TenantId;
use sked_core::ports::PageRequest;
use sked_core::timestamp::{self, Timestamp};
use std::str::FromStr;

/// Header carrying a client's idempotency key for creates.
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";
/// Default page size of listings.
pub const DEFAULT_LIMIT: usize = 100;
/// Largest page size of listings.
pub const MAX_LIMIT: usize = 1_000;
/// Longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// Who is calling, as [`crate::auth`] found it (every route but `/healthz` has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .map(Caller)
            .ok_or_else(|| ApiError::unauthenticated("no verified identity came with this request"))
    }
}

/// The calling tenant: the principal's (never a header the caller sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub TenantId);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Caller(principal) = Caller::from_request_parts(parts, state).await?;
        Ok(Tenant(principal.tenant))
    }
}

/// `If-Match: <version>` (also accepted quoted, as an entity tag: `"3"` or `W/"3"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IfMatch(pub Option<u64>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(axum::http::header::IF_MATCH) else {
            return Ok(IfMatch(None));
        };
        let text = value.to_str().unwrap_or("").trim();
        let text = text.strip_prefix("W/").unwrap_or(text);
        let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
        text.parse::<u64>().map(|v| IfMatch(Some(v))).map_err(|_| {
            ApiError::bad_request(
                Some("If-Match"),
                "If-Match must be the job's version, a non-negative integer",
            )
        })
    }
}

/// `Idempotency-Key`: 1 to 255 visible ASCII characters, or absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(IDEMPOTENCY_HEADER) else {
            return Ok(IdempotencyKey(None));
        };
        match value.to_str() {
            Ok(s) if (1..=MAX_IDEMPOTENCY_KEY).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic()) => {
                Ok(IdempotencyKey(Some(s.to_string())))
            }
            _ => Err(ApiError::bad_request(
                Some(IDEMPOTENCY_HEADER),
                format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
            )),
        }
    }
}

/// The one path parameter of a route (`{id}` or `{run_id}`), percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| PathId(id))
            .map_err(|e| ApiError::bad_request(None, format!("invalid path: {e}")))
    }
}

/// A JSON request body, parsed but not yet typed. Larger than the configured limit → 413;
/// empty or not JSON → 400.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonBody(pub Value);

impl<S> FromRequest<S> for JsonBody
where
    S: Send + Sync,
    AppState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = AppState::from_ref(state).config.max_body_bytes;
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(limit)
            } else {
                ApiError::bad_request(None, format!("could not read the request body: {rejection}"))
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad_request(None, "request body is empty; expected JSON"));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(None, format!("request body is not valid JSON: {e}")))
    }
}

/// Decodes `value` into `T`, naming the field of the first problem, below `prefix` (a
/// dotted path, or empty for the body's root).
pub fn decode<T: DeserializeOwned>(value: Value, prefix: &str) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        let mut field = join(prefix, if path == "." { "" } else { &path });
        // serde reports missing and unknown fields at their parent; name the field itself.
        for marker in ["missing field `", "unknown field `"] {
            if let Some(name) = message.strip_prefix(marker).and_then(|rest| rest.split('`').next())
                && field.rsplit('.').next().is_none_or(|last| last != name)
            {
                field = join(&field, name);
            }
        }
        FieldError::new(field, message)
    })
}

/// 400 unless `value` is a JSON object (or, with `or_null`, `null`): serde would read a
/// struct from an array of its fields' values too, which no client means. `field` names it
/// (empty for the body itself).
pub fn require_object(value: &Value, field: &str, or_null: bool) -> Result<(), ApiError> {
    if value.is_object() || (or_null && value.is_null()) {
        return Ok(());
    }
    let what = if field.is_empty() { "the request body" } else { field };
    Err(ApiError::bad_request(
        (!field.is_empty()).then_some(field),
        format!("{what} must be a JSON object"),
    ))
}

/// `a.b` joined, skipping empty sides.
pub fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ if b.starts_with('[') => format!("{a}{b}"),
        _ => format!("{a}.{b}"),
    }
}

/// The query string as name/value pairs, with typed, validated accessors. Every problem is
/// a 400 naming the parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryParams(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map(|Query(pairs)| QueryParams(pairs))
            .map_err(|e| ApiError::bad_request(None, format!("malformed query string: {e}")))
    }
}

impl QueryParams {
    /// Refuses any parameter not in `allowed`.
    pub fn allow(&self, allowed: &[&str]) -> Result<&Self, ApiError> {
        match self.0.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            Some((k, _)) => Err(ApiError::bad_request(
                Some(k),
                format!("unknown query parameter {k:?}; expected one of: {}", allowed.join(", ")),
            )),
            None => Ok(self),
        }
    }

    /// Refuses any parameter the route's documented parameters `P` ([`crate::params`]) do
    /// not name.
    pub fn allow_documented<P: utoipa::IntoParams>(&self) -> Result<&Self, ApiError> {
        let names: Vec<String> = P::into_params(|| None).into_iter().map(|p| p.name).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.allow(&names)
    }

    /// The value of a parameter given at most once.
    pub fn one(&self, name: &str) -> Result<Option<&str>, ApiError> {
        let mut values = self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(ApiError::bad_request(
                Some(name),
                format!("query parameter {name:?} given more than once"),
            ));
        }
        Ok(first)
    }

    /// Every value of a repeatable parameter, in order.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// A parameter parsed with `FromStr`; `what` describes the expected form.
    pub fn parse<T: FromStr>(&self, name: &str, what: &str) -> Result<Option<T>, ApiError> {
        self.one(name)?
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| ApiError::bad_request(Some(name), format!("{name} must be {what}, got {v:?}")))
            })
            .transpose()
    }

    /// An integer parameter within `range`.
    pub fn int_in(&self, name: &str, range: std::ops::RangeInclusive<usize>) -> Result<Option<usize>, ApiError> {
        let what = format!("an integer from {} to {}", range.start(), range.end());
        let value = self.parse::<usize>(name, &what)?;
        match value {
            Some(v) if !range.contains(&v) => Err(ApiError::bad_request(
                Some(name),
                format!("{name} must be {what}, got {v}"),
            )),
            v => Ok(v),
        }
    }

    /// A state name (`PENDING`, `active`…; case-insensitive) parsed with the enum's `FromStr`.
    pub fn state<T: FromStr>(&self, expected: &str) -> Result<Option<T>, ApiError> {
        self.one("state")?
            .map(|v| {
                v.to_ascii_uppercase().parse::<T>().map_err(|_| {
                    ApiError::bad_request(Some("state"), format!("state must be one of {expected}, got {v:?}"))
                })
            })
            .transpose()
    }

    /// A boolean parameter: `true`/`false`/`1`/`0`.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        self.one(name)?
            .map(|v| match v {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(ApiError::bad_request(
                    Some(name),
                    format!("{name} must be true or false, got {v:?}"),
                )),
            })
            .transpose()
    }

    /// An RFC 3339 timestamp parameter.
    pub fn timestamp(&self, name: &str) -> Result<Option<Timestamp>, ApiError> {
        self.one(name)?
            .map(|v| {
                timestamp::parse(v).map_err(|e| {
                    ApiError::bad_request(Some(name), format!("{name} must be an RFC 3339 timestamp: {e}"))
                })
            })
            .transpose()
    }

    /// `cursor` and `limit` (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    pub fn page(&self) -> Result<PageRequest, ApiError> {
        let limit = self.int_in("limit", 1..=MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
        let cursor = self.one("cursor")?.filter(|c| !c.is_empty()).map(str::to_string);
        Ok(PageRequest { cursor, limit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sked_core::job::JobSpec;

    fn spec_error(v: Value) -> FieldError {
        decode::<JobSpec>(v, "").unwrap_err()
    }

    fn base() -> Value {
        json!({"schedule": {"every": "5m"}, "task": {"command": {"argv": ["true"]}}})
    }

    #[test]
    fn decode_names_missing_field() {
        assert_eq!(
            spec_error(json!({"task": {"command": {"argv": ["x"]}}})).field,
            "schedule"
        );
        assert_eq!(
            spec_error(json!({"schedule": {"every": "5m"}, "task": {"command": {}}})).field,
            "task.command.argv"
        );
    }

    #[test]
    fn decode_names_unknown_field() {
        let mut v = base();
        v["colour"] = json!("red");
        assert_eq!(spec_error(v).field, "colour");
        let mut v = base();
        v["task"]["command"]["shell"] = json!(true);
        assert_eq!(spec_error(v).field, "task.command.shell");
    }

    #[test]
    fn decode_names_type_errors() {
        let mut v = base();
        v["priority"] = json!("high");
        assert_eq!(spec_error(v).field, "priority");
        let mut v = base();
        v["max_retries"] = json!(-1);
        assert_eq!(spec_error(v).field, "max_retries");
        let mut v = base();
        v["task"]["command"]["argv"] = json!([1]);
        assert_eq!(spec_error(v).field, "task.command.argv[0]");
        let v = json!({"schedule": {"at": "yesterday"}, "task": {"command": {"argv": ["x"]}}});
        assert_eq!(spec_error(v).field, "schedule.at");
    }

    #[test]
    fn decode_prefixes() {
        let e = decode::<JobSpec>(json!({"schedule": {"every": "5m"}}), "jobs[3]").unwrap_err();
        assert_eq!(e.field, "jobs[3].task");
    }

    #[test]
    fn query_accessors() {
        let q = QueryParams(vec![
            ("limit".into(), "5000".into()),
            ("label".into(), "a=b".into()),
            ("label".into(), "c=d".into()),
        ]);
        assert!(q.allow(&["limit"]).is_err());
        assert_eq!(q.page().unwrap_err().field.as_deref(), Some("limit"));
        assert_eq!(q.all("label").count(), 2);
        assert!(q.one("label").is_err());
    }
}
