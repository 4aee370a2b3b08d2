//! [`LogBucket`]: where finished logs go, as `--log-bucket` names it (`s3://bucket[/prefix]`),
//! and the object key of each attempt's log under it.
//!
//! What it must not do: talk to the storage (see `objects`).

use sked_core::log_record::{LOG_PREFIX, object_key};
use sked_core::ports::LogKey;
use std::fmt;
use std::str::FromStr;

/// A bucket and the prefix under which sked keeps its logs (`""`, or ending in `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBucket {
    /// The bucket's name.
    pub bucket: String,
    /// The deployment's prefix: empty, or path components each followed by `/`.
    pub prefix: String,
}

/// Why a `--log-bucket` value names no bucket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// Not an `s3://` URL.
    #[error("{0:?} is not an S3 location: expected s3://bucket or s3://bucket/prefix")]
    NotS3(String),
    /// The bucket's name breaks S3's naming rules.
    #[error("{0:?} is not a bucket name: 3 to 63 lowercase letters, digits, dots and hyphens")]
    BadName(String),
}

impl LogBucket {
    /// Every log object's key starts with this: `<prefix>logs/`.
    pub fn logs_prefix(&self) -> String {
        format!("{}{LOG_PREFIX}", self.prefix)
    }

    /// The key of `key`'s finished log: `<prefix>logs/<tenant>/<run_id>/<attempt>.jsonl`.
    pub fn key_of(&self, key: &LogKey) -> String {
        format!("{}{}", self.prefix, object_key(key))
    }
}

impl FromStr for LogBucket {
    type Err = BucketError;

    /// `s3://bucket`, `s3://bucket/`, `s3://bucket/a/b` or `s3://bucket/a/b/` (the last two
    /// both keep logs under `a/b/`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .trim()
            .strip_prefix("s3://")
            .ok_or_else(|| BucketError::NotS3(s.into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let name_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
        if !name_ok {
            return Err(BucketError::BadName(bucket.into()));
        }
        let parts: Vec<&str> = prefix.split('/').filter(|p| !p.is_empty()).collect();
        let prefix = parts.iter().map(|p| format!("{p}/")).collect();
        Ok(LogBucket {
            bucket: bucket.into(),
            prefix,
        })
    }
}

impl fmt::Display for LogBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LogKey {
        LogKey {
            tenant: "acme".into(),
            run_id: "report@20260301T000000.000Z".into(),
            attempt: 2,
        }
    }

    #[test]
    fn given_a_location_with_or_without_prefix_then_keys_are_under_it() {
        let plain: LogBucket = "s3://sked-logs".parse().unwrap();
        assert_eq!((plain.bucket.as_str(), plain.prefix.as_str()), ("sked-logs", ""));
        assert_eq!(plain.key_of(&key()), "logs/acme/report@20260301T000000.000Z/2.jsonl");
        assert_eq!(plain, "s3://sked-logs/".parse().unwrap());

        let nested: LogBucket = "s3://sked-logs/prod//eu/".parse().unwrap();
        assert_eq!(nested.prefix, "prod/eu/");
        assert_eq!(nested.logs_prefix(), "prod/eu/logs/");
        assert_eq!(
            nested.key_of(&key()),
            "prod/eu/logs/acme/report@20260301T000000.000Z/2.jsonl"
        );
        assert_eq!(nested.to_string(), "s3://sked-logs/prod/eu/");
        assert_eq!(nested, nested.to_string().parse().unwrap());
    }

    #[test]
    fn what_is_not_an_s3_bucket_is_refused() {
        for bad in [
            "sked-logs",
            "https://sked-logs",
            "s3://",
            "s3://ab",
            "s3://Sked",
            "s3://a_b/x",
        ] {
            assert!(bad.parse::<LogBucket>().is_err(), "{bad}");
        }
    }
}
