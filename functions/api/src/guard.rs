//! One request's failure stays that request's: [`guard`] runs each request on its own task,
//! answers `503 unavailable` when it would outlive the invocation's deadline, and
//! `500 internal` when its handler panics. The function process lives on either way.
//!
//! Why: a request that outlives the function's timeout takes the runtime with it. Under
//! `cargo lambda watch` (`make local-aws`) the emulator answers the late response and the next
//! `/next` poll with an error that carries no `lambda-runtime-aws-request-id` header, and
//! `lambda_runtime` panics on that (`missing lambda-runtime-aws-request-id header`): the
//! process exits and every later request waits out its timeout (408). On Lambda a timed-out
//! invocation costs a cold start. Either way, answering before the deadline is the fix; the
//! work a request does is also bounded (the core's direct firing: a create fires at most
//! `MAX_RUNS_PER_FIRING` runs a job, for at most `DIRECT_FIRE_BUDGET`), so the guard is the
//! backstop, not the plan.
//!
//! A request stopped at its deadline is dropped where it stands. That is safe for the same
//! reasons a crashed function is: every store write is one conditional write or transaction,
//! applied whole or not at all; runs written but not enqueued are enqueued by the sweeper's
//! repair pass; a retried create is answered as the re-POST it is.
//!
//! This module must not decide anything about what a request does.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lambda_http::tracing;
use sked_api::ApiError;
use std::time::{Duration, SystemTime};

/// Answer this long before the invocation's deadline, so the answer reaches the runtime in
/// time.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);
/// The budget of a request without a Lambda context (tests, a local listener): API
/// Gateway's 29 s less the margin.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(27);

/// The middleware (`axum::middleware::from_fn(guard)`).
pub async fn guard(req: Request, next: Next) -> Response {
    let budget = budget_of(
        req.extensions().get::<lambda_http::Context>().map(|c| c.deadline()),
        SystemTime::now(),
    );
    guarded(budget, next.run(req)).await
}

/// Runs `answer` on its own task for at most `budget`.
pub async fn guarded<F>(budget: Duration, answer: F) -> Response
where
    F: Future<Output = Response> + Send + 'static,
{
    let mut task = tokio::spawn(answer);
    match tokio::time::timeout(budget, &mut task).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) if e.is_panic() => {
            tracing::error!(error = %e, "request handler panicked");
            error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "request task ended without an answer");
            error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
        }
        Err(_) => {
            task.abort();
            tracing::warn!(
                budget_ms = budget.as_millis() as u64,
                "request stopped at the function's deadline"
            );
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the request did not finish within the function's time limit; try again",
            )
        }
    }
}

/// The time a request may take: until `deadline` less [`DEADLINE_MARGIN`], or
/// [`DEFAULT_BUDGET`] without a deadline (a context without one says 0, the epoch).
pub fn budget_of(deadline: Option<SystemTime>, now: SystemTime) -> Duration {
    match deadline.filter(|d| *d > SystemTime::UNIX_EPOCH) {
        Some(d) => d
            .duration_since(now)
            .unwrap_or_default()
            .saturating_sub(DEADLINE_MARGIN),
        None => DEFAULT_BUDGET,
    }
}

fn error(status: StatusCode, code: &'static str, message: &str) -> Response {
    let mut e = ApiError::bad_request(None, message);
    e.status = status;
    e.code = code;
    e.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    #[test]
    fn the_budget_is_the_deadline_less_the_margin_or_the_default() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(budget_of(None, now), DEFAULT_BUDGET);
        assert_eq!(budget_of(Some(SystemTime::UNIX_EPOCH), now), DEFAULT_BUDGET);
        assert_eq!(
            budget_of(Some(now + Duration::from_secs(29)), now),
            Duration::from_secs(27)
        );
        assert_eq!(budget_of(Some(now + Duration::from_secs(1)), now), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_request_past_its_budget_answers_503_and_a_panic_500_and_the_next_one_is_served() {
        let slow = guarded(Duration::from_millis(50), std::future::pending()).await;
        assert_eq!(slow.status(), StatusCode::SERVICE_UNAVAILABLE);

        let panicking = guarded(Duration::from_secs(5), async { panic!("a handler bug") }).await;
        assert_eq!(panicking.status(), StatusCode::INTERNAL_SERVER_ERROR);

        let fine = guarded(Duration::from_secs(5), async { Response::new(Body::from("ok")) }).await;
        assert_eq!(fine.status(), StatusCode::OK);
    }
}
