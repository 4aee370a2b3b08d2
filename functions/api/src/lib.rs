//! The API function: sked's REST API (the same [`sked_api::router`] `sked server` serves) on
//! AWS Lambda behind an API Gateway HTTP API, served by `lambda_http`.
//!
//! [`app`] builds the router over the AWS ports; `main` reads the settings once and hands the
//! router to `lambda_http::run`. The only difference from the local API is the direct firing:
//! the AWS sweeper runs on a one-minute tick, so a job created, replaced or resumed with an
//! occurrence within [`DIRECT_FIRE_WITHIN`] (the tick and a margin) is fired by this call
//! itself ([`SkedConfig::fire_within`]) — its runs are written and sent to SQS with
//! `DelaySeconds`, and start on time however the tick falls. Only that window is fired here,
//! not the sweeper's whole look-ahead: a per-second cron costs its create 90 runs, not 600.
//!
//! Every request runs under [`guard::guard`]: one that would outlive the invocation answers
//! 503 before the deadline, a panicking one 500, and the process serves the next.
//!
//! Who is calling comes from what API Gateway verified ([`identity`]): the JWT's claims, or in
//! IAM mode the signer's ARN looked up in the mapping the operator keeps ([`iam`]); never from
//! a header.
//!
//! This crate must not decide anything about scheduling or HTTP: both live in the libraries.

pub mod guard;
pub mod iam;
pub mod identity;

use axum::Router;
use identity::IdentitySources;
use sked_api::{ApiConfig, Auth};
use sked_aws::{Settings, TenantStores};
use sked_core::duration::Dur;
use sked_core::service::alerts::WebhookSecretService;
use sked_core::service::quotas::Quotas;
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::validate::Capabilities;
use std::sync::Arc;

/// How far ahead a create, replace or resume fires a job itself: the sweeper's one-minute tick
/// and 30 s for the sweep to reach the job, so an occurrence before the next sweep is not late.
/// (At most the look-ahead; a per-second job: 90 runs, within one firing's bound.)
pub const DIRECT_FIRE_WITHIN: Dur = Dur::secs(90);

/// The API over `ports` and the tenants' `quotas`, configured by `settings`: container tasks
/// are accepted when an ECS cluster is configured; jobs due within [`DIRECT_FIRE_WITHIN`] are
/// fired at once; callers are who `identities` say (the claims of their verified JWT, or the IAM
/// mapping; a bare [`identity::ClaimNames`] maps no IAM principal).
pub fn app(ports: Ports, tenants: TenantStores, settings: &Settings, identities: impl Into<IdentitySources>) -> Router {
    let config = SkedConfig {
        capabilities: Capabilities {
            container_tasks: settings.aws.ecs.is_some(),
        },
        fire_within: DIRECT_FIRE_WITHIN.min(settings.lookahead),
    };
    // Nothing in this process sweeps: the signal is never waited on.
    let quotas = Quotas::new(tenants.quotas, ports.clock.clone());
    let secrets = WebhookSecretService::new(tenants.webhook_secrets, ports.clock.clone());
    let sked = Sked::new(ports, config, SweepSignal::default())
        .with_quotas(quotas)
        .with_webhook_secrets(secrets);
    sked_api::router(sked, ApiConfig::default(), Auth::Injected)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(identities.into()),
            identity::identify,
        ))
        .layer(axum::middleware::from_fn(guard::guard))
}
