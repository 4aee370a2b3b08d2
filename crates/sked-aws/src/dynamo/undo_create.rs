//! Undoing the part of a batch create that was written before a later transaction of it was
//! refused (a batch larger than one transaction is written in chunks: its jobs, its
//! idempotency key, the tenant's active-jobs count, then its jobs' `after` edges).
//!
//! A job written is left as a DELETED item, not removed: it then reads as absent as a deleted
//! job does, and a later create of its id goes over a DELETED item, so it is never created
//! lone (`lone`) — a downstream created while the batch was out may have written its edge in
//! the job's partition. The idempotency key written is removed (a retry with it must create
//! the jobs, not answer ids that name none), and the count is given back what the batch added.
//! Edges the batch wrote are left: the jobs they name are DELETED, and a release checks the
//! jobs it finds (`dependencies`). Each undo is a write of its own, on condition the item is
//! still the batch's; one that fails is logged and left.

use super::codec::{job_item, key, ms, n, s};
use super::keys::{IDEM_SK, idem_pk};
use super::quotas::TenantLimits;
use super::store::DynamoStore;
use sked_core::job::{Job, JobState};

/// What a chunked batch create wrote before it was refused.
pub(super) struct WrittenPart<'a> {
    /// The batch's jobs, in the order their writes come first in the batch.
    pub jobs: &'a [Job],
    /// How many of the batch's writes were committed.
    pub committed: usize,
    /// The idempotency key and fingerprint, when the batch carried one (written right after
    /// the jobs).
    pub idempotency: Option<(&'a str, &'a str)>,
    /// The index of the active-jobs count's write among the batch's writes, if it had one,
    /// the tenant's limits it was written under and what it added.
    pub counter: Option<(usize, &'a TenantLimits, i64)>,
}

impl DynamoStore {
    /// Undoes `written` (the module doc says how).
    pub(super) async fn undo_written_part(&self, written: WrittenPart<'_>) {
        let WrittenPart {
            jobs,
            committed,
            idempotency,
            counter,
        } = written;
        let Some(first) = jobs.first() else { return };
        let now = self.now();
        for job in &jobs[..committed.min(jobs.len())] {
            let deleted = Job {
                state: JobState::Deleted,
                ..job.clone()
            };
            let undone = match job_item(&deleted, now, &self.job_layout()) {
                Ok(item) => self
                    .put_if(
                        item,
                        "version = :v AND created_at = :c",
                        vec![(":v", n(job.version)), (":c", n(ms(job.created_at)))],
                    )
                    .await
                    .map_err(|f| f.into_store(String::new)),
                Err(e) => Err(e),
            };
            if let Err(e) = undone {
                tracing::warn!(tenant = %job.tenant, job_id = %job.id, error = %e, "a job of a refused batch could not be undone");
            }
        }
        if let Some((k, fingerprint)) = idempotency.filter(|_| jobs.len() < committed) {
            let undone = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key(idem_pk(first.tenant.as_str(), k), IDEM_SK.into())))
                .condition_expression("fingerprint = :fp")
                .expression_attribute_values(":fp", s(fingerprint))
                .send()
                .await;
            if let Err(e) = undone {
                tracing::warn!(tenant = %first.tenant, key = k, error = %e, "the idempotency key of a refused batch could not be removed");
            }
        }
        if let Some((_, limits, added)) = counter.filter(|(index, _, _)| *index < committed) {
            let give_back = match self.active_jobs_write(&first.tenant, limits, -added) {
                Ok(Some(write)) => self.transact(vec![write]).await.map_err(|f| f.into_store(String::new)),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = give_back {
                tracing::warn!(tenant = %first.tenant, error = %e, "the active-jobs count of a refused batch could not be given back");
            }
        }
    }
}
