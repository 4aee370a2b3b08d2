//! Authentication over every route: no key, a malformed, unknown or revoked key is 401
//! `unauthenticated`; a role that may not is 403 `permission_denied`; another tenant's job,
//! run, log or key is 404 exactly as if it did not exist; `X-Sked-Tenant` is ignored. Prints
//! the matrix it checked.

mod common;

use axum::http::{Method, StatusCode};
use common::{World, bearer};
use serde_json::{Value, json};
use sked_core::auth::{Principal, Role};
use sked_core::ids::TenantId;

fn job(id: &str) -> Value {
    json!({"id": id, "schedule": {"every": "1h"}, "task": {"command": {"argv": ["true"]}}})
}

/// One route: method, path (with `{job}`, `{run}`, `{key}`, `{tenant}` filled in per tenant), the role it
/// needs, a body, and whether it names a resource of the tenant (404 to others).
struct Route {
    method: Method,
    path: &'static str,
    needs: Role,
    body: Option<Value>,
    owned: bool,
}

fn routes() -> Vec<Route> {
    let r = |method: Method, path: &'static str, needs: Role, body: Option<Value>, owned: bool| Route {
        method,
        path,
        needs,
        body,
        owned,
    };
    let patch = Some(json!({"priority": 3}));
    vec![
        r(Method::GET, "/v1/openapi.json", Role::Read, None, false),
        r(Method::GET, "/metrics", Role::Read, None, false),
        r(Method::GET, "/v1/jobs", Role::Read, None, false),
        r(Method::POST, "/v1/jobs", Role::Write, Some(job("fresh")), false),
        r(
            Method::POST,
            "/v1/jobs:batch",
            Role::Write,
            Some(json!({"jobs": [job("batched")]})),
            false,
        ),
        r(Method::GET, "/v1/jobs/{job}", Role::Read, None, true),
        r(Method::PUT, "/v1/jobs/{job}", Role::Write, Some(job("j")), true),
        r(Method::PATCH, "/v1/jobs/{job}", Role::Write, patch, true),
        r(Method::POST, "/v1/jobs/{job}/pause", Role::Write, None, true),
        r(Method::POST, "/v1/jobs/{job}/resume", Role::Write, None, true),
        r(Method::POST, "/v1/jobs/{job}/trigger", Role::Write, None, true),
        r(
            Method::POST,
            "/v1/jobs/{job}/backfill",
            Role::Write,
            Some(json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"})),
            true,
        ),
        r(Method::GET, "/v1/jobs/{job}/preview", Role::Read, None, true),
        r(Method::GET, "/v1/jobs/{job}/runs", Role::Read, None, true),
        r(Method::GET, "/v1/jobs/{job}/occurrences", Role::Read, None, true),
        r(Method::GET, "/v1/jobs/{job}/why", Role::Read, None, true),
        r(Method::GET, "/v1/runs", Role::Read, None, false),
        r(Method::GET, "/v1/runs/{run}", Role::Read, None, true),
        r(Method::GET, "/v1/runs/{run}/logs", Role::Read, None, true),
        r(Method::POST, "/v1/runs/{run}/cancel", Role::Write, None, true),
        r(Method::GET, "/v1/keys", Role::Admin, None, false),
        r(
            Method::POST,
            "/v1/keys",
            Role::Admin,
            Some(json!({"role": "read", "name": "made"})),
            false,
        ),
        r(Method::DELETE, "/v1/keys/{key}", Role::Admin, None, true),
        r(Method::GET, "/v1/tenants/{tenant}/quota", Role::Operator, None, false),
        r(
            Method::PUT,
            "/v1/tenants/{tenant}/quota",
            Role::Operator,
            Some(json!({"max_active_jobs": 100})),
            false,
        ),
        r(Method::GET, "/v1/webhook-secret", Role::Admin, None, false),
        r(Method::POST, "/v1/webhook-secret", Role::Admin, None, false),
        r(Method::DELETE, "/v1/jobs/{job}", Role::Write, None, true),
        r(Method::GET, "/v1/no-such-route", Role::Read, None, false),
    ]
}

/// Tenant `acme`'s things: a job `j`, its triggered run, and a spare key.
async fn acme_things(w: &World, admin: &str) -> (String, String) {
    let (status, _, body) = w
        .call(&Method::POST, "/v1/jobs", Some(&bearer(admin)), Some(&job("j")), &[])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, run) = w
        .call(&Method::POST, "/v1/jobs/j/trigger", Some(&bearer(admin)), None, &[])
        .await;
    assert!(status.is_success(), "{run}");
    (
        run["run_id"].as_str().unwrap().to_string(),
        w.key("acme", Role::Read).await.0,
    )
}

fn fill(path: &str, run: &str, key: &str) -> String {
    path.replace("{job}", "j")
        .replace("{run}", run)
        .replace("{key}", key)
        .replace("{tenant}", "acme")
}

#[tokio::test]
async fn every_route_needs_a_live_key_of_a_role_that_may_and_sees_only_its_tenant() {
    let w = World::new();
    let (_, acme_admin) = w.key("acme", Role::Admin).await;
    let (revoked_id, revoked) = w.key("acme", Role::Admin).await;
    let (_, read) = w.key("acme", Role::Read).await;
    let (_, beta_admin) = w.key("beta", Role::Admin).await;
    let (run, spare_key) = acme_things(&w, &acme_admin).await;
    let operator = Principal::new(TenantId::default(), Role::Operator);
    w.keys.revoke(&operator, &revoked_id).await.unwrap();

    let unknown = bearer(&sked_core::auth::new_secret().0);
    let refused: [(&str, Option<String>); 5] = [
        ("no key", None),
        ("not bearer", Some(format!("Basic {acme_admin}"))),
        ("malformed", Some("Bearer sked_nope".to_string())),
        ("unknown", Some(unknown)),
        ("revoked", Some(bearer(&revoked))),
    ];
    let names: Vec<&str> = refused.iter().map(|(n, _)| *n).collect();
    let mut matrix = vec![format!("| route | {} | read key | other tenant |", names.join(" | "))];
    for route in routes() {
        let path = fill(route.path, &run, &spare_key);
        let name = format!("{} {}", route.method, route.path);
        let mut row = vec![name.clone()];
        for (what, authorization) in &refused {
            let (status, code, body) = w
                .call(&route.method, &path, authorization.as_deref(), route.body.as_ref(), &[])
                .await;
            assert_eq!(
                (status, code.as_str()),
                (StatusCode::UNAUTHORIZED, "unauthenticated"),
                "{name} with {what}: {body}"
            );
            row.push(status.as_u16().to_string());
        }
        // A read key: reads pass the gate, everything else is 403.
        let (status, code, body) = w
            .call(&route.method, &path, Some(&bearer(&read)), route.body.as_ref(), &[])
            .await;
        if route.needs > Role::Read {
            assert_eq!(
                (status, code.as_str()),
                (StatusCode::FORBIDDEN, "permission_denied"),
                "{name} with a read key: {body}"
            );
        } else {
            assert!(
                !matches!(status.as_u16(), 401 | 403),
                "{name} with a read key: {status} {body}"
            );
        }
        row.push(status.as_u16().to_string());
        // Another tenant's admin, naming acme in X-Sked-Tenant: acme's things are absent.
        let (status, code, body) = w
            .call(
                &route.method,
                &path,
                Some(&bearer(&beta_admin)),
                route.body.as_ref(),
                &[("X-Sked-Tenant", "acme")],
            )
            .await;
        if route.owned {
            assert_eq!(
                (status, code.as_str()),
                (StatusCode::NOT_FOUND, "not_found"),
                "{name} as beta: {body}"
            );
        } else if route.needs > Role::Admin {
            assert_eq!(
                (status, code.as_str()),
                (StatusCode::FORBIDDEN, "permission_denied"),
                "{name} as beta's admin: {body}"
            );
        } else {
            assert!(!matches!(status.as_u16(), 401 | 403), "{name} as beta: {status} {body}");
        }
        row.push(status.as_u16().to_string());
        matrix.push(format!("| {} |", row.join(" | ")));
    }
    // Beta saw nothing of acme's: its listings are empty but for what it made itself.
    let (_, _, jobs) = w
        .call(&Method::GET, "/v1/jobs", Some(&bearer(&beta_admin)), None, &[])
        .await;
    let ids: Vec<&str> = jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&"j"), "{jobs}");
    let (_, _, runs) = w
        .call(&Method::GET, "/v1/runs", Some(&bearer(&beta_admin)), None, &[])
        .await;
    assert!(
        runs["items"].as_array().unwrap().iter().all(|r| r["job_id"] != "j"),
        "{runs}"
    );
    // And acme's job is still there, unchanged by beta's attempts.
    let (status, _, mine) = w
        .call(&Method::GET, "/v1/jobs/j", Some(&bearer(&acme_admin)), None, &[])
        .await;
    assert_eq!(
        (status, mine["state"].as_str()),
        (StatusCode::OK, Some("ACTIVE")),
        "{mine}"
    );
    println!("{}", matrix.join("\n"));
}

#[tokio::test]
async fn the_matrix_and_the_openapi_document_list_the_same_routes() {
    // Given: the routes this file checks, in the document's spelling of path parameters.
    let w = World::new();
    let (_, admin) = w.key("acme", Role::Admin).await;
    let mut listed: Vec<String> = routes()
        .iter()
        .filter(|r| r.path != "/v1/no-such-route")
        .map(|r| {
            let path = r
                .path
                .replace("{job}", "{id}")
                .replace("{run}", "{run_id}")
                .replace("{key}", "{id}");
            format!("{} {path}", r.method)
        })
        .chain(["GET /healthz".to_string(), "GET /readyz".to_string()])
        .collect();
    listed.sort();
    // When the document is read, then it has exactly those operations: none undocumented,
    // none unchecked.
    let (status, _, doc) = w
        .call(&Method::GET, "/v1/openapi.json", Some(&bearer(&admin)), None, &[])
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut documented: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect();
    documented.sort();
    assert_eq!(documented, listed);
}

#[tokio::test]
async fn health_and_readiness_are_open_and_keys_answer_their_secret_only_once() {
    let w = World::new();
    let (status, _, _) = w.call(&Method::GET, "/healthz", None, None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = w.call(&Method::GET, "/readyz", None, None, &[]).await;
    assert_eq!(status, StatusCode::OK, "the readiness probe needs no key");
    let (_, admin) = w.key("acme", Role::Admin).await;
    let body = json!({"role": "write", "name": "deploy bot"});
    let (status, _, made) = w
        .call(&Method::POST, "/v1/keys", Some(&bearer(&admin)), Some(&body), &[])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let secret = made["key"].as_str().unwrap();
    assert!(secret.starts_with("sked_"));
    assert_eq!(
        (made["tenant"].as_str(), made["role"].as_str()),
        (Some("acme"), Some("write"))
    );
    let (_, _, listed) = w.call(&Method::GET, "/v1/keys", Some(&bearer(&admin)), None, &[]).await;
    assert!(!listed.to_string().contains(secret), "{listed}");
    assert!(
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k.get("key").is_none())
    );
    // The new key works; revoked, it is refused at once.
    let (status, _, _) = w.call(&Method::GET, "/v1/jobs", Some(&bearer(secret)), None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let id = made["id"].as_str().unwrap();
    let (status, _, revoked) = w
        .call(
            &Method::DELETE,
            &format!("/v1/keys/{id}"),
            Some(&bearer(&admin)),
            None,
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert!(revoked["revoked_at"].is_string());
    let (status, code, _) = w.call(&Method::GET, "/v1/jobs", Some(&bearer(secret)), None, &[]).await;
    assert_eq!((status, code.as_str()), (StatusCode::UNAUTHORIZED, "unauthenticated"));
    // Bad input names the field; an admin may not mint operators or other tenants' keys.
    for (body, status, field) in [
        (
            json!({"role": "root", "name": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "role",
        ),
        (json!({"role": "read"}), StatusCode::BAD_REQUEST, "name"),
        (
            json!({"role": "read", "name": "x", "extra": 1}),
            StatusCode::BAD_REQUEST,
            "extra",
        ),
        (
            json!({"role": "read", "name": "x", "tenant": "bad tenant!"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "tenant",
        ),
    ] {
        let (got, _, answer) = w
            .call(&Method::POST, "/v1/keys", Some(&bearer(&admin)), Some(&body), &[])
            .await;
        assert_eq!(
            (got, answer["error"]["field"].as_str()),
            (status, Some(field)),
            "{body}: {answer}"
        );
    }
    for body in [
        json!({"role": "operator", "name": "x"}),
        json!({"role": "read", "name": "x", "tenant": "beta"}),
    ] {
        let (got, code, answer) = w
            .call(&Method::POST, "/v1/keys", Some(&bearer(&admin)), Some(&body), &[])
            .await;
        assert_eq!(
            (got, code.as_str()),
            (StatusCode::FORBIDDEN, "permission_denied"),
            "{body}: {answer}"
        );
    }
    let (status, _, unauthenticated) = w.call(&Method::GET, "/v1/jobs", None, None, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{unauthenticated}");
}
