//! The API function driven by the API Gateway v2 events in `events/`, against moto: the same
//! conversion `lambda_http::run` applies (`lambda_http::request::from_str`), then the router.
//! The events carry what API Gateway verified: the JWT's claims
//! (`requestContext.authorizer.jwt`), or in IAM mode the signer's ARN
//! (`requestContext.authorizer.iam.userArn`, looked up in the operator's mapping). The tenant
//! and role come from them, never from the `x-sked-tenant` header the events also carry. The
//! template's other front (`ApiFront: FunctionUrl`) invokes the function with a function URL's
//! event (`events/function-url-iam-create-job.json`): the same payload format, its signer named
//! in the same place.

use http_body_util::BodyExt;
use lambda_http::Request;
use serde_json::{Value, json};
use sked_aws::testing::fresh_resources;
use sked_aws::{Settings, SqsQueue};
use sked_core::duration::Dur;
use sked_core::ports::{Clock, DispatchQueue, SystemClock};
use sked_core::timestamp;
use sked_fn_api::iam::parse_iam_principals;
use sked_fn_api::identity::{ClaimNames, IdentitySources};
use std::sync::Arc;
use tower::ServiceExt;

const CREATE_JOB: &str = include_str!("../../../events/apigw-v2-create-job.json");
const GET_JOB: &str = include_str!("../../../events/apigw-v2-get-job.json");
const IAM_CREATE_JOB: &str = include_str!("../../../events/apigw-v2-iam-create-job.json");
const FUNCTION_URL_CREATE_JOB: &str = include_str!("../../../events/function-url-iam-create-job.json");

/// The API over fresh resources, firing 10 minutes ahead, and its SQS queue; callers
/// identified by the default claims, no IAM principal mapped.
async fn api() -> (axum::Router, SqsQueue) {
    api_with(ClaimNames::default().into()).await
}

/// [`api`] with callers identified by `identities`.
async fn api_with(identities: IdentitySources) -> (axum::Router, SqsQueue) {
    let (clients, aws) = fresh_resources().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let settings = Settings {
        aws,
        lookahead: Dur::secs(600),
    };
    let (ports, tenants) = sked_aws::ports_and_tenants(&clients, &settings.aws, clock.clone());
    let queue = SqsQueue::new(clients.sqs.clone(), &settings.aws, clock);
    (sked_fn_api::app(ports, tenants, &settings, identities), queue)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_second_cron_created_through_the_api_fires_only_until_the_next_sweep() {
    // With the whole 10-minute look-ahead fired in the request (600 runs), the
    // create outlived the function's time limit. Now it fires the next 90 seconds.
    let (app, _) = api().await;
    let mut event: Value = serde_json::from_str(CREATE_JOB).unwrap();
    let body = json!({"id": "every-second", "schedule": {"cron": "*/1 * * * * *"},
        "task": {"command": {"argv": ["true"]}}});
    event["body"] = Value::String(body.to_string());
    let started = std::time::Instant::now();
    let (status, created) = call(&app, request(&event.to_string())).await;
    let took = started.elapsed();
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["state"], "ACTIVE", "{created}");
    let created_at = timestamp::parse(created["created_at"].as_str().unwrap()).unwrap();
    let next = timestamp::parse(created["next_fire_at"].as_str().unwrap()).unwrap();
    let window = sked_fn_api::DIRECT_FIRE_WITHIN.as_millis() / 1000;
    let ahead = (next - created_at).num_seconds();
    assert!(
        (window - 1..=window + 1).contains(&ahead),
        "fired up to the window, not the look-ahead: next {ahead} s after the create"
    );

    // One run per second up to there, each once.
    let mut runs: Value = serde_json::from_str(GET_JOB).unwrap();
    runs["rawPath"] = json!("/v1/jobs/every-second/runs");
    runs["requestContext"]["http"]["path"] = json!("/v1/jobs/every-second/runs");
    runs["rawQueryString"] = json!("limit=100");
    runs["queryStringParameters"] = json!({"limit": "100"});
    let (status, page) = call(&app, request(&runs.to_string())).await;
    assert_eq!(status, 200, "{page}");
    let mut times: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scheduled_for"].as_str().unwrap().to_string())
        .collect();
    times.sort();
    times.dedup();
    let expected = (next - created_at).num_seconds() as usize;
    assert!(
        times.len() + 1 >= expected && times.len() <= expected,
        "{} runs for {expected} s",
        times.len()
    );
    eprintln!(
        "create of a per-second cron on moto: {} ms, {} runs",
        took.as_millis(),
        times.len()
    );
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

/// The IAM mapping the IAM-mode tests run with (the fixture's signer is a session of the role
/// `sked-deploy`, here under a path).
const IAM_PRINCIPALS: &str = "arn:aws:iam::123456789012:role/ci/sked-deploy=acme:write, \
    arn:aws:iam::123456789012:role/sked-audit=acme:read, \
    arn:aws:iam::123456789012:user/alice=beta:admin";

/// The API with the default claims and [`IAM_PRINCIPALS`] mapped.
async fn iam_api() -> axum::Router {
    let identities = IdentitySources {
        iam: parse_iam_principals(IAM_PRINCIPALS).unwrap(),
        ..IdentitySources::default()
    };
    api_with(identities).await.0
}

/// A session of the mapped role `sked-deploy` (acme, write), named `session`.
fn deployer(session: &str) -> String {
    format!("arn:aws:sts::123456789012:assumed-role/sked-deploy/{session}")
}

const AUDITOR: &str = "arn:aws:sts::123456789012:assumed-role/sked-audit/audit-run";
const ALICE: &str = "arn:aws:iam::123456789012:user/alice";

/// An IAM-mode event, built from the fixture `events/apigw-v2-iam-create-job.json` (a POST of
/// `nightly-report` signed by a `sked-deploy` session, with `x-sked-tenant: someone-else`).
struct IamEvent(Value);

impl IamEvent {
    fn create_job() -> Self {
        IamEvent(serde_json::from_str(IAM_CREATE_JOB).unwrap())
    }

    /// `method path` without a body.
    fn to(method: &str, path: &str) -> Self {
        let IamEvent(mut event) = Self::create_job();
        event["rawPath"] = json!(path);
        event["requestContext"]["http"]["method"] = json!(method);
        event["requestContext"]["http"]["path"] = json!(path);
        event["body"] = Value::Null;
        let headers = event["headers"].as_object_mut().unwrap();
        headers.remove("content-length");
        headers.remove("content-type");
        IamEvent(event)
    }

    /// With `body` instead of the fixture's job.
    fn body(mut self, body: &Value) -> Self {
        let body = body.to_string();
        self.0["headers"]["content-length"] = json!(body.len().to_string());
        self.0["body"] = json!(body);
        self
    }

    /// Signed by `user_arn` (`None`: an IAM authorizer that names no one).
    fn signed_by(mut self, user_arn: Option<&str>) -> Self {
        let iam = &mut self.0["requestContext"]["authorizer"]["iam"];
        iam["userArn"] = json!(user_arn);
        iam["accountId"] = json!(user_arn.and_then(|arn| arn.split(':').nth(4)));
        self
    }

    /// Without any authorizer: nothing verified.
    fn unsigned(mut self) -> Self {
        self.0["requestContext"].as_object_mut().unwrap().remove("authorizer");
        self
    }

    /// With `X-Sked-Tenant: tenant`.
    fn claiming_tenant(mut self, tenant: &str) -> Self {
        self.0["headers"]["x-sked-tenant"] = json!(tenant);
        self
    }

    fn request(&self) -> Request {
        request(&self.0.to_string())
    }
}

fn new_job(id: &str) -> Value {
    json!({"id": id, "schedule": {"every": "1h"}, "task": {"command": {"argv": ["true"]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_role_session_acts_for_its_tenant_and_role_whatever_its_session_name() {
    let app = iam_api().await;
    // The fixture: session deploy-42 of sked-deploy (acme, write) creates nightly-report.
    let (status, created) = call(&app, IamEvent::create_job().request()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], "nightly-report");

    // Another session of the same role, named anything, is the same tenant.
    let get = |who: &str| IamEvent::to("GET", "/v1/jobs/nightly-report").signed_by(Some(who));
    for session in ["deploy-43", "alice", "acme@example.com"] {
        let (status, got) = call(&app, get(&deployer(session)).request()).await;
        assert_eq!(status, 200, "{session}: {got}");
        assert_eq!(got["id"], "nightly-report");
    }
    // It is acme's job: a JWT with acme's claims reads it too (claims work beside the mapping).
    let (status, _) = call(&app, with_claims(GET_JOB, claims("acme", "read"))).await;
    assert_eq!(status, 200);

    // The user alice acts for beta: acme's job does not exist for her, nor hers for acme.
    let (status, body) = call(&app, get(ALICE).request()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    let hers = IamEvent::to("POST", "/v1/jobs")
        .body(&new_job("beta-job"))
        .signed_by(Some(ALICE));
    let (status, body) = call(&app, hers.request()).await;
    assert_eq!(status, 201, "{body}");
    let theirs = IamEvent::to("GET", "/v1/jobs/beta-job").signed_by(Some(&deployer("deploy-42")));
    let (status, body) = call(&app, theirs.request()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_mapped_to_read_may_read_but_not_write() {
    let app = iam_api().await;
    let (status, body) = call(&app, IamEvent::create_job().signed_by(Some(AUDITOR)).request()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("permission_denied")),
        "{body}"
    );
    let (status, body) = call(&app, IamEvent::to("GET", "/v1/jobs").signed_by(Some(AUDITOR)).request()).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iam_callers_the_mapping_does_not_name_and_requests_without_an_authorizer_get_401() {
    let app = iam_api().await;
    let refused = [
        // A role nobody mapped.
        IamEvent::create_job().signed_by(Some("arn:aws:sts::123456789012:assumed-role/other-role/deploy-42")),
        // The mapped role's name in another account.
        IamEvent::create_job().signed_by(Some("arn:aws:sts::210987654321:assumed-role/sked-deploy/deploy-42")),
        // The mapped user's name in another account.
        IamEvent::create_job().signed_by(Some("arn:aws:iam::210987654321:user/alice")),
        // A role named like the mapped user.
        IamEvent::create_job().signed_by(Some("arn:aws:sts::123456789012:assumed-role/alice/s")),
        // An IAM authorizer without a userArn.
        IamEvent::create_job().signed_by(None),
        // Nothing verified at all.
        IamEvent::create_job().unsigned(),
    ];
    for event in refused {
        let (status, body) = call(&app, event.request()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthenticated")),
            "{:?}: {body}",
            event.0["requestContext"].get("authorizer")
        );
    }
    // Nothing was created.
    let get = IamEvent::to("GET", "/v1/jobs/nightly-report").signed_by(Some(&deployer("deploy-42")));
    let (status, _) = call(&app, get.request()).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_x_sked_tenant_header_changes_nothing_in_iam_mode() {
    let app = iam_api().await;
    // acme's session naming beta in the header still creates acme's job...
    let (status, body) = call(&app, IamEvent::create_job().claiming_tenant("beta").request()).await;
    assert_eq!(status, 201, "{body}");
    let get = || IamEvent::to("GET", "/v1/jobs/nightly-report");
    let as_acme = get().signed_by(Some(&deployer("s"))).claiming_tenant("beta");
    let (status, _) = call(&app, as_acme.request()).await;
    assert_eq!(status, 200);
    // ...that beta's user does not see, naming acme in the header...
    let as_beta = get().signed_by(Some(ALICE)).claiming_tenant("acme");
    let (status, _) = call(&app, as_beta.request()).await;
    assert_eq!(status, 404);
    // ...and the header makes no one of an unmapped or unsigned caller.
    for who in [
        get().signed_by(Some("arn:aws:sts::123456789012:assumed-role/other-role/s")),
        get().unsigned(),
    ] {
        let (status, _) = call(&app, who.claiming_tenant("acme").request()).await;
        assert_eq!(status, 401);
    }
}

/// `make bench-aws` (ignored in `make test`): how long a create takes through the API event on
/// moto, a per-second cron (which the call fires 90 s ahead: 90 runs, 90 SQS messages) against
/// a one-shot due now (one run). Five of each, alternating, on one fresh deployment, so the
/// table and the queues fill as they would; prints each and the medians. moto is not AWS:
/// the figures say how a change moves sked's work per create, not what AWS answers in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: make bench-aws"]
async fn bench_create_latency_of_a_per_second_cron_and_a_one_shot() {
    const ROUNDS: usize = 5;
    let (app, _) = api().await;
    let mut cron_ms = Vec::new();
    let mut once_ms = Vec::new();
    for i in 0..ROUNDS {
        for (kind, took) in [("cron", &mut cron_ms), ("once", &mut once_ms)] {
            let schedule = match kind {
                "cron" => json!({"cron": "*/1 * * * * *"}),
                _ => json!({"at": timestamp::format(&SystemClock.now())}),
            };
            let mut event: Value = serde_json::from_str(CREATE_JOB).unwrap();
            let body = json!({"id": format!("{kind}-{i}"), "schedule": schedule,
                "task": {"command": {"argv": ["true"]}}});
            event["body"] = Value::String(body.to_string());
            let started = std::time::Instant::now();
            let (status, created) = call(&app, request(&event.to_string())).await;
            took.push(started.elapsed().as_millis());
            assert_eq!(status, 201, "{created}");
        }
        eprintln!(
            "create {i}: per-second cron {} ms, one-shot {} ms",
            cron_ms[i], once_ms[i]
        );
    }
    let median = |v: &mut Vec<u128>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    eprintln!(
        "bench-aws create latency on moto, median of {ROUNDS}: per-second cron {} ms (max {}), one-shot {} ms (max {})",
        median(&mut cron_ms),
        cron_ms[ROUNDS - 1],
        median(&mut once_ms),
        once_ms[ROUNDS - 1]
    );
}

/// `ApiFront: FunctionUrl`: Lambda verified the SigV4 signature and invokes the function with
/// a function URL's event, whose request context names the signer as the HTTP API's does. The
/// same mapping decides: the fixture's session of `sked-deploy` creates acme's job (not the
/// header's tenant), and an unmapped signer or an event without an authorizer is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_url_event_is_identified_by_the_same_iam_mapping() {
    let app = iam_api().await;
    let event: Value = serde_json::from_str(FUNCTION_URL_CREATE_JOB).unwrap();
    assert!(
        event["requestContext"]["domainName"]
            .as_str()
            .unwrap()
            .contains(".lambda-url."),
        "the fixture is a function URL's event"
    );
    let signed_by = |user_arn: &str| {
        let mut event = event.clone();
        event["requestContext"]["authorizer"]["iam"]["userArn"] = json!(user_arn);
        request(&event.to_string())
    };
    let (status, body) = call(&app, signed_by(AUDITOR)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("permission_denied")),
        "{body}"
    );
    let (status, body) = call(&app, signed_by("arn:aws:sts::123456789012:assumed-role/other-role/x")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthenticated")),
        "{body}"
    );
    let mut unsigned = event.clone();
    unsigned["requestContext"]["authorizer"] = Value::Null;
    let (status, body) = call(&app, request(&unsigned.to_string())).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthenticated")),
        "{body}"
    );

    let (status, created) = call(&app, request(FUNCTION_URL_CREATE_JOB)).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], "invoice-run");
    // acme's: another acme session reads it; beta's user (and the header's tenant) does not.
    let get = |who: &str| IamEvent::to("GET", "/v1/jobs/invoice-run").signed_by(Some(who));
    let (status, got) = call(&app, get(&deployer("deploy-1")).request()).await;
    assert_eq!((status, got["priority"].as_u64()), (200, Some(4)), "{got}");
    let (status, _) = call(&app, get(ALICE).request()).await;
    assert_eq!(status, 404);
}
