//! `sked --sigv4`: the client signs its requests with AWS Signature Version 4 for an API behind
//! IAM. A server on 127.0.0.1 stands in for Lambda's function URL: it rebuilds each request's
//! signature from what it received (method, URL, the headers named signed, the body) with the
//! caller's credentials and the scope and time the request names, answers 403 unless it
//! matches, and records what it checked. Shown able to refuse: an unsigned request, and one
//! whose body is not the body signed.
#![cfg(feature = "aws")]

mod common;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use common::SKED;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const ACCESS_KEY: &str = "AKIAEXAMPLESIGV4TEST";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const SESSION_TOKEN: &str = "IQoJb3JpZ2luX2VjEXAMPLE-session-token";

/// What the server verified of one request.
#[derive(Debug, Clone)]
struct Verified {
    method: String,
    path: String,
    service: String,
    region: String,
    signed_headers: Vec<String>,
    body: String,
}

type Seen = Arc<Mutex<Vec<Verified>>>;

/// The value of `name` in `Credential=…, SignedHeaders=…, Signature=…`.
fn auth_part<'a>(authorization: &'a str, name: &str) -> Option<&'a str> {
    let rest = authorization.strip_prefix("AWS4-HMAC-SHA256 ")?;
    rest.split(',')
        .map(str::trim)
        .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
}

/// A request to sign as the test's credentials would: what the signature covers.
struct ToSign<'a> {
    method: &'a str,
    url: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: &'a [u8],
    /// The session token, if the credentials are temporary.
    token: Option<String>,
    /// Region and service.
    scope: (&'a str, &'a str),
    time: SystemTime,
}

/// Its signature, and the headers that carry it.
struct Signed {
    signature: String,
    headers: Vec<(String, String)>,
}

fn sign_as_the_test(request: ToSign<'_>) -> Result<Signed, String> {
    let identity: Identity = Credentials::new(ACCESS_KEY, SECRET_KEY, request.token, None, "test").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(request.scope.0)
        .name(request.scope.1)
        .time(request.time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        request.headers.into_iter(),
        SignableBody::Bytes(request.body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, signature) = sign(signable, &params).map_err(|e| e.to_string())?.into_parts();
    let headers = instructions
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    Ok(Signed { signature, headers })
}

/// Rebuilds the request's signature from what arrived; the checked request, or why not.
fn verify(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Verified, String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let authorization = header("authorization").ok_or("no authorization header")?;
    let credential = auth_part(authorization, "Credential").ok_or("no Credential")?;
    let signed = auth_part(authorization, "SignedHeaders").ok_or("no SignedHeaders")?;
    let signature = auth_part(authorization, "Signature").ok_or("no Signature")?;
    let [access_key, _date, region, service, "aws4_request"] = credential.split('/').collect::<Vec<_>>()[..] else {
        return Err(format!("a credential scope of another shape: {credential}"));
    };
    if access_key != ACCESS_KEY {
        return Err(format!("signed by {access_key}"));
    }
    let amz_date = header("x-amz-date").ok_or("no x-amz-date")?;
    let time = chrono::NaiveDateTime::parse_from_str(amz_date, "%Y%m%dT%H%M%SZ")
        .map_err(|e| format!("x-amz-date {amz_date}: {e}"))?
        .and_utc();
    let signed_headers: Vec<String> = signed.split(';').map(String::from).collect();
    let mut pairs = Vec::new();
    for name in &signed_headers {
        let value = header(name).ok_or_else(|| format!("signed header {name} missing"))?;
        pairs.push((name.as_str(), value));
    }
    let host = header("host").ok_or("no host")?;
    let url = format!("http://{host}{}", uri.path_and_query().map_or("/", |p| p.as_str()));
    let token = header("x-amz-security-token").map(String::from);
    let expected = sign_as_the_test(ToSign {
        method: method.as_str(),
        url: &url,
        headers: pairs,
        body,
        token,
        scope: (region, service),
        time: SystemTime::UNIX_EPOCH + Duration::from_secs(time.timestamp() as u64),
    })?
    .signature;
    if expected != signature {
        return Err(format!("signature {signature}, expected {expected}"));
    }
    Ok(Verified {
        method: method.to_string(),
        path: uri.path().to_string(),
        service: service.into(),
        region: region.into(),
        signed_headers,
        body: String::from_utf8_lossy(body).into_owned(),
    })
}

/// Every request: verified, then answered as the API would (a list, or the job created).
async fn handle(
    State(seen): State<Seen>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    match verify(&method, &uri, &headers, &body) {
        Ok(verified) => {
            let created = method == Method::POST;
            seen.lock().unwrap().push(verified);
            let answer = match created {
                true => json!({"id": "signed-job", "state": "ACTIVE"}),
                false => json!({"items": [], "next_cursor": null}),
            };
            let status = if created { StatusCode::CREATED } else { StatusCode::OK };
            (status, answer.to_string())
        }
        Err(why) => (
            StatusCode::FORBIDDEN,
            json!({"error": {"code": "permission_denied", "message": why}}).to_string(),
        ),
    }
}

/// The verifying server on 127.0.0.1; its base URL and what it verified.
async fn server() -> (String, Seen) {
    let seen = Seen::default();
    let app = axum::Router::new().fallback(handle).with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

/// `sked <command> --json --url <url> --sigv4 --sigv4-service lambda --sigv4-region eu-west-1
/// <rest>` with the test's credentials in the environment and nothing else to find.
async fn sked_signed(url: &str, command_words: &[&str], rest: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(SKED);
    command
        .args(command_words)
        .args([
            "--json",
            "--url",
            url,
            "--sigv4",
            "--sigv4-service",
            "lambda",
            "--sigv4-region",
            "eu-west-1",
        ])
        .args(rest)
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_SESSION_TOKEN", SESSION_TOKEN)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/sked-test-aws-config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/sked-test-aws-credentials")
        .env_remove("AWS_PROFILE")
        .env_remove("SKED_API_KEY");
    command.output().await.unwrap()
}

#[tokio::test]
async fn the_cli_signs_its_requests_with_the_default_chain_s_credentials() {
    let (url, seen) = server().await;

    let listed = sked_signed(&url, &["jobs", "list"], &[]).await;
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let created = sked_signed(
        &url,
        &["jobs", "create"],
        &["--id", "signed-job", "--every", "1h", "--", "true"],
    )
    .await;
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let answer: Value = serde_json::from_slice(&created.stdout).unwrap();
    assert_eq!(answer["id"], "signed-job");

    let seen = seen.lock().unwrap().clone();
    let [get, post] = seen.as_slice() else {
        panic!("two verified requests: {seen:?}")
    };
    assert_eq!((get.method.as_str(), get.path.as_str()), ("GET", "/v1/jobs"));
    assert_eq!((post.method.as_str(), post.path.as_str()), ("POST", "/v1/jobs"));
    for request in [get, post] {
        assert_eq!(
            (request.service.as_str(), request.region.as_str()),
            ("lambda", "eu-west-1")
        );
        for header in ["host", "x-amz-date", "x-amz-security-token"] {
            assert!(
                request.signed_headers.iter().any(|h| h == header),
                "{header} not signed: {request:?}"
            );
        }
    }
    // The body signed is the job sent.
    let job: Value = serde_json::from_str(&post.body).unwrap();
    assert_eq!(job["id"], "signed-job");
}

#[tokio::test]
async fn the_test_server_refuses_an_unsigned_request_and_a_body_other_than_the_one_signed() {
    let (url, seen) = server().await;
    let http = reqwest::Client::new();

    let unsigned = http.get(format!("{url}/v1/jobs")).send().await.unwrap();
    assert_eq!(unsigned.status(), 403);

    // Signed for one body, sent with another.
    let jobs_url = format!("{url}/v1/jobs");
    let signature = sign_as_the_test(ToSign {
        method: "POST",
        url: &jobs_url,
        headers: Vec::new(),
        body: br#"{"id":"a"}"#,
        token: None,
        scope: ("eu-west-1", "lambda"),
        time: SystemTime::now(),
    })
    .unwrap();
    let mut tampered = http.post(&jobs_url).body(r#"{"id":"b"}"#);
    for (name, value) in &signature.headers {
        tampered = tampered.header(name, value);
    }
    let answer = tampered.send().await.unwrap();
    assert_eq!(answer.status(), 403, "{}", answer.text().await.unwrap());
    assert!(seen.lock().unwrap().is_empty());
}
