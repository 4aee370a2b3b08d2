//! Lone jobs and runs: a run whose end releases nothing, known without a read. The write that
//! ends a run reads its job's `after` edges (one `Query` of the job's partition,
//! `dependencies`) — for most jobs, which no other job names, for nothing. A job item carries
//! [`LONE`] while no job's `after` names it; a firing of a job this process read lone marks its
//! runs [`LONE`] (on condition the job's item still is), and the write that ends a lone run
//! reads no edges.
//!
//! What keeps the mark true:
//! - A job is created lone only where its item did not exist and no job of its batch names it:
//!   job items are kept (DELETED included) and an edge is written only by a job that names an
//!   existing upstream, so a new item's partition holds no edge. One created over a DELETED
//!   item is not lone. An update keeps [`LONE`] only on condition the item still has it (and
//!   only where this process read it lone at the version updated; else it drops it).
//! - A job whose `after` names upstreams is written only after, for each upstream: (1) its item
//!   loses [`LONE`] — no later firing marks its runs, and one that read it lone before is
//!   refused and fired again by a later sweep; (2) each of its PENDING or RUNNING runs marked
//!   lone loses the mark and its item version `rv` moves, so a write decided on an earlier copy
//!   (a claim, a heartbeat, a completion) is refused and decides again on the item: the end of
//!   the run then reads the edges. A run that ended before (2) ended before the edge existed,
//!   and releases nothing for it, as a run whose query came before the edge.
//! - Whatever is not marked reads the edges as before: runs written by a trigger or a release,
//!   and every item written before the mark existed.
//!
//! A batch create larger than one transaction that is refused leaves the jobs it wrote DELETED
//! (`undo_create`), never removed: a downstream created meanwhile may have written its edge in
//! such a job's partition, and a create over a DELETED item is not lone.

use super::codec::{Item, Reader, n, run_key};
use super::store::DynamoStore;
use crate::error::{Failure, classify};
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use futures::stream::{self, StreamExt, TryStreamExt};
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ports::store::{Firing, StoreError};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

/// The attribute (`true`, or absent) of a lone job item and of a lone run item.
pub const LONE: &str = "lone";

/// Most jobs remembered lone; the map is emptied when it reaches this (a forgotten job is
/// fired and updated as not lone: its runs read their edges).
const MAX_REMEMBERED: usize = 16_384;

/// Parallel writes taking the mark off an upstream's active runs.
const PARALLEL_UNMARKS: usize = 16;

/// The jobs this process read lone, each at the version read.
#[derive(Debug, Default)]
pub(super) struct LoneJobs {
    versions: Mutex<HashMap<(TenantId, JobId), u64>>,
}

impl LoneJobs {
    /// Notes each job item among `items` lone (at its version) or not.
    pub(super) fn note(&self, items: &[Item]) {
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        for item in items {
            let r = Reader::new(item);
            let (Ok(tenant), Ok(id), Ok(version)) = (r.s("tenant"), r.s("job_id"), r.n::<u64>("version")) else {
                continue;
            };
            let job = (TenantId(tenant), JobId(id));
            if r.flag(LONE).unwrap_or(false) {
                if versions.len() >= MAX_REMEMBERED {
                    versions.clear();
                }
                versions.insert(job, version);
            } else {
                versions.remove(&job);
            }
        }
    }

    /// Notes `jobs` lone at their versions: this process just wrote them so (a create), as
    /// good as a read for a firing, whose write is conditional on the mark.
    pub(super) fn note_written<'a>(&self, jobs: impl IntoIterator<Item = &'a Job>) {
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        for job in jobs {
            if versions.len() >= MAX_REMEMBERED {
                versions.clear();
            }
            versions.insert((job.tenant.clone(), job.id.clone()), job.version);
        }
    }

    /// Whether `tenant`'s job `id` was read lone at `version`.
    pub(super) fn at(&self, tenant: &TenantId, id: &JobId, version: u64) -> bool {
        let versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        versions.get(&(tenant.clone(), id.clone())) == Some(&version)
    }
}

/// The jobs of a batch some job of the same batch names in its `after`.
pub(super) fn named_in_batch(jobs: &[Job]) -> HashSet<(&TenantId, &JobId)> {
    jobs.iter()
        .filter(|j| j.state != JobState::Deleted)
        .flat_map(|j| {
            let upstreams = j.spec.schedule.after().map(|a| a.jobs.as_slice()).unwrap_or_default();
            upstreams.iter().map(move |u| (&j.tenant, u))
        })
        .collect()
}

impl DynamoStore {
    /// Whether `firing` fires a job this process read lone at the version it fires.
    pub(super) fn fires_lone(&self, firing: &Firing) -> bool {
        self.lone_jobs
            .at(&firing.tenant, &firing.job_id, firing.expected_version)
    }

    /// Before `jobs` are written: the upstreams their `after` names are lone no more, nor
    /// their active runs (the module's header, (1) and (2)).
    pub(super) async fn end_lone_upstreams(&self, jobs: &[Job]) -> Result<(), StoreError> {
        let upstreams: BTreeSet<(&TenantId, &JobId)> = named_in_batch(jobs).into_iter().collect();
        for (tenant, upstream) in upstreams {
            self.end_lone_job(tenant, upstream).await?;
            let marked: Vec<RunId> = self
                .active_stored_runs(tenant, upstream, None)
                .await?
                .into_iter()
                .filter(|stored| stored.lone)
                .map(|stored| stored.run.run_id)
                .collect();
            stream::iter(marked.into_iter().map(|run_id| self.end_lone_run(tenant, run_id)))
                .buffer_unordered(PARALLEL_UNMARKS)
                .try_collect::<Vec<()>>()
                .await?;
        }
        Ok(())
    }

    /// (1): the upstream's item is lone no more (an absent one is left absent).
    async fn end_lone_job(&self, tenant: &TenantId, id: &JobId) -> Result<(), StoreError> {
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.job_key(tenant.as_str(), id.as_str())))
            .update_expression("REMOVE #lone")
            .condition_expression("attribute_exists(pk) AND attribute_exists(#lone)")
            .expression_attribute_names("#lone", LONE)
            .send()
            .await;
        refusal_ignored("dynamodb:UpdateItem", res.map(|_| ()))
    }

    /// (2): a lone run is lone no more, and its item version moves.
    async fn end_lone_run(&self, tenant: &TenantId, run_id: RunId) -> Result<(), StoreError> {
        let Some(k) = run_key(tenant, &run_id) else {
            return Ok(());
        };
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(k))
            .update_expression("REMOVE #lone SET rv = rv + :one")
            .condition_expression("attribute_exists(#lone)")
            .expression_attribute_names("#lone", LONE)
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        refusal_ignored("dynamodb:UpdateItem", res.map(|_| ()))
    }
}

/// `res`, a refused condition being no error (the mark was gone already).
fn refusal_ignored<E>(operation: &'static str, res: Result<(), SdkError<E>>) -> Result<(), StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match res.map_err(|e| classify(operation, e, |_| None)) {
        Ok(()) | Err(Failure::Condition { .. }) => Ok(()),
        Err(f) => Err(f.into_store(String::new)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::s;
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn item(job: &str, version: u64, lone: bool) -> Item {
        let mut item = Item::from([
            ("tenant".to_string(), s("t")),
            ("job_id".into(), s(job)),
            ("version".into(), n(version)),
        ]);
        if lone {
            item.insert(LONE.into(), AttributeValue::Bool(true));
        }
        item
    }

    #[test]
    fn a_job_read_lone_is_lone_at_the_version_read_until_read_otherwise() {
        let lone = LoneJobs::default();
        let (t, a, b) = (TenantId::from("t"), JobId::from("a"), JobId::from("b"));
        lone.note(&[item("a", 3, true), item("b", 1, false)]);
        assert!(lone.at(&t, &a, 3));
        assert!(!lone.at(&t, &a, 4), "another version");
        assert!(!lone.at(&t, &b, 1));
        lone.note(&[item("a", 3, false)]);
        assert!(!lone.at(&t, &a, 3), "read again without the mark");
    }
}
