//! [`connect`]: the S3 client of `--log-bucket`, configured as every AWS tool is (the standard
//! chain: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, web identity, instance or
//! pod roles; `AWS_REGION`), plus the endpoint of an S3-compatible server (`--log-endpoint`,
//! or `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`), so the same flags work against MinIO,
//! LocalStack, moto or S3 itself.
//!
//! With an endpoint the client addresses buckets by path (`http://host:9000/bucket/key`), as
//! those servers expect; without one, as S3 prefers. Checksums are sent and checked only
//! where S3's API requires them: servers that implement S3 as it was before its default
//! checksums (several compatible ones do) refuse the extra headers otherwise. Without any
//! region configured, `us-east-1` is assumed (S3-compatible servers mostly ignore it).
//!
//! What it must not do: read sked's own flags or environment (the binary passes them in).

use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};

/// The region assumed when the chain names none.
pub const DEFAULT_REGION: &str = "us-east-1";

/// How to reach the storage, beyond the standard chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// The server's URL (`http://minio:9000`); `None`: the chain's, else AWS's own S3.
    pub endpoint: Option<String>,
}

/// An S3 client for `settings`, credentials and region from the standard chain.
pub async fn connect(settings: &S3Settings) -> aws_sdk_s3::Client {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(url) = &settings.endpoint {
        loader = loader.endpoint_url(url);
    }
    let shared = loader.load().await;
    let region = shared.region().cloned().unwrap_or_else(|| Region::new(DEFAULT_REGION));
    let config = aws_sdk_s3::config::Builder::from(&shared)
        .region(region)
        .force_path_style(shared.endpoint_url().is_some())
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}
