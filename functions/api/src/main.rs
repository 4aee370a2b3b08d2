//! `sked-fn-api`: the API function's entry point. Reads the settings from the environment once
//! (names in `sked_aws::env`; the JWT claims naming tenant and role in `SKED_TENANT_CLAIM` and
//! `SKED_ROLE_CLAIM`; `SKED_LOCAL_IDENTITY` for `make local-aws` only), builds the AWS ports,
//! and serves the router with `lambda_http`.

use anyhow::Context as _;
use sked_core::ports::SystemClock;
use sked_fn_api::identity::{ClaimNames, parse_local_identity};
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lambda_http::tracing::init_default_subscriber();
    let settings = sked_aws::Settings::from_env().context("reading the function's environment")?;
    let clients = sked_aws::connect(&settings.aws).await;
    let (ports, quotas) = sked_aws::ports_and_quotas(&clients, &settings.aws, Arc::new(SystemClock));
    let defaults = ClaimNames::default();
    let local_identity = match std::env::var("SKED_LOCAL_IDENTITY") {
        Ok(text) => {
            let who = parse_local_identity(&text).map_err(|e| anyhow::anyhow!("SKED_LOCAL_IDENTITY: {e}"))?;
            lambda_http::tracing::warn!(tenant = %who.tenant, role = %who.role, "SKED_LOCAL_IDENTITY is set: every request without verified claims acts as this identity (make local-aws only)");
            Some(who)
        }
        Err(_) => None,
    };
    let claims = ClaimNames {
        tenant: std::env::var("SKED_TENANT_CLAIM").unwrap_or(defaults.tenant),
        role: std::env::var("SKED_ROLE_CLAIM").unwrap_or(defaults.role),
        local_identity,
    };
    let app = sked_fn_api::app(ports, quotas, &settings, claims);
    lambda_http::run(app).await.map_err(|e| anyhow::anyhow!(e))
}
