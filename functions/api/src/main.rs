//! `sked-fn-api`: the API function's entry point. Reads the settings from the environment once
//! (names in `sked_aws::env`; the JWT claims naming tenant and role in `SKED_TENANT_CLAIM` and
//! `SKED_ROLE_CLAIM`; IAM mode's mapping of principals to tenants and roles in
//! `SKED_IAM_PRINCIPALS`; `SKED_LOCAL_IDENTITY` for `make local-aws` only), builds the AWS
//! ports, and serves the router with `lambda_http`. A setting it cannot read stops it.

use anyhow::Context as _;
use sked_core::ports::SystemClock;
use sked_fn_api::iam::parse_iam_principals;
use sked_fn_api::identity::{ClaimNames, IdentitySources, parse_local_identity};
use std::env::{self, VarError};
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lambda_http::tracing::init_default_subscriber();
    let settings = sked_aws::Settings::from_env().context("reading the function's environment")?;
    let defaults = ClaimNames::default();
    let local_identity = match env::var("SKED_LOCAL_IDENTITY") {
        Ok(text) => {
            let who = parse_local_identity(&text).map_err(|e| anyhow::anyhow!("SKED_LOCAL_IDENTITY: {e}"))?;
            lambda_http::tracing::warn!(tenant = %who.tenant, role = %who.role, "SKED_LOCAL_IDENTITY is set: every request API Gateway verified nothing for acts as this identity (make local-aws only)");
            Some(who)
        }
        Err(_) => None,
    };
    // Unset is no one; a value that cannot be read refuses to start rather than guess.
    let iam = match env::var("SKED_IAM_PRINCIPALS") {
        Ok(text) => parse_iam_principals(&text).context("SKED_IAM_PRINCIPALS")?,
        Err(VarError::NotPresent) => Default::default(),
        Err(e) => return Err(e).context("SKED_IAM_PRINCIPALS"),
    };
    lambda_http::tracing::info!(mapped = iam.len(), "IAM principals mapped to tenants");
    let identities = IdentitySources {
        claims: ClaimNames {
            tenant: env::var("SKED_TENANT_CLAIM").unwrap_or(defaults.tenant),
            role: env::var("SKED_ROLE_CLAIM").unwrap_or(defaults.role),
        },
        iam,
        local_identity,
    };
    let clients = sked_aws::connect(&settings.aws).await;
    sked_aws::check_table_layout(&clients, &settings.aws)
        .await
        .context("checking the table's layout")?;
    let (ports, tenants) = sked_aws::ports_and_tenants(&clients, &settings.aws, Arc::new(SystemClock));
    let app = sked_fn_api::app(ports, tenants, &settings, identities);
    lambda_http::run(app).await.map_err(|e| anyhow::anyhow!(e))
}
