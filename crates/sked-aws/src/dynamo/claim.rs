//! Claims on DynamoDB: [`JobStore::claim`] of a batch (its jobs read, runs their overlap
//! policy holds back answered as held, every other run claimed), and the three ways one
//! run's claim is written — plain, one run's read–decide–put (`runs`); gated, the attempt and
//! the slots it takes in one transaction (`slots`); alone, on condition that none of the
//! job's other active runs moved meanwhile. What a claim decides is sked-core's
//! ([`sked_core::lifecycle`]); fencing tokens grow per run.

use super::codec::{Item, StoredRun, n, run_key};
use super::plumbing::MAX_TRANSACTION;
use super::quotas::TenantLimits;
use super::runs::MAX_RMW_ATTEMPTS;
use super::store::DynamoStore;
use crate::error::{Failure, build_error};
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::Job;
use sked_core::lifecycle::{ClaimStep, another_run_leased_until, claim_reads_run, held_at_claim, held_once_read};
use sked_core::ports::store::{CLAIM_CHECK_HORIZON, ClaimBatch, ClaimOutcome, JobClaim, JobStore, StoreError};
use sked_core::run::Run;
use sked_core::timestamp::{Timestamp, trunc_ms};

/// The fencing token of a run's next attempt: above every token it was ever given.
pub(super) fn next_token(stored: &StoredRun) -> u64 {
    stored.last_token.max(stored.run.attempts.len() as u64) + 1
}

/// Starts attempt `token` of the run: the claim's answer.
pub(super) fn start(
    stored: &mut StoredRun,
    token: u64,
    worker: &WorkerId,
    now: Timestamp,
    lease_until: Timestamp,
) -> ClaimOutcome {
    stored.run.start_attempt(worker, now, lease_until, token);
    stored.last_token = token;
    ClaimOutcome::Claimed {
        run: stored.run.clone(),
        token,
    }
}

impl DynamoStore {
    /// The body of [`JobStore::claim`].
    pub(super) async fn claim_batch(
        &self,
        batch: &ClaimBatch,
    ) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        let named: Vec<Option<(TenantId, JobId)>> = batch
            .runs
            .iter()
            .map(|(tenant, run_id)| Some((tenant.clone(), run_id.parts()?.0)))
            .collect();
        let wanted: Vec<(TenantId, JobId)> = named.iter().flatten().cloned().collect();
        // Where firings may be left unwritten, the jobs as stored, with their items (a claim of
        // such a run builds it from its job: `super::claim_unwritten`).
        let read: Vec<Option<(Job, Item)>> = match (batch.read_jobs, self.unwritten.is_some()) {
            (false, _) => vec![None; wanted.len()],
            (true, true) => self.jobs_as_stored(&wanted).await?,
            (true, false) => self
                .get_jobs(&wanted)
                .await?
                .into_iter()
                .map(|job| job.map(|job| (job, Item::new())))
                .collect(),
        };
        let mut read = read.into_iter();
        let jobs: Vec<Option<(Job, Item)>> = named
            .iter()
            .map(|n| n.as_ref().and_then(|_| read.next().flatten()))
            .collect();
        let (now, lease_until) = (trunc_ms(batch.now), trunc_ms(batch.lease_until));
        let mut out: Vec<Option<Result<JobClaim, StoreError>>> = (0..batch.runs.len()).map(|_| None).collect();
        let mut to_claim = Vec::new();
        for (index, ((tenant, run_id), job)) in batch.runs.iter().zip(&jobs).enumerate() {
            if let Some((job, _)) = job.as_ref() {
                // A backfill run waits its turn, a run at a time the job's timing dropped is
                // skipped; where the wiring holds every policy but `allow` (runs fired ahead),
                // the first costs no read, and the second is read only at such a time.
                let held = held_at_claim(job, &batch.hold)
                    || (claim_reads_run(job, run_id)
                        && self
                            .load_run(tenant, run_id)
                            .await?
                            .is_some_and(|stored| held_once_read(job, &stored.run)));
                if held {
                    out[index] = Some(Ok(JobClaim::Held(job.clone())));
                    continue;
                }
            }
            to_claim.push(index);
        }
        for (index, outcome) in self
            .claim_unwritten(batch, &to_claim, &jobs, (now, lease_until))
            .await?
        {
            let job = jobs[index].as_ref().map(|(job, _)| job.clone());
            out[index] = Some(Ok(JobClaim::Claimed(outcome, job)));
        }
        for index in to_claim {
            if out[index].is_some() {
                continue;
            }
            let (tenant, run_id) = &batch.runs[index];
            let owner = batch.owner_of(index);
            let outcome = match batch.alone {
                true => self.claim_alone(tenant, run_id, owner, now, lease_until).await,
                false => self.claim_run(tenant, run_id, owner, now, lease_until).await,
            };
            let job = jobs[index].as_ref().map(|(job, _)| job.clone());
            out[index] = Some(outcome.map(|outcome| JobClaim::Claimed(outcome, job)));
        }
        Ok(out
            .into_iter()
            .map(|answer| answer.unwrap_or_else(|| Err(StoreError::Other("a claim went unanswered".into()))))
            .collect())
    }

    /// A claim of a [`ClaimBatch`] with `alone` for one run: the job's active runs are read; if none
    /// other holds a live lease, the claim is written in one transaction with a condition
    /// that each of those runs is still at the version read (so none of them was claimed
    /// meanwhile: two workers claiming two runs of the job at once each check the other's
    /// run, and at most one transaction succeeds). A lost race reads and decides again.
    async fn claim_alone(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        let Some((job_id, _)) = run_id.parts() else {
            return Err(StoreError::NotFound);
        };
        let (now, lease_until) = (trunc_ms(now), trunc_ms(lease_until));
        let limits = self.tenant_limits(tenant).await?;
        for _ in 0..MAX_RMW_ATTEMPTS {
            let active = self
                .active_stored_runs(tenant, &job_id, Some(now + CLAIM_CHECK_HORIZON.to_chrono()))
                .await?;
            let runs: Vec<Run> = active.iter().map(|stored| stored.run.clone()).collect();
            if let Some(until) = another_run_leased_until(&runs, run_id, now) {
                return Ok(ClaimOutcome::Leased(until));
            }
            let mut stored = match active.iter().find(|stored| &stored.run.run_id == run_id) {
                Some(stored) => stored.clone(),
                // Not active: ended (or never existed); `claim` answers that.
                None => return self.claim_run(tenant, run_id, worker, now, lease_until).await,
            };
            let token = next_token(&stored);
            let slot = match stored.run.decide_claim(now) {
                ClaimStep::Answer { .. } => return self.claim_run(tenant, run_id, worker, now, lease_until).await,
                ClaimStep::Start => match self.take_slots(&stored.run, token, now, &limits).await? {
                    Ok(writes) => writes,
                    Err(full) => return Ok(full),
                },
            };
            let outcome = start(&mut stored, token, worker, now, lease_until);
            let others: Vec<&StoredRun> = active.iter().filter(|o| &o.run.run_id != run_id).collect();
            if others.len() + slot.len() >= MAX_TRANSACTION {
                return Err(StoreError::Other(
                    format!(
                        "job {job_id} has {} active runs: too many to claim one alone",
                        others.len()
                    )
                    .into(),
                ));
            }
            let mut items = vec![self.versioned_put(&stored)?];
            for other in others {
                let k = run_key(&other.run.tenant, &other.run.run_id)
                    .ok_or_else(|| StoreError::Other(format!("run id {} names no job", other.run.run_id).into()))?;
                let check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(k))
                    .condition_expression("rv = :rv")
                    .expression_attribute_values(":rv", n(other.rv))
                    .build()
                    .map_err(build_error)?;
                items.push(TransactWriteItem::builder().condition_check(check).build());
            }
            items.extend(slot);
            match self.transact(items).await {
                Ok(()) => {
                    self.remember_written(&stored);
                    return Ok(outcome);
                }
                Err(Failure::Condition { .. }) => continue,
                Err(f) => return Err(f.into_store(String::new)),
            }
        }
        Err(StoreError::Transient(
            format!("job {job_id}'s runs kept changing under {MAX_RMW_ATTEMPTS} claims").into(),
        ))
    }

    /// [`JobStore::claim`] of a run that counts against a slot pool (its tenant has a
    /// `max_concurrent_runs`, or it has a concurrency key): the attempt starts in one
    /// transaction with the slots it takes ([`super::slots`]); a lost race reads and decides
    /// again.
    async fn claim_gated(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
        limits: &TenantLimits,
    ) -> Result<ClaimOutcome, StoreError> {
        for _ in 0..MAX_RMW_ATTEMPTS {
            let mut stored = self
                .load_run_as(tenant, run_id, true)
                .await?
                .ok_or(StoreError::NotFound)?;
            let token = next_token(&stored);
            match stored.run.decide_claim(now) {
                ClaimStep::Answer { outcome, changed } => {
                    if !changed || self.save_run(&stored).await? {
                        return Ok(outcome);
                    }
                }
                ClaimStep::Start => {
                    let slots = match self.take_slots(&stored.run, token, now, limits).await? {
                        Ok(writes) => writes,
                        Err(full) => return Ok(full),
                    };
                    let outcome = start(&mut stored, token, worker, now, lease_until);
                    let mut items = vec![self.versioned_put(&stored)?];
                    items.extend(slots);
                    match self.transact(items).await {
                        Ok(()) => {
                            self.remember_written(&stored);
                            return Ok(outcome);
                        }
                        Err(Failure::Condition { .. }) => {}
                        Err(f) => return Err(f.into_store(String::new)),
                    }
                }
            }
        }
        Err(StoreError::Transient(
            format!("run {run_id} or its slots kept changing under {MAX_RMW_ATTEMPTS} claims").into(),
        ))
    }

    /// One claim of [`JobStore::claim`] (neither held nor alone).
    async fn claim_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        let (now, lease_until) = (trunc_ms(now), trunc_ms(lease_until));
        let limits = self.tenant_limits(tenant).await?;
        if limits.quota.max_concurrent_runs.is_some() {
            return self
                .claim_gated(tenant, run_id, worker, now, lease_until, &limits)
                .await;
        }
        // `None`: the run has a concurrency key, so its start needs a slot (a second read).
        let (claimed, _) = self
            .modify_run_as(tenant, run_id, true, |stored| match stored.run.decide_claim(now) {
                ClaimStep::Answer { outcome, changed } => Ok((changed, Some(outcome))),
                ClaimStep::Start if stored.run.concurrency.is_some() => Ok((false, None)),
                ClaimStep::Start => {
                    let token = next_token(stored);
                    Ok((true, Some(start(stored, token, worker, now, lease_until))))
                }
            })
            .await?;
        match claimed {
            Some(outcome) => Ok(outcome),
            None => {
                self.claim_gated(tenant, run_id, worker, now, lease_until, &limits)
                    .await
            }
        }
    }
}
