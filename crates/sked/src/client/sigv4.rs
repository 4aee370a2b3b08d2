//! `--sigv4`: the client's requests signed with AWS Signature Version 4, for an API deployed
//! with `AuthMode: IAM` — behind the HTTP API (service `execute-api`) or the function's own URL
//! (`ApiFront: FunctionUrl`, service `lambda`). The credentials are the AWS SDK's default chain
//! (environment, profile, SSO, container or instance role), read once per command; the service
//! and region follow from the `--url`'s host unless `--sigv4-service` and `--sigv4-region` name
//! them (a custom domain). The signature covers the method, the URL, the host, the body and the
//! session token; no API key is sent beside it. Built with the `aws` feature only.

use crate::cli::ClientArgs;
use reqwest::Url;

/// Where signed requests go: the service and region a signature is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningScope {
    /// `execute-api` or `lambda`.
    pub service: String,
    /// e.g. `us-east-1`.
    pub region: String,
}

impl SigningScope {
    /// The scope `args` ask for, for requests to `base`: `None` without `--sigv4`.
    pub fn of(args: &ClientArgs, base: &Url) -> anyhow::Result<Option<SigningScope>> {
        if !args.sigv4 {
            return Ok(None);
        }
        let inferred = base.host_str().and_then(scope_of_host);
        let service = args
            .sigv4_service
            .clone()
            .or_else(|| inferred.as_ref().map(|s| s.service.clone()));
        let region = args
            .sigv4_region
            .clone()
            .or_else(|| inferred.as_ref().map(|s| s.region.clone()));
        match (service, region) {
            (Some(service), Some(region)) => Ok(Some(SigningScope { service, region })),
            _ => anyhow::bail!(
                "--sigv4: the service and region do not follow from the host of --url {base} (an API Gateway or function URL host); name them with --sigv4-service and --sigv4-region"
            ),
        }
    }
}

/// The scope an AWS endpoint's host implies: `<id>.execute-api.<region>.amazonaws.com` (an
/// HTTP API) or `<id>.lambda-url.<region>.on.aws` (a function URL).
fn scope_of_host(host: &str) -> Option<SigningScope> {
    let parts: Vec<&str> = host.split('.').collect();
    let (service, region) = match parts.as_slice() {
        [_, "execute-api", region, "amazonaws", "com", ..] => ("execute-api", *region),
        [_, "lambda-url", region, "on", "aws"] => ("lambda", *region),
        _ => return None,
    };
    Some(SigningScope {
        service: service.into(),
        region: region.into(),
    })
}

#[cfg(feature = "aws")]
pub use signer::Signer;

#[cfg(feature = "aws")]
mod signer {
    use super::SigningScope;
    use anyhow::Context as _;
    use aws_credential_types::Credentials;
    use aws_credential_types::provider::ProvideCredentials as _;
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;
    use aws_smithy_runtime_api::client::identity::Identity;
    use reqwest::header::{HeaderName, HeaderValue};
    use std::time::SystemTime;
    use tokio::sync::OnceCell;

    /// Signs requests for one scope with the default chain's credentials.
    pub struct Signer {
        scope: SigningScope,
        credentials: OnceCell<Credentials>,
    }

    impl Signer {
        /// A signer for `scope`; the credentials are read at the first request.
        pub fn new(scope: SigningScope) -> Self {
            Signer {
                scope,
                credentials: OnceCell::new(),
            }
        }

        async fn credentials(&self) -> anyhow::Result<&Credentials> {
            self.credentials
                .get_or_try_init(async || {
                    let config = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
                    let provider = config
                        .credentials_provider()
                        .context("--sigv4: no AWS credentials provider is configured")?;
                    provider
                        .provide_credentials()
                        .await
                        .context("--sigv4: no AWS credentials found (environment, profile, SSO or role)")
                })
                .await
        }

        /// Adds the signature's headers (`authorization`, `x-amz-date`, and
        /// `x-amz-security-token` for temporary credentials) to `request`, as it will be sent.
        pub async fn sign(&self, request: &mut reqwest::Request) -> anyhow::Result<()> {
            let identity: Identity = self.credentials().await?.clone().into();
            let params = v4::SigningParams::builder()
                .identity(&identity)
                .region(&self.scope.region)
                .name(&self.scope.service)
                .time(SystemTime::now())
                .settings(SigningSettings::default())
                .build()
                .context("--sigv4: signing parameters")?
                .into();
            let body = request.body().and_then(|b| b.as_bytes()).unwrap_or_default();
            let headers: Vec<(&str, &str)> = request
                .headers()
                .iter()
                .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
                .collect();
            let signable = SignableRequest::new(
                request.method().as_str(),
                request.url().as_str(),
                headers.into_iter(),
                SignableBody::Bytes(body),
            )
            .context("--sigv4: the request cannot be signed")?;
            let (instructions, _signature) = sign(signable, &params)
                .context("--sigv4: signing the request")?
                .into_parts();
            let added: Vec<(HeaderName, HeaderValue)> = instructions
                .headers()
                .map(|(name, value)| Ok((HeaderName::try_from(name)?, HeaderValue::try_from(value)?)))
                .collect::<anyhow::Result<_>>()?;
            request.headers_mut().extend(added);
            Ok(())
        }
    }
}

/// Without the `aws` feature `--sigv4` is refused when the client is built.
#[cfg(not(feature = "aws"))]
pub struct Signer;

#[cfg(not(feature = "aws"))]
impl Signer {
    /// Refused: this build cannot sign.
    pub fn new(_scope: SigningScope) -> Self {
        Signer
    }

    /// Never called: [`super::Client::new`] refuses `--sigv4` in this build.
    pub async fn sign(&self, _request: &mut reqwest::Request) -> anyhow::Result<()> {
        anyhow::bail!("--sigv4 needs a sked built with the aws feature")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(sigv4: bool, service: Option<&str>, region: Option<&str>) -> ClientArgs {
        ClientArgs {
            url: String::new(),
            api_key: None,
            key_file: "/nonexistent/admin.key".into(),
            json: false,
            sigv4,
            sigv4_service: service.map(String::from),
            sigv4_region: region.map(String::from),
        }
    }

    fn scope(service: &str, region: &str) -> Option<SigningScope> {
        Some(SigningScope {
            service: service.into(),
            region: region.into(),
        })
    }

    #[test]
    fn the_scope_follows_from_an_aws_host_or_is_named() {
        let url = |u: &str| Url::parse(u).unwrap();
        let on = args(true, None, None);
        let api = url("https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com");
        assert_eq!(SigningScope::of(&on, &api).unwrap(), scope("execute-api", "eu-west-1"));
        let fn_url = url("https://f7k2q9x4m1abc.lambda-url.us-east-1.on.aws/");
        assert_eq!(SigningScope::of(&on, &fn_url).unwrap(), scope("lambda", "us-east-1"));
        let custom = url("https://sked.example.com");
        let err = SigningScope::of(&on, &custom).unwrap_err().to_string();
        assert!(err.contains("--sigv4-service"), "{err}");
        let named = args(true, Some("execute-api"), Some("ap-south-1"));
        assert_eq!(
            SigningScope::of(&named, &custom).unwrap(),
            scope("execute-api", "ap-south-1")
        );
        assert_eq!(SigningScope::of(&args(false, None, None), &api).unwrap(), None);
    }
}
