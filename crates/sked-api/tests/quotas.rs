//! Quotas over the API: `GET|PUT /v1/tenants/{tenant}/quota` for operators only, bad limits
//! named, and each limit's refusal — 429 `resource_exhausted`, with `Retry-After` for the
//! submit rate — storing nothing.

mod common;

use axum::http::{Method, StatusCode};
use common::{World, bearer};
use serde_json::{Value, json};
use sked_core::auth::Role;
use sked_core::duration::Dur;

fn job(id: &str) -> Value {
    json!({"id": id, "schedule": {"every": "1h"}, "task": {"command": {"argv": ["true"]}}})
}

/// An operator's and acme's admin's bearer headers.
async fn keys(w: &World) -> (String, String) {
    let operator = bearer(&w.key("default", Role::Operator).await.1);
    let admin = bearer(&w.key("acme", Role::Admin).await.1);
    (operator, admin)
}

async fn set_quota(w: &World, operator: &str, quota: Value) {
    let (status, _, body) = w
        .call(
            &Method::PUT,
            "/v1/tenants/acme/quota",
            Some(operator),
            Some(&quota),
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn job_ids(w: &World, admin: &str) -> Vec<String> {
    let (_, _, jobs) = w.call(&Method::GET, "/v1/jobs", Some(admin), None, &[]).await;
    jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn operators_read_and_set_quotas_and_bad_limits_are_named() {
    let w = World::new();
    let (operator, admin) = keys(&w).await;
    let (status, _, unset) = w
        .call(&Method::GET, "/v1/tenants/acme/quota", Some(&operator), None, &[])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        unset,
        json!({"tenant": "acme", "max_active_jobs": null, "max_concurrent_runs": null, "submit_rate": null})
    );
    let quota =
        json!({"max_active_jobs": 10, "max_concurrent_runs": 2, "submit_rate": {"per_second": 0.5, "burst": 3}});
    set_quota(&w, &operator, quota.clone()).await;
    let (_, _, read) = w
        .call(&Method::GET, "/v1/tenants/acme/quota", Some(&operator), None, &[])
        .await;
    let mut expected = quota.clone();
    expected["tenant"] = json!("acme");
    assert_eq!(read, expected);

    let put = async |body: &Value| {
        w.call(&Method::PUT, "/v1/tenants/acme/quota", Some(&operator), Some(body), &[])
            .await
    };
    for (body, status, field) in [
        (
            json!({"max_active_jobs": -1}),
            StatusCode::BAD_REQUEST,
            "max_active_jobs",
        ),
        (json!({"max_jobs": 1}), StatusCode::BAD_REQUEST, "max_jobs"),
        (
            json!({"submit_rate": {"per_second": 0, "burst": 1}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "submit_rate.per_second",
        ),
        (
            json!({"submit_rate": {"per_second": 1}}),
            StatusCode::BAD_REQUEST,
            "submit_rate.burst",
        ),
        (
            json!({"max_concurrent_runs": 2_000_000_000u64}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "max_concurrent_runs",
        ),
    ] {
        let (got, _, answer) = put(&body).await;
        assert_eq!(
            (got, answer["error"]["field"].as_str()),
            (status, Some(field)),
            "{body}: {answer}"
        );
    }
    for body in [json!([null, null]), json!({"submit_rate": [1, 2]})] {
        let (got, _, answer) = put(&body).await;
        assert_eq!(
            got,
            StatusCode::BAD_REQUEST,
            "a struct is not read from an array: {body}: {answer}"
        );
    }
    let (_, _, unchanged) = w
        .call(&Method::GET, "/v1/tenants/acme/quota", Some(&operator), None, &[])
        .await;
    assert_eq!(unchanged, expected, "a refused PUT changes nothing");

    // Whole numbers written as floats are the same integers (JSON Schema's `integer`).
    let floats =
        json!({"max_active_jobs": 10.0, "max_concurrent_runs": 2.0, "submit_rate": {"per_second": 0.5, "burst": 3.0}});
    set_quota(&w, &operator, floats).await;
    let (_, _, read) = w
        .call(&Method::GET, "/v1/tenants/acme/quota", Some(&operator), None, &[])
        .await;
    assert_eq!(read, expected);

    // An admin may not read or raise its own tenant's quota.
    for method in [Method::GET, Method::PUT] {
        let (status, code, _) = w
            .call(&method, "/v1/tenants/acme/quota", Some(&admin), Some(&json!({})), &[])
            .await;
        assert_eq!((status, code.as_str()), (StatusCode::FORBIDDEN, "permission_denied"));
    }
}

#[tokio::test]
async fn creates_past_max_active_jobs_are_refused_and_store_nothing() {
    let w = World::new();
    let (operator, admin) = keys(&w).await;
    set_quota(&w, &operator, json!({"max_active_jobs": 2})).await;
    for id in ["a", "b"] {
        let (status, _, body) = w
            .call(&Method::POST, "/v1/jobs", Some(&admin), Some(&job(id)), &[])
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, code, body) = w
        .call(&Method::POST, "/v1/jobs", Some(&admin), Some(&job("c")), &[])
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted")
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains("at most 2"),
        "{body}"
    );
    let batch = json!({"jobs": [job("d")]});
    let (status, _, _) = w
        .call(&Method::POST, "/v1/jobs:batch", Some(&admin), Some(&batch), &[])
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(job_ids(&w, &admin).await, ["a", "b"], "nothing of the refused creates");

    // A paused job keeps its place; a deleted one frees it.
    let (status, _, _) = w.call(&Method::POST, "/v1/jobs/a/pause", Some(&admin), None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = w
        .call(&Method::POST, "/v1/jobs", Some(&admin), Some(&job("c")), &[])
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let (status, _, _) = w.call(&Method::DELETE, "/v1/jobs/a", Some(&admin), None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = w
        .call(&Method::POST, "/v1/jobs", Some(&admin), Some(&job("c")), &[])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Another tenant is not limited by acme's quota.
    let beta = bearer(&w.key("beta", Role::Admin).await.1);
    for id in ["x", "y", "z"] {
        let (status, _, _) = w
            .call(&Method::POST, "/v1/jobs", Some(&beta), Some(&job(id)), &[])
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
}

#[tokio::test]
async fn the_submit_rate_refuses_with_retry_after_and_refills_with_time() {
    let w = World::new();
    let (operator, admin) = keys(&w).await;
    set_quota(&w, &operator, json!({"submit_rate": {"per_second": 0.5, "burst": 2}})).await;
    for id in ["a", "b"] {
        let (status, _, _) = w
            .call(&Method::POST, "/v1/jobs", Some(&admin), Some(&job(id)), &[])
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let refused = w
        .send(&Method::POST, "/v1/jobs", Some(&admin), Some(&job("c")), &[])
        .await;
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted")
    );
    assert_eq!(refused.headers["retry-after"], "2", "one submission every 2 s");
    // A manual trigger is a submission too.
    let (status, _, _) = w
        .call(&Method::POST, "/v1/jobs/a/trigger", Some(&admin), None, &[])
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(job_ids(&w, &admin).await, ["a", "b"]);

    w.clock.advance(Dur::secs(2));
    let (status, _, _) = w
        .call(&Method::POST, "/v1/jobs", Some(&admin), Some(&job("c")), &[])
        .await;
    assert_eq!(status, StatusCode::CREATED, "the wait Retry-After named is enough");
    // A batch larger than the burst can never pass: said so, without a Retry-After.
    w.clock.advance(Dur::secs(60));
    let batch = json!({"jobs": [job("d"), job("e"), job("f")]});
    let refused = w
        .send(&Method::POST, "/v1/jobs:batch", Some(&admin), Some(&batch), &[])
        .await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers.get("retry-after").is_none());
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("burst of 2"),
        "{}",
        refused.json
    );
}
