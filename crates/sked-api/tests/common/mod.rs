//! The in-process API the tests drive: the router over in-memory ports on a manual clock,
//! with keys, quotas and webhook secrets, and a request helper that answers status, error code and body.

#![allow(dead_code)] // each test file uses part of it

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use sked_api::{ApiConfig, Auth, router};
use sked_core::auth::{Principal, Role};
use sked_core::ids::TenantId;
use sked_core::service::alerts::WebhookSecretService;
use sked_core::service::keys::{Keys, NewKey};
use sked_core::service::quotas::Quotas;
use sked_core::service::{Sked, SkedConfig, SweepSignal};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemKeys, MemPorts, MemStore};
use std::sync::Arc;
use tower::ServiceExt;

/// The API over fresh in-memory ports.
pub struct World {
    pub router: Router,
    pub keys: Keys,
    pub clock: Arc<ManualClock>,
    pub store: Arc<MemStore>,
}

/// An answer: status, `error.code` (empty when none), body, headers.
pub struct Answer {
    pub status: StatusCode,
    pub code: String,
    pub json: Value,
    pub headers: HeaderMap,
}

impl World {
    pub fn new() -> Self {
        let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
        let keys = Keys::new(Arc::new(MemKeys::new()), clock.clone());
        let quotas = Quotas::new(store.clone(), clock.clone());
        let secrets = WebhookSecretService::new(store.clone(), clock.clone());
        let sked = Sked::new(ports, SkedConfig::default(), SweepSignal::default())
            .with_quotas(quotas)
            .with_webhook_secrets(secrets);
        World {
            router: router(sked, ApiConfig::default(), Auth::Keys(keys.clone())),
            keys,
            clock,
            store,
        }
    }

    /// A new key of `tenant` with `role`: (id, secret).
    pub async fn key(&self, tenant: &str, role: Role) -> (String, String) {
        let operator = Principal::new(TenantId::default(), Role::Operator);
        let new = NewKey {
            tenant: TenantId::from(tenant),
            role,
            name: format!("{role} of {tenant}"),
        };
        let made = self.keys.create(&operator, new).await.unwrap();
        (made.key.id, made.secret)
    }

    /// Status, error code and body of `method path` with `authorization` (and `extra` headers).
    pub async fn call(
        &self,
        method: &Method,
        path: &str,
        authorization: Option<&str>,
        body: Option<&Value>,
        extra: &[(&str, &str)],
    ) -> (StatusCode, String, Value) {
        let a = self.send(method, path, authorization, body, extra).await;
        (a.status, a.code, a.json)
    }

    /// The whole answer of `method path` with `authorization` (and `extra` headers).
    pub async fn send(
        &self,
        method: &Method,
        path: &str,
        authorization: Option<&str>,
        body: Option<&Value>,
        extra: &[(&str, &str)],
    ) -> Answer {
        let mut req = Request::builder().method(method.clone()).uri(path);
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let code = json["error"]["code"].as_str().unwrap_or("").to_string();
        Answer {
            status,
            code,
            json,
            headers,
        }
    }
}

pub fn bearer(secret: &str) -> String {
    format!("Bearer {secret}")
}
