//! A job created due at once, written with its first firing
//! ([`JobStore::create_fired`](sked_core::ports::JobStore::create_fired)): one
//! `TransactWriteItems` puts the job as the firing leaves it (a one-shot COMPLETED, out of the
//! due index; a recurring job due next at its next occurrence), its idempotency key, and the
//! firing's skip records and runs. A create and then a firing wrote the job twice (a put, then
//! a transactional update billed twice), filed it in the due index and took it out again, and
//! changed its listed state: 4 write units and a request more for a one-shot created to run
//! now (measured in `crates/sked/tests/aws_requests.rs`).
//!
//! Left to a create and a firing apart (`None`, nothing written): a job whose schedule is
//! `after` other jobs (its edges and the upstreams' `lone` marks), a firing that cancels runs,
//! a tenant whose active jobs are counted (the count is checked as the job enters ACTIVE, which
//! a job created fired may never be), a write too large for one transaction, and a run that
//! exists already (a job created again over a DELETED one, whose old run may hold the id: the
//! firing written apart passes it).

use super::plumbing::MAX_TRANSACTION;
use super::store::{DynamoStore, conflict};
use crate::error::Failure;
use aws_sdk_dynamodb::types::TransactWriteItem;
use sked_core::job::Job;
use sked_core::ports::store::{Firing, StoreError};
use sked_core::run::Run;
use std::collections::HashSet;

/// One try's writes: the create's (the job's put first) and where the firing's begin.
struct Writes {
    items: Vec<TransactWriteItem>,
    runs: Vec<Run>,
    firing_from: usize,
}

/// How one try ended.
enum Tried {
    Written(Vec<Run>),
    /// The job's item exists (written lone, it must not exist at all).
    JobExists,
    /// Refused otherwise, or too large: the answer (`None`: leave it to a create and a firing).
    Answer(Option<Result<Vec<Run>, StoreError>>),
}

impl DynamoStore {
    /// The body of [`JobStore::create_fired`](sked_core::ports::JobStore::create_fired): lone
    /// first (`super::lone`: a job whose item did not exist, its runs marked so), then, if its
    /// item exists (DELETED, or a conflict), as any create.
    pub(super) async fn write_created_fired(
        &self,
        job: &Job,
        idempotency: Option<(&str, &str)>,
        firing: &Firing,
    ) -> Option<Result<Vec<Run>, StoreError>> {
        if job.spec.schedule.after().is_some() || !firing.cancel.is_empty() {
            return None;
        }
        let limits = match self.tenant_limits(&job.tenant).await {
            Ok(limits) => limits,
            Err(e) => return Some(Err(e)),
        };
        if limits.counting {
            return None;
        }
        let created = Job {
            state: firing.state,
            next_fire_at: firing.next_fire_at,
            ..job.clone()
        };
        let now = self.now();
        let writes = |lone: bool| -> Result<Writes, StoreError> {
            let (mut items, _) = self.create_writes(std::slice::from_ref(&created), idempotency, &limits, lone, now)?;
            let firing_from = items.len();
            let (fired, runs) = self.fired_writes(firing, lone, &HashSet::new())?;
            items.extend(fired);
            Ok(Writes {
                items,
                runs: runs.into_iter().flatten().collect(),
                firing_from,
            })
        };
        for lone in [true, false] {
            match self.try_created_fired(writes(lone), idempotency).await {
                Tried::Written(runs) => {
                    self.keep_fired(firing, &runs, lone);
                    return Some(Ok(runs));
                }
                Tried::JobExists if lone => continue,
                Tried::JobExists => return Some(Err(conflict(format!("job {} exists", job.id)))),
                Tried::Answer(answer) => return answer,
            }
        }
        None
    }

    /// One transaction of `writes`.
    async fn try_created_fired(&self, writes: Result<Writes, StoreError>, idempotency: Option<(&str, &str)>) -> Tried {
        let writes = match writes {
            Ok(writes) => writes,
            Err(e) => return Tried::Answer(Some(Err(e))),
        };
        if writes.items.len() > MAX_TRANSACTION {
            return Tried::Answer(None);
        }
        match self.transact(writes.items).await {
            Ok(()) => Tried::Written(writes.runs),
            Err(Failure::Condition { failed_items, .. }) => match failed_items.iter().min() {
                Some(0) => Tried::JobExists,
                Some(&i) if i < writes.firing_from => Tried::Answer(Some(Err(conflict(format!(
                    "idempotency key {} already recorded",
                    idempotency.map(|(k, _)| k).unwrap_or_default()
                ))))),
                // A run of the firing exists: nothing was written.
                _ => Tried::Answer(None),
            },
            Err(f) => Tried::Answer(Some(Err(f.into_store(String::new)))),
        }
    }
}
