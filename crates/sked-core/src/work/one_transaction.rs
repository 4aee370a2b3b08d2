//! The steps of the [`WorkPort`](crate::ports::WorkPort) where the queue is a table of the
//! store's database, each to be run inside one transaction ([`WorkTx`]): what happens in each
//! step and in what order is decided here, once, for every such adapter. A refusal (a fenced
//! completion or heartbeat) comes before any write of its step and fails the step, so a
//! transaction that rolls back on error — or a memory one that has written nothing yet —
//! changes nothing.

use crate::attempt::{ClaimOutcome, RunTransition};
use crate::duration::Dur;
use crate::ids::{RunId, TenantId};
use crate::lifecycle::{ClaimTx, claim_batch};
use crate::ports::{
    Completion, Delivery, Dispatch, Ended, Firing, JobClaim, Receipt, ReceiveRequest, Received, Settlement, StoreError,
};
use crate::run::Run;
use crate::timestamp::Timestamp;

/// One transaction over a store and the queue kept beside it: the store's writes (as
/// [`crate::ports::JobStore`] describes them) and the queue's (as
/// [`crate::ports::DispatchQueue`] does), on the transaction's own view. A refusal is
/// `Err(StoreError)` converted into the transaction's error, which must make it roll back.
pub trait WorkTx: ClaimTx
where
    Self::Error: From<StoreError>,
{
    /// [`crate::ports::JobStore::fire`].
    fn fire(&mut self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, Self::Error>;
    /// Leases up to `max` messages visible at `now` for `visibility`, in serving order.
    fn take(&mut self, max: usize, visibility: Dur, now: Timestamp) -> Result<Vec<Delivery>, Self::Error>;
    /// [`crate::ports::DispatchQueue::enqueue`].
    fn enqueue(&mut self, items: &[Dispatch]) -> Result<(), Self::Error>;
    /// Removes the delivered message if `receipt` is still its current delivery; whether it
    /// did.
    fn ack(&mut self, receipt: &Receipt) -> Result<bool, Self::Error>;
    /// Keeps the delivered message invisible until `until` if `receipt` is still its current
    /// delivery; whether it did.
    fn extend(&mut self, receipt: &Receipt, until: Timestamp) -> Result<bool, Self::Error>;
    /// [`crate::ports::JobStore::heartbeat`]; a refusal is an error.
    fn renew_lease(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, Self::Error>;
    /// [`crate::ports::JobStore::complete`]; a refusal is an error.
    fn complete(&mut self, done: &Completion) -> Result<Ended, Self::Error>;
    /// Sets the delivered message aside on its tenant's concurrency `key` if `receipt` is still
    /// its current delivery (whether it was): no longer leased, not receivable before
    /// `fallback` unless [`WorkTx::wake`] wakes it first, its place in the serving order
    /// kept. A later enqueue of its run un-parks it as it re-arms any message.
    fn park(&mut self, receipt: &Receipt, key: &str, fallback: Timestamp) -> Result<bool, Self::Error>;
    /// Makes the first `n` messages parked on `tenant`'s `key` (in serving order) receivable
    /// at `now`; how many it woke.
    fn wake(&mut self, tenant: &TenantId, key: &str, n: usize, now: Timestamp) -> Result<usize, Self::Error>;
}

/// How long a message parked on a full concurrency key waits at most before its run's claim
/// is tried again, though no wake came: the bound on a slot left unused by a wake that never
/// came (the attempt holding it was abandoned rather than ended, or it ended between the
/// claim that was refused and the park).
pub const PARK_FALLBACK: Dur = Dur::secs(5);

/// A sweep's firings and their runs' messages.
pub fn fire<T>(tx: &mut T, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let answers = tx.fire(firings)?;
    let dispatches: Vec<Dispatch> = answers.iter().flatten().flatten().map(Dispatch::from).collect();
    if !dispatches.is_empty() {
        tx.enqueue(&dispatches)?;
    }
    Ok(answers)
}

/// Messages visible at `now` leased, and their runs claimed at `now` (jobs read, runs whose
/// job's policy is in `request.hold` held back).
pub fn receive<T>(tx: &mut T, request: &ReceiveRequest, now: Timestamp) -> Result<Vec<Received>, T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let deliveries = tx.take(request.max, request.lease, now)?;
    if deliveries.is_empty() {
        return Ok(Vec::new());
    }
    let claims = claim_batch(tx, &request.claim_of(&deliveries, now))?;
    let mut out = Vec::with_capacity(deliveries.len());
    for (delivery, claim) in deliveries.into_iter().zip(claims) {
        // Refused for its concurrency key: parked on the key in this same transaction, so the
        // end of an attempt holding the key (a later transaction) finds it and wakes it.
        if let Ok(JobClaim::Claimed(ClaimOutcome::KeyAtLimit { key }, _)) = &claim {
            let fallback = now + PARK_FALLBACK.to_chrono();
            tx.park(&delivery.receipt, key, fallback)?;
            continue;
        }
        out.push(Received { delivery, claim });
    }
    Ok(out)
}

/// The attempt's lease renewed until `until`, and its message kept invisible as long.
pub fn heartbeat<T>(
    tx: &mut T,
    (tenant, run_id, token): (&TenantId, &RunId, u64),
    receipt: &Receipt,
    now: Timestamp,
    until: Timestamp,
) -> Result<Run, T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let run = tx.renew_lease(tenant, run_id, token, now, until)?;
    tx.extend(receipt, until)?;
    Ok(run)
}

/// The attempt closed, then its delivery settled: a retry's message enqueued (for a queue
/// that keeps one message per run, the delivered one re-armed), and the delivered message
/// acknowledged (a no-op once re-armed); the downstream runs its end released enqueued; then,
/// if the attempt held a concurrency key, the first message parked on the key woken. Answers
/// the run with what it released, and whether a message became receivable (a retry's, a
/// released run's, or one woken), so the caller can wake its receivers.
pub fn complete<T>(tx: &mut T, settlement: &Settlement) -> Result<(Ended, bool), T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let ended = tx.complete(&settlement.completion)?;
    let run = &ended.run;
    let retry = matches!(settlement.completion.next, RunTransition::Retry { .. });
    let mut dispatches: Vec<Dispatch> = ended.to_enqueue().map(Dispatch::from).collect();
    let released = !dispatches.is_empty();
    if retry {
        dispatches.push(Dispatch::from(run));
    }
    if !dispatches.is_empty() {
        tx.enqueue(&dispatches)?;
    }
    tx.ack(&settlement.receipt)?;
    // The attempt held a slot of its key: the first run parked on the key takes its turn.
    let woken = match &run.concurrency {
        Some(concurrency) => tx.wake(
            &run.tenant,
            &concurrency.key,
            1,
            settlement.completion.result.finished_at,
        )?,
        None => 0,
    };
    let receivable = retry || released || woken > 0;
    Ok((ended, receivable))
}
