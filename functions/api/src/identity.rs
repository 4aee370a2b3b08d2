//! Who is calling, on AWS. API Gateway (or, with the template's `ApiFront: FunctionUrl`, Lambda
//! at the function's own URL, IAM only) authenticates the caller before invoking the function
//! and puts what it verified on the request context — the same payload format 2.0 either way;
//! this layer turns that into the [`Principal`] `sked_api::Auth::Injected` expects, or into
//! none, and a request without one is refused (401). Nothing the caller sends in a header is
//! read — `X-Sked-Tenant` least of all.
//!
//! - JWT mode (`AuthMode: JWT`): the verified token's claims name the tenant and the role. The
//!   claims' names are settings ([`ClaimNames`], from the template's `TenantClaim` and
//!   `RoleClaim`). Claims that lack either, name an unknown role or a tenant that is not an
//!   id: no principal.
//! - IAM mode (`AuthMode: IAM`): the context names the SigV4 signer by ARN (an IAM user or an
//!   assumed-role session), and the mapping the operator keeps says which tenant and role it
//!   is ([`IamPrincipals`], from the template's `IamPrincipals`; format and matching rules in
//!   [`crate::iam`]). A principal the mapping does not name: no principal. The default mapping
//!   names no one.
//!
//! `make local-aws` has no API Gateway in front (cargo lambda's function URL), so nothing
//! verifies anything there: its script sets [`IdentitySources::local_identity`]
//! (`SKED_LOCAL_IDENTITY=<tenant>:<role>`), the identity of every request whose context
//! carries neither claims nor an IAM identity. The template never sets it, and the function
//! logs a warning at start when it is set.

use crate::iam::IamPrincipals;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::request::RequestContext;
use sked_core::auth::{Principal, Role};
use sked_core::ids::{TenantId, is_valid_id};
use std::collections::HashMap;
use std::sync::Arc;

/// Where callers' identities come from: the JWT claims' names, the IAM mapping, and (`make
/// local-aws` only) the identity of unauthenticated requests.
#[derive(Debug, Clone, Default)]
pub struct IdentitySources {
    /// The JWT claims that carry the tenant and the role (JWT mode).
    pub claims: ClaimNames,
    /// The IAM principals the operator mapped to tenants and roles (IAM mode; default: none).
    pub iam: IamPrincipals,
    /// `make local-aws` only: who a request that API Gateway verified nothing for is. `None`
    /// (the default, and always on AWS): such a request is refused.
    pub local_identity: Option<Principal>,
}

impl From<ClaimNames> for IdentitySources {
    /// These claims' names, no IAM principal and no local identity.
    fn from(claims: ClaimNames) -> Self {
        IdentitySources {
            claims,
            ..IdentitySources::default()
        }
    }
}

/// The JWT claims that carry the tenant and the role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimNames {
    /// The claim holding the tenant id (default `custom:sked_tenant`, a Cognito custom
    /// attribute).
    pub tenant: String,
    /// The claim holding the role: `read`, `write`, `admin` or `operator` (default
    /// `custom:sked_role`).
    pub role: String,
}

impl Default for ClaimNames {
    fn default() -> Self {
        ClaimNames {
            tenant: "custom:sked_tenant".into(),
            role: "custom:sked_role".into(),
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

/// What API Gateway verified about a caller, as it put it on the request context.
enum Verified<'a> {
    /// The claims of a JWT.
    Claims(&'a HashMap<String, String>),
    /// A SigV4 signer: its ARN (`None` if the context lacks it, which maps to no one).
    Iam(Option<&'a str>),
}

/// What API Gateway verified about the caller of `req`, if anything.
fn verified(req: &Request) -> Option<Verified<'_>> {
    let RequestContext::ApiGatewayV2(context) = req.extensions().get::<RequestContext>()? else {
        return None;
    };
    let authorizer = context.authorizer.as_ref()?;
    if let Some(jwt) = &authorizer.jwt {
        return Some(Verified::Claims(&jwt.claims));
    }
    let iam = authorizer.iam.as_ref()?;
    Some(Verified::Iam(iam.user_arn.as_deref()))
}

/// The layer: puts the caller's principal on the request — from its verified claims, from the
/// IAM mapping, or, when API Gateway verified nothing, the local identity if one is
/// configured.
pub async fn identify(State(sources): State<Arc<IdentitySources>>, mut req: Request, next: Next) -> Response {
    let principal = match verified(&req) {
        Some(Verified::Claims(claims)) => principal_from_claims(claims, &sources.claims),
        Some(Verified::Iam(user_arn)) => {
            let principal = user_arn.and_then(|arn| sources.iam.principal_of(arn)).cloned();
            if principal.is_none() {
                // The operator's clue when a caller they meant to map is refused.
                lambda_http::tracing::info!(
                    user_arn,
                    "refused: an IAM caller the IamPrincipals mapping does not name"
                );
            }
            principal
        }
        None => sources.local_identity.clone(),
    };
    if let Some(principal) = principal {
        req.extensions_mut().insert(principal);
    }
    next.run(req).await
}
