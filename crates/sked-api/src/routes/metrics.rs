//! `GET /metrics`: this process's metrics in the Prometheus text format, for any key — an
//! operator key sees every tenant's series, any other key its own tenant's
//! ([`crate::metrics::Scope`]). What the families mean and where their numbers come from:
//! [`crate::metrics`].

use crate::AppState;
use crate::extract::Caller;
use crate::metrics::{Scope, exposition};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "get_metrics",
    tag = "ops",
    summary = "Prometheus metrics of this process (an operator key sees every tenant's series, other keys their tenant's)",
    responses((status = 200, description = "The Prometheus text format, version 0.0.4", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(st): State<AppState>, Caller(principal): Caller) -> impl IntoResponse {
    let depth = match st.sked.ports().queue.depth().await {
        Ok(depth) => depth,
        Err(e) => {
            tracing::warn!(error = %e, "queue depth unavailable for this scrape");
            None
        }
    };
    let text = exposition::encode(&st.config.metrics, &Scope::of(&principal), depth);
    ([(CONTENT_TYPE, exposition::CONTENT_TYPE)], text)
}
