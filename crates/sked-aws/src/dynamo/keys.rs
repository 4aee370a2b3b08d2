//! Key formats of the sked table (see the table layout in [`super`]): partition and sort keys
//! of jobs, runs and idempotency keys, and the sparse index keys that make the sweeper's,
//! reaper's and listing queries possible.
//!
//! Times in keys are milliseconds since the epoch, zero-padded to 15 digits, so that string
//! order is time order. Tenants and job ids are `[A-Za-z0-9_.-]`, so `#` separates
//! unambiguously. This module only formats strings: it must not talk to DynamoDB.

use crate::JobKeys;
use chrono::{TimeZone, Utc};

/// Partition key attribute.
pub const PK: &str = "pk";
/// Sort key attribute.
pub const SK: &str = "sk";
/// Partition key of the `sched` index (due jobs, pending runs, running runs).
pub const GSI1_PK: &str = "gsi1pk";
/// Sort key of the `sched` index.
pub const GSI1_SK: &str = "gsi1sk";
/// Partition key of the `list` index (a tenant's jobs and runs).
pub const GSI2_PK: &str = "gsi2pk";
/// Sort key of the `list` index.
pub const GSI2_SK: &str = "gsi2sk";
/// The index the sweeper and reaper query.
pub const SCHED_INDEX: &str = "sched";
/// The index listings query.
pub const LIST_INDEX: &str = "list";
/// Partition key of the `live` index (running runs).
pub const GSI3_PK: &str = "gsi3pk";
/// Sort key of the `live` index.
pub const GSI3_SK: &str = "gsi3sk";
/// The index of running runs the reaper reads: keys only, so a heartbeat that leaves a run's
/// entry where it is writes nothing to it.
pub const LIVE_INDEX: &str = "live";
/// Sort key of the `active` local index: a copy of a run's `sk`, present while the run is
/// PENDING or RUNNING (and kept by a run that ends its job: `codec::ENDS_ITS_JOB`).
pub const ACTIVE_SK: &str = "act";
/// The local index of a job's active runs (overlap checks at claim).
pub const ACTIVE_INDEX: &str = "active";
/// The TTL attribute (epoch seconds).
pub const TTL: &str = "ttl";

/// Sort key of a job item.
pub const JOB_SK: &str = "JOB";
/// Sort key of an idempotency-key item.
pub const IDEM_SK: &str = "IDEM";
/// Partition key of the sweeper's bookkeeping items.
pub const SWEEP_PK: &str = "SWEEP";
/// Sort key of the due-bucket watermark.
pub const WATERMARK_SK: &str = "WATERMARK";

/// Milliseconds, zero-padded to sort as text (negative instants clamp to 0).
pub fn pad_ms(ms: i64) -> String {
    format!("{:015}", ms.max(0))
}

/// The largest instant a padded key can hold.
pub const MAX_PADDED_MS: i64 = 999_999_999_999_999;

/// Partition key of a job's runs, edges, waits and skip records — and of the job's own item
/// under [`JobKeys::PerJob`].
pub fn job_pk(tenant: &str, job: &str) -> String {
    format!("T#{tenant}#J#{job}")
}

/// Partitions a tenant's job items are spread over under [`JobKeys::TenantShards`]: one
/// tenant's creates share them (1,000 WRU/s each: ~32,000 one-shots created a second), and
/// each holds at most 10 GB (the table has a local index), ~10 M jobs of 1 KB.
pub const JOB_SHARDS: u32 = 32;

/// Partition key of shard `shard` of a tenant's job items ([`JobKeys::TenantShards`]).
pub fn jobs_pk(tenant: &str, shard: u32) -> String {
    format!("T#{tenant}#JOBS#{shard}")
}

/// The primary key (`pk`, `sk`) of a job's item, as the table keys jobs.
pub fn job_item_key(keys: JobKeys, tenant: &str, job: &str) -> (String, String) {
    match keys {
        JobKeys::PerJob => (job_pk(tenant, job), JOB_SK.to_string()),
        JobKeys::TenantShards => (
            jobs_pk(tenant, shard_of(&format!("{tenant}#{job}"), JOB_SHARDS)),
            job.to_string(),
        ),
    }
}

/// Sort key of the run of a job at `scheduled_ms`.
pub fn run_sk(scheduled_ms: i64) -> String {
    format!("RUN#{}", pad_ms(scheduled_ms))
}

/// Prefix shared by the sort keys of a job's runs.
pub const RUN_SK_PREFIX: &str = "RUN#";

/// Partition key of a run's small finished logs ([`crate::logs`]).
pub fn log_pk(tenant: &str, run: &str) -> String {
    format!("T#{tenant}#LOG#{run}")
}

/// Sort key of one attempt's small finished log.
pub fn log_sk(attempt: u32) -> String {
    format!("ATTEMPT#{attempt}")
}

/// Partition key of an idempotency key.
pub fn idem_pk(tenant: &str, key: &str) -> String {
    format!("T#{tenant}#IDEM#{key}")
}

/// Partition key of a tenant's own items: its quota and its concurrency slots.
pub fn tenant_pk(tenant: &str) -> String {
    format!("T#{tenant}#TENANT")
}

/// Sort key of a tenant's quota (and active-jobs count).
pub const QUOTA_SK: &str = "QUOTA";

/// Partition of the slots of a tenant's concurrency key (`[A-Za-z0-9_.:-]`, so no `#`).
pub fn concurrency_pk(tenant: &str, key: &str) -> String {
    format!("T#{tenant}#CKEY#{key}")
}

/// Prefix shared by the sort keys of a slot pool's slots (a tenant's, a concurrency key's).
pub const SLOT_SK_PREFIX: &str = "SLOT#";

/// Sort key of concurrency slot `index`.
pub fn slot_sk(index: u64) -> String {
    format!("{SLOT_SK_PREFIX}{index:010}")
}

/// A stable shard in `0..shards` for `key` (FNV-1a; never changes between releases).
pub fn shard_of(key: &str, shards: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(shards.max(1))) as u32
}

/// How long before its due time a job is filed in the due index ([`super::codec::due_minute`]):
/// the default look-ahead of the AWS sweeper (`SKED_LOOKAHEAD`, 10 minutes), so a sweep
/// reads the minute buckets from its watermark to about now. A part of the table's layout:
/// every writer files by it; a sweeper looking less far ahead checks that a bucket it would
/// pass holds nothing not yet due (`firing`).
pub const DUE_FILED_AHEAD_MS: i64 = 10 * 60_000;

/// The epoch minute of an instant in milliseconds.
pub fn epoch_minute(ms: i64) -> i64 {
    ms.div_euclid(60_000)
}

/// `yyyyMMddHHmm` of an epoch minute.
pub fn minute_label(minute: i64) -> String {
    Utc.timestamp_opt(minute * 60, 0)
        .single()
        .map(|t| t.format("%Y%m%d%H%M").to_string())
        .unwrap_or_else(|| "000000000000".into())
}

/// `sched` partition of due jobs filed under `minute`, shard `shard`.
pub fn due_pk(minute: i64, shard: u32) -> String {
    format!("DUE#{}#{shard}", minute_label(minute))
}

/// The epoch minute a due partition key names, if it is one.
pub fn minute_of_due_pk(pk: &str) -> Option<i64> {
    let label = pk.strip_prefix("DUE#")?.split('#').next()?;
    let t = chrono::NaiveDateTime::parse_from_str(&format!("{label}00"), "%Y%m%d%H%M%S").ok()?;
    Some(t.and_utc().timestamp().div_euclid(60))
}

/// `sched` sort key of a due job.
pub fn due_sk(next_fire_ms: i64, tenant: &str, job: &str) -> String {
    format!("{}#{tenant}#{job}", pad_ms(next_fire_ms))
}

/// `sched` partition of pending runs.
pub fn pending_pk(shard: u32) -> String {
    format!("PENDING#{shard}")
}

/// `sched` sort key of a pending run: oldest `not_before` first.
pub fn pending_sk(not_before_ms: i64, scheduled_ms: i64, tenant: &str, run_id: &str) -> String {
    format!("{}#{}#{tenant}#{run_id}", pad_ms(not_before_ms), pad_ms(scheduled_ms))
}

/// `sched` partition of ended runs whose alert is pending ([`sked_core::alert`]).
pub fn alerts_pk(shard: u32) -> String {
    format!("ALERT#{shard}")
}

/// `sched` sort key of a pending alert: earliest due first.
pub fn alerts_sk(due_ms: i64, tenant: &str, run_id: &str) -> String {
    format!("{}#{tenant}#{run_id}", pad_ms(due_ms))
}

/// Sort key of a tenant's webhook secret, in the tenant's partition.
pub const WEBHOOK_SECRET_SK: &str = "WEBHOOK_SECRET";

/// `live` partition of active runs: PENDING and RUNNING (the name is older than the pending
/// entries).
pub fn running_pk(shard: u32) -> String {
    format!("RUNNING#{shard}")
}

/// How coarse a running run's `live` sort key is: the start of the 5-minute step its lease
/// expires in. A heartbeat extends the lease by a few seconds; its entry moves (one index
/// delete and one put) only when the expiry crosses into the next step — once in 60
/// heartbeats at a 15 s lease — instead of at every heartbeat. The reaper reads every entry
/// filed at or before now and decides on the run's item (its real expiry), so it finds an
/// expired lease exactly when it did with an exact key.
pub const RUNNING_KEY_STEP_MS: i64 = 5 * 60_000;

/// `live` sort key of an active run ([`super::live`]): a PENDING run's `not_before`, exactly
/// (the repair pass reads the runs ready by a time), and a RUNNING run's the same while its
/// lease expires less than a step after it — so the claim of a run on time, and its first
/// heartbeats, leave the entry where the firing put it (no index write) — then the start of
/// the step its lease expires in. Never after a RUNNING run's expiry: the claim comes at or
/// after `not_before` (less a clock's skew, far below a lease).
pub fn live_sk(not_before_ms: i64, lease_expires_ms: Option<i64>) -> String {
    match lease_expires_ms {
        Some(expires) if !(not_before_ms..not_before_ms + RUNNING_KEY_STEP_MS).contains(&expires) => {
            pad_ms(expires.div_euclid(RUNNING_KEY_STEP_MS) * RUNNING_KEY_STEP_MS)
        }
        _ => pad_ms(not_before_ms),
    }
}

/// Sort key of an edge item in an upstream job's partition: `downstream` runs after it.
pub fn after_sk(downstream: &str) -> String {
    format!("{AFTER_SK_PREFIX}{downstream}")
}

/// Prefix of the edge items of a job's partition.
pub const AFTER_SK_PREFIX: &str = "AFTER#";

/// Sort key of a wait item in a downstream job's partition: its occurrence at `scheduled_ms`.
pub fn wait_sk(scheduled_ms: i64) -> String {
    format!("WAIT#{}", pad_ms(scheduled_ms))
}

/// Sort key of a skip record in its job's partition ([`sked_core::ledger`]).
pub fn skip_sk(from_ms: i64) -> String {
    format!("{SKIP_SK_PREFIX}{}", pad_ms(from_ms))
}

/// Prefix of the skip records of a job's partition.
pub const SKIP_SK_PREFIX: &str = "SKIP#";

/// `sched` partition of waiting `after` occurrences.
pub fn waiting_pk(shard: u32) -> String {
    format!("WAITING#{shard}")
}

/// `sched` sort key of a waiting occurrence: earliest deadline first.
pub fn waiting_sk(deadline_ms: i64, tenant: &str, job: &str, scheduled_ms: i64) -> String {
    format!("{}#{tenant}#{job}#{}", pad_ms(deadline_ms), pad_ms(scheduled_ms))
}

/// `list` partition of a tenant's jobs.
pub fn jobs_list_pk(tenant: &str) -> String {
    format!("T#{tenant}#JOBS")
}

/// `list` partition of a tenant's runs, shard `shard`.
pub fn runs_list_pk(tenant: &str, shard: u32) -> String {
    format!("T#{tenant}#RUNS#{shard}")
}

/// `list` sort key of a run: newest first when read backwards.
pub fn runs_list_sk(scheduled_ms: i64, run_id: &str) -> String {
    format!("{}#{run_id}", pad_ms(scheduled_ms))
}

/// Encodes a listing position as an opaque cursor (hex, so nobody parses it).
pub fn encode_cursor(position: &str) -> String {
    position.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Decodes [`encode_cursor`]; `None` if malformed.
pub fn decode_cursor(cursor: &str) -> Option<String> {
    if !cursor.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_times_sort_as_text() {
        assert!(pad_ms(999) < pad_ms(1000));
        assert_eq!(pad_ms(-5), "000000000000000");
        assert_eq!(pad_ms(1_772_323_200_000).len(), 15);
    }

    #[test]
    fn minutes_and_buckets() {
        let ms = 1_772_323_260_123; // 2026-03-01T00:01:00.123Z
        assert_eq!(minute_label(epoch_minute(ms)), "202603010001");
        assert_eq!(due_pk(epoch_minute(ms), 3), "DUE#202603010001#3");
        assert_eq!(minute_of_due_pk(&due_pk(epoch_minute(ms), 3)), Some(epoch_minute(ms)));
        assert_eq!(minute_of_due_pk("PENDING#1"), None);
        assert_eq!(epoch_minute(-1), -1);
    }

    #[test]
    fn shards_are_stable_and_in_range() {
        assert_eq!(shard_of("t1#a", 4), shard_of("t1#a", 4));
        assert!((0..100).all(|i| shard_of(&format!("k{i}"), 4) < 4));
        assert_eq!(shard_of("x", 0), 0);
    }

    #[test]
    fn a_run_s_live_key_stays_from_its_firing_through_its_claim_then_moves_once_a_step() {
        let step_start = 1_772_323_200_000; // 2026-03-01T00:00:00Z, a multiple of the step
        assert_eq!(step_start % RUNNING_KEY_STEP_MS, 0);
        let not_before = step_start + 200_000; // 00:03:20
        let pending = live_sk(not_before, None);
        assert_eq!(pending, pad_ms(not_before));
        // Claimed on time with a 15 s lease, then heartbeats every 5 s: the firing's key until
        // the expiry is a step past it, then one key a step.
        let keys: Vec<String> = (0..120)
            .map(|beat| live_sk(not_before, Some(not_before + 1 + beat * 5_000 + 15_000)))
            .collect();
        assert_eq!(keys[0], pending, "the claim leaves the entry where it was");
        let distinct: std::collections::BTreeSet<&String> = keys.iter().collect();
        assert_eq!(distinct.len(), 3, "{distinct:?}");
        for (beat, key) in keys.iter().enumerate() {
            let expiry = not_before + 1 + beat as i64 * 5_000 + 15_000;
            assert!(key.as_str() <= pad_ms(expiry).as_str(), "never after the expiry");
        }
        // A claim long after `not_before` (a backlog) files the run by its expiry's step.
        let late = not_before + 3_600_000;
        assert_eq!(live_sk(not_before, Some(late + 15_000)), pad_ms(step_start + 3_600_000));
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = encode_cursor("000000000001000|a@20260301T000000.000Z");
        assert_eq!(
            decode_cursor(&c).as_deref(),
            Some("000000000001000|a@20260301T000000.000Z")
        );
        assert_eq!(decode_cursor("zz"), None);
        assert_eq!(decode_cursor("abc"), None);
    }
}
