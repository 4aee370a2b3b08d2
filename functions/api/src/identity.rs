//! Who is calling, on AWS: API Gateway verified the caller's JWT before invoking the function,
//! and its claims name the tenant and the role. The claims' names are settings
//! ([`ClaimNames`], from the template's `TenantClaim` and `RoleClaim`). This layer turns them
//! into the [`Principal`] `sked_api::Auth::Injected` expects; a request whose claims lack
//! either, or name an unknown role, gets none and is refused (401). Nothing the caller sends in
//! a header is read — `X-Sked-Tenant` least of all.
//!
//! In IAM mode (`AuthMode: IAM`) requests carry no claims, so every request is refused until a
//! mapping from IAM principals to tenants exists.
//!
//! `make local-aws` has no API Gateway in front (cargo lambda's function URL), so nothing
//! verifies anything there: its script sets [`ClaimNames::local_identity`]
//! (`SKED_LOCAL_IDENTITY=<tenant>:<role>`), the identity of every request without claims. The
//! template never sets it, and the function logs a warning at start when it is set.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::request::RequestContext;
use sked_core::auth::{Principal, Role};
use sked_core::ids::{TenantId, is_valid_id};
use std::collections::HashMap;
use std::sync::Arc;

/// The JWT claims that carry the tenant and the role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimNames {
    /// The claim holding the tenant id (default `custom:sked_tenant`, a Cognito custom
    /// attribute).
    pub tenant: String,
    /// The claim holding the role: `read`, `write`, `admin` or `operator` (default
    /// `custom:sked_role`).
    pub role: String,
    /// `make local-aws` only: who a request without claims is. `None` (the default, and
    /// always on AWS): such a request is refused.
    pub local_identity: Option<Principal>,
}

impl Default for ClaimNames {
    fn default() -> Self {
        ClaimNames {
            tenant: "custom:sked_tenant".into(),
            role: "custom:sked_role".into(),
            local_identity: None,
        }
    }
}

/// `<tenant>:<role>` (the value of `SKED_LOCAL_IDENTITY`) as a principal.
pub fn parse_local_identity(text: &str) -> Result<Principal, String> {
    let (tenant, role) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not <tenant>:<role>"))?;
    if !is_valid_id(tenant) {
        return Err(format!("{tenant:?} is not a tenant id"));
    }
    Ok(Principal::new(TenantId::from(tenant), role.parse()?))
}

/// The principal the verified `claims` name, if they name a valid tenant and role.
pub fn principal_from_claims(claims: &HashMap<String, String>, names: &ClaimNames) -> Option<Principal> {
    let tenant = claims.get(&names.tenant).filter(|t| is_valid_id(t))?;
    let role: Role = claims.get(&names.role)?.parse().ok()?;
    Some(Principal::new(TenantId::from(tenant.as_str()), role))
}

/// The JWT claims API Gateway put on the request context, if any.
fn verified_claims(req: &Request) -> Option<&HashMap<String, String>> {
    match req.extensions().get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(context) => context.authorizer.as_ref()?.jwt.as_ref().map(|jwt| &jwt.claims),
        _ => None,
    }
}

/// The layer: puts the claims' principal on the request (or, without claims, the local
/// identity if one is configured).
pub async fn identify(State(names): State<Arc<ClaimNames>>, mut req: Request, next: Next) -> Response {
    let principal = match verified_claims(&req) {
        Some(claims) => principal_from_claims(claims, &names),
        None => names.local_identity.clone(),
    };
    if let Some(principal) = principal {
        req.extensions_mut().insert(principal);
    }
    next.run(req).await
}
