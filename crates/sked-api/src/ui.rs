//! The web dashboard: `GET /` (the page) and `GET /ui/{version}/{file}` (its scripts, styles and
//! icon), built into the binary from `crates/sked-api/ui/` with `include_bytes!` — plain HTML,
//! CSS and JavaScript modules with no build step, so neither building nor serving it needs
//! Node.js.
//!
//! It owns only the serving of those static files and their headers. The pages hold no data and
//! need no key: the dashboard is a client of the JSON API, and every call it makes carries the
//! key the user signed in with ([`crate::auth`] lets `GET`/`HEAD` of [`is_open`] paths through
//! and nothing else). These routes are not API: they stay out of the OpenAPI document.
//!
//! Headers: a Content-Security-Policy of `default-src 'self'` with no inline script or style
//! (so nothing the API returns can run as code even if it reached the page as markup), no
//! framing, no referrer, `nosniff`. Caching: asset URLs carry a version — a hash of every
//! file — so an asset is cached for a year as immutable, and the page itself is revalidated on
//! every load (`no-cache` with an `ETag`): a new binary's page names new asset URLs.

use crate::AppState;
use crate::error::ApiError;
use axum::Router;
use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HeaderName, IF_NONE_MATCH, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// The prefix of the dashboard's assets.
pub const ASSET_PREFIX: &str = "/ui/";

/// What the page allows: its own origin for everything, nothing inline, no plugins, no framing.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Where `index.html` names the version in its asset URLs.
const VERSION_MARK: &str = "__VERSION__";

/// One file of the dashboard.
struct Asset {
    /// Its name under `/ui/{version}/`.
    name: &'static str,
    /// Its `Content-Type`.
    mime: &'static str,
    /// Its bytes, built in.
    body: &'static [u8],
}

/// `include_bytes!` of `ui/<name>`, with its type.
macro_rules! asset {
    ($name:literal, $mime:expr) => {
        Asset {
            name: $name,
            mime: $mime,
            body: include_bytes!(concat!("../ui/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file under `ui/` but `index.html` (a test checks none is missing).
const ASSETS: &[Asset] = &[
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("words.js", JS),
    asset!("jobs.js", JS),
    asset!("job.js", JS),
    asset!("run.js", JS),
    asset!("failed.js", JS),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
];

const INDEX: &str = include_str!("../ui/index.html");

/// The version in asset URLs: the first 16 hex digits of a SHA-256 over every file.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut hash = Sha256::new();
    hash.update(INDEX.as_bytes());
    for asset in ASSETS {
        hash.update(asset.name.as_bytes());
        hash.update([0]);
        hash.update(asset.body);
    }
    hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
});

/// The page, its asset URLs carrying [`VERSION`].
static PAGE: LazyLock<String> = LazyLock::new(|| INDEX.replace(VERSION_MARK, &VERSION));

/// Whether `path` is one of the dashboard's (served without a key).
pub fn is_open(path: &str) -> bool {
    path == "/" || path.starts_with(ASSET_PREFIX)
}

/// `GET /` and `GET /ui/{version}/{file}`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(page))
        .route("/ui/{version}/{file}", get(asset))
}

/// The headers every dashboard answer carries.
fn security_headers(headers: &mut HeaderMap) {
    let fixed: [(HeaderName, &'static str); 4] = [
        (CONTENT_SECURITY_POLICY, CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "no-referrer"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// `body` as `mime` with `etag`, or 304 when the request already has it.
fn respond(request: &HeaderMap, mime: &'static str, etag: &str, cache: &'static str, body: &'static [u8]) -> Response {
    let etag = format!("\"{etag}\"");
    let fresh = request
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(CONTENT_TYPE, mime)], body).into_response()
    };
    let headers = response.headers_mut();
    security_headers(headers);
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(ETAG, value);
    }
    response
}

/// `GET /`: the page, revalidated on every load.
async fn page(headers: HeaderMap) -> Response {
    respond(
        &headers,
        "text/html; charset=utf-8",
        &VERSION,
        "no-cache",
        PAGE.as_bytes(),
    )
}

/// `GET /ui/{version}/{file}`: a file, cached for good when asked for under this build's
/// version; under another version (a page of an earlier build), served but revalidated.
async fn asset(headers: HeaderMap, Path((version, file)): Path<(String, String)>) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == file) else {
        return ApiError::not_found("no such dashboard file").into_response();
    };
    let cache = if version == *VERSION {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    respond(&headers, asset.mime, &VERSION, cache, asset.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_under_ui_is_served() {
        // Given the files in ui/, when the table is read, then each (but the page) is in it.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name != "index.html")
            .collect();
        on_disk.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
        served.sort();
        assert_eq!(on_disk, served);
    }

    #[test]
    fn the_page_names_this_builds_assets_and_no_inline_script() {
        assert!(!PAGE.contains(VERSION_MARK));
        assert!(PAGE.contains(&format!("/ui/{}/app.js", *VERSION)));
        // The CSP forbids inline scripts and styles: the page must not need any.
        assert!(!PAGE.contains("<script>") && !PAGE.contains("style=") && !PAGE.contains("<style"));
        for asset in ASSETS.iter().filter(|a| a.mime == JS) {
            let text = std::str::from_utf8(asset.body).unwrap();
            assert!(!text.contains("innerHTML"), "{} sets innerHTML", asset.name);
            assert!(!text.contains("eval("), "{} calls eval", asset.name);
        }
    }

    #[test]
    fn open_paths_are_the_page_and_its_assets_only() {
        assert!(is_open("/") && is_open("/ui/abc/app.js"));
        assert!(!is_open("/v1/jobs") && !is_open("/metrics") && !is_open("/uix"));
    }
}
