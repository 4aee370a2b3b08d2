//! The route table: which path and method reach which handler. Handlers live in one file per
//! resource ([`jobs`], [`runs`], [`logs`], [`keys`], [`tenants`], [`ops`]); this file only wires them, with
//! [`crate::auth`] in front of all of them.
//!
//! `/v1/jobs:batch` is a literal segment (`jobs:batch`), a sibling of `/v1/jobs`, so it
//! cannot be taken for `/v1/jobs/{id}`.

pub mod jobs;
pub mod keys;
pub mod logs;
pub mod ops;
pub mod runs;
pub mod tenants;

use crate::auth::{self, Auth};
use crate::{ApiConfig, AppState};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use sked_core::service::Sked;

/// Builds the router over `sked` with `config`, authenticating by `auth`.
pub fn build(sked: Sked, config: ApiConfig, auth: Auth) -> Router {
    let body_limit = config.max_body_bytes;
    let state = AppState { sked, config, auth };
    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/v1/openapi.json", get(ops::openapi))
        .route("/v1/jobs", post(jobs::create).get(jobs::list))
        .route("/v1/jobs:batch", post(jobs::create_batch))
        .route(
            "/v1/jobs/{id}",
            get(jobs::get)
                .put(jobs::replace)
                .patch(jobs::patch)
                .delete(jobs::delete),
        )
        .route("/v1/jobs/{id}/pause", post(jobs::pause))
        .route("/v1/jobs/{id}/resume", post(jobs::resume))
        .route("/v1/jobs/{id}/trigger", post(jobs::trigger))
        .route("/v1/jobs/{id}/preview", get(jobs::preview))
        .route("/v1/jobs/{id}/runs", get(jobs::runs))
        .route("/v1/runs", get(runs::list))
        .route("/v1/runs/{run_id}", get(runs::get))
        .route("/v1/runs/{run_id}/cancel", post(runs::cancel))
        .route("/v1/runs/{run_id}/logs", get(logs::read))
        .route("/v1/keys", post(keys::create).get(keys::list))
        .route("/v1/keys/{id}", delete(keys::revoke))
        .route(
            "/v1/tenants/{tenant}/quota",
            get(tenants::get_quota).put(tenants::put_quota),
        )
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::authenticate))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}
