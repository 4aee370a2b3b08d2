//! The middleware that counts every HTTP request by the route template it matched (never its
//! raw path: `/v1/jobs/{id}`, not `/v1/jobs/nightly`) and its status, and times it. Requests
//! no route matched count as `unmatched`.

use crate::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

/// The route label of requests no route matched.
pub const UNMATCHED: &str = "unmatched";

/// Records the request in the router's [`super::Recorder`].
pub(crate) async fn record(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_string(), |p| p.as_str().to_string());
    let clock = st.sked.ports().clock.clone();
    let began = clock.now();
    let response = next.run(req).await;
    let elapsed = (clock.now() - began).to_std().unwrap_or_default();
    st.config
        .metrics
        .http_request(&route, response.status().as_u16(), elapsed);
    response
}
