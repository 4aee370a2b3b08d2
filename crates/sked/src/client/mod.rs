//! The HTTP client behind `sked jobs`, `runs`, `logs`, `keys` and `tenants`, and how their errors
//! become messages and exit codes.
//!
//! - The base URL comes from `--url` / `SKED_URL` (default `http://127.0.0.1:8080`); the API
//!   key from `--api-key` / `SKED_API_KEY`, or else from `--key-file` / `SKED_KEY_FILE`
//!   (default `./sked-data/admin.key`, the first key `make run` writes), sent as
//!   `Authorization: Bearer`. The key decides the tenant. With `--sigv4` requests are signed
//!   for an API behind IAM instead ([`sigv4`]), and no key is sent.
//! - Any non-2xx answer becomes an [`ApiError`] carrying the API's `error.message` and
//!   `error.field`; [`report_error`] prints it and exits 2 for a 4xx, 1 otherwise.
//!
//! The client keeps the API's JSON as [`serde_json::Value`]: `--json` prints the body as
//! received, and the tables read only the fields they show.

pub mod jobs;
pub mod keys;
pub mod logs;
pub mod runs;
pub mod sigv4;
pub mod tenants;

use crate::cli::ClientArgs;
use anyhow::Context as _;
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use std::fmt;
use std::process::ExitCode;

/// The key to send: `--api-key`, else the first line of `--key-file` if that file exists.
fn api_key(args: &ClientArgs) -> anyhow::Result<Option<String>> {
    if let Some(key) = args.api_key.as_deref().map(str::trim).filter(|k| !k.is_empty()) {
        return Ok(Some(key.to_string()));
    }
    match std::fs::read_to_string(&args.key_file) {
        Ok(text) => Ok(text
            .lines()
            .next()
            .map(|l| l.trim().to_string())
            .filter(|k| !k.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading the key file {}", args.key_file.display())),
    }
}

/// A request the API refused or failed.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// `error.code` (`invalid_argument`, `not_found`, …), if the body had one.
    pub code: Option<String>,
    /// `error.message`, or the raw body when it was not the API's error shape.
    pub message: String,
    /// `error.field`, when the API named one.
    pub field: Option<String>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(field) = &self.field {
            write!(f, " (field: {field})")?;
        }
        match &self.code {
            Some(code) => write!(f, " [{} {code}]", self.status.as_u16()),
            None => write!(f, " [{}]", self.status),
        }
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// Reads the API's `{"error": {"code", "message", "field"}}` body; any other body is kept
    /// as the message.
    fn from_body(status: StatusCode, body: &str) -> Self {
        let parsed: Option<Value> = serde_json::from_str(body).ok();
        let error = parsed.as_ref().and_then(|v| v.get("error"));
        let text = |key: &str| {
            error
                .and_then(|e| e.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let message = text("message").unwrap_or_else(|| {
            let raw = body.trim();
            if raw.is_empty() {
                status.canonical_reason().unwrap_or("request failed").to_string()
            } else {
                raw.to_string()
            }
        });
        // The field may also sit in `details` (one entry per problem, as a batch reports).
        let field = text("field").or_else(|| {
            error
                .and_then(|e| e.get("details"))
                .and_then(Value::as_array)
                .and_then(|d| d.first())
                .and_then(|d| d.get("field"))
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        ApiError {
            status,
            code: text("code"),
            message,
            field,
        }
    }
}

/// Prints `err` on stderr and picks the exit code: 2 for a 4xx answer, 1 for anything else.
pub fn report_error(err: &anyhow::Error) -> ExitCode {
    if let Some(api) = err.downcast_ref::<ApiError>() {
        eprintln!("error: {api}");
        if api.status.is_client_error() {
            return ExitCode::from(2);
        }
    } else {
        eprintln!("error: {err:#}");
    }
    ExitCode::FAILURE
}

/// An answer from the API: its body as received and parsed.
#[derive(Debug)]
pub struct Answer {
    /// The body text, for `--json`.
    pub text: String,
    /// The body parsed (`Null` when empty).
    pub json: Value,
}

/// Talks to one sked API with one key, or signing its requests.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    api_key: Option<String>,
    signer: Option<sigv4::Signer>,
}

impl Client {
    /// A client for `args.url` with the key `args` names (none if it names none).
    pub fn new(args: &ClientArgs) -> anyhow::Result<Self> {
        let base = Url::parse(&args.url).with_context(|| format!("invalid --url {:?}", args.url))?;
        if base.cannot_be_a_base() {
            anyhow::bail!("invalid --url {:?}: not an http(s) base URL", args.url);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .build()
            .context("building the HTTP client")?;
        let scope = sigv4::SigningScope::of(args, &base)?;
        if scope.is_some() && !cfg!(feature = "aws") {
            anyhow::bail!("--sigv4 needs a sked built with the aws feature (cargo build -p sked --features aws)");
        }
        Ok(Client {
            http,
            base,
            api_key: if scope.is_some() { None } else { api_key(args)? },
            signer: scope.map(sigv4::Signer::new),
        })
    }

    /// `base` + `/v1/` + the segments (each percent-encoded as needed) + the query pairs.
    pub fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("v1").extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    /// A request builder with the key set.
    pub fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, url);
        match &self.api_key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    /// Sends what `builder` built, signed first with `--sigv4`.
    pub async fn send(&self, builder: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let mut request = builder.build().context("building the request")?;
        if let Some(signer) = &self.signer {
            signer.sign(&mut request).await?;
        }
        self.http
            .execute(request)
            .await
            .with_context(|| format!("cannot reach sked at {}", self.base))
    }

    /// Sends a request and reads the whole answer; a non-2xx status is an [`ApiError`].
    pub async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        let url = self.url(segments, query);
        let mut builder = self.request(method.clone(), url.clone());
        if let Some(body) = body {
            builder = builder.json(body);
        }
        let response = self.send(builder).await?;
        read_answer(response)
            .await
            .with_context(|| format!("{method} {}", url.path()))
    }

    /// `GET`.
    pub async fn get(&self, segments: &[&str], query: &[(&str, String)]) -> anyhow::Result<Answer> {
        self.call(Method::GET, segments, query, None).await
    }

    /// `POST` with an optional JSON body.
    pub async fn post(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        self.call(Method::POST, segments, query, body).await
    }

    /// Follows a list's `next_cursor` until `limit` items (all if `None`) or the last page.
    pub async fn list_all(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
        limit: Option<usize>,
    ) -> anyhow::Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut q = query.to_vec();
            if let Some(limit) = limit {
                q.push(("limit", limit.saturating_sub(items.len()).min(1000).to_string()));
            }
            if let Some(c) = &cursor {
                q.push(("cursor", c.clone()));
            }
            let answer = self.get(segments, &q).await?;
            let page = answer
                .json
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let empty = page.is_empty();
            items.extend(page);
            cursor = answer
                .json
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(limit) = limit
                && items.len() >= limit
            {
                items.truncate(limit);
                break;
            }
            if cursor.is_none() || empty {
                break;
            }
        }
        Ok(items)
    }
}

/// Reads a response into an [`Answer`], or an [`ApiError`] for a non-2xx status.
pub async fn read_answer(response: reqwest::Response) -> anyhow::Result<Answer> {
    let status = response.status();
    let text = response.text().await.context("reading the answer")?;
    if !status.is_success() {
        return Err(ApiError::from_body(status, &text).into());
    }
    let json = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).context("the answer is not JSON")?
    };
    Ok(Answer { text, json })
}

/// Reads a JSON document from a file, or from stdin when the path is `-`.
pub fn read_json_file(path: &std::path::Path) -> anyhow::Result<Value> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
    };
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
}

/// Splits `KEY=VALUE` flags into pairs.
pub fn parse_pairs(flag: &str, values: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    values
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => anyhow::bail!("--{flag} takes KEY=VALUE, got {kv:?}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(url: &str) -> Client {
        Client::new(&ClientArgs {
            url: url.into(),
            api_key: None,
            key_file: "/nonexistent/admin.key".into(),
            json: false,
            sigv4: false,
            sigv4_service: None,
            sigv4_region: None,
        })
        .unwrap()
    }

    #[test]
    fn urls_join_segments_under_v1() {
        let c = client("http://127.0.0.1:8080");
        assert_eq!(
            c.url(&["jobs:batch"], &[]).as_str(),
            "http://127.0.0.1:8080/v1/jobs:batch"
        );
        let u = c.url(&["runs", "a@20260101T000000.000Z", "logs"], &[("tail", "5".into())]);
        assert_eq!(
            u.as_str(),
            "http://127.0.0.1:8080/v1/runs/a@20260101T000000.000Z/logs?tail=5"
        );
        let c = client("http://h:1/prefix/");
        assert_eq!(c.url(&["jobs", "a b"], &[]).as_str(), "http://h:1/prefix/v1/jobs/a%20b");
    }

    #[test]
    fn api_errors_keep_message_and_field() {
        let body = r#"{"error":{"code":"invalid_argument","message":"bad cron","field":"schedule.cron"}}"#;
        let e = ApiError::from_body(StatusCode::UNPROCESSABLE_ENTITY, body);
        assert_eq!(e.message, "bad cron");
        assert_eq!(e.field.as_deref(), Some("schedule.cron"));
        assert_eq!(e.to_string(), "bad cron (field: schedule.cron) [422 invalid_argument]");
        let e = ApiError::from_body(StatusCode::BAD_GATEWAY, "upstream down");
        assert_eq!(e.message, "upstream down");
    }

    #[test]
    fn pairs_need_an_equals_sign() {
        assert_eq!(
            parse_pairs("env", &["A=1=2".into()]).unwrap(),
            vec![("A".into(), "1=2".into())]
        );
        assert!(parse_pairs("env", &["A".into()]).is_err());
    }
}
