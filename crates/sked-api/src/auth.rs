//! Authentication and the role gate, in front of every route but `GET /healthz`, `/readyz` and the web
//! dashboard's static files ([`crate::ui::is_open`]: they hold no data; the API calls the
//! dashboard makes carry the user's key).
//!
//! Deny by default: a request reaches a handler only with a [`Principal`], put on it here.
//! Where it comes from is the deployment's choice ([`Auth`]):
//! - [`Auth::Keys`]: `Authorization: Bearer <key>`, checked against the key store (`sked
//!   server`). No key, an unknown or a revoked one: 401 `unauthenticated`.
//! - [`Auth::Injected`]: the layer in front already put a `Principal` on the request from
//!   credentials a gateway verified (the Lambda entry point reads API Gateway's JWT claims).
//!   A request without one is refused. Nothing a caller sends (no header) can set it.
//!
//! Then the role gate: reading (`GET`, `HEAD`) needs `read`; anything else needs `write`.
//! Key and quota routes ask for more in their handlers. `X-Sked-Tenant` is not read: the
//! tenant is the principal's.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sked_core::auth::{Principal, Role};
use sked_core::service::keys::Keys;

/// Where a request's principal comes from.
#[derive(Clone)]
pub enum Auth {
    /// Bearer API keys, checked against these keys.
    Keys(Keys),
    /// Put on the request (as an extension) by the layer in front; refused without one.
    Injected,
}

/// The routes open to anyone: the health and readiness checks, and reading the dashboard's
/// page and files.
fn is_open(req: &Request) -> bool {
    let path = req.uri().path();
    (req.method() == Method::GET && matches!(path, "/healthz" | "/readyz"))
        || (matches!(*req.method(), Method::GET | Method::HEAD) && crate::ui::is_open(path))
}

/// The bearer token of `headers`, if there is exactly one well-formed one.
fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let missing = || ApiError::unauthenticated("this route needs `Authorization: Bearer <API key>`");
    let value = headers.get(AUTHORIZATION).ok_or_else(missing)?;
    let text = value.to_str().map_err(|_| missing())?.trim();
    let (scheme, token) = text.split_once(' ').ok_or_else(missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(missing());
    }
    Ok(token.trim())
}

/// The middleware: finds the principal, applies the role gate, and hands the request on with
/// the principal as an extension.
pub(crate) async fn authenticate(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    if is_open(&req) {
        return next.run(req).await;
    }
    let principal = match &st.auth {
        Auth::Keys(keys) => match bearer(req.headers()) {
            Ok(token) => keys.authenticate(token).await.map_err(ApiError::from),
            Err(e) => Err(e),
        },
        Auth::Injected => req
            .extensions()
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| ApiError::unauthenticated("no verified identity came with this request")),
    };
    let principal = match principal {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let needed = if matches!(*req.method(), Method::GET | Method::HEAD) {
        Role::Read
    } else {
        Role::Write
    };
    if !principal.may(needed) {
        let message = format!("this key is {}; {} needs {needed}", principal.role, req.method());
        return ApiError::permission_denied(message).into_response();
    }
    req.extensions_mut().insert(principal);
    next.run(req).await
}
