//! The API function driven by the API Gateway v2 events in `events/`, against moto: the same
//! conversion `lambda_http::run` applies (`lambda_http::request::from_str`), then the router.
//! The events carry the JWT claims API Gateway verified (`requestContext.authorizer.jwt`):
//! the tenant and role come from them, never from the `x-sked-tenant` header they also carry.

use http_body_util::BodyExt;
use lambda_http::Request;
use serde_json::{Value, json};
use sked_aws::testing::fresh_resources;
use sked_aws::{Settings, SqsQueue};
use sked_core::duration::Dur;
use sked_core::ports::{Clock, DispatchQueue, SystemClock};
use sked_core::timestamp;
use sked_fn_api::identity::ClaimNames;
use std::sync::Arc;
use tower::ServiceExt;

const CREATE_JOB: &str = include_str!("../../../events/apigw-v2-create-job.json");
const GET_JOB: &str = include_str!("../../../events/apigw-v2-get-job.json");

/// The API over fresh resources, firing 10 minutes ahead, and its SQS queue.
async fn api() -> (axum::Router, SqsQueue) {
    let (clients, aws) = fresh_resources().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let settings = Settings {
        aws,
        lookahead: Dur::secs(600),
    };
    let (ports, quotas) = sked_aws::ports_and_quotas(&clients, &settings.aws, clock.clone());
    let queue = SqsQueue::new(clients.sqs.clone(), &settings.aws, clock);
    (sked_fn_api::app(ports, quotas, &settings, ClaimNames::default()), queue)
}

/// The request an event file describes.
fn request(event: &str) -> Request {
    lambda_http::request::from_str(event).expect("an API Gateway v2 event")
}

/// Calls the router; returns the status and the JSON body.
async fn call(app: &axum::Router, req: Request) -> (u16, Value) {
    let resp = app.clone().oneshot(req).await.expect("the router never fails");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_create_event_creates_the_job_and_the_get_event_reads_it_back() {
    let (app, _) = api().await;

    let (status, created) = call(&app, request(CREATE_JOB)).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], "nightly-report");
    assert_eq!(created["state"], "ACTIVE");
    assert_eq!(created["priority"], 7);

    let (status, got) = call(&app, request(GET_JOB)).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["id"], "nightly-report");
    assert_eq!(got["schedule"], created["schedule"]);

    // The same request again is answered as a re-POST of the same job.
    let (status, again) = call(&app, request(CREATE_JOB)).await;
    assert_eq!(status, 200, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_due_within_the_look_ahead_is_enqueued_by_the_api_call_itself() {
    let (app, queue) = api().await;
    // The create event with a one-shot due now instead of the cron.
    let mut event: Value = serde_json::from_str(CREATE_JOB).unwrap();
    let now = timestamp::format(&SystemClock.now());
    let body =
        json!({"id": "right-now", "schedule": {"at": now}, "task": {"command": {"argv": ["true"]}}, "priority": 8});
    event["body"] = Value::String(body.to_string());
    let (status, created) = call(&app, request(&event.to_string())).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["state"], "COMPLETED", "fired by the call: {created}");

    // No sweeper ran: the message is on the high queue already.
    let got = queue.receive(10, Dur::secs(30), Dur::secs(5)).await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].dispatch.run_id.to_string().starts_with("right-now@"));
    assert!(got[0].receipt.0.starts_with("high|"), "{:?}", got[0].receipt);
}

/// `event` with the verified claims replaced by `claims` (`None`: no authorizer at all).
fn with_claims(event: &str, claims: Option<Value>) -> Request {
    let mut event: Value = serde_json::from_str(event).unwrap();
    match claims {
        Some(claims) => event["requestContext"]["authorizer"]["jwt"]["claims"] = claims,
        None => {
            event["requestContext"].as_object_mut().unwrap().remove("authorizer");
        }
    }
    request(&event.to_string())
}

fn claims(tenant: &str, role: &str) -> Option<Value> {
    Some(json!({"sub": "someone", "custom:sked_tenant": tenant, "custom:sked_role": role}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_and_role_come_from_the_verified_claims_never_from_a_header() {
    let (app, _) = api().await;
    // Created by tenant acme (the event's claims), whatever its x-sked-tenant header says.
    let (status, created) = call(&app, request(CREATE_JOB)).await;
    assert_eq!(status, 201, "{created}");
    // Tenant beta does not see it, even naming acme in the header.
    let (status, body) = call(&app, with_claims(GET_JOB, claims("beta", "admin"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    let (status, _) = call(&app, with_claims(GET_JOB, claims("acme", "read"))).await;
    assert_eq!(status, 200);

    // No claims, a role that is not one, a tenant that is not an id: 401.
    for bad in [
        None,
        claims("acme", "root"),
        claims("bad tenant!", "write"),
        Some(json!({"sub": "x"})),
    ] {
        let (status, body) = call(&app, with_claims(GET_JOB, bad.clone())).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthenticated")),
            "{bad:?}: {body}"
        );
    }
    // A read role may not write.
    let (status, body) = call(&app, with_claims(CREATE_JOB, claims("acme", "read"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("permission_denied")),
        "{body}"
    );
}

/// `CREATE_JOB` turned into `method path` with `body`, by `claims`.
fn event_for(method: &str, path: &str, body: &Value, claims: Option<Value>) -> Request {
    let mut event: Value = serde_json::from_str(CREATE_JOB).unwrap();
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["method"] = json!(method);
    event["requestContext"]["http"]["path"] = json!(path);
    let body = body.to_string();
    event["headers"]["content-length"] = json!(body.len().to_string());
    event["body"] = json!(body);
    with_claims(&event.to_string(), claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sets_a_quota_that_the_dynamodb_store_holds() {
    let (app, _) = api().await;
    let quota = json!({"max_active_jobs": 1, "max_concurrent_runs": 2});
    let put = |role: &str| event_for("PUT", "/v1/tenants/acme/quota", &quota, claims("ops", role));
    let (status, body) = call(&app, put("admin")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("permission_denied")),
        "{body}"
    );
    let (status, body) = call(&app, put("operator")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["tenant"].as_str(), body["max_active_jobs"].as_u64()),
        (Some("acme"), Some(1))
    );

    let job = |id: &str| json!({"id": id, "schedule": {"every": "1h"}, "task": {"command": {"argv": ["true"]}}});
    let (status, body) = call(
        &app,
        event_for("POST", "/v1/jobs", &job("first"), claims("acme", "write")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &app,
        event_for("POST", "/v1/jobs", &job("second"), claims("acme", "write")),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("resource_exhausted")),
        "{body}"
    );
    let (status, _) = call(&app, with_claims(GET_JOB, claims("acme", "read"))).await;
    assert_eq!(status, 404, "nothing else was stored");
    // Another tenant is not limited.
    let (status, body) = call(
        &app,
        event_for("POST", "/v1/jobs", &job("second"), claims("beta", "write")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}
