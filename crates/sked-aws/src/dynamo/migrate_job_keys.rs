//! Moves a table's jobs from per-job keys to tenant shards ([`JobKeys`]; `docs/lean-layout.md`,
//! step 5): the way for a stack made with `per-job` to the lean store's last write unit.
//!
//! Every process of the stack must be stopped first — the API and sweeper functions' triggers
//! disabled, the workers scaled to zero — since a process keying jobs per job would neither see
//! a moved job nor be seen. The table's layout record says `migrating` meanwhile
//! ([`super::layout`]), so a process started by mistake refuses. Each job moves in one
//! transaction: its item put under its new key (on condition none is there) and the old one
//! deleted (on condition it is as read). The new item keeps every attribute but its keys and
//! its `list` entry's, and takes the TTL of a job that is done ([`super::codec`]'s `job_ttl`).
//! Then the record says `tenant-shards`. A run cut short leaves the record `migrating` and some
//! jobs moved: run it again, it moves the rest. Runs, edges, waits and skip records stay where
//! they are (under the job's own partition either way).

use super::codec::{Item, JobLayout, Reader, job_from_item, job_ttl, key, n, s};
use super::keys::{GSI2_PK, GSI2_SK, PK, SK, TTL, job_item_key};
use super::layout::{JOB_KEYS_ATTR, MIGRATING, jobs_keyed_per_job, marker_key, recorded};
use crate::config::{AwsConfig, JobKeys};
use crate::error::classify;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use futures::{StreamExt, TryStreamExt, stream};
use sked_core::ports::StoreError;
use sked_core::timestamp::Timestamp;

/// Jobs moved at once.
const PARALLEL_MOVES: usize = 16;

/// Moves every job of `config.table` keyed per job to its tenant's shards, as of `now` (the
/// TTLs); answers how many moved. A table already keyed by tenant shards moves nothing.
pub async fn migrate_to_tenant_shards(
    client: &Client,
    config: &AwsConfig,
    now: Timestamp,
) -> Result<usize, StoreError> {
    let table = config.table.as_str();
    let (per_job, sharded) = (JobKeys::PerJob.as_str(), JobKeys::TenantShards.as_str());
    match recorded(client, table).await?.as_deref() {
        Some(text) if text == sharded => return Ok(0),
        Some(MIGRATING) => {}
        _ => record(client, table, MIGRATING, Some(per_job)).await?,
    }
    let layout = JobLayout {
        shards: config.shards.max(1),
        keys: JobKeys::TenantShards,
        run_retention_secs: config.run_retention.as_secs() as i64,
    };
    // Page by page: a table may hold more jobs than memory.
    let (mut moved, mut start) = (0, None);
    loop {
        let (jobs, next) = jobs_keyed_per_job(client, table, start).await?;
        moved += jobs.len();
        stream::iter(jobs)
            .map(|old| move_job(client, table, old, &layout, now))
            .buffer_unordered(PARALLEL_MOVES)
            .try_collect::<Vec<()>>()
            .await?;
        match next {
            Some(next) => start = Some(next),
            None => break,
        }
    }
    record(client, table, sharded, Some(MIGRATING)).await?;
    Ok(moved)
}

/// One job's move: its item put under its new key and the old deleted, in one transaction.
async fn move_job(
    client: &Client,
    table: &str,
    old: Item,
    layout: &JobLayout,
    now: Timestamp,
) -> Result<(), StoreError> {
    let job = job_from_item(&old)?;
    let version = Reader::new(&old).n::<u64>("version")?;
    let old_key = key(Reader::new(&old).s(PK)?, Reader::new(&old).s(SK)?);
    let mut item = old;
    for attr in [GSI2_PK, GSI2_SK, TTL] {
        item.remove(attr);
    }
    let (pk, sk) = job_item_key(JobKeys::TenantShards, job.tenant.as_str(), job.id.as_str());
    item.extend(key(pk, sk));
    if let Some(ttl) = job_ttl(&job, now, layout) {
        item.insert(TTL.into(), n(ttl));
    }
    let built = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Other(Box::new(e));
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .build()
        .map_err(built)?;
    let delete = Delete::builder()
        .table_name(table)
        .set_key(Some(old_key))
        .condition_expression("version = :v")
        .expression_attribute_values(":v", n(version))
        .build()
        .map_err(built)?;
    client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .transact_items(TransactWriteItem::builder().delete(delete).build())
        .send()
        .await
        .map_err(|e| {
            let what = format!("job {} of tenant {} not moved", job.id, job.tenant);
            classify("dynamodb:TransactWriteItems", e, |_| None).into_store(|| what)
        })?;
    Ok(())
}

/// Records `value`, on condition the record says `was` (or, for `per-job`, is absent).
async fn record(client: &Client, table: &str, value: &str, was: Option<&str>) -> Result<(), StoreError> {
    let mut item = marker_key();
    item.insert(JOB_KEYS_ATTR.into(), s(value));
    let condition = if was == Some(JobKeys::PerJob.as_str()) {
        "attribute_not_exists(pk) OR #jk = :was"
    } else {
        "#jk = :was"
    };
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(condition)
        .expression_attribute_names("#jk", JOB_KEYS_ATTR)
        .expression_attribute_values(":was", s(was.unwrap_or_default()))
        .send()
        .await
        .map_err(|e| {
            let what = format!("table {table}'s layout record was not {}", was.unwrap_or("absent"));
            classify("dynamodb:PutItem", e, |_| None).into_store(|| what)
        })?;
    Ok(())
}
