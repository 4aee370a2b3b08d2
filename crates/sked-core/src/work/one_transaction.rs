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
    /// [`WorkTx::ack`] for each of `receipts`. By default one after the other.
    fn ack_each(&mut self, receipts: &[&Receipt]) -> Result<(), Self::Error> {
        for receipt in receipts {
            self.ack(receipt)?;
        }
        Ok(())
    }
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
    /// The refusal `error` is, if it is one (a decision of a step, made before any write of
    /// it), else `error` itself (a failure of the transaction, which must roll back).
    fn refusal(error: Self::Error) -> Result<StoreError, Self::Error>;
    /// Each of `done` as [`WorkTx::complete`] does it, each on its own and in order: a refused
    /// completion answers its refusal and has written nothing, the others are written. By
    /// default one after the other; a store may write them together (PostgreSQL: a few
    /// statements for the whole group).
    fn complete_each(&mut self, done: &[Completion]) -> Result<Vec<Result<Ended, StoreError>>, Self::Error> {
        let mut answers = Vec::with_capacity(done.len());
        for completion in done {
            answers.push(match self.complete(completion) {
                Ok(ended) => Ok(ended),
                Err(e) => Err(Self::refusal(e)?),
            });
        }
        Ok(answers)
    }
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
    let mut answers = receive_together(tx, std::slice::from_ref(request), now)?;
    Ok(answers.pop().unwrap_or_default())
}

/// [`receive`] for several requests at once (the receives of one process's workers that came
/// together), answered in order: the requests that lease and hold alike take their messages
/// in one take of all their `max`es and claim them in one [`ClaimBatch`](crate::ports::ClaimBatch),
/// each run for the worker of the request it goes to — the first request gets the first
/// messages in serving order, up to its `max`, then the next. Requests that lease or hold
/// otherwise take and claim after them, in the same way.
pub fn receive_together<T>(
    tx: &mut T,
    requests: &[ReceiveRequest],
    now: Timestamp,
) -> Result<Vec<Vec<Received>>, T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let mut answers: Vec<Vec<Received>> = requests.iter().map(|_| Vec::new()).collect();
    let mut served = vec![false; requests.len()];
    for first in 0..requests.len() {
        if served[first] {
            continue;
        }
        let like_first = |r: &ReceiveRequest| r.lease == requests[first].lease && r.hold == requests[first].hold;
        let alike: Vec<usize> = (first..requests.len())
            .filter(|&i| !served[i] && like_first(&requests[i]))
            .collect();
        for &i in &alike {
            served[i] = true;
        }
        let max = alike.iter().map(|&i| requests[i].max).sum();
        let deliveries = tx.take(max, requests[first].lease, now)?;
        if deliveries.is_empty() {
            continue;
        }
        // The request each delivery goes to, in order.
        let takers: Vec<usize> = alike
            .iter()
            .flat_map(|&i| std::iter::repeat_n(i, requests[i].max))
            .take(deliveries.len())
            .collect();
        let mut batch = requests[first].claim_of(&deliveries, now);
        if alike.len() > 1 {
            batch.owners = takers.iter().map(|&i| requests[i].worker.clone()).collect();
        }
        let claims = claim_batch(tx, &batch)?;
        for ((delivery, claim), taker) in deliveries.into_iter().zip(claims).zip(takers) {
            // Refused for its concurrency key: parked on the key in this same transaction, so
            // the end of an attempt holding the key (a later transaction) finds it and wakes it.
            if let Ok(JobClaim::Claimed(ClaimOutcome::KeyAtLimit { key }, _)) = &claim {
                let fallback = now + PARK_FALLBACK.to_chrono();
                tx.park(&delivery.receipt, key, fallback)?;
                continue;
            }
            answers[taker].push(Received { delivery, claim });
        }
    }
    Ok(answers)
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

/// A completion's answer: the run as ended (with what it released), and whether a message
/// became receivable.
pub type Settled = (Ended, bool);

/// The attempt closed, then its delivery settled: a retry's message enqueued (for a queue
/// that keeps one message per run, the delivered one re-armed), and the delivered message
/// acknowledged (a no-op once re-armed); the downstream runs its end released enqueued; then,
/// if the attempt held a concurrency key, the first message parked on the key woken. Answers
/// the run with what it released, and whether a message became receivable (a retry's, a
/// released run's, or one woken), so the caller can wake its receivers. A refusal is an error
/// (the transaction must roll back; nothing was written).
pub fn complete<T>(tx: &mut T, settlement: &Settlement) -> Result<Settled, T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let mut answers = complete_each(tx, std::slice::from_ref(settlement))?;
    answers
        .pop()
        .expect("one answer per settlement")
        .map_err(T::Error::from)
}

/// [`complete`] for each of `settlements`, each on its own, in one transaction (a group
/// commit): a refused one answers its refusal and changes nothing, the others are written —
/// the attempts closed together, then every message to enqueue (retries', released runs')
/// in one enqueue, then the delivered messages acknowledged, then one parked message woken
/// per ended attempt that held a concurrency key, in the order of `settlements`.
pub fn complete_each<T>(tx: &mut T, settlements: &[Settlement]) -> Result<Vec<Result<Settled, StoreError>>, T::Error>
where
    T: WorkTx,
    T::Error: From<StoreError>,
{
    let completions: Vec<Completion> = settlements.iter().map(|s| s.completion.clone()).collect();
    let answers = tx.complete_each(&completions)?;
    let mut dispatches = Vec::new();
    let mut receivable = Vec::with_capacity(answers.len());
    for (settlement, answer) in settlements.iter().zip(&answers) {
        let Ok(ended) = answer else {
            receivable.push(false);
            continue;
        };
        let before = dispatches.len();
        dispatches.extend(ended.to_enqueue().map(Dispatch::from));
        if matches!(settlement.completion.next, RunTransition::Retry { .. }) {
            dispatches.push(Dispatch::from(&ended.run));
        }
        receivable.push(dispatches.len() > before);
    }
    if !dispatches.is_empty() {
        tx.enqueue(&dispatches)?;
    }
    let settled: Vec<&Receipt> = settlements
        .iter()
        .zip(&answers)
        .filter(|(_, answer)| answer.is_ok())
        .map(|(settlement, _)| &settlement.receipt)
        .collect();
    tx.ack_each(&settled)?;
    for ((settlement, answer), receivable) in settlements.iter().zip(&answers).zip(receivable.iter_mut()) {
        // The attempt held a slot of its key: the first run parked on the key takes its turn.
        let Ok(ended) = answer else { continue };
        if let Some(concurrency) = &ended.run.concurrency {
            let finished_at = settlement.completion.result.finished_at;
            *receivable |= tx.wake(&ended.run.tenant, &concurrency.key, 1, finished_at)? > 0;
        }
    }
    Ok(answers
        .into_iter()
        .zip(receivable)
        .map(|(answer, receivable)| answer.map(|ended| (ended, receivable)))
        .collect())
}
