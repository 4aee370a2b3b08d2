//! Dead letters: what to do with a run whose queue message was given up on (on AWS, SQS moved
//! it to the DLQ after `maxReceiveCount` receives). The DLQ handler calls [`dead_letter`] for
//! each message; it is the last backstop, so it ends the run FAILED unless something else
//! still owns it.
//!
//! It uses the worker's own ports and rules — no special store operation:
//!
//! - the run is **claimed** as worker [`DLQ_WORKER`] (so an expired attempt is closed as
//!   worker lost first, a cancel request ends it CANCELLED, a run with no attempt left ends
//!   FAILED — all by the store's usual claim rules), and
//! - the new attempt is at once **completed** FAILED with the reason as its error, and the run
//!   finished FAILED. The run's history thus shows one last zero-length attempt by `sked-dlq`
//!   whose error says why (`dead-lettered after N receives`); `attempts ≤ max_attempts` holds
//!   because claim never starts an attempt past the limit.
//!
//! A run that is not abandoned is left alone, and handed a new message for when it is worth
//! looking at again: one RUNNING under a live lease (a duplicate message was dead-lettered
//! while its worker is fine, or its own message while it runs) for when that lease ends, a
//! PENDING one waiting out a backoff for its time, one waiting for a slot of its tenant's
//! concurrency cap (or of its key) at once. Where the reaper's repair pass reads every run,
//! that message is one more copy; a run fired unwritten on DynamoDB is in no index the reaper
//! reads, and its message is all that finds it should its worker die. A message for a run
//! that no longer exists is dropped.

use super::Ports;
use crate::error::CoreError;
use crate::ids::{RunId, TenantId, WorkerId};
use crate::ports::{
    AttemptResult, ClaimOutcome, Completion, Dispatch, Event, JobStoreExt, Outcome, RunTransition, StoreError,
};
use crate::run::{AttemptOutcome, Run, RunState};
use crate::timestamp::{Timestamp, trunc_ms};

/// The worker id the dead-letter attempt is recorded under.
pub const DLQ_WORKER: &str = "sked-dlq";

/// How long the dead-letter attempt's lease lasts (it is completed at once).
const DLQ_LEASE: chrono::Duration = chrono::Duration::seconds(30);

/// The reason recorded for a run dead-lettered after `receives` receives.
pub fn dead_letter_reason(receives: u32) -> String {
    format!("dead-lettered after {receives} receives")
}

/// What [`dead_letter`] did.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a return value, moved once
pub enum DeadLetterOutcome {
    /// The run ended FAILED now, with the reason on its last attempt.
    Failed(Run),
    /// The run had already ended (or claim rules ended it now: cancelled, no attempt left).
    AlreadyEnded(Run),
    /// A worker holds a live lease on it until this instant: left to that worker.
    StillRunning(Timestamp),
    /// It waits for a retry not before this instant: left to its own dispatch.
    Waiting(Timestamp),
    /// No such run (deleted, expired by TTL, or a message for another deployment).
    Gone,
}

/// Ends the run of a dead-lettered message FAILED with `reason` unless something else still
/// owns it (see the module docs). Store errors are returned: the message should then stay in
/// the DLQ for another try.
pub async fn dead_letter(
    ports: &Ports,
    tenant: &TenantId,
    run_id: &RunId,
    reason: &str,
) -> Result<DeadLetterOutcome, CoreError> {
    let now = trunc_ms(ports.clock.now());
    let worker = WorkerId(DLQ_WORKER.to_string());
    let claimed = ports
        .store
        .claim_one(tenant, run_id, &worker, now, now + DLQ_LEASE)
        .await;
    let (run, token) = match claimed {
        Ok(ClaimOutcome::Claimed { run, token }) => (run, token),
        Ok(ClaimOutcome::Terminal(run)) => return Ok(DeadLetterOutcome::AlreadyEnded(run)),
        Ok(ClaimOutcome::Leased(until)) => {
            hand_on(ports, tenant, run_id, until).await?;
            return Ok(DeadLetterOutcome::StillRunning(until));
        }
        Ok(ClaimOutcome::NotYet(at)) => {
            hand_on(ports, tenant, run_id, at).await?;
            return Ok(DeadLetterOutcome::Waiting(at));
        }
        // Due, but its tenant is at its concurrency cap or its key at its limit: not abandoned.
        Ok(ClaimOutcome::AtCapacity | ClaimOutcome::KeyAtLimit { .. }) => {
            hand_on(ports, tenant, run_id, now).await?;
            return Ok(DeadLetterOutcome::Waiting(now));
        }
        Err(StoreError::NotFound) => return Ok(DeadLetterOutcome::Gone),
        Err(e) => return Err(e.into()),
    };
    let result = AttemptResult {
        finished_at: now,
        outcome: AttemptOutcome::Failed,
        exit_code: None,
        http_status: None,
        error: Some(reason.to_string()),
        log_bytes: 0,
        log_truncated: false,
    };
    let ended = ports
        .store
        .complete(&Completion {
            tenant: tenant.clone(),
            run_id: run.run_id.clone(),
            token,
            result,
            next: RunTransition::Finish(RunState::Failed),
            only_if_expired_by: None,
        })
        .await?;
    super::enqueue_released(ports, &ended).await;
    let failed = ended.run;
    tracing::warn!(%tenant, job_id = %failed.job_id, %run_id, attempt = failed.attempt_count(), reason, "run failed: its message was dead-lettered");
    if let Some(outcome) = Outcome::of(failed.state) {
        ports.observe(Event::Finished { tenant, outcome });
    }
    Ok(DeadLetterOutcome::Failed(failed))
}

/// Hands a run the dead-letter handler leaves alone a new message, due `at` (see the module
/// docs). A failure is returned: the dead letter stays for another try.
async fn hand_on(ports: &Ports, tenant: &TenantId, run_id: &RunId, at: Timestamp) -> Result<(), CoreError> {
    let Some(run) = ports.store.get_run(tenant, run_id).await? else {
        return Ok(());
    };
    let mut dispatch = Dispatch::from(&run);
    dispatch.not_before = at;
    ports.queue.enqueue(&[dispatch]).await?;
    Ok(())
}
