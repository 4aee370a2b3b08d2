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
//!   ([`SETTLED`](super::unwritten::SETTLED)) saw the run: the claim stands.
//! - **the lone mark** (`super::lone`): a run put lone whose job lost the mark in between may
//!   have been missed by the new downstream's pass over the job's active runs, so it loses
//!   the mark itself.

use super::claim::{next_token, start};
use super::codec::{Item, Reader, StoredRun, ms};
use super::lone::LONE;
use super::store::DynamoStore;
use super::unwritten::{ABSENT_RV, dedup, settled_times};
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
            .map(|(t, id)| self.job_key(t.as_str(), id.as_str()))
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
                    keyed: true,
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
        let keys: Vec<Item> = puts
            .iter()
            .map(|p| self.job_key(p.job.tenant.as_str(), p.job.id.as_str()))
            .collect();
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
            let settled = settled_times(item).contains(&ms(put.stored.run.scheduled_for));
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

/// The claim's checks after its put, each with a change landing between the claim's read of
/// the job and its put (the read is taken first, the change written, then the claim made on
/// that read) — what no test through the port can interleave.
#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::testing::fresh_table;
    use sked_core::ids::WorkerId;
    use sked_core::job::JobSpec;
    use sked_core::ports::store::{JobStore, JobStoreExt};
    use sked_core::ports::{Clock, SystemClock};
    use sked_core::run::{Run, RunState};
    use sked_testkit::contract::fixtures::{one_shot, planned_firing};
    use std::sync::Arc;

    async fn store() -> DynamoStore {
        let (clients, mut config) = fresh_table().await;
        config.unwritten_one_shots = true;
        DynamoStore::new(clients.dynamodb, &config, Arc::new(SystemClock))
    }

    /// Creates `job`, fires it unwritten (and marks it sent); the run it stands for.
    async fn fired(store: &DynamoStore, job: &Job) -> Run {
        store.create_jobs(std::slice::from_ref(job), None).await.unwrap();
        let firing = planned_firing(job, 10);
        let mut fired = store.fire_one(&firing).await.unwrap();
        store.firings_sent(std::slice::from_ref(&firing)).await.unwrap();
        fired.pop().expect("one run fired")
    }

    /// The claim's first read of `job`'s item.
    async fn read(store: &DynamoStore, job: &Job) -> Vec<Option<(Job, Item)>> {
        store
            .jobs_as_stored(&[(job.tenant.clone(), job.id.clone())])
            .await
            .unwrap()
    }

    /// The claim of `run` on `read`.
    async fn claim(store: &DynamoStore, run: &Run, read: &[Option<(Job, Item)>]) -> Vec<(usize, ClaimOutcome)> {
        let batch = ClaimBatch {
            runs: vec![(run.tenant.clone(), run.run_id.clone())],
            worker: WorkerId::from("w1"),
            owners: vec![],
            now: run.not_before,
            lease_until: run.not_before + chrono::Duration::seconds(30),
            read_jobs: true,
            hold: vec![],
            alone: false,
        };
        let times = (batch.now, batch.lease_until);
        store.claim_unwritten(&batch, &[0], read, times).await.unwrap()
    }

    #[tokio::test]
    async fn a_put_built_on_a_job_moved_meanwhile_is_undone_and_decided_again() {
        let store = store().await;
        let a = one_shot("t1", "a", 60);
        let run = fired(&store, &a).await;
        let first_read = read(&store, &a).await;
        let stored = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
        let moved = Job {
            version: stored.version + 1,
            ..one_shot("t1", "a", 120)
        };
        // Read as fired (known sent): the change settles the firing first, putting the run.
        store
            .update_job(&moved, stored.version, stored.next_fire_at)
            .await
            .unwrap();
        let settled = store.load_run(&a.tenant, &run.run_id).await.unwrap().unwrap();
        assert_eq!((settled.rv, settled.run.state), (1, RunState::Pending), "settled");
        // A claim on the read before the change: the item holds the run, so the claim
        // leaves it to the read–decide–put path.
        assert!(claim(&store, &run, &first_read).await.is_empty());

        // In the send window (not marked sent): the change is written alone, and the claim
        // that read the job before it puts a run the job no longer has.
        let b = one_shot("t1", "b", 60);
        store.create_jobs(std::slice::from_ref(&b), None).await.unwrap();
        let mut fired_b = store.fire_one(&planned_firing(&b, 10)).await.unwrap();
        let run_b = fired_b.pop().expect("one run fired");
        let first_read = read(&store, &b).await;
        let moved = Job {
            version: b.version + 1,
            ..one_shot("t1", "b", 120)
        };
        store.update_job(&moved, b.version, b.next_fire_at).await.unwrap();
        assert!(claim(&store, &run_b, &first_read).await.is_empty(), "nothing started");
        let key = super::super::codec::run_key(&b.tenant, &run_b.run_id).unwrap();
        assert!(store.get_item(key).await.unwrap().is_none(), "the put undone");
    }

    #[tokio::test]
    async fn a_run_put_lone_loses_the_mark_its_job_lost_meanwhile() {
        let store = store().await;
        let a = one_shot("t1", "a", 60);
        let run = fired(&store, &a).await;
        let first_read = read(&store, &a).await;
        assert!(
            Reader::new(&first_read[0].as_ref().unwrap().1).flag(LONE).unwrap(),
            "created lone"
        );
        // A downstream comes: the upstream's item loses the mark (its run has no item to lose it).
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": {"after": {"jobs": ["a"]}},
            "task": {"command": {"argv": ["ok"]}},
        }))
        .unwrap();
        let now = sked_core::timestamp::trunc_ms(SystemClock.now());
        let down = Job {
            id: "down".into(),
            spec,
            next_fire_at: None,
            created_at: now,
            updated_at: now,
            ..a.clone()
        };
        store.create_jobs(std::slice::from_ref(&down), None).await.unwrap();
        let answers = claim(&store, &run, &first_read).await;
        assert!(
            matches!(answers.as_slice(), [(0, ClaimOutcome::Claimed { .. })]),
            "{answers:?}"
        );
        let stored = store.load_run(&a.tenant, &run.run_id).await.unwrap().unwrap();
        assert_eq!(stored.run.state, RunState::Running);
        assert!(!stored.lone, "its end reads the edges");
    }
}
