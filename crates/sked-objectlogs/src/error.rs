//! [`ObjectLogError`]: what went wrong with the bucket, naming the call and the object, the
//! SDK's error kept as the source.

use std::error::Error;

/// A failed call to the storage.
#[derive(Debug, thiserror::Error)]
pub enum ObjectLogError {
    /// A request failed (refused, unreachable, or its answer was lost).
    #[error("s3:{call} on s3://{bucket}/{key} failed")]
    Call {
        /// The S3 operation, e.g. `PutObject`.
        call: &'static str,
        /// The bucket.
        bucket: String,
        /// The object, or the prefix listed.
        key: String,
        /// The SDK's error.
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
    /// Some objects of a `DeleteObjects` batch were not deleted.
    #[error("s3:DeleteObjects in s3://{bucket}: {failed} objects not deleted (first: {first})")]
    NotDeleted {
        /// The bucket.
        bucket: String,
        /// How many failed.
        failed: usize,
        /// The first failure's key, code and message.
        first: String,
    },
}

impl ObjectLogError {
    /// The error and every source under it, on one line (for warnings).
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = self.source();
        while let Some(e) = source {
            text.push_str(": ");
            text.push_str(&e.to_string());
            source = e.source();
        }
        text
    }
}

impl From<ObjectLogError> for sked_core::ports::LogError {
    fn from(e: ObjectLogError) -> Self {
        sked_core::ports::LogError::Io(Box::new(e))
    }
}
