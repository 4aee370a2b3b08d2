//! Where a PostgreSQL deployment keeps attempts' logs: rows of the database
//! ([`PgLogs`]), or — with `--log-bucket s3://bucket[/prefix]` (build feature `s3-logs`) —
//! rows while the attempt runs and one object of that bucket once it ends
//! (`sked_objectlogs::PgObjectLogs`), reached through `--log-endpoint` or the standard AWS
//! chain. The bucket is checked at start (`HeadBucket`), so a wrong name or missing
//! credentials stop the process with a clear error instead of leaving every log in the
//! database.
//!
//! Wiring only: the store's behaviour lives in sked-postgres and sked-objectlogs.

use crate::cli::StoreArgs;
use sked_core::ports::{LogRetention, LogStore};
use sked_postgres::PgLogs;
use std::sync::Arc;

/// The log store and its retention for `args` over `rows`.
pub async fn open(rows: PgLogs, args: &StoreArgs) -> anyhow::Result<(Arc<dyn LogStore>, Arc<dyn LogRetention>)> {
    match &args.log_bucket {
        None => {
            if args.log_endpoint.is_some() {
                anyhow::bail!("--log-endpoint (SKED_LOG_ENDPOINT) needs --log-bucket (SKED_LOG_BUCKET)");
            }
            let logs = Arc::new(rows);
            Ok((logs.clone(), logs))
        }
        Some(bucket) => in_bucket(rows, bucket, args.log_endpoint.clone()).await,
    }
}

#[cfg(feature = "s3-logs")]
async fn in_bucket(
    rows: PgLogs,
    bucket: &str,
    endpoint: Option<String>,
) -> anyhow::Result<(Arc<dyn LogStore>, Arc<dyn LogRetention>)> {
    use anyhow::Context as _;
    use sked_objectlogs::{LogBucket, ObjectLogs, PgObjectLogs, S3Settings};
    let bucket: LogBucket = bucket.parse().context("--log-bucket (SKED_LOG_BUCKET)")?;
    let client = sked_objectlogs::connect(&S3Settings {
        endpoint: endpoint.clone(),
    })
    .await;
    let endpoint = endpoint.as_deref().unwrap_or("the default endpoint");
    let objects = ObjectLogs::new(client, bucket.clone());
    objects.check().await.map_err(|e| {
        anyhow::anyhow!(
            "checking the log bucket {bucket} at {endpoint} (--log-bucket, --log-endpoint, AWS credentials): {}",
            e.chain()
        )
    })?;
    tracing::info!(bucket = %bucket, endpoint, "finished attempts' logs go to the bucket");
    let logs = Arc::new(PgObjectLogs::new(rows, objects));
    Ok((logs.clone(), logs))
}

#[cfg(not(feature = "s3-logs"))]
async fn in_bucket(
    _rows: PgLogs,
    _bucket: &str,
    _endpoint: Option<String>,
) -> anyhow::Result<(Arc<dyn LogStore>, Arc<dyn LogRetention>)> {
    anyhow::bail!(
        "--log-bucket: this sked was built without S3 log support: build it with `cargo build --release -p sked --features s3-logs` (or `--features aws`)"
    )
}
