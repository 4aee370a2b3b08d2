//! Identifiers: tenants, jobs, runs and workers, and how a run id is derived.
//!
//! A run id is `<job_id>@<scheduled_for as yyyymmddTHHMMSS.mmmZ>`: a pure function of the job
//! and the nominal time, so a second sweep of the same occurrence names the same run and
//! cannot create another. Job ids never contain `@`, so the split is unambiguous.

use crate::timestamp::{self, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }
    };
}

string_id!(
    /// The tenant that owns a job and everything it produces. Part of every key.
    TenantId
);
string_id!(
    /// A job's id, unique per tenant: `[A-Za-z0-9_.-]{1,128}`.
    JobId
);
string_id!(
    /// One firing of a job at a nominal time; see the module header for its form.
    RunId
);
string_id!(
    /// A worker's identity, recorded on leases and attempts.
    WorkerId
);

impl Default for TenantId {
    fn default() -> Self {
        TenantId("default".into())
    }
}

/// Whether `s` is a valid caller-given id (job id or tenant): `[A-Za-z0-9_.-]{1,128}`.
pub fn is_valid_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

impl JobId {
    /// A new ULID job id whose time part is `now`.
    pub fn generate(now: Timestamp) -> Self {
        JobId(ulid::Ulid::from_parts(now.timestamp_millis() as u64, rand::random()).to_string())
    }
}

impl RunId {
    /// The run id of job `job` at nominal time `scheduled_for`.
    pub fn derive(job: &JobId, scheduled_for: Timestamp) -> Self {
        RunId(format!("{}@{}", job, scheduled_for.format("%Y%m%dT%H%M%S%.3fZ")))
    }

    /// The job id and nominal time this run id was derived from, if it is well formed.
    pub fn parts(&self) -> Option<(JobId, Timestamp)> {
        let (job, when) = self.0.rsplit_once('@')?;
        let naive = chrono::NaiveDateTime::parse_from_str(when, "%Y%m%dT%H%M%S%.3fZ").ok()?;
        Some((JobId(job.to_string()), timestamp::trunc_ms(naive.and_utc())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_round_trips_job_and_time() {
        let at = timestamp::parse("2026-12-01T09:00:00.250Z").unwrap();
        let id = RunId::derive(&JobId::from("backup.nightly"), at);
        assert_eq!(id.as_str(), "backup.nightly@20261201T090000.250Z");
        assert_eq!(id.parts(), Some((JobId::from("backup.nightly"), at)));
    }

    #[test]
    fn same_occurrence_same_run_id() {
        let at = timestamp::parse("2026-12-01T09:00:00Z").unwrap();
        assert_eq!(RunId::derive(&"a".into(), at), RunId::derive(&"a".into(), at));
        assert_ne!(RunId::derive(&"a".into(), at), RunId::derive(&"b".into(), at));
    }

    #[test]
    fn id_rules() {
        assert!(is_valid_id("a-b_c.9"));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("a@b"));
        assert!(!is_valid_id("a b"));
        assert!(!is_valid_id(&"x".repeat(129)));
    }
}
