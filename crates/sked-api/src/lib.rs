//! sked-api: sked's REST API as an axum [`Router`], built once here and served by whatever
//! main chooses (`axum::serve` locally, `lambda_http` on AWS).
//!
//! The contract is the wire shapes in `dto` and the routes here; `GET /v1/openapi.json`
//! serves it as an OpenAPI 3.1 document generated from this code ([`openapi`]). Modules:
//!
//! - [`routes`]: the route table, and one handler file per resource (jobs, runs, logs, keys,
//!   tenants, metrics, ops).
//! - [`metrics`]: the Prometheus recorder (sked-core's observer port) and the exposition of
//!   `GET /metrics`.
//! - [`auth`]: who is calling (API keys, or an identity the gateway verified) and the role
//!   gate, in front of every route but `/healthz`.
//! - `extract`: the caller and its tenant, `If-Match`, `Idempotency-Key`, path ids, query
//!   parameters and JSON bodies — malformed requests end here with a 400 naming the field.
//! - `input`: create, batch, PUT and PATCH bodies decoded into core types.
//! - `shorthand`: the seed-style one-shot body (`payload`, `scheduled_time`).
//! - `merge_patch`: RFC 7386 for PATCH.
//! - `dto`: how jobs, runs, log lines and pages are written.
//! - [`openapi`]: the document — the route table's annotations, the views' schemas, and the
//!   request bodies derived from `JobSpec`'s; `params`: query and header parameters as
//!   documented (the handlers accept exactly those).
//! - [`error`]: [`ApiError`], and the mapping from `CoreError` to status and JSON.
//! - [`ui`]: the web dashboard (`GET /` and its files under `/ui/`), built into the binary; a
//!   client of this API like any other, outside the OpenAPI document.
//!
//! This crate decides nothing about scheduling: every action is a call to
//! [`sked_core::service::Sked`], and a request that is not well formed never reaches it.

pub mod auth;
pub mod error;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod ui;

mod dto;
mod extract;
mod input;
mod merge_patch;
mod params;
mod shorthand;

pub use auth::Auth;
pub use error::ApiError;

use axum::Router;
use sked_core::service::Sked;

/// Default request body limit: 256 KiB (the product's documented request limit).
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;

/// Settings of the HTTP layer.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest request body accepted; larger ones answer 413. Default
    /// [`DEFAULT_MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// The series `GET /metrics` answers with; the HTTP requests are counted into it. Give the
    /// same recorder to the services' ports ([`sked_core::service::Ports::with_observer`]) so
    /// it also counts runs. Default: a new one (HTTP requests and queue depth only).
    pub metrics: std::sync::Arc<metrics::Recorder>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            metrics: std::sync::Arc::new(metrics::Recorder::new()),
        }
    }
}

/// What every handler is given: the service, the HTTP settings and how callers are known.
#[derive(Clone)]
pub struct AppState {
    /// The service every action goes through.
    pub sked: Sked,
    /// HTTP settings.
    pub config: ApiConfig,
    /// Where a request's principal comes from.
    pub auth: Auth,
}

/// The API: `/v1/...` routes, `/healthz`, JSON errors for unknown paths, and the body limit;
/// every route but `/healthz` behind `auth`. Also the web dashboard ([`ui`]) at `/`, whose
/// static files need no key (its calls to the API carry one).
pub fn router(sked: Sked, config: ApiConfig, auth: Auth) -> Router {
    routes::build(sked, config, auth)
}

/// `/healthz`, `/readyz` and `/metrics` alone, as [`router`] serves them: for a process that serves no
/// API but has metrics of its own (`sked worker --metrics-listen`).
pub fn ops_router(sked: Sked, config: ApiConfig, auth: Auth) -> Router {
    routes::build_ops(sked, config, auth)
}
