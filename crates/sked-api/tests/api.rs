//! Black-box tests of the router: requests in through `tower::ServiceExt::oneshot`, over the
//! in-memory ports of sked-testkit and a manual clock. They check the API's wire shapes, status
//! codes and field names, and that a rejected request writes nothing.
//!
//! Every request carries an API key: an admin key of the tenant the test acts as (`default`,
//! or the one a `X-Test-As` pseudo-header names, which the harness removes). Authentication
//! itself — 401, 403, 404 across tenants, every route — is `tests/auth.rs`'s.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sked_api::{ApiConfig, Auth, router};
use sked_core::auth::{Principal, Role};
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId, WorkerId};
use sked_core::ports::{
    AttemptResult, ClaimOutcome, Completion, JobStore, JobStoreExt, LogKey, LogLine, LogStore, LogStream, LogWriter,
    RunTransition,
};
use sked_core::run::{AttemptOutcome, RunState};
use sked_core::service::alerts::WebhookSecretService;
use sked_core::service::keys::{Keys, NewKey};
use sked_core::service::quotas::Quotas;
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemKeys, MemLogs, MemQueue, MemStore};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use tower::ServiceExt;

// ----- harness -----

/// 07:00 UTC on a Monday in winter: 08:00 in Berlin.
fn t0() -> Timestamp {
    timestamp::parse("2026-01-05T07:00:00Z").unwrap()
}

struct Api {
    router: Router,
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    logs: Arc<MemLogs>,
    keys: Keys,
    /// An admin key per tenant acted as, made on first use.
    tenant_keys: Mutex<HashMap<String, String>>,
}

/// The pseudo-header naming the tenant a request acts as (the harness sends that tenant's key).
const AS: &str = "X-Test-As";

struct Resp {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
    json: Value,
}

impl Resp {
    /// The error's `field`, or "" when null.
    fn field(&self) -> &str {
        self.json["error"]["field"].as_str().unwrap_or("")
    }
    fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
    fn items(&self) -> &Vec<Value> {
        self.json["items"]
            .as_array()
            .unwrap_or_else(|| panic!("no items in {}", self.text))
    }
    fn ids(&self) -> Vec<&str> {
        self.items().iter().map(|j| j["id"].as_str().unwrap()).collect()
    }
}

fn api() -> Api {
    let clock = Arc::new(ManualClock::new(t0()));
    let store = Arc::new(MemStore::new());
    let logs = Arc::new(MemLogs::new());
    let queue = Arc::new(MemQueue::new(clock.clone()));
    let ports = Ports::new(store.clone(), queue, logs.clone(), clock.clone());
    let quotas = Quotas::new(store.clone(), clock.clone());
    let secrets = WebhookSecretService::new(store.clone(), clock.clone());
    let sked = Sked::new(ports, SkedConfig::default(), SweepSignal::default())
        .with_quotas(quotas)
        .with_webhook_secrets(secrets);
    let keys = Keys::new(Arc::new(MemKeys::new()), clock.clone());
    Api {
        router: router(sked, ApiConfig::default(), Auth::Keys(keys.clone())),
        clock,
        store,
        logs,
        keys,
        tenant_keys: Mutex::default(),
    }
}

impl Api {
    /// The admin key of `tenant`, made on first use.
    async fn key_of(&self, tenant: &str) -> String {
        if let Some(key) = self.tenant_keys.lock().unwrap().get(tenant) {
            return key.clone();
        }
        let operator = Principal::new(TenantId::default(), Role::Operator);
        let new = NewKey {
            tenant: TenantId::from(tenant),
            role: Role::Admin,
            name: format!("{tenant} test key"),
        };
        let made = self.keys.create(&operator, new).await.unwrap();
        self.tenant_keys
            .lock()
            .unwrap()
            .insert(tenant.to_string(), made.secret.clone());
        made.secret
    }

    async fn call(&self, method: Method, uri: &str, headers: &[(&str, &str)], body: Option<Vec<u8>>) -> Resp {
        let mut req = Request::builder().method(method).uri(uri);
        let tenant = headers.iter().find(|(k, _)| *k == AS).map_or("default", |(_, v)| *v);
        req = req.header("authorization", format!("Bearer {}", self.key_of(tenant).await));
        for (k, v) in headers.iter().filter(|(k, _)| *k != AS) {
            req = req.header(*k, *v);
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(body.map(Body::from).unwrap_or_else(Body::empty)).unwrap();
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            text,
            json,
        }
    }

    async fn get(&self, uri: &str) -> Resp {
        self.call(Method::GET, uri, &[], None).await
    }
    async fn get_as(&self, tenant: &str, uri: &str) -> Resp {
        self.call(Method::GET, uri, &[(AS, tenant)], None).await
    }
    async fn post(&self, uri: &str, body: Value) -> Resp {
        self.call(Method::POST, uri, &[], Some(body.to_string().into_bytes()))
            .await
    }
    async fn post_empty(&self, uri: &str) -> Resp {
        self.call(Method::POST, uri, &[], None).await
    }
    async fn send(&self, method: Method, uri: &str, headers: &[(&str, &str)], body: Value) -> Resp {
        self.call(method, uri, headers, Some(body.to_string().into_bytes()))
            .await
    }

    /// Every job of the default tenant, in every state.
    async fn job_ids(&self) -> Vec<String> {
        let r = self.get("/v1/jobs?limit=1000").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.ids().into_iter().map(str::to_string).collect()
    }

    /// Creates a job and returns its JSON.
    async fn create(&self, body: Value) -> Value {
        let r = self.post("/v1/jobs", body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        r.json
    }

    /// Creates a job whose `key` is `value`, expecting `status` with `field` named and nothing
    /// stored.
    async fn refused_creating(&self, key: &str, value: Value, status: StatusCode, field: &str) {
        let r = self.post("/v1/jobs", with(every_job("bad"), key, value.clone())).await;
        assert_eq!(r.status, status, "{value}: {}", r.text);
        assert!(r.text.contains(field), "{value}: {field} not named in {}", r.text);
        assert_eq!(
            self.get("/v1/jobs/bad").await.status,
            StatusCode::NOT_FOUND,
            "nothing stored"
        );
    }

    /// Triggers a job and returns the run id.
    async fn trigger(&self, id: &str) -> String {
        let r = self.post_empty(&format!("/v1/jobs/{id}/trigger")).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        r.json["run_id"].as_str().unwrap().to_string()
    }
}

fn cron_job(id: &str) -> Value {
    json!({
        "id": id,
        "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"},
        "task": {"command": {"argv": ["echo", "hi"]}},
        "labels": {"team": "a"}
    })
}

fn every_job(id: &str) -> Value {
    json!({"id": id, "schedule": {"every": "5m"}, "task": {"command": {"argv": ["true"]}}})
}

fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

// ----- create and read back -----

#[tokio::test]
async fn create_answers_201_with_the_normalised_job() {
    let api = api();
    let r = api.post("/v1/jobs", cron_job("nightly")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.headers["location"], "/v1/jobs/nightly");
    let j = &r.json;
    assert_eq!(j["id"], "nightly");
    assert_eq!(j["state"], "ACTIVE");
    assert_eq!(j["schedule"], json!({"cron": "0 9 * * *", "timezone": "Europe/Berlin"}));
    assert_eq!(j["task"], json!({"command": {"argv": ["echo", "hi"]}}));
    assert_eq!(j["labels"], json!({"team": "a"}));
    assert_eq!(j["next_fire_at"], "2026-01-05T08:00:00.000Z");
    assert_eq!(j["created_at"], "2026-01-05T07:00:00.000Z");
    assert_eq!(j["updated_at"], "2026-01-05T07:00:00.000Z");
    assert!(j["version"].is_u64());
    // Defaults are filled in.
    assert_eq!(j["priority"], 5);
    assert_eq!(j["max_retries"], 3);
    assert_eq!(j["timeout"], "1h");
    assert_eq!(j["on_timeout"], "fail");
    assert_eq!(j["overlap"], "forbid");
    assert_eq!(j["misfire"], "fire_once");
    assert_eq!(j["resources"], "small");
    assert!(j["backoff"].is_object() && j["dst"].is_object());
    assert!(j["start_at"].is_null() && j["end_at"].is_null());

    let got = api.get("/v1/jobs/nightly").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json, r.json);
}

#[tokio::test]
async fn every_schedule_reads_back_with_its_anchor() {
    let api = api();
    let j = api.create(every_job("tick")).await;
    assert_eq!(j["schedule"]["every"], "5m");
    assert_eq!(j["schedule"]["anchor"], "2026-01-05T07:00:00.000Z");
    assert_eq!(j["overlap"], "forbid");
}

#[tokio::test]
async fn generated_ids_when_absent() {
    let api = api();
    let mut body = every_job("x");
    body.as_object_mut().unwrap().remove("id");
    let j = api.create(body).await;
    assert_eq!(j["id"].as_str().unwrap().len(), 26, "a ULID: {j}");
}

#[tokio::test]
async fn repost_identical_is_200_and_different_is_409() {
    let api = api();
    let first = api.create(cron_job("nightly")).await;
    let again = api.post("/v1/jobs", cron_job("nightly")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.json, first);
    let other = with(cron_job("nightly"), "priority", json!(7));
    let r = api.post("/v1/jobs", other).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.code(), "conflict");
    assert_eq!(api.get("/v1/jobs/nightly").await.json["priority"], 5);
}

#[tokio::test]
async fn idempotency_key_replays_the_first_answer() {
    let api = api();
    let mut body = every_job("x");
    body.as_object_mut().unwrap().remove("id");
    let key = [("Idempotency-Key", "order-42")];
    let first = api.send(Method::POST, "/v1/jobs", &key, body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let replay = api.send(Method::POST, "/v1/jobs", &key, body.clone()).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.text);
    assert_eq!(replay.json["id"], first.json["id"]);
    let reused = api
        .send(Method::POST, "/v1/jobs", &key, with(body, "priority", json!(1)))
        .await;
    assert_eq!(reused.status, StatusCode::CONFLICT, "{}", reused.text);
    assert_eq!(api.job_ids().await.len(), 1);

    let bad = api
        .send(Method::POST, "/v1/jobs", &[("Idempotency-Key", "")], every_job("y"))
        .await;
    assert_eq!((bad.status, bad.field()), (StatusCode::BAD_REQUEST, "Idempotency-Key"));
}

#[tokio::test]
async fn shorthand_maps_to_a_one_shot_job() {
    let api = api();
    let r = api
        .post(
            "/v1/jobs",
            json!({"id": "seed", "payload": "echo hi", "scheduled_time": 1767603600, "priority": 7, "max_retries": 0}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["schedule"], json!({"at": "2026-01-05T09:00:00.000Z"}));
    assert_eq!(
        r.json["task"],
        json!({"command": {"argv": ["/bin/sh", "-c", "echo hi"]}})
    );
    assert_eq!(
        (r.json["priority"].clone(), r.json["max_retries"].clone()),
        (json!(7), json!(0))
    );
    assert_eq!(r.json["overlap"], "allow");

    let r = api.post("/v1/jobs", json!({"payload": ["echo", "x"]})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["schedule"]["at"], "2026-01-05T07:00:00.000Z");
    let http = json!({"http": {"url": "https://example.com/hook"}});
    let r = api
        .post(
            "/v1/jobs",
            json!({"payload": http, "scheduled_time": "2026-02-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["task"]["http"]["url"], "https://example.com/hook");

    let mixed = api
        .post("/v1/jobs", json!({"payload": "x", "schedule": {"every": "5m"}}))
        .await;
    assert_eq!((mixed.status, mixed.field()), (StatusCode::BAD_REQUEST, "schedule"));
    let bad_time = api
        .post("/v1/jobs", json!({"payload": "x", "scheduled_time": "tomorrow"}))
        .await;
    assert_eq!(
        (bad_time.status, bad_time.field()),
        (StatusCode::BAD_REQUEST, "scheduled_time")
    );
    assert_eq!(api.job_ids().await.len(), 3);
}

// ----- batch -----

#[tokio::test]
async fn batch_creates_all_in_order() {
    let api = api();
    let jobs = json!({"jobs": [every_job("b3"), cron_job("b1"), {"id": "b2", "payload": "echo"}]});
    let r = api.post("/v1/jobs:batch", jobs).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.ids(), ["b3", "b1", "b2"]);
    assert_eq!(r.items()[0]["state"], "ACTIVE");
    assert_eq!(api.job_ids().await, ["b1", "b2", "b3"]);
}

#[tokio::test]
async fn batch_with_invalid_entries_lists_each_and_creates_nothing() {
    let api = api();
    let bad_cron = json!({"id": "c", "schedule": {"cron": "61 * * * *"}, "task": {"command": {"argv": ["x"]}}});
    let jobs = json!({"jobs": [every_job("a"), with(every_job("b"), "priority", json!(10)), every_job("d"), bad_cron]});
    let r = api.post("/v1/jobs:batch", jobs).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.code(), "invalid_argument");
    let details = r.json["error"]["details"].as_array().unwrap();
    let found: Vec<(u64, &str)> = details
        .iter()
        .map(|d| (d["index"].as_u64().unwrap(), d["field"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [(1, "priority"), (3, "schedule.cron")], "{}", r.text);
    assert!(
        details
            .iter()
            .all(|d| d["message"].as_str().is_some_and(|m| !m.is_empty()))
    );
    assert!(api.job_ids().await.is_empty());
}

#[tokio::test]
async fn batch_with_malformed_and_invalid_entries_lists_both() {
    let api = api();
    let bad_cron = json!({"schedule": {"cron": "nope"}, "task": {"command": {"argv": ["x"]}}});
    let jobs = json!({"jobs": [with(every_job("a"), "priority", json!("high")), every_job("b"), bad_cron]});
    let r = api.post("/v1/jobs:batch", jobs).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    let details = r.json["error"]["details"].as_array().unwrap();
    let found: Vec<(u64, &str)> = details
        .iter()
        .map(|d| (d["index"].as_u64().unwrap(), d["field"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [(0, "priority"), (2, "schedule.cron")], "{}", r.text);
    assert!(api.job_ids().await.is_empty());
}

#[tokio::test]
async fn batch_envelope_is_checked() {
    let api = api();
    let many: Vec<Value> = (0..1001).map(|i| every_job(&format!("j{i}"))).collect();
    let r = api.post("/v1/jobs:batch", json!({ "jobs": many })).await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "jobs"), "{}", r.text);
    let r = api.post("/v1/jobs:batch", json!({"jobs": {}})).await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "jobs"));
    let r = api.post("/v1/jobs:batch", json!([])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // `jobs:batch` is its own path, not a job id.
    let r = api.get("/v1/jobs:batch").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(api.job_ids().await.is_empty());
}

// ----- bad input, field by field -----

#[tokio::test]
async fn bad_input_names_the_field_and_writes_nothing() {
    let api = api();
    let base = every_job("j");
    let cases: Vec<(&str, Value, StatusCode, &str)> = vec![
        (
            "schedule missing",
            json!({"id": "j", "task": {"command": {"argv": ["x"]}}}),
            StatusCode::BAD_REQUEST,
            "schedule",
        ),
        (
            "task missing",
            json!({"id": "j", "schedule": {"every": "5m"}}),
            StatusCode::BAD_REQUEST,
            "task",
        ),
        (
            "empty schedule",
            with(base.clone(), "schedule", json!({})),
            StatusCode::BAD_REQUEST,
            "schedule",
        ),
        (
            "bad cron",
            with(base.clone(), "schedule", json!({"cron": "61 * * * *"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.cron",
        ),
        (
            "bad timezone",
            with(
                base.clone(),
                "schedule",
                json!({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.timezone",
        ),
        (
            "every 0s",
            with(base.clone(), "schedule", json!({"every": "0s"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.every",
        ),
        (
            "bad duration",
            with(base.clone(), "schedule", json!({"every": "5 parsecs"})),
            StatusCode::BAD_REQUEST,
            "schedule.every",
        ),
        (
            "bad at",
            with(base.clone(), "schedule", json!({"at": "noon"})),
            StatusCode::BAD_REQUEST,
            "schedule.at",
        ),
        (
            "end before start",
            with(
                with(base.clone(), "start_at", json!("2026-03-01T00:00:00Z")),
                "end_at",
                json!("2026-02-01T00:00:00Z"),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "end_at",
        ),
        (
            "empty argv",
            with(base.clone(), "task", json!({"command": {"argv": []}})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "task.command.argv",
        ),
        (
            "argv not strings",
            with(base.clone(), "task", json!({"command": {"argv": [1]}})),
            StatusCode::BAD_REQUEST,
            "task.command.argv[0]",
        ),
        (
            "bad url",
            with(base.clone(), "task", json!({"http": {"url": "not a url"}})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "task.http.url",
        ),
        (
            "unknown task kind",
            with(base.clone(), "task", json!({"lambda": {}})),
            StatusCode::BAD_REQUEST,
            "task",
        ),
        (
            "priority 10",
            with(base.clone(), "priority", json!(10)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "priority",
        ),
        (
            "priority string",
            with(base.clone(), "priority", json!("high")),
            StatusCode::BAD_REQUEST,
            "priority",
        ),
        (
            "negative max_retries",
            with(base.clone(), "max_retries", json!(-1)),
            StatusCode::BAD_REQUEST,
            "max_retries",
        ),
        (
            "string max_retries",
            with(base.clone(), "max_retries", json!("three")),
            StatusCode::BAD_REQUEST,
            "max_retries",
        ),
        (
            "timeout 0s",
            with(base.clone(), "timeout", json!("0s")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "timeout",
        ),
        (
            "unknown field",
            with(base.clone(), "colour", json!("red")),
            StatusCode::BAD_REQUEST,
            "colour",
        ),
        (
            "unknown nested field",
            with(base.clone(), "task", json!({"command": {"argv": ["x"], "shell": true}})),
            StatusCode::BAD_REQUEST,
            "task.command.shell",
        ),
        (
            "bad id",
            with(base.clone(), "id", json!("no spaces")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "id",
        ),
        (
            "id not a string",
            with(base.clone(), "id", json!(7)),
            StatusCode::BAD_REQUEST,
            "id",
        ),
        ("body not an object", json!([1, 2]), StatusCode::BAD_REQUEST, ""),
    ];
    for (name, body, status, field) in cases {
        let r = api.post("/v1/jobs", body).await;
        assert_eq!(r.status, status, "{name}: {}", r.text);
        assert_eq!(r.field(), field, "{name}: {}", r.text);
        assert_eq!(r.code(), "invalid_argument", "{name}");
        assert!(!r.json["error"]["message"].as_str().unwrap().is_empty(), "{name}");
    }

    let r = api
        .call(Method::POST, "/v1/jobs", &[], Some(b"{\"schedule\": ".to_vec()))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "invalid_argument"),
        "{}",
        r.text
    );
    let r = api.call(Method::POST, "/v1/jobs", &[], None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);

    let huge = with(base.clone(), "name", json!("x".repeat(300 * 1024)));
    let r = api.post("/v1/jobs", huge).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        "{}",
        r.text
    );

    assert!(api.job_ids().await.is_empty());
}

#[tokio::test]
async fn container_task_is_unsupported_here() {
    let api = api();
    let r = api
        .post(
            "/v1/jobs",
            with(every_job("c"), "task", json!({"container": {"image": "busybox"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.code(), "unsupported");
    assert!(r.field().starts_with("task"), "{}", r.text);
    assert!(api.job_ids().await.is_empty());
}

// ----- reading and listing -----

#[tokio::test]
async fn list_pages_and_filters_by_label_and_state() {
    let api = api();
    for i in 1..=5 {
        let mut job = every_job(&format!("a{i}"));
        job["labels"] = if i % 2 == 1 {
            json!({"team": "a", "env": if i == 5 { "prod" } else { "dev" }})
        } else {
            json!({"team": "b"})
        };
        api.create(job).await;
    }
    let mut seen = Vec::new();
    let mut uri = "/v1/jobs?limit=2".to_string();
    loop {
        let r = api.get(&uri).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert!(r.items().len() <= 2);
        seen.extend(r.ids().into_iter().map(str::to_string));
        match r.json["next_cursor"].as_str() {
            Some(c) => uri = format!("/v1/jobs?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["a1", "a2", "a3", "a4", "a5"]);

    assert_eq!(api.get("/v1/jobs?label=team=a").await.ids(), ["a1", "a3", "a5"]);
    assert_eq!(api.get("/v1/jobs?label=team=a&label=env=prod").await.ids(), ["a5"]);
    assert_eq!(api.get("/v1/jobs?state=ACTIVE").await.ids().len(), 5);
    assert!(api.get("/v1/jobs?state=PAUSED").await.ids().is_empty());

    for (uri, field) in [
        ("/v1/jobs?limit=abc", "limit"),
        ("/v1/jobs?limit=1001", "limit"),
        ("/v1/jobs?limit=0", "limit"),
        ("/v1/jobs?state=SLEEPING", "state"),
        ("/v1/jobs?label=team", "label"),
        ("/v1/jobs?colour=red", "colour"),
    ] {
        let r = api.get(uri).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, field),
            "{uri}: {}",
            r.text
        );
    }
}

#[tokio::test]
async fn tenants_are_isolated() {
    let api = api();
    let r = api
        .send(Method::POST, "/v1/jobs", &[(AS, "acme")], every_job("shared"))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let missing = api.get("/v1/jobs/shared").await;
    assert_eq!(
        (missing.status, missing.code()),
        (StatusCode::NOT_FOUND, "not_found"),
        "{}",
        missing.text
    );
    assert_eq!(api.get_as("acme", "/v1/jobs/shared").await.status, StatusCode::OK);
    assert!(api.job_ids().await.is_empty());
    assert_eq!(api.get_as("acme", "/v1/jobs").await.ids(), ["shared"]);
    assert_eq!(
        api.post_empty("/v1/jobs/shared/trigger").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(api.get("/v1/jobs/shared/runs").await.status, StatusCode::NOT_FOUND);

    // The same id is free in another tenant.
    api.create(with(every_job("shared"), "priority", json!(1))).await;
    assert_eq!(api.get_as("acme", "/v1/jobs/shared").await.json["priority"], 5);
}

// ----- replace, patch, lifecycle -----

#[tokio::test]
async fn put_replaces_and_honours_if_match() {
    let api = api();
    let v1 = api.create(every_job("j")).await["version"].as_u64().unwrap();
    let v1s = v1.to_string();
    let body = with(every_job("j"), "schedule", json!({"cron": "*/10 * * * *"}));
    let r = api
        .send(Method::PUT, "/v1/jobs/j", &[("If-Match", &v1s)], body.clone())
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["schedule"]["cron"], "*/10 * * * *");
    assert_eq!(r.json["next_fire_at"], "2026-01-05T07:10:00.000Z");
    let v2 = r.json["version"].as_u64().unwrap();
    assert!(v2 > v1);

    let stale = api
        .send(Method::PUT, "/v1/jobs/j", &[("If-Match", &v1s)], every_job("j"))
        .await;
    assert_eq!(
        (stale.status, stale.code()),
        (StatusCode::CONFLICT, "conflict"),
        "{}",
        stale.text
    );
    let invalid = api
        .send(
            Method::PUT,
            "/v1/jobs/j",
            &[],
            with(every_job("j"), "priority", json!(10)),
        )
        .await;
    assert_eq!(
        (invalid.status, invalid.field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "priority")
    );
    let renamed = api.send(Method::PUT, "/v1/jobs/j", &[], every_job("k")).await;
    assert_eq!((renamed.status, renamed.field()), (StatusCode::BAD_REQUEST, "id"));
    let bad_header = api
        .send(Method::PUT, "/v1/jobs/j", &[("If-Match", "latest")], every_job("j"))
        .await;
    assert_eq!(
        (bad_header.status, bad_header.field()),
        (StatusCode::BAD_REQUEST, "If-Match")
    );
    let absent = api.send(Method::PUT, "/v1/jobs/nope", &[], every_job("nope")).await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND);

    let now = api.get("/v1/jobs/j").await.json;
    assert_eq!(
        (now["version"].as_u64(), now["schedule"]["cron"].as_str()),
        (Some(v2), Some("*/10 * * * *"))
    );
}

#[tokio::test]
async fn patch_merges_and_checks_the_version() {
    let api = api();
    let v1 = api.create(cron_job("j")).await["version"].as_u64().unwrap();
    let r = api
        .send(
            Method::PATCH,
            "/v1/jobs/j",
            &[],
            json!({"priority": 8, "labels": {"team": null, "env": "prod"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["priority"], 8);
    assert_eq!(r.json["labels"], json!({"env": "prod"}));
    assert_eq!(r.json["task"], json!({"command": {"argv": ["echo", "hi"]}}));
    let v2 = r.json["version"].as_u64().unwrap();
    assert!(v2 > v1);

    // Switching schedule kind: null out the old keys (RFC 7386).
    let r = api
        .send(
            Method::PATCH,
            "/v1/jobs/j",
            &[],
            json!({"schedule": {"cron": null, "timezone": null, "every": "1h"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["schedule"]["every"], "1h");

    let stale = api
        .send(
            Method::PATCH,
            "/v1/jobs/j",
            &[("If-Match", &v1.to_string())],
            json!({"priority": 1}),
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.text);
    let malformed = api
        .send(Method::PATCH, "/v1/jobs/j", &[], json!({"priority": "high"}))
        .await;
    assert_eq!(
        (malformed.status, malformed.field()),
        (StatusCode::BAD_REQUEST, "priority")
    );
    let invalid = api
        .send(Method::PATCH, "/v1/jobs/j", &[], json!({"priority": 12}))
        .await;
    assert_eq!(
        (invalid.status, invalid.field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "priority")
    );
    let unknown = api
        .send(Method::PATCH, "/v1/jobs/j", &[], json!({"colour": "red"}))
        .await;
    assert_eq!((unknown.status, unknown.field()), (StatusCode::BAD_REQUEST, "colour"));
    assert_eq!(api.get("/v1/jobs/j").await.json["priority"], 8);
}

#[tokio::test]
async fn dst_is_auto_by_default_and_preview_lists_both_passes_of_an_interval_cron() {
    let api = api();
    // Every quarter hour in Berlin, from 01:40 CEST on the night clocks go back (2026-10-25).
    let j = api
        .create(json!({
            "id": "quarter",
            "schedule": {"cron": "*/15 * * * *", "timezone": "Europe/Berlin"},
            "start_at": "2026-10-24T23:40:00Z",
            "task": {"command": {"argv": ["true"]}},
        }))
        .await;
    assert_eq!(j["dst"], json!({"gap": "auto", "repeat": "auto"}));
    let times = |r: Resp| -> Vec<String> {
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.items().iter().map(|t| t.as_str().unwrap().to_string()).collect()
    };
    let quarters = |from: &str, n: usize| -> Vec<String> {
        let from = timestamp::parse(from).unwrap();
        (0..n as i64)
            .map(|i| timestamp::format(&(from + chrono::Duration::minutes(15 * i))))
            .collect()
    };
    // 01:45 CEST, 02:00…02:45 CEST, 02:00…02:45 CET, 03:00 CET: every quarter hour.
    let both = times(api.get("/v1/jobs/quarter/preview?count=10").await);
    assert_eq!(both, quarters("2026-10-24T23:45:00Z", 10));

    // A written half forces the policy: the second pass is gone.
    let r = api
        .send(
            Method::PATCH,
            "/v1/jobs/quarter",
            &[],
            json!({"dst": {"repeat": "once"}}),
        )
        .await;
    assert_eq!(r.json["dst"], json!({"gap": "auto", "repeat": "once"}), "{}", r.text);
    let once = times(api.get("/v1/jobs/quarter/preview?count=6").await);
    let mut want = quarters("2026-10-24T23:45:00Z", 5);
    want.push("2026-10-25T02:00:00.000Z".into());
    assert_eq!(once, want);

    // What a job stored before `auto` holds (`shift`, `once`) is kept; `null` goes back to auto.
    let r = api
        .send(
            Method::PATCH,
            "/v1/jobs/quarter",
            &[],
            json!({"dst": {"gap": "shift", "repeat": "once"}}),
        )
        .await;
    assert_eq!(r.json["dst"], json!({"gap": "shift", "repeat": "once"}), "{}", r.text);
    let r = api
        .send(Method::PATCH, "/v1/jobs/quarter", &[], json!({"dst": null}))
        .await;
    assert_eq!(r.json["dst"], json!({"gap": "auto", "repeat": "auto"}), "{}", r.text);
    assert_eq!(times(api.get("/v1/jobs/quarter/preview?count=10").await), both);

    let bad = api
        .send(Method::PATCH, "/v1/jobs/quarter", &[], json!({"dst": {"gap": "later"}}))
        .await;
    assert_eq!(
        (bad.status, bad.field()),
        (StatusCode::BAD_REQUEST, "dst.gap"),
        "{}",
        bad.text
    );

    // The document lists `auto` among each half's values.
    let doc = api.get("/v1/openapi.json").await.json;
    for (schema, values) in [
        ("DstGap", ["auto", "shift", "skip"]),
        ("DstRepeat", ["auto", "once", "twice"]),
    ] {
        assert_eq!(doc["components"]["schemas"][schema]["enum"], json!(values), "{schema}");
    }
}

#[tokio::test]
async fn pause_resume_trigger_preview_delete() {
    let api = api();
    api.create(cron_job("j")).await;
    let r = api.post_empty("/v1/jobs/j/pause").await;
    assert_eq!(
        (r.status, r.json["state"].as_str()),
        (StatusCode::OK, Some("PAUSED")),
        "{}",
        r.text
    );
    let r = api.post_empty("/v1/jobs/j/resume").await;
    assert_eq!(
        (r.status, r.json["state"].as_str()),
        (StatusCode::OK, Some("ACTIVE")),
        "{}",
        r.text
    );

    let r = api.post_empty("/v1/jobs/j/trigger").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["job_id"], "j");
    assert_eq!(r.json["state"], "PENDING");
    assert_eq!(r.json["trigger"], "manual");
    assert_eq!(r.json["attempts"], json!([]));
    assert_eq!(
        r.headers["location"],
        format!("/v1/runs/{}", r.json["run_id"].as_str().unwrap())
    );

    let r = api.get("/v1/jobs/j/preview?count=3").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.json["items"],
        json!([
            "2026-01-05T08:00:00.000Z",
            "2026-01-06T08:00:00.000Z",
            "2026-01-07T08:00:00.000Z"
        ])
    );
    assert_eq!(api.get("/v1/jobs/j/preview").await.items().len(), 10);
    for bad in ["count=0", "count=101", "count=ten"] {
        let r = api.get(&format!("/v1/jobs/j/preview?{bad}")).await;
        assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "count"), "{bad}");
    }

    let r = api
        .call(Method::DELETE, "/v1/jobs/j?cancel_running=maybe", &[], None)
        .await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "cancel_running"));
    let r = api
        .call(Method::DELETE, "/v1/jobs/j?cancel_running=true", &[], None)
        .await;
    assert_eq!(
        (r.status, r.json["state"].as_str()),
        (StatusCode::OK, Some("DELETED")),
        "{}",
        r.text
    );
    assert_eq!(api.get("/v1/jobs/j").await.json["state"], "DELETED");
    assert_eq!(
        api.post_empty("/v1/jobs/nope/pause").await.status,
        StatusCode::NOT_FOUND
    );
}

// ----- runs -----

#[tokio::test]
async fn runs_list_get_cancel() {
    let api = api();
    api.create(cron_job("j")).await;
    api.create(every_job("k")).await;
    let run_j = api.trigger("j").await;
    api.clock.advance(sked_core::duration::Dur::secs(1));
    let run_k = api.trigger("k").await;

    let r = api.get(&format!("/v1/runs/{run_j}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let keys: Vec<&str> = r.json.as_object().unwrap().keys().map(String::as_str).collect();
    for key in [
        "run_id",
        "job_id",
        "scheduled_for",
        "state",
        "trigger",
        "priority",
        "created_at",
        "started_at",
        "finished_at",
        "not_before",
        "reason",
        "cancel_requested",
        "attempts",
    ] {
        assert!(keys.contains(&key), "{key} missing from {}", r.text);
    }
    assert!(r.json["started_at"].is_null() && r.json["finished_at"].is_null());

    let all = api.get("/v1/runs").await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.text);
    let ids: Vec<&str> = all.items().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [run_k.as_str(), run_j.as_str()], "newest first");
    assert!(all.json["next_cursor"].is_null());
    let page = api.get("/v1/runs?limit=1").await;
    assert_eq!(page.items().len(), 1);
    let next = page.json["next_cursor"].as_str().expect("a cursor");
    let rest = api.get(&format!("/v1/runs?limit=1&cursor={next}")).await;
    assert_eq!(rest.items()[0]["run_id"], run_j.as_str());

    assert_eq!(api.get("/v1/runs?job_id=j").await.items().len(), 1);
    assert_eq!(api.get("/v1/jobs/k/runs").await.items()[0]["run_id"], run_k.as_str());
    assert_eq!(api.get("/v1/runs?state=PENDING").await.items().len(), 2);
    assert!(api.get("/v1/runs?state=FAILED").await.items().is_empty());
    assert!(api.get("/v1/runs?since=2026-01-05T07:00:00.500Z").await.items().len() == 1);
    assert!(api.get("/v1/runs?until=2026-01-05T07:00:00.500Z").await.items().len() == 1);
    for (uri, field) in [
        ("/v1/runs?state=LOST", "state"),
        ("/v1/runs?limit=1001", "limit"),
        ("/v1/runs?since=yesterday", "since"),
        ("/v1/runs?until=2026", "until"),
        ("/v1/runs?job_id=a%20b", "job_id"),
        ("/v1/jobs/j/runs?state=nope", "state"),
    ] {
        let r = api.get(uri).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, field),
            "{uri}: {}",
            r.text
        );
    }

    let r = api.post_empty(&format!("/v1/runs/{run_j}/cancel")).await;
    assert_eq!(
        (r.status, r.json["state"].as_str()),
        (StatusCode::OK, Some("CANCELLED")),
        "{}",
        r.text
    );
    let again = api.post_empty(&format!("/v1/runs/{run_j}/cancel")).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    assert_eq!(api.get("/v1/runs?state=CANCELLED").await.items().len(), 1);

    assert_eq!(
        api.get("/v1/runs/j@20990101T000000.000Z").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.get_as("acme", &format!("/v1/runs/{run_k}")).await.status,
        StatusCode::NOT_FOUND
    );
}

/// Claims the run's next attempt for worker `w1`: its fencing token and its log writer.
async fn start_attempt(api: &Api, run_id: &str) -> (u64, Box<dyn LogWriter>) {
    let (tenant, run_id) = (TenantId::default(), RunId::from(run_id));
    let now = api.clock.now();
    let lease_until = now + chrono::Duration::seconds(60);
    let claim = api
        .store
        .claim_one(&tenant, &run_id, &WorkerId::from("w1"), now, lease_until)
        .await
        .unwrap();
    let ClaimOutcome::Claimed { token, run } = claim else {
        panic!("not claimed: {claim:?}")
    };
    let key = LogKey {
        tenant,
        run_id,
        attempt: run.attempt_count(),
    };
    (token, api.logs.writer(&key).await.unwrap())
}

fn log_line(stream: LogStream, line: &str, ts: Timestamp) -> LogLine {
    LogLine {
        ts,
        stream,
        line: line.into(),
    }
}

/// Closes the attempt's log and completes it successfully.
async fn finish_attempt(api: &Api, run_id: &str, token: u64, writer: Box<dyn LogWriter>) {
    let summary = writer.finish().await.unwrap();
    let result = AttemptResult {
        finished_at: api.clock.now(),
        outcome: AttemptOutcome::Succeeded,
        exit_code: Some(0),
        http_status: None,
        error: None,
        log_bytes: summary.bytes,
        log_truncated: summary.truncated,
    };
    let done = Completion {
        tenant: TenantId::default(),
        run_id: RunId::from(run_id),
        token,
        result,
        next: RunTransition::Finish(RunState::Succeeded),
        only_if_expired_by: None,
    };
    api.store.complete(&done).await.unwrap();
}

/// Runs the first attempt to success, logging `one` (stdout), `two` (stderr), `three` (stdout).
async fn run_one_attempt(api: &Api, run_id: &str) {
    let (token, mut writer) = start_attempt(api, run_id).await;
    for (stream, line) in [
        (LogStream::Stdout, "one"),
        (LogStream::Stderr, "two"),
        (LogStream::Stdout, "three"),
    ] {
        writer.append(log_line(stream, line, api.clock.now())).await.unwrap();
    }
    finish_attempt(api, run_id, token, writer).await;
}

#[tokio::test]
async fn finished_runs_show_their_attempts() {
    let api = api();
    api.create(every_job("j")).await;
    let run = api.trigger("j").await;
    run_one_attempt(&api, &run).await;
    let r = api.get(&format!("/v1/runs/{run}")).await;
    assert_eq!(r.json["state"], "SUCCEEDED", "{}", r.text);
    assert_eq!(r.json["started_at"], "2026-01-05T07:00:00.000Z");
    let a = &r.json["attempts"][0];
    assert_eq!(
        (a["attempt"].as_u64(), a["worker"].as_str(), a["outcome"].as_str()),
        (Some(1), Some("w1"), Some("succeeded"))
    );
    assert_eq!(
        (
            a["exit_code"].as_i64(),
            a["http_status"].is_null(),
            a["error"].is_null()
        ),
        (Some(0), true, true)
    );
    assert!(a["log_bytes"].as_u64().unwrap() > 0);
    assert_eq!(a["log_truncated"], false);
    let cancel = api.post_empty(&format!("/v1/runs/{run}/cancel")).await;
    assert_eq!(cancel.status, StatusCode::CONFLICT, "{}", cancel.text);
}

#[tokio::test]
async fn logs_read_and_follow() {
    let api = api();
    api.create(every_job("j")).await;
    let run = api.trigger("j").await;
    run_one_attempt(&api, &run).await;
    let base = format!("/v1/runs/{run}/logs");

    let r = api.get(&base).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["truncated"], false);
    assert_eq!(
        r.json["lines"][1],
        json!({"ts": "2026-01-05T07:00:00.000Z", "stream": "stderr", "line": "two"})
    );
    let lines = |r: &Resp| {
        r.json["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["line"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&r), ["one", "two", "three"]);
    assert_eq!(
        lines(&api.get(&format!("{base}?stream=stdout")).await),
        ["one", "three"]
    );
    assert_eq!(lines(&api.get(&format!("{base}?stream=both&tail=1")).await), ["three"]);
    assert_eq!(
        lines(&api.get(&format!("{base}?attempt=1&stream=stderr")).await),
        ["two"]
    );

    for (q, field) in [
        ("stream=stdin", "stream"),
        ("tail=-1", "tail"),
        ("attempt=0", "attempt"),
        ("follow=yes", "follow"),
    ] {
        let r = api.get(&format!("{base}?{q}")).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, field),
            "{q}: {}",
            r.text
        );
    }
    assert_eq!(
        api.get("/v1/runs/j@20990101T000000.000Z/logs").await.status,
        StatusCode::NOT_FOUND
    );

    let f = api.get(&format!("{base}?follow=true")).await;
    assert_eq!(f.status, StatusCode::OK, "{}", f.text);
    assert_eq!(f.headers["content-type"], "application/x-ndjson");
    let followed: Vec<Value> = f.text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(followed.len(), 3, "{}", f.text);
    assert_eq!(
        followed[2],
        json!({"ts": "2026-01-05T07:00:00.000Z", "stream": "stdout", "line": "three"})
    );
}

// ----- ops -----

#[tokio::test]
async fn health_openapi_and_unknown_paths() {
    let api = api();
    let r = api.get("/healthz").await;
    assert_eq!((r.status, r.json.clone()), (StatusCode::OK, json!({"status": "ok"})));
    let r = api.get("/readyz").await;
    assert_eq!((r.status, r.json.clone()), (StatusCode::OK, json!({"status": "ready"})));
    let r = api.get("/v1/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["openapi"], "3.1.0");
    for path in [
        "/v1/jobs",
        "/v1/jobs:batch",
        "/v1/jobs/{id}",
        "/v1/runs/{run_id}/logs",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(
            r.json["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    let r = api.get("/v1/nothing").await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "not_found"));
    let r = api.call(Method::DELETE, "/v1/runs", &[], None).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
}

#[tokio::test]
async fn follow_streams_lines_while_the_attempt_runs() {
    let api = api();
    api.create(every_job("j")).await;
    let run = api.trigger("j").await;
    let (token, mut writer) = start_attempt(&api, &run).await;
    writer
        .append(log_line(LogStream::Stdout, "one", api.clock.now()))
        .await
        .unwrap();

    let req = Request::get(format!("/v1/runs/{run}/logs?follow=true"))
        .header("authorization", format!("Bearer {}", api.key_of("default").await))
        .body(Body::empty())
        .unwrap();
    let res = api.router.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "application/x-ndjson");
    let mut body = res.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let first: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(first["line"], "one", "the first line arrives before the attempt ends");

    writer
        .append(log_line(LogStream::Stderr, "two", api.clock.now()))
        .await
        .unwrap();
    finish_attempt(&api, &run, token, writer).await;
    let rest = tokio::spawn(async move { body.collect().await.unwrap().to_bytes() });
    // The follow polls on the manual clock: move it until the stream ends.
    for _ in 0..1_000 {
        if rest.is_finished() {
            break;
        }
        api.clock.advance(sked_core::duration::Dur::millis(200));
        tokio::task::yield_now().await;
    }
    assert!(rest.is_finished(), "the follow did not end after the attempt finished");
    let rest = rest.await.unwrap();
    let lines: Vec<Value> = rest
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (lines[0]["line"].as_str(), lines[0]["stream"].as_str()),
        (Some("two"), Some("stderr"))
    );
}

// ----- the OpenAPI document -----

#[tokio::test]
async fn a_malformed_cursor_is_a_400_naming_it_on_the_run_listings_and_the_ledger() {
    // Given: a job with a run (schemathesis found these two answering 500).
    let api = api();
    api.create(every_job("j")).await;
    api.trigger("j").await;
    for uri in [
        "/v1/runs?cursor=not-a-cursor",
        "/v1/runs?cursor=x%7Cy",
        "/v1/jobs/j/runs?cursor=not-a-cursor",
        "/v1/jobs/j/occurrences?cursor=not-a-cursor",
    ] {
        // When a cursor no listing answered is passed back, then: 400 on `cursor`.
        let r = api.get(uri).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, "cursor"),
            "{uri}: {}",
            r.text
        );
        assert_eq!(r.code(), "invalid_argument");
    }
}

/// Every operation of the document as `METHOD path`.
fn documented_operations(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            out.push((method.to_uppercase(), path.clone()));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn every_documented_operation_reaches_a_handler() {
    // Given: the document the router serves.
    let api = api();
    let doc = api.get("/v1/openapi.json").await.json;
    let operations = documented_operations(&doc);
    assert!(operations.len() >= 20, "{operations:?}");
    for (method, path) in operations {
        // When each operation is called with its path parameters filled in, then the router
        // has a handler for it: never the fallback's 404 or 405.
        let uri = path.replace("{id}", "x").replace("{run_id}", "x@20260101T000000.000Z");
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let r = api.call(method.clone(), &uri, &[], Some(b"{}".to_vec())).await;
        assert_ne!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}: {}", r.text);
        assert!(
            !(r.status == StatusCode::NOT_FOUND && r.text.contains("no such endpoint")),
            "{method} {path} is documented but not routed: {}",
            r.text
        );
    }
}

#[tokio::test]
async fn the_document_is_openapi_3_1_with_every_answer_described() {
    let doc = api().get("/v1/openapi.json").await.json;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    let mut ids = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let name = format!("{method} {path}");
            ids.push(
                op["operationId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: no operationId")),
            );
            let responses = op["responses"].as_object().unwrap();
            let open = path == "/healthz" || path == "/readyz";
            assert_eq!(op["security"].as_array().unwrap().is_empty(), open, "{name}");
            if !open {
                for status in ["401", "403", "500", "503"] {
                    assert!(responses.contains_key(status), "{name} lacks {status}");
                }
            }
            for (status, answer) in responses {
                let body = &answer["content"]["application/json"]["schema"];
                if status.starts_with('4') || status.starts_with('5') {
                    assert_eq!(body["$ref"], "#/components/schemas/Error", "{name} {status}");
                }
            }
        }
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "operation ids must be unique: {ids:?}");
    // Bounds in the document are the extractors'.
    let limit = doc["paths"]["/v1/runs"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!(limit["schema"]["maximum"], 1000);
    let batch = &doc["components"]["schemas"]["JobBatch"]["properties"]["jobs"];
    assert_eq!(batch["maxItems"], 1000);
    // Every `$ref` names a component that exists.
    let text = doc.to_string();
    for piece in text.split("\"#/components/schemas/").skip(1) {
        let name = piece.split('"').next().unwrap();
        assert!(doc["components"]["schemas"][name].is_object(), "dangling $ref {name}");
    }
}

#[tokio::test]
async fn backfill_creates_a_run_per_missing_occurrence_once_and_names_bad_fields() {
    let api = api(); // 2026-01-05T07:00Z
    api.create(json!({"id": "h", "schedule": {"cron": "0 * * * *"}, "task": {"command": {"argv": ["true"]}}}))
        .await;
    let body = json!({"from": "2026-01-05T04:00:00Z", "to": "2026-01-05T06:30:00Z"});
    let r = api.post("/v1/jobs/h/backfill", body.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        r.json["items"],
        json!([
            "h@20260105T040000.000Z",
            "h@20260105T050000.000Z",
            "h@20260105T060000.000Z"
        ])
    );
    let run = api.get("/v1/runs/h@20260105T050000.000Z").await;
    assert_eq!(
        (run.json["trigger"].as_str(), run.json["scheduled_for"].as_str()),
        (Some("backfill"), Some("2026-01-05T05:00:00.000Z")),
        "{}",
        run.text
    );
    let again = api.post("/v1/jobs/h/backfill", body.clone()).await;
    assert_eq!(
        (again.status, again.json["items"].clone()),
        (StatusCode::CREATED, json!([]))
    );

    let cases = [
        (
            json!({"from": "yesterday", "to": "2026-01-05T06:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
        ),
        (
            json!({"from": "2026-01-05T01:00:00Z", "to": "2026-01-05T01:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"from": "2026-01-05T01:00:00Z", "to": "2026-01-05T08:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (
            json!({"from": "2025-01-01T00:00:00Z", "to": "2026-01-05T00:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
        ),
        (json!({"from": "2026-01-05T01:00:00Z"}), StatusCode::BAD_REQUEST, "to"),
        (
            json!({"from": "2026-01-05T01:00:00Z", "to": "2026-01-05T02:00:00Z", "x": 1}),
            StatusCode::BAD_REQUEST,
            "x",
        ),
    ];
    for (bad, status, field) in cases {
        let r = api.post("/v1/jobs/h/backfill", bad.clone()).await;
        assert_eq!((r.status, r.field()), (status, field), "{bad}: {}", r.text);
    }
    let runs = api.get("/v1/jobs/h/runs").await;
    assert_eq!(
        runs.items().len(),
        3,
        "a refused backfill creates nothing: {}",
        runs.text
    );
    let r = api.post("/v1/jobs/nope/backfill", body.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api
        .call(
            Method::POST,
            "/v1/jobs/h/backfill",
            &[(AS, "other")],
            Some(body.to_string().into_bytes()),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "another tenant's job is not found: {}",
        r.text
    );
}

#[tokio::test]
async fn a_concurrency_key_reads_back_reaches_its_runs_and_bad_ones_are_named() {
    let api = api();
    let keyed = with(
        every_job("k"),
        "concurrency",
        json!({"key": "db-migrations", "limit": 2}),
    );
    let created = api.create(keyed).await;
    assert_eq!(created["concurrency"], json!({"key": "db-migrations", "limit": 2}));
    let run_id = api.trigger("k").await;
    let run = api.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(
        run.json["concurrency"],
        json!({"key": "db-migrations", "limit": 2}),
        "{}",
        run.text
    );
    // A job without a key: absent on the job, null on its runs.
    assert!(api.create(every_job("plain")).await.get("concurrency").is_none());
    let plain_run = api.trigger("plain").await;
    assert!(api.get(&format!("/v1/runs/{plain_run}")).await.json["concurrency"].is_null());

    for (body, status, field) in [
        (
            json!({"key": "a b", "limit": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "concurrency.key",
        ),
        (
            json!({"key": "", "limit": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "concurrency.key",
        ),
        (
            json!({"key": "db", "limit": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "concurrency.limit",
        ),
        (
            json!({"key": "db", "limit": 10_001}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "concurrency.limit",
        ),
        (json!({"key": "db"}), StatusCode::BAD_REQUEST, "concurrency"),
        (
            json!({"key": "db", "limit": 1, "x": 1}),
            StatusCode::BAD_REQUEST,
            "concurrency",
        ),
    ] {
        api.refused_creating("concurrency", body, status, field).await;
    }
}

#[tokio::test]
async fn notify_reads_back_reaches_its_runs_and_bad_ones_are_named() {
    let api = api();
    let notify = json!({"on": ["failed", "timed_out", "skipped"], "webhook": "https://hooks.example/sked"});
    let created = api.create(with(every_job("n"), "notify", notify.clone())).await;
    assert_eq!(created["notify"], notify);
    let run_id = api.trigger("n").await;
    let run = api.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run.json["alert"]["notify"], notify, "{}", run.text);
    assert_eq!(run.json["alert"]["state"], "idle");
    assert_eq!(run.json["alert"]["deliveries"], json!([]));
    assert!(run.json["alert"]["next_try_at"].is_null());
    let plain_run = {
        api.create(every_job("plain")).await;
        api.trigger("plain").await
    };
    assert!(api.get(&format!("/v1/runs/{plain_run}")).await.json["alert"].is_null());

    for (body, status, field) in [
        (
            json!({"on": ["failed"], "webhook": "ftp://x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "notify.webhook",
        ),
        (
            json!({"on": [], "webhook": "https://x.test"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "notify.on",
        ),
        (
            json!({"on": ["failed", "failed"], "webhook": "https://x.test"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "notify.on",
        ),
        (
            json!({"on": ["exploded"], "webhook": "https://x.test"}),
            StatusCode::BAD_REQUEST,
            "notify",
        ),
        (json!({"on": ["failed"]}), StatusCode::BAD_REQUEST, "notify"),
    ] {
        api.refused_creating("notify", body, status, field).await;
    }
}

#[tokio::test]
async fn the_webhook_secret_is_shown_when_made_and_never_after() {
    let api = api();
    let before = api.get("/v1/webhook-secret").await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.text);
    assert!(before.json["created_at"].is_null());
    let made = api.post_empty("/v1/webhook-secret").await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let secret = made.json["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_") && secret.len() == 70, "{secret}");
    let read = api.get("/v1/webhook-secret").await;
    assert_eq!(read.json["created_at"], made.json["created_at"]);
    assert!(!read.text.contains(&secret), "the secret is shown once: {}", read.text);
    let again = api.post_empty("/v1/webhook-secret").await;
    assert_ne!(again.json["secret"].as_str().unwrap(), secret, "a new one replaces it");
}

fn after_job(id: &str, upstreams: &[&str]) -> Value {
    json!({"id": id, "schedule": {"after": {"jobs": upstreams}}, "task": {"command": {"argv": ["true"]}}})
}

#[tokio::test]
async fn an_after_job_runs_at_its_upstreams_time_and_its_graph_is_checked() {
    let api = api();
    api.create(every_job("a")).await;
    let b = api.create(after_job("b", &["a"])).await;
    assert_eq!(
        (&b["schedule"], &b["state"], &b["overlap"], &b["next_fire_at"]),
        (
            &json!({"after": {"jobs": ["a"], "on": "success"}}),
            &json!("ACTIVE"),
            &json!("allow"),
            &Value::Null
        ),
        "{b}"
    );
    let preview = api.get("/v1/jobs/b/preview").await;
    assert_eq!(
        preview.json["items"],
        json!([]),
        "no fire time by the clock: {}",
        preview.text
    );

    // a's run ends: b's run at the same nominal time, trigger `after`, is there.
    let a_run = api.trigger("a").await;
    api.clock.advance(Dur::secs(2));
    run_one_attempt(&api, &a_run).await;
    let a_at = api.get(&format!("/v1/runs/{a_run}")).await.json["scheduled_for"].clone();
    let b_runs = api.get("/v1/jobs/b/runs").await;
    assert_eq!(b_runs.items().len(), 1, "{}", b_runs.text);
    let b_run = &b_runs.items()[0];
    assert_eq!(
        (&b_run["scheduled_for"], &b_run["trigger"], &b_run["state"]),
        (&a_at, &json!("after"), &json!("PENDING"))
    );

    // Unknown upstream, a cycle, itself, a bad `on`, a bad `within`: named, nothing written.
    let before = api.job_ids().await;
    for (body, status, field) in [
        (
            after_job("c", &["nope"]),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.after.jobs",
        ),
        (
            after_job("c", &["c"]),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.after.jobs",
        ),
        (
            after_job("c", &[]),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.after.jobs",
        ),
        (
            json!({"id": "c", "schedule": {"after": {"jobs": ["a"], "within": "0s"}}, "task": {"command": {"argv": ["true"]}}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "schedule.after.within",
        ),
        (
            json!({"id": "c", "schedule": {"after": {"jobs": ["a"], "on": "maybe"}}, "task": {"command": {"argv": ["true"]}}}),
            StatusCode::BAD_REQUEST,
            "schedule.after.on",
        ),
        (
            with(after_job("c", &["a"]), "jitter", json!("5s")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "jitter",
        ),
    ] {
        let r = api.post("/v1/jobs", body.clone()).await;
        assert_eq!((r.status, r.field()), (status, field), "{body}: {}", r.text);
    }
    assert_eq!(api.job_ids().await, before, "nothing written");
    // a after b closes a cycle (b runs after a).
    let r = api
        .send(
            Method::PATCH,
            "/v1/jobs/a",
            &[],
            json!({"schedule": {"every": null, "anchor": null, "after": {"jobs": ["b"]}}}),
        )
        .await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "schedule.after.jobs"),
        "{}",
        r.text
    );
    assert!(r.text.contains("cycle"), "{}", r.text);
    // Another tenant's job of that name is not an upstream.
    let r = api
        .call(
            Method::POST,
            "/v1/jobs",
            &[(AS, "other")],
            Some(after_job("x", &["a"]).to_string().into_bytes()),
        )
        .await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "schedule.after.jobs")
    );

    // Deleting a job others run after: 409 naming them, unless forced.
    let r = api.call(Method::DELETE, "/v1/jobs/a", &[], None).await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "conflict"), "{}", r.text);
    assert!(r.text.contains('b'), "{}", r.text);
    assert_eq!(api.get("/v1/jobs/a").await.json["state"], "ACTIVE");
    let r = api.call(Method::DELETE, "/v1/jobs/a?force=true", &[], None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["state"], "DELETED");
}
