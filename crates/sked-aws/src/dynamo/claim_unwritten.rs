//! Claims of runs whose one-shot firing was left unwritten (`super::unwritten`): the claim is
//! the run's first write. A batch's such runs are each built from its job as the claim read
//! it ([`due_run`]: the message proves the firing, the job says what runs), started, and put
//! on condition no item holds it — no read of the run. Then their jobs are read again, in one
//! consistent `BatchGetItem`, for what may have changed between the first read and the put:
//!
//! - **the job**: a change that came in between was written while no item held the run, so it
//!   did not see the firing (a change of a job read as not fired checks that no item holds its
//!   run: one after the put is refused). The put is undone (deleted on condition it is still
//!   as put) and the run decided again on the job as it now stands — built again, or none if
//!   the change took the occurrence away. A change that settled the firing first
//!   ([`SETTLED`]) saw the run: the claim stands.
//! - **the lone mark** (`super::lone`): a run put lone whose job lost the mark in between may
//!   have been missed by the new downstream's pass over the job's active runs, so it loses
//!   the mark itself.

use super::claim::{next_token, start};
use super::codec::{Item, Reader, StoredRun, key, ms};
use super::keys::*;
use super::lone::LONE;
use super::store::DynamoStore;
use super::unwritten::{ABSENT_RV, SETTLED, dedup};
use crate::error::{Failure, classify};
use sked_core::ids::{JobId, TenantId};
use sked_core::job::Job;
use sked_core::lifecycle::ClaimStep;
use sked_core::ports::store::{ClaimBatch, ClaimOutcome, StoreError};
use sked_core::timestamp::Timestamp;
use sked_core::unwritten_firing::due_run;
use std::collections::HashMap;

/// Rounds of put and check a run whose job keeps changing gets before the caller's claim.
const ROUNDS: usize = 3;

/// A run put by a claim, to be checked against its job read again.
struct Put {
    index: usize,
    stored: StoredRun,
    outcome: ClaimOutcome,
    job: Job,
}

/// Whether `now` (as read again) is the job `put` was built from, its lone mark aside.
fn same_job(built_from: &Job, now: &Job) -> bool {
    (built_from.version, built_from.next_fire_at, built_from.state) == (now.version, now.next_fire_at, now.state)
}

impl DynamoStore {
    /// The jobs `ids` name, as stored (no view: a claim decides on the job as it stands), each
    /// with its item; `None` for an id naming no job.
    pub(super) async fn jobs_as_stored(
        &self,
        ids: &[(TenantId, JobId)],
    ) -> Result<Vec<Option<(Job, Item)>>, StoreError> {
        let keys: Vec<Item> = ids
            .iter()
            .map(|(t, id)| key(job_pk(t.as_str(), id.as_str()), JOB_SK.into()))
            .collect();
        let items = match keys.as_slice() {
            [one] => self.get_item(one.clone()).await?.into_iter().collect(),
            _ => self.batch_get(dedup(keys)).await?,
        };
        self.lone_jobs.note(&items);
        let mut by_id: HashMap<(TenantId, JobId), (Job, Item)> = HashMap::with_capacity(items.len());
        for item in items {
            let job = super::codec::job_from_item(&item)?;
            by_id.insert((job.tenant.clone(), job.id.clone()), (job, item));
        }
        Ok(ids.iter().map(|id| by_id.get(id).cloned()).collect())
    }

    /// Claims those of `batch`'s runs (by index) that a firing left unwritten and no item
    /// holds, with their jobs as just read (`jobs`, by index; items and decoded); the module's
    /// header says how. Answers by index; the others are the caller's to claim (an item holds
    /// the run, the run needs a slot, the claim has more to write than the start).
    pub(super) async fn claim_unwritten(
        &self,
        batch: &ClaimBatch,
        candidates: &[usize],
        jobs: &[Option<(Job, Item)>],
        (now, lease_until): (Timestamp, Timestamp),
    ) -> Result<Vec<(usize, ClaimOutcome)>, StoreError> {
        let mut answers = Vec::new();
        if self.unwritten.is_none() || batch.alone {
            return Ok(answers);
        }
        let mut current: HashMap<usize, (Job, Item)> = candidates
            .iter()
            .filter_map(|&i| Some((i, jobs.get(i)?.clone()?)))
            .collect();
        for _ in 0..ROUNDS {
            let mut puts = Vec::new();
            let mut order: Vec<usize> = current.keys().copied().collect();
            order.sort_unstable();
            for index in order {
                let (job, item) = &current[&index];
                let (tenant, run_id) = &batch.runs[index];
                let Some(run) = due_run(job).filter(|run| &run.run_id == run_id && &run.tenant == tenant) else {
                    continue;
                };
                if run.concurrency.is_some()
                    || self.written_runs.holds(tenant, run_id)
                    || self.tenant_limits(tenant).await?.quota.max_concurrent_runs.is_some()
                {
                    continue;
                }
                let mut stored = StoredRun {
                    rv: ABSENT_RV,
                    lone: Reader::new(item).flag(LONE).unwrap_or(false),
                    ends_its_job: true,
                    ..StoredRun::new(run)
                };
                match stored.run.decide_claim(now) {
                    ClaimStep::Answer {
                        outcome,
                        changed: false,
                    } => answers.push((index, outcome)),
                    ClaimStep::Answer { changed: true, .. } => {}
                    ClaimStep::Start => {
                        let token = next_token(&stored);
                        let outcome = start(&mut stored, token, batch.owner_of(index), now, lease_until);
                        // Refused: an item holds the run (the caller reads it).
                        if self.put_run(&stored).await? {
                            puts.push(Put {
                                index,
                                stored,
                                outcome,
                                job: job.clone(),
                            });
                        }
                    }
                }
            }
            current = self.check_puts(puts, &mut answers).await?;
            if current.is_empty() {
                break;
            }
        }
        Ok(answers)
    }

    /// Reads the jobs of `puts` again and answers the claims that stand; undoes the others
    /// and answers their jobs as now read, to decide again.
    async fn check_puts(
        &self,
        puts: Vec<Put>,
        answers: &mut Vec<(usize, ClaimOutcome)>,
    ) -> Result<HashMap<usize, (Job, Item)>, StoreError> {
        let mut again = HashMap::new();
        if puts.is_empty() {
            return Ok(again);
        }
        let job_key = |tenant: &TenantId, id: &JobId| key(job_pk(tenant.as_str(), id.as_str()), JOB_SK.into());
        let keys: Vec<Item> = puts.iter().map(|p| job_key(&p.job.tenant, &p.job.id)).collect();
        let mut read: HashMap<(TenantId, JobId), Item> = HashMap::new();
        for item in self.batch_get(dedup(keys)).await? {
            let job = super::codec::job_from_item(&item)?;
            read.insert((job.tenant, job.id), item);
        }
        for put in puts {
            let Some(item) = read.get(&(put.job.tenant.clone(), put.job.id.clone())) else {
                // Gone since (items are kept, DELETED): nothing to start.
                self.undo_put(&put.stored).await?;
                continue;
            };
            let now = super::codec::job_from_item(item)?;
            let r = Reader::new(item);
            let settled = r.opt_n::<i64>(SETTLED).ok().flatten() == Some(ms(put.stored.run.scheduled_for));
            if !same_job(&put.job, &now) && !settled {
                self.undo_put(&put.stored).await?;
                again.insert(put.index, (now, item.clone()));
                continue;
            }
            self.remember_written(&put.stored);
            if put.stored.lone && !r.flag(LONE).unwrap_or(false) {
                let (tenant, run_id) = (&put.stored.run.tenant, &put.stored.run.run_id);
                self.modify_run(tenant, run_id, |stored| {
                    let was = std::mem::replace(&mut stored.lone, false);
                    Ok((was, ()))
                })
                .await?;
            }
            answers.push((put.index, put.outcome));
        }
        Ok(again)
    }

    /// Deletes the run `put` (as a claim put it, version 1) if its item is still as put: a
    /// claim built on a job changed meanwhile. Refused, someone wrote the run since, and it
    /// is the caller's to read.
    async fn undo_put(&self, put: &StoredRun) -> Result<(), StoreError> {
        let Some(k) = super::codec::run_key(&put.run.tenant, &put.run.run_id) else {
            return Ok(());
        };
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(k))
            .condition_expression("rv = :rv")
            .expression_attribute_values(":rv", super::codec::n(put.rv + 1))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) => match classify("dynamodb:DeleteItem", e, |_| None) {
                Failure::Condition { .. } => Ok(()),
                f => Err(f.into_store(String::new)),
            },
        }
    }
}
