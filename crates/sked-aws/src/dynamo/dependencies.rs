//! The `after` schedule on DynamoDB ([`sked_core::dependency`] holds its rules):
//!
//! | item | `pk` | `sk` | other attributes |
//! |---|---|---|---|
//! | edge | `T#<tenant>#J#<upstream>` | `AFTER#<downstream>` | `downstream`: that job runs after this one |
//! | wait | `T#<tenant>#J#<downstream>` | `WAIT#<T>` | `deadline`; `sched` index `WAITING#<shard>` / `<deadline>#<tenant>#<job>#<T>` |
//!
//! Edges are written with the job that names its upstreams (create and update); they are
//! hints — a downstream is released only if its stored `after` still names the upstream and
//! it is not DELETED — so an edge left by a changed or deleted job is harmless.
//!
//! The write that ends a run ([`DynamoStore::save_run`]) — unless the run is lone (`super::lone`:
//! fired while no job named its job) — reads the job's edges (one `Query` of its partition), the downstream jobs, their runs at the nominal time and the other
//! upstreams' runs, decides with [`dependency::decide`], and puts the ended run, the
//! released runs (`attribute_not_exists`), the waits, and a condition on every other upstream
//! run it read (its `rv`, or that it is absent) in one `TransactWriteItems`: two upstreams of a
//! fan-in that end at once each check the other's run, so at most one of the two
//! transactions commits as read, and the other reads again and sees both ended.

use super::codec::{Item, Reader, StoredRun, job_from_item, key, ms, n, run_key, s, truncated};
use super::keys::*;
use super::plumbing::QuerySpec;
use super::runs::MAX_RMW_ATTEMPTS;
use super::store::DynamoStore;
use crate::error::{Failure, build_error};
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem};
use sked_core::dependency::{self, Step, Wait};
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ports::{JobStoreExt, StoreError};
use sked_core::run::Run;
use sked_core::timestamp::{Timestamp, from_ms};
use std::collections::{HashMap, HashSet};

/// How long a wait item outlives its deadline before DynamoDB's TTL removes it (the reaper
/// removes it long before; this only bounds a table no reaper reads).
const WAIT_TTL_SECS: i64 = 7 * 24 * 3600;

/// What a run's end releases, as writes of its transaction.
#[derive(Default)]
pub(super) struct Release {
    /// The puts, deletes and condition checks to make with the ended run's put.
    pub(super) writes: Vec<TransactWriteItem>,
    /// For each of `writes`, the run it puts, if it puts one.
    pub(super) writes_run: Vec<Option<Run>>,
    /// The runs written (PENDING and SKIPPED).
    pub(super) released: Vec<Run>,
    /// Runs this transaction writes, by id: read from here, not from the table.
    in_flight: HashMap<RunId, Run>,
    /// Keys the transaction already names (DynamoDB refuses one key twice).
    named: HashSet<(String, String)>,
}

impl Release {
    /// Adds `write` (which puts `run`, if any).
    fn push(&mut self, write: TransactWriteItem, run: Option<Run>) {
        self.writes.push(write);
        self.writes_run.push(run);
    }

    /// Whether the transaction names the key of `item` yet; names it.
    fn name(&mut self, item: &Item) -> bool {
        let r = Reader::new(item);
        self.named
            .insert((r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default()))
    }
}

impl DynamoStore {
    /// The edge items of `job` (puts, unconditional): one per upstream its live `after`
    /// names.
    pub(super) fn edge_writes(&self, job: &Job) -> Result<Vec<TransactWriteItem>, StoreError> {
        let Some(after) = job.spec.schedule.after().filter(|_| job.state != JobState::Deleted) else {
            return Ok(Vec::new());
        };
        let t = job.tenant.as_str();
        after
            .jobs
            .iter()
            .map(|upstream| {
                let mut item = key(job_pk(t, upstream.as_str()), after_sk(job.id.as_str()));
                item.extend([
                    ("kind".to_string(), s("after")),
                    ("tenant".into(), s(t)),
                    ("downstream".into(), s(job.id.as_str())),
                ]);
                self.put_always(item)
            })
            .collect()
    }

    /// The live jobs whose `after` names `upstream`, in id order (edges read consistently,
    /// then the jobs they name, checked).
    pub(super) async fn downstream_jobs(&self, tenant: &TenantId, upstream: &JobId) -> Result<Vec<Job>, StoreError> {
        let mut q = QuerySpec::new(None, "#pk = :pk AND begins_with(#sk, :after)")
            .name("#pk", PK)
            .name("#sk", SK)
            .value(":pk", s(job_pk(tenant.as_str(), upstream.as_str())))
            .value(":after", s(AFTER_SK_PREFIX));
        q.consistent = true;
        let edges = self.query(&q, usize::MAX).await?;
        if edges.is_empty() {
            return Ok(Vec::new());
        }
        let keys = edges
            .iter()
            .map(|e| {
                let downstream = Reader::new(e).s("downstream")?;
                Ok(self.job_key(tenant.as_str(), &downstream))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut jobs: Vec<Job> = self
            .batch_get(keys)
            .await?
            .iter()
            .map(job_from_item)
            .collect::<Result<_, _>>()?;
        jobs.retain(|j| {
            j.state != JobState::Deleted && j.spec.schedule.after().is_some_and(|a| a.jobs.contains(upstream))
        });
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(jobs)
    }

    /// The writes that release what `ended` (about to be put in the same transaction, at
    /// its key) decides.
    pub(super) async fn plan_release(&self, ended: &Run) -> Result<Release, StoreError> {
        let mut plan = Release::default();
        if let Some(k) = run_key(&ended.tenant, &ended.run_id) {
            plan.name(&k);
        }
        plan.in_flight.insert(ended.run_id.clone(), ended.clone());
        self.release_into(ended, &mut plan).await?;
        Ok(plan)
    }

    /// Plans what `ended` releases into `plan` (and, for a SKIPPED run it writes, what that
    /// releases in turn).
    async fn release_into(&self, ended: &Run, plan: &mut Release) -> Result<(), StoreError> {
        let now = ended.finished_at.unwrap_or(ended.created_at);
        for downstream in self.downstream_jobs(&ended.tenant, &ended.job_id).await? {
            Box::pin(self.settle_into(&downstream, ended.scheduled_for, now, false, plan)).await?;
        }
        Ok(())
    }

    /// Plans the decision of `downstream`'s occurrence at `t` into `plan`; `expired`: its
    /// wait's deadline passed.
    async fn settle_into(
        &self,
        downstream: &Job,
        t: Timestamp,
        now: Timestamp,
        expired: bool,
        plan: &mut Release,
    ) -> Result<(), StoreError> {
        let Some(after) = downstream.spec.schedule.after() else {
            return Ok(());
        };
        let tenant = &downstream.tenant;
        let own_id = RunId::derive(&downstream.id, t);
        if plan.in_flight.contains_key(&own_id) || self.load_run(tenant, &own_id).await?.is_some() {
            return Ok(());
        }
        let mut upstream_runs = Vec::with_capacity(after.jobs.len());
        for upstream in &after.jobs {
            let id = RunId::derive(upstream, t);
            if let Some(run) = plan.in_flight.get(&id) {
                upstream_runs.push(Some(run.clone()));
                continue;
            }
            let stored = self.load_run(tenant, &id).await?;
            // What was read must still hold when the transaction commits.
            if let Some(k) = run_key(tenant, &id)
                && plan.name(&k)
            {
                let (condition, rv) = match &stored {
                    Some(stored) => ("rv = :rv", Some(stored.rv)),
                    None => ("attribute_not_exists(pk)", None),
                };
                let mut check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(k))
                    .condition_expression(condition);
                if let Some(rv) = rv {
                    check = check.expression_attribute_values(":rv", n(rv));
                }
                let check = check.build().map_err(build_error)?;
                plan.push(TransactWriteItem::builder().condition_check(check).build(), None);
            }
            upstream_runs.push(stored.map(|s| s.run));
        }
        let decision = dependency::decide(downstream, after, t, &upstream_runs, now);
        let run = match dependency::step(downstream, t, decision, now, expired) {
            Step::Write(run) => run,
            Step::Wait(wait) => {
                let item = self.wait_item(&wait);
                if plan.name(&item) {
                    plan.push(self.put_always(item)?, None);
                }
                return Ok(());
            }
            Step::Nothing => return Ok(()),
        };
        let stored = StoredRun::new(truncated(&run));
        let item = self.stored_run_item(&stored)?;
        plan.name(&item);
        plan.push(
            self.put(item, "attribute_not_exists(pk)", vec![])?,
            Some(stored.run.clone()),
        );
        let wait_key = key(job_pk(tenant.as_str(), downstream.id.as_str()), wait_sk(ms(t)));
        if plan.name(&wait_key) {
            let delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(wait_key))
                .build()
                .map_err(build_error)?;
            plan.push(TransactWriteItem::builder().delete(delete).build(), None);
        }
        plan.in_flight.insert(stored.run.run_id.clone(), stored.run.clone());
        plan.released.push(stored.run.clone());
        if stored.run.state.is_terminal() {
            Box::pin(self.release_into(&stored.run, plan)).await?;
        }
        Ok(())
    }

    /// A put with no condition (edges and waits: writing one again changes nothing).
    pub(super) fn put_always(&self, item: Item) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A wait's item.
    fn wait_item(&self, wait: &Wait) -> Item {
        let (t, job) = (wait.tenant.as_str(), wait.job_id.as_str());
        let mut item = key(job_pk(t, job), wait_sk(ms(wait.scheduled_for)));
        item.extend([
            ("kind".to_string(), s("wait")),
            ("tenant".into(), s(t)),
            ("job_id".into(), s(job)),
            ("scheduled_for".into(), n(ms(wait.scheduled_for))),
            ("deadline".into(), n(ms(wait.deadline))),
            (
                GSI1_PK.into(),
                s(waiting_pk(shard_of(&format!("{t}#{job}"), self.shards))),
            ),
            (
                GSI1_SK.into(),
                s(waiting_sk(ms(wait.deadline), t, job, ms(wait.scheduled_for))),
            ),
            (TTL.into(), n(wait.deadline.timestamp() + WAIT_TTL_SECS)),
        ]);
        item
    }

    /// [`sked_core::ports::JobStore::dependents`].
    pub(super) async fn dependent_ids(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        Ok(self
            .downstream_jobs(tenant, job_id)
            .await?
            .into_iter()
            .map(|j| j.id)
            .collect())
    }

    /// [`sked_core::ports::JobStore::expired_waits`]: every shard's waits below `now`.
    pub(super) async fn waits_expired_by(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        let items = self.sched_below(waiting_pk, ms(now), limit).await?;
        let mut waits = items
            .iter()
            .map(|i| {
                let r = Reader::new(i);
                Ok(Wait {
                    tenant: TenantId(r.s("tenant")?),
                    job_id: JobId(r.s("job_id")?),
                    scheduled_for: from_ms(r.n("scheduled_for")?),
                    deadline: from_ms(r.n("deadline")?),
                })
            })
            .collect::<Result<Vec<Wait>, StoreError>>()?;
        waits.retain(|w| w.deadline < now);
        waits.sort_by(|a, b| (a.deadline, &a.job_id).cmp(&(b.deadline, &b.job_id)));
        waits.truncate(limit);
        Ok(waits)
    }

    /// [`sked_core::ports::JobStore::expire_wait`]: the occurrence given up (unless decided
    /// meanwhile) and the wait removed, in one transaction; a lost race decides again.
    pub(super) async fn expire(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        let job = self
            .get_job(&wait.tenant, &wait.job_id)
            .await?
            .filter(|j| j.state != JobState::Deleted);
        let wait_key = key(
            job_pk(wait.tenant.as_str(), wait.job_id.as_str()),
            wait_sk(ms(wait.scheduled_for)),
        );
        for _ in 0..MAX_RMW_ATTEMPTS {
            let mut plan = Release::default();
            if let Some(job) = &job {
                self.settle_into(job, wait.scheduled_for, now, true, &mut plan).await?;
            }
            if plan.name(&wait_key) {
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(wait_key.clone()))
                    .build()
                    .map_err(build_error)?;
                plan.push(TransactWriteItem::builder().delete(delete).build(), None);
            }
            match self.transact(plan.writes).await {
                Ok(()) => return Ok(plan.released),
                Err(Failure::Condition { .. }) => continue,
                Err(f) => return Err(f.into_store(String::new)),
            }
        }
        Err(StoreError::Transient(
            format!("the wait of {}@{} kept changing", wait.job_id, ms(wait.scheduled_for)).into(),
        ))
    }
}
