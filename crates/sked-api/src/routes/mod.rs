//! The route table: which path and method reach which handler. Handlers live in one file per
//! resource ([`jobs`], [`runs`], [`logs`], [`keys`], [`tenants`], [`webhooks`], [`metrics`], [`ops`]); this file only wires them, with
//! [`crate::auth`] in front of all of them, and the request counter
//! ([`crate::metrics`]) in front of that.
//!
//! The table is also the OpenAPI document's list of operations ([`crate::openapi`]): each
//! handler carries `#[utoipa::path(method, path = "...", ...)]` — its path, parameters
//! ([`crate::params`] for query and header ones), body and every status it can answer — and
//! `.routes(routes!(a, b))` below registers handlers of one path with axum *and* the document
//! from that annotation, so the two cannot drift apart. To add a route: annotate the handler
//! (401, 403, 500 and 503 are added to every authenticated operation by
//! [`crate::openapi::document`]; list the others it answers, with `body = ErrorBody`), then add
//! one `.routes(routes!(handler, ...))` line here. A plain `.route(...)` would serve the path but
//! leave it out of the document, and `tests/api.rs` would fail.
//!
//! The web dashboard's routes ([`crate::ui`]) are merged in by [`build`], outside the table: they
//! are not API and not in the document.
//!
//! `/v1/jobs:batch` is a literal segment (`jobs:batch`), a sibling of `/v1/jobs`, so it
//! cannot be taken for `/v1/jobs/{id}`.

pub mod jobs;
pub mod keys;
pub mod logs;
pub mod metrics;
pub mod ops;
pub mod runs;
pub mod tenants;
pub mod webhooks;

use crate::auth::{self, Auth};
use crate::openapi::ApiDoc;
use crate::{ApiConfig, AppState};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use sked_core::service::Sked;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Every route with its handlers, and the document they make.
pub fn table() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::openapi))
        .routes(routes!(metrics::metrics))
        .routes(routes!(jobs::create, jobs::list))
        .routes(routes!(jobs::create_batch))
        .routes(routes!(jobs::get, jobs::replace, jobs::patch, jobs::delete))
        .routes(routes!(jobs::pause))
        .routes(routes!(jobs::resume))
        .routes(routes!(jobs::trigger))
        .routes(routes!(jobs::backfill))
        .routes(routes!(jobs::preview))
        .routes(routes!(jobs::runs))
        .routes(routes!(jobs::occurrences))
        .routes(routes!(jobs::why))
        .routes(routes!(runs::list))
        .routes(routes!(runs::get))
        .routes(routes!(runs::cancel))
        .routes(routes!(logs::read))
        .routes(routes!(keys::create, keys::list))
        .routes(routes!(keys::revoke))
        .routes(routes!(tenants::get_quota, tenants::put_quota))
        .routes(routes!(webhooks::create, webhooks::get))
}

/// Builds the router over `sked` with `config`, authenticating by `auth`: the API of
/// [`table`], and the web dashboard ([`crate::ui`]) beside it — served, counted and limited
/// like the API, but neither in its document nor behind a key.
pub fn build(sked: Sked, config: ApiConfig, auth: Auth) -> Router {
    let (router, _) = table().split_for_parts();
    serve(router.merge(crate::ui::routes()), AppState { sked, config, auth })
}

/// Builds a router of `/healthz`, `/readyz` and `/metrics` only (a process that serves no API, such as
/// `sked worker`), with the same authentication and request counting.
pub fn build_ops(sked: Sked, config: ApiConfig, auth: Auth) -> Router {
    let ops_only = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(metrics::metrics));
    let (router, _) = ops_only.split_for_parts();
    serve(router, AppState { sked, config, auth })
}

/// `router` behind authentication, the request counter and the body limit, answering JSON
/// errors for unknown paths and methods.
fn serve(router: axum::Router<AppState>, state: AppState) -> Router {
    let body_limit = state.config.max_body_bytes;
    router
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::authenticate))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::http::record,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}
