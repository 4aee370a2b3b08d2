//! Job actions: create (single, batch, idempotent), read, list, replace, delete, pause,
//! resume, trigger, preview.

use super::Sked;
use crate::error::CoreError;
use crate::ids::{JobId, TenantId};
use crate::job::{Job, JobSpec};
use crate::ports::{JobFilter, Page, PageRequest};
use crate::run::Run;
use crate::timestamp::Timestamp;

/// A job as submitted: an optional caller-given id and the definition.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Caller-given id; a ULID is generated if absent.
    pub id: Option<JobId>,
    /// The definition.
    pub spec: JobSpec,
}

/// The answer to a create: the job, and whether this call created it (false when an
/// identical re-POST or a replayed idempotency key returned the existing job).
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// The stored job.
    pub job: Job,
    /// Whether it was created now.
    pub created: bool,
}

impl Sked {
    /// Creates one job. Re-POST of the same id with the same spec returns the existing job
    /// (`created: false`); with a different spec, `Conflict`. With `idempotency_key`, a
    /// replay of the same request returns the first answer; a different request reusing
    /// the key is a `Conflict`.
    pub async fn create_job(&self, tenant: &TenantId, new: NewJob, idempotency_key: Option<&str>) -> Result<Created, CoreError> {
        let _ = (tenant, new, idempotency_key);
        todo!()
    }

    /// Creates up to 1,000 jobs in one transaction; any invalid entry fails them all with
    /// `InvalidBatch` listing every problem.
    pub async fn create_jobs(&self, tenant: &TenantId, jobs: Vec<NewJob>, idempotency_key: Option<&str>) -> Result<Vec<Job>, CoreError> {
        let _ = (tenant, jobs, idempotency_key);
        todo!()
    }

    /// One job (DELETED jobs included, so history stays reachable).
    pub async fn get_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        let _ = (tenant, id);
        todo!()
    }

    /// A page of jobs.
    pub async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter, page: &PageRequest) -> Result<Page<Job>, CoreError> {
        let _ = (tenant, filter, page);
        todo!()
    }

    /// Replaces a job's definition (PUT; PATCH merges first, then calls this). A schedule
    /// change recomputes `next_fire_at`. With `if_version`, `Conflict` unless it matches.
    pub async fn replace_job(&self, tenant: &TenantId, id: &JobId, spec: JobSpec, if_version: Option<u64>) -> Result<Job, CoreError> {
        let _ = (tenant, id, spec, if_version);
        todo!()
    }

    /// Deletes a job: no new runs; running attempts finish unless `cancel_running`.
    pub async fn delete_job(&self, tenant: &TenantId, id: &JobId, cancel_running: bool) -> Result<Job, CoreError> {
        let _ = (tenant, id, cancel_running);
        todo!()
    }

    /// Stops a job firing until resumed.
    pub async fn pause_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        let _ = (tenant, id);
        todo!()
    }

    /// Resumes a paused job; occurrences missed meanwhile follow its misfire policy.
    pub async fn resume_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        let _ = (tenant, id);
        todo!()
    }

    /// Runs a job once now, outside its schedule.
    pub async fn trigger_job(&self, tenant: &TenantId, id: &JobId) -> Result<Run, CoreError> {
        let _ = (tenant, id);
        todo!()
    }

    /// The next `count` fire times of a stored job, DST applied.
    pub async fn preview_job(&self, tenant: &TenantId, id: &JobId, count: usize) -> Result<Vec<Timestamp>, CoreError> {
        let _ = (tenant, id, count);
        todo!()
    }
}
