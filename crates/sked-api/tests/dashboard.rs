//! The web dashboard as the router serves it: the page and its files without a key, with
//! their security and cache headers; nothing else opened by it (the API still needs a key, and
//! unknown `/v1` paths are still 404 behind it); and none of it in the OpenAPI document. What
//! the pages do in a browser is scripts/dashboard-test.sh's.

mod common;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use common::{World, bearer};
use http_body_util::BodyExt;
use sked_core::auth::Role;
use tower::ServiceExt;

/// Status, headers and body (as text) of `method path` with `headers`.
async fn fetch(w: &World, method: Method, path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
    let mut req = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = w
        .router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).map_or("", |v| v.to_str().unwrap())
}

/// The asset URLs `page` names: `/ui/<version>/<file>`.
fn asset_urls(page: &str) -> Vec<String> {
    page.split('"')
        .filter(|s| s.starts_with("/ui/"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn the_page_is_served_without_a_key_with_its_security_headers() {
    let w = World::new();
    let (status, headers, _) = fetch(&w, Method::GET, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "content-type"), "text/html; charset=utf-8");
    let csp = header(&headers, "content-security-policy");
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(header(&headers, "x-content-type-options"), "nosniff");
    assert_eq!(header(&headers, "referrer-policy"), "no-referrer");
    // The page is revalidated on every load; a matching ETag answers 304 with no body.
    assert_eq!(header(&headers, "cache-control"), "no-cache");
    let etag = header(&headers, "etag").to_string();
    let (status, _, body) = fetch(&w, Method::GET, "/", &[("if-none-match", &etag)]).await;
    assert_eq!((status, body.as_str()), (StatusCode::NOT_MODIFIED, ""));
    // HEAD too, for checks that do not want the body.
    let (status, _, _) = fetch(&w, Method::HEAD, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn every_file_the_page_names_is_served_and_cached_for_good() {
    let w = World::new();
    let (_, _, page) = fetch(&w, Method::GET, "/", &[]).await;
    let urls = asset_urls(&page);
    assert!(urls.iter().any(|u| u.ends_with("/app.js")), "{urls:?}");
    assert!(urls.iter().any(|u| u.ends_with("/style.css")), "{urls:?}");
    for url in &urls {
        let (status, headers, body) = fetch(&w, Method::GET, url, &[]).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        assert!(!body.is_empty(), "{url}");
        assert_eq!(
            header(&headers, "cache-control"),
            "public, max-age=31536000, immutable",
            "{url}"
        );
        assert_eq!(header(&headers, "x-content-type-options"), "nosniff", "{url}");
        let mime = header(&headers, "content-type");
        let expected = match url.rsplit('.').next() {
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            other => panic!("unexpected asset {other:?}"),
        };
        assert_eq!(mime, expected, "{url}");
    }
    // The modules app.js imports sit beside it, under the same version.
    let app = urls.iter().find(|u| u.ends_with("/app.js")).unwrap();
    let dir = app.trim_end_matches("app.js");
    for module in [
        "api.js",
        "dom.js",
        "words.js",
        "jobs.js",
        "job.js",
        "run.js",
        "failed.js",
    ] {
        let (status, _, _) = fetch(&w, Method::GET, &format!("{dir}{module}"), &[]).await;
        assert_eq!(status, StatusCode::OK, "{module}");
    }
    // Under another version (a page of an earlier build still open): served, but revalidated.
    let (status, headers, _) = fetch(&w, Method::GET, "/ui/0000000000000000/app.js", &[]).await;
    assert_eq!(
        (status, header(&headers, "cache-control")),
        (StatusCode::OK, "no-cache")
    );
}

#[tokio::test]
async fn the_dashboard_opens_nothing_else() {
    let w = World::new();
    // An unknown file is a 404, as JSON like the API's.
    let (status, _, body) = fetch(&w, Method::GET, "/ui/x/secrets.txt", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Only reading is open: a POST to the page is refused before anything else.
    let (status, _, _) = fetch(&w, Method::POST, "/", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The API still needs a key, and an unknown /v1 path is still 404 behind it.
    let (status, _, _) = fetch(&w, Method::GET, "/v1/jobs", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, key) = w.key("acme", Role::Read).await;
    let (status, _, _) = fetch(&w, Method::GET, "/v1/nothing", &[("authorization", &bearer(&key))]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The dashboard is not API: the OpenAPI document does not list it.
    let (_, _, doc) = fetch(&w, Method::GET, "/v1/openapi.json", &[("authorization", &bearer(&key))]).await;
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("/v1/") || ["/healthz", "/readyz", "/metrics"].contains(&p.as_str())),
        "{paths:?}"
    );
}
