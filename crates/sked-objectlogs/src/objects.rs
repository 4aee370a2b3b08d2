//! [`ObjectLogs`]: finished logs as objects of one bucket, under the deployment's prefix — check
//! the bucket, put one, get one, and remove those older than a cutoff.
//!
//! Removal lists the prefix (`ListObjectsV2`, 1,000 keys a page) and deletes what was last
//! written before the cutoff with `DeleteObjects` (at most 1,000 keys a request, S3's limit).
//! Keys are ordered by tenant and run, not by age, so a pass must walk the whole prefix: each
//! call resumes the walk after the last key the previous one looked at, and a call that reaches
//! the end starts the next one from the beginning — a pass of many calls lists every key
//! once, not once per call. (A bucket lifecycle rule on `<prefix>logs/` does the same
//! without listing, with `--log-retention off`.)
//!
//! What it must not do: decide what goes into a log, or when a log is finished.

use crate::bucket::LogBucket;
use crate::error::ObjectLogError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use sked_core::Timestamp;
use sked_core::ports::LogKey;
use std::sync::{Arc, Mutex};

/// Most keys S3 deletes in one `DeleteObjects`.
const DELETE_BATCH: usize = 1000;

/// What a finished log's object says about itself (its metadata, as the AWS deployment's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Lines, the marker included.
    pub lines: u64,
    /// Whether the log was cut at its cap.
    pub truncated: bool,
}

/// Finished logs in one bucket.
#[derive(Debug, Clone)]
pub struct ObjectLogs {
    /// The client.
    client: aws_sdk_s3::Client,
    /// Bucket and prefix.
    bucket: LogBucket,
    /// Where the retention walk resumes: after this key (`None`: from the start).
    walk: Arc<Mutex<Option<String>>>,
}

impl ObjectLogs {
    /// Logs in `bucket` (which must exist) through `client`.
    pub fn new(client: aws_sdk_s3::Client, bucket: LogBucket) -> Self {
        ObjectLogs {
            client,
            bucket,
            walk: Arc::default(),
        }
    }

    /// Where the logs are.
    pub fn bucket(&self) -> &LogBucket {
        &self.bucket
    }

    /// A failed call on `key` as an error.
    fn failed(
        &self,
        call: &'static str,
        key: String,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> ObjectLogError {
        ObjectLogError::Call {
            call,
            bucket: self.bucket.bucket.clone(),
            key,
            source: Box::new(e),
        }
    }

    /// Checks that the bucket exists and these credentials may use it (`HeadBucket`), so a
    /// process can refuse to start rather than leave every log in the database.
    pub async fn check(&self) -> Result<(), ObjectLogError> {
        self.client
            .head_bucket()
            .bucket(&self.bucket.bucket)
            .send()
            .await
            .map_err(|e| self.failed("HeadBucket", String::new(), e))?;
        Ok(())
    }

    /// Writes `key`'s finished log: `body` holds its records, one a line.
    pub async fn put(&self, key: &LogKey, body: Vec<u8>, meta: ObjectMeta) -> Result<(), ObjectLogError> {
        let object = self.bucket.key_of(key);
        self.client
            .put_object()
            .bucket(&self.bucket.bucket)
            .key(&object)
            .content_type("application/x-ndjson")
            .metadata("sked-lines", meta.lines.to_string())
            .metadata("sked-truncated", meta.truncated.to_string())
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|e| self.failed("PutObject", object, e))?;
        Ok(())
    }

    /// `key`'s finished log, or `None` when there is no object.
    pub async fn get(&self, key: &LogKey) -> Result<Option<Vec<u8>>, ObjectLogError> {
        let object = self.bucket.key_of(key);
        let got = self
            .client
            .get_object()
            .bucket(&self.bucket.bucket)
            .key(&object)
            .send()
            .await;
        let out = match got {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(self.failed("GetObject", object, e)),
        };
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| self.failed("GetObject", object, e))?;
        Ok(Some(body.into_bytes().to_vec()))
    }

    /// Removes at most `limit` logs last written before `cutoff`, continuing the walk of the
    /// prefix where the last call stopped; returns how many. Fewer than `limit`: the walk
    /// reached the end (the next call starts over).
    pub async fn remove_before(&self, cutoff: Timestamp, limit: usize) -> Result<u64, ObjectLogError> {
        let prefix = self.bucket.logs_prefix();
        let cutoff_ms = cutoff.timestamp_millis();
        let start_after = self.walk.lock().map(|w| w.clone()).unwrap_or_default();
        let mut old: Vec<String> = Vec::new();
        let mut token: Option<String> = None;
        let mut last_seen = start_after.clone();
        let mut reached_end = false;
        while old.len() < limit {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket.bucket)
                .prefix(&prefix)
                .set_start_after(if token.is_none() { start_after.clone() } else { None })
                .set_continuation_token(token.clone())
                .send()
                .await
                .map_err(|e| self.failed("ListObjectsV2", prefix.clone(), e))?;
            for object in page.contents() {
                let Some(key) = object.key() else { continue };
                last_seen = Some(key.to_string());
                let modified = object.last_modified().and_then(|t| t.to_millis().ok());
                if modified.is_some_and(|ms| ms < cutoff_ms) {
                    old.push(key.to_string());
                    if old.len() == limit {
                        break;
                    }
                }
            }
            token = page.next_continuation_token().map(str::to_string);
            if token.is_none() && old.len() < limit {
                reached_end = true;
                break;
            }
        }
        let removed = self.delete(&old).await?;
        if let Ok(mut walk) = self.walk.lock() {
            *walk = if reached_end { None } else { last_seen };
        }
        Ok(removed)
    }

    /// Deletes `keys`, [`DELETE_BATCH`] a request; a key already gone is no error (S3 reports
    /// none). Returns how many were asked for.
    async fn delete(&self, keys: &[String]) -> Result<u64, ObjectLogError> {
        for batch in keys.chunks(DELETE_BATCH) {
            let objects = batch
                .iter()
                .map(|k| ObjectIdentifier::builder().key(k).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.failed("DeleteObjects", batch[0].clone(), e))?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(|e| self.failed("DeleteObjects", batch[0].clone(), e))?;
            let out = self
                .client
                .delete_objects()
                .bucket(&self.bucket.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| self.failed("DeleteObjects", batch[0].clone(), e))?;
            let errors = out.errors();
            if let Some(first) = errors.first() {
                return Err(ObjectLogError::NotDeleted {
                    bucket: self.bucket.bucket.clone(),
                    failed: errors.len(),
                    first: format!(
                        "{} {} {}",
                        first.key().unwrap_or("?"),
                        first.code().unwrap_or("?"),
                        first.message().unwrap_or("")
                    ),
                });
            }
        }
        Ok(keys.len() as u64)
    }
}
