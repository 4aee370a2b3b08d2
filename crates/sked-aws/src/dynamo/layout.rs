//! The table's layout marker: how the table keys its jobs ([`JobKeys`]). The choice is the
//! table's, not a process's — a process that keyed jobs the other way would neither see the
//! table's jobs nor be seen — so the first process to start on a table records its setting,
//! and every process checks it at start ([`check_job_keys`]) and refuses to run on a table
//! keyed otherwise.
//!
//! Item: `pk = SWEEP`, `sk = LAYOUT`, `job_keys` (`per-job` or `tenant-shards`), put on
//! condition it is absent. A table without the item was used (if at all) by processes older
//! than it, which keyed jobs per job: a process set to `tenant-shards` records its setting
//! only on a table holding no job item keyed per job (a `Scan` for one, stopped at the first;
//! on a fresh table, one request). While a table's jobs move from one way to the other
//! ([`super::migrate_job_keys`]) the record says `migrating`, and every process refuses.

use crate::config::JobKeys;
use crate::dynamo::codec::{Item, Reader, key, s};
use crate::dynamo::keys::{JOB_SK, PK, SK, SWEEP_PK};
use crate::error::classify;
use aws_sdk_dynamodb::Client;
use sked_core::ports::StoreError;

/// Sort key of the layout marker.
pub const LAYOUT_SK: &str = "LAYOUT";

/// The marker's attribute naming how jobs are keyed.
pub(super) const JOB_KEYS_ATTR: &str = "job_keys";

/// The record's value while the table's jobs move to tenant shards.
pub(super) const MIGRATING: &str = "migrating";

/// Checks that `table` keys jobs as `mine` says, recording `mine` if the table has no
/// record yet. A table keyed otherwise is an error naming both settings.
pub async fn check_job_keys(client: &Client, table: &str, mine: JobKeys) -> Result<(), StoreError> {
    let recorded = match read_marker(client, table).await? {
        Some(recorded) => recorded,
        None => {
            if mine == JobKeys::TenantShards && holds_jobs_keyed_per_job(client, table).await? {
                return Err(refusal(table, JobKeys::PerJob, mine));
            }
            put_marker(client, table, mine).await?;
            // Another process may have recorded its own first.
            read_marker(client, table).await?.unwrap_or(mine)
        }
    };
    if recorded != mine {
        return Err(refusal(table, recorded, mine));
    }
    Ok(())
}

fn refusal(table: &str, recorded: JobKeys, mine: JobKeys) -> StoreError {
    StoreError::Other(
        format!(
            "table {table} keys its jobs {recorded}, and this process is set to {mine} \
             (SKED_JOB_KEYS; the template's JobKeys): a table's job keys are fixed at its \
             first use, so set {recorded} (a table changes only by a migration)"
        )
        .into(),
    )
}

pub(super) fn marker_key() -> Item {
    key(SWEEP_PK.into(), LAYOUT_SK.into())
}

/// The table's layout record as written (`per-job`, `tenant-shards`, `migrating`), if any.
pub(super) async fn recorded(client: &Client, table: &str) -> Result<Option<String>, StoreError> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(marker_key()))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| classify("dynamodb:GetItem", e, |_| None).into_store(String::new))?;
    Ok(out.item.map(|item| Reader::new(&item).s(JOB_KEYS_ATTR)).transpose()?)
}

/// The job keys the table records, if it records any (an error while it is being migrated).
async fn read_marker(client: &Client, table: &str) -> Result<Option<JobKeys>, StoreError> {
    let Some(text) = recorded(client, table).await? else {
        return Ok(None);
    };
    if text == MIGRATING {
        return Err(StoreError::Other(
            format!("table {table}'s jobs are being moved to tenant shards (the migrate_job_keys tool); start once it has ended").into(),
        ));
    }
    text.parse()
        .map(Some)
        .map_err(|e: String| StoreError::Other(format!("table {table}'s layout marker: {e}").into()))
}

/// Records `mine`, unless a record exists (then nothing changes).
async fn put_marker(client: &Client, table: &str, mine: JobKeys) -> Result<(), StoreError> {
    let mut item = marker_key();
    item.insert(JOB_KEYS_ATTR.into(), s(mine.as_str()));
    let put = client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    match put {
        Ok(_) => Ok(()),
        Err(e) => match classify("dynamodb:PutItem", e, |_| None).into_store(String::new) {
            StoreError::Conflict(_) => Ok(()),
            other => Err(other),
        },
    }
}

/// Whether the table holds a job item keyed per job.
async fn holds_jobs_keyed_per_job(client: &Client, table: &str) -> Result<bool, StoreError> {
    let mut start = None;
    loop {
        let (found, next) = jobs_keyed_per_job(client, table, start).await?;
        if !found.is_empty() {
            return Ok(true);
        }
        match next {
            Some(next) => start = Some(next),
            None => return Ok(false),
        }
    }
}

/// One page of a `Scan` for the job items keyed per job (`T#<tenant>#J#<job>` / `JOB`; a job
/// keyed by tenant shards whose id is `JOB` is not one), whole, from `start`: the items, and
/// where the next page starts (`None`: the scan is over).
pub(super) async fn jobs_keyed_per_job(
    client: &Client,
    table: &str,
    start: Option<Item>,
) -> Result<(Vec<Item>, Option<Item>), StoreError> {
    let out = client
        .scan()
        .table_name(table)
        .filter_expression("#sk = :job AND contains(#pk, :per_job)")
        .expression_attribute_names("#sk", SK)
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":job", s(JOB_SK))
        .expression_attribute_values(":per_job", s("#J#"))
        .consistent_read(true)
        .set_exclusive_start_key(start)
        .send()
        .await
        .map_err(|e| classify("dynamodb:Scan", e, |_| None).into_store(String::new))?;
    Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
}
