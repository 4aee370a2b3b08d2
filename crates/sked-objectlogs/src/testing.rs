//! Test fixture (feature `testing`): S3 clients and fresh buckets on a test server (the moto
//! server of `sked_aws::testing`, or any S3-compatible one), with fixed credentials instead of
//! the standard chain, so tests need no environment.

use crate::bucket::LogBucket;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use std::sync::atomic::{AtomicU32, Ordering};

/// A client of the server at `endpoint`, path-style, with test credentials.
pub fn client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "sked-testing"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// A bucket name no other test of this process uses (not created).
pub fn unique_bucket() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("sked-logs-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Creates a fresh bucket and answers it as `s3://<bucket>/<prefix>`.
pub async fn fresh_bucket(client: &aws_sdk_s3::Client, prefix: &str) -> LogBucket {
    let name = unique_bucket();
    client
        .create_bucket()
        .bucket(&name)
        .send()
        .await
        .expect("create bucket");
    format!("s3://{name}/{prefix}").parse().expect("a bucket")
}
