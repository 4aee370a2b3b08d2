//! Concurrency keys: a job's `"concurrency": {"key", "limit"}`, what counts against a key, and
//! which values are valid.
//!
//! Across all jobs of a tenant that name a key, at most `limit` runs are RUNNING at once. A
//! run carries its job's key and limit from its creation ([`crate::run::Run::concurrency`]),
//! so the claim decides on the run it loads (no read of the job), and a changed key or limit
//! applies to runs created after the change. A run holds a slot of its key while it
//! occupies one ([`crate::quota::occupies_slot`]: RUNNING under a live lease), exactly as for
//! the tenant's `max_concurrent_runs`. A claim that would pass the limit starts nothing and
//! answers [`ClaimOutcome::KeyAtLimit`](crate::attempt::ClaimOutcome::KeyAtLimit); the store
//! decides it in the claim's transaction, so racing workers cannot pass it together. Runs of
//! different jobs naming one key with different limits: each claim applies its own run's
//! limit.
//!
//! Where the queue lives beside the store ([`crate::work::one_transaction`]), a run refused
//! for its key is set aside (its message parked on the key) and woken in priority order, one
//! per attempt that ends holding the key; elsewhere the worker looks again shortly.

use crate::error::FieldError;
use serde::{Deserialize, Serialize};

/// Longest key.
pub const MAX_KEY_LEN: usize = 64;
/// Largest limit.
pub const MAX_LIMIT: u32 = 10_000;

/// A concurrency key and the most runs that may hold it at once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Concurrency {
    /// Shared by every job of the tenant that names it: 1 to 64 of `A-Z a-z 0-9 _ . : -`.
    #[cfg_attr(
        feature = "utoipa",
        schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.:-]{1,64}$")
    )]
    pub key: String,
    /// Most runs naming the key RUNNING at once (as this job counts them).
    #[serde(deserialize_with = "crate::integer::whole")]
    #[cfg_attr(feature = "utoipa", schema(minimum = 1, maximum = 10_000))]
    pub limit: u32,
}

impl Concurrency {
    /// Every invalid field, named as in a job's body (`concurrency.key`, `concurrency.limit`).
    pub fn problems(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        if !is_valid_key(&self.key) {
            out.push(FieldError::new(
                "concurrency.key",
                format!(
                    "{:?} is not a concurrency key: use 1 to {MAX_KEY_LEN} of A-Z a-z 0-9 _ . : -",
                    self.key
                ),
            ));
        }
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            out.push(FieldError::new(
                "concurrency.limit",
                format!("limit is {}; use 1 to {MAX_LIMIT}", self.limit),
            ));
        }
        out
    }

    /// Whether no new attempt may start while `occupied` runs hold the key.
    pub fn full(&self, occupied: u64) -> bool {
        occupied >= u64::from(self.limit)
    }
}

/// Whether `key` may name a concurrency key.
pub fn is_valid_key(key: &str) -> bool {
    (1..=MAX_KEY_LEN).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(key: &str, limit: u32) -> Concurrency {
        Concurrency { key: key.into(), limit }
    }

    #[test]
    fn keys_and_limits_are_checked_and_named() {
        assert!(gate("db-migrations", 1).problems().is_empty());
        assert!(gate("a.b:c_9", MAX_LIMIT).problems().is_empty());
        let fields = |c: Concurrency| c.problems().into_iter().map(|p| p.field).collect::<Vec<_>>();
        assert_eq!(fields(gate("", 1)), ["concurrency.key"]);
        assert_eq!(fields(gate("a b", 1)), ["concurrency.key"]);
        assert_eq!(fields(gate("a#b", 1)), ["concurrency.key"]);
        assert_eq!(fields(gate(&"k".repeat(65), 1)), ["concurrency.key"]);
        assert_eq!(fields(gate("k", 0)), ["concurrency.limit"]);
        assert_eq!(fields(gate("k", MAX_LIMIT + 1)), ["concurrency.limit"]);
    }

    #[test]
    fn a_key_is_full_at_its_limit() {
        let c = gate("k", 2);
        assert!(!c.full(0));
        assert!(!c.full(1));
        assert!(c.full(2));
        assert!(c.full(3));
    }
}
