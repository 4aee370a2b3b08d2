//! The checks an `after` schedule needs from the store ([`crate::dependency`] holds the
//! rules of its runs): every upstream exists, no cycle, and a job others run after is not
//! deleted unless asked to force.

use super::Sked;
use crate::error::{CoreError, FieldError};
use crate::ids::{JobId, TenantId};
use crate::job::{JobSpec, JobState};
use crate::ports::JobStoreExt;
use std::collections::{BTreeMap, HashSet};

/// The field every dependency problem names.
const FIELD: &str = "schedule.after.jobs";
/// Most jobs a cycle check reads (a bound on its work; a graph this deep is refused).
const MAX_WALK: usize = 1_000;

impl Sked {
    /// The problems of `spec`'s `after` (none for other schedules) for job `id` of `tenant`:
    /// an upstream that does not exist (or is DELETED), or a chain of `after` leading back to
    /// `id`. `batch`: the other jobs created with it, by id, which count as existing.
    pub(crate) async fn check_after(
        &self,
        tenant: &TenantId,
        id: Option<&JobId>,
        spec: &JobSpec,
        batch: &BTreeMap<JobId, JobSpec>,
    ) -> Result<Vec<FieldError>, CoreError> {
        let Some(after) = spec.schedule.after() else {
            return Ok(Vec::new());
        };
        let mut problems = crate::dependency::problems(after, id);
        if !problems.is_empty() {
            return Ok(problems);
        }
        // Walk upstream from the named jobs; reaching `id` again is a cycle.
        let mut seen = HashSet::new();
        let mut frontier: Vec<(JobId, bool)> = after.jobs.iter().map(|j| (j.clone(), true)).collect();
        while let Some((job_id, named)) = frontier.pop() {
            if !seen.insert(job_id.clone()) {
                continue;
            }
            if seen.len() > MAX_WALK {
                problems.push(FieldError::new(
                    FIELD,
                    format!("the jobs upstream of this one are more than {MAX_WALK}"),
                ));
                break;
            }
            if Some(&job_id) == id {
                problems.push(FieldError::new(
                    FIELD,
                    format!("a cycle: {job_id} already runs after this job, directly or through others"),
                ));
                break;
            }
            let upstream_spec = match batch.get(&job_id) {
                Some(spec) => Some(spec.clone()),
                None => match self.ports.store.get_job(tenant, &job_id).await? {
                    Some(job) if job.state != JobState::Deleted => Some(job.spec),
                    _ => None,
                },
            };
            match upstream_spec {
                Some(spec) => {
                    if let Some(more) = spec.schedule.after() {
                        frontier.extend(more.jobs.iter().map(|j| (j.clone(), false)));
                    }
                }
                None if named => problems.push(FieldError::new(FIELD, format!("no job {job_id}"))),
                None => {}
            }
        }
        Ok(problems)
    }

    /// Refuses to delete `id` while other jobs run after it, unless `force` (their
    /// occurrences then wait for runs that never come, or give up after `within`).
    pub(crate) async fn check_no_dependents(
        &self,
        tenant: &TenantId,
        id: &JobId,
        force: bool,
    ) -> Result<(), CoreError> {
        if force {
            return Ok(());
        }
        let dependents = self.ports.store.dependents(tenant, id).await?;
        if dependents.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = dependents.iter().map(JobId::as_str).collect();
        Err(CoreError::Conflict(format!(
            "jobs run after {id}: {}; delete them first, or delete with force=true",
            names.join(", ")
        )))
    }
}
