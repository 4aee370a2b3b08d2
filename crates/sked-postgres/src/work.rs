//! [`PgWork`]: the [`WorkPort`] of the self-hosted deployment, where the dispatch queue is a
//! table of the store's database: each step is one transaction over both, running
//! [`sked_core::work::one_transaction`]'s step on `PgTx`, as SQLite's work port does.
//!
//! - `fire`: the firings' runs and their messages written together, so a crash can never
//!   leave a written run unqueued.
//! - `receive`: messages leased (`FOR UPDATE SKIP LOCKED`: receives on many hosts take
//!   disjoint messages and never wait for one another) and their runs claimed (jobs read,
//!   overlap holds, tenant caps, concurrency keys, fencing tokens) in the transaction that
//!   takes them; a run refused for its full concurrency key is parked on the key in it. The
//!   receives of a process's workers that come at about the same time are taken and claimed
//!   together (`receive_group`: one transaction, each run for its own worker). One that finds
//!   nothing then waits: the queue's long poll (`LISTEN`/`NOTIFY`, one waiter per process).
//! - `heartbeat`: the run's lease and its message's visibility renewed together.
//! - `complete`: the attempt closed, the released runs and a retry's message enqueued, the
//!   delivered message acknowledged and the first message parked on the attempt's key woken,
//!   together; a fenced completion changes nothing. The completions that come at about the
//!   same time are written in one transaction, each on its own (`group`: group commit).
//!
//! Every transaction that makes a message receivable notifies the listeners in itself (the
//! queue's `insert_dispatches` and `wake_parked` call `pg_notify`), so the notification is
//! delivered at, and only at, its commit — to the waiting receives of every host.
//!
//! # Isolation: READ COMMITTED under one lock discipline
//!
//! Every step is `READ COMMITTED` and takes, before it decides, the locks of
//! [`crate::locks`] — the ones every other path that claims or ends a run takes too
//! ([`crate::PgStore`]'s claims, which the worker uses for held runs, deliveries that came
//! early and the dead-letter pass; its completions, heartbeats, cancels and the sweeper's
//! firings; the releases of downstream runs). What rests on it:
//! - no double claim, and fencing: a claim (or completion, or heartbeat) reads its run with
//!   `FOR UPDATE`, so two transactions deciding on one run decide one after the other, the
//!   second on the row the first committed; a claim hands out `last_token + 1`.
//! - the limits a claim checks by counting rows — a tenant's cap on running attempts, a
//!   concurrency key's slots, a `queue_one` job's other runs: the claim holds an advisory lock
//!   on what it counts (taken with the batch's others, sorted) before it counts, so racing
//!   claims count one after the other and never each see the other's slot free. A
//!   completion takes its key's lock before it wakes a message parked on the key, so a claim
//!   that parks one commits first (and is woken) or counts after the slot was freed.
//! - a downstream occurrence decided once: two upstreams ending at once lock the occurrence
//!   ([`sked_core::dependency::DependencyTx::lock_occurrence`]) before deciding it.
//! - nothing lost: a step's writes to runs and messages commit together or not at all; a
//!   step PostgreSQL aborts for a deadlock (40P01: rare, between paths that take one lock at a
//!   time) is run again whole ([`PgDb::locking_transaction`]).
//!
//! `SERIALIZABLE` remains for the store's other writes (jobs, quotas, keys), which are rare.
//! PostgreSQL's serializable checks do not see what a `READ COMMITTED` transaction reads or
//! writes, so those writes hold against these steps only where they write the same row (an
//! update of a job a firing locked: the second writer waits, and the `SERIALIZABLE` one is
//! aborted and run again if the row changed since its snapshot); none of them decides on an
//! existing run, a key's slots or a cap.
//!
//! Measured on a 2-core machine (`tests/work_contract.rs`, `drain_under_four_hosts`: four
//! pools, four receivers each, batches of 10, 2,000 runs of 20 jobs of one tenant): 1.9–3.5 s
//! (load average 3–7) with no transaction aborted, where the same drain at `SERIALIZABLE`
//! took 5.8 s (6–9 s earlier) with 579 transactions aborted (650–740 earlier) and 3 steps
//! answering [`StoreError::Transient`] after running out of [`crate::tx::MAX_TRIES`]. The
//! contract cases that race claims of a key's last slot and of a capped tenant's, and the
//! ends of a fan-in's two upstreams, fail without the advisory locks (checked by removing
//! them), as does this crate's `receives_on_several_hosts_claim_a_key_s_last_slot_once`.

use crate::db::PgDb;
use crate::group::CompletionGroups;
use crate::locks::{advisory_locks, key_lock};
use crate::queue::{
    Poller, delete_all_delivered, delete_delivered, extend_delivered, insert_dispatches, park_delivered, receipt_seq,
    take_visible, wake_parked,
};
use crate::receive_group::ReceiveGroups;
use crate::store::{LeaseRenewal, PgTx, apply_firings, finish_attempt, finish_attempts, renew_lease};
use crate::tx::{Isolation, Tx, TxError};
use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::{
    Clock, Completion, Delivery, Dispatch, Ended, Firing, Receipt, ReceiveRequest, Received, Settlement, StoreError,
    WorkError, WorkPort,
};
use sked_core::run::Run;
use sked_core::timestamp::{Timestamp, trunc_ms};
use sked_core::work::{WorkTx, one_transaction};
use std::sync::Arc;

/// The work port over one PostgreSQL database holding both the store ([`crate::PgStore`])
/// and the queue ([`crate::PgQueue`]).
pub struct PgWork {
    /// The shared pool.
    db: PgDb,
    /// Time of claims, leases and visibility.
    clock: Arc<dyn Clock>,
    /// The long poll of receives (one waits at a time in this process).
    poller: Poller,
    /// Completions that come at once, written in one transaction.
    completions: CompletionGroups,
    /// Receives that come at once, taken and claimed in one transaction.
    receives: ReceiveGroups,
}

impl std::fmt::Debug for PgWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWork").field("db", &self.db).finish_non_exhaustive()
    }
}

impl PgWork {
    /// The work port over `db` (whose store is a [`crate::PgStore`] and whose queue a
    /// [`crate::PgQueue`], on this pool or another), timed by `clock`. Opens its `LISTEN`
    /// connection in the background: must be called within a Tokio runtime.
    pub fn new(db: PgDb, clock: Arc<dyn Clock>) -> Self {
        let poller = Poller::new(db.clone(), clock.clone());
        let completions = CompletionGroups::new(db.clone());
        let receives = ReceiveGroups::new(db.clone(), clock.clone());
        PgWork {
            db,
            clock,
            poller,
            completions,
            receives,
        }
    }

    /// Polls every `interval` (real time) while a receive waits, whatever the notifications
    /// say, instead of every [`crate::queue::DEFAULT_FALLBACK_POLL`].
    pub fn with_fallback_poll(mut self, interval: std::time::Duration) -> Self {
        self.poller.fallback_poll = interval;
        self
    }

    /// Runs `step`, which follows the lock discipline of [`crate::locks`], in one `READ
    /// COMMITTED` transaction (run again whole if PostgreSQL aborts it for a deadlock, rolled
    /// back if it fails).
    async fn step<T, F>(&self, mut step: F) -> Result<T, WorkError>
    where
        T: Send + 'static,
        F: FnMut(&mut PgTx<'_>) -> Result<T, TxError> + Send + 'static,
    {
        self.db
            .locking_transaction(move |tx| step(&mut PgTx(tx)))
            .await
            .map_err(|e| WorkError::Store(e.into_store()))
    }
}

/// Runs `step` on the message a `receipt` names if the receipt is well formed (one that is
/// not names no current delivery: `false`).
fn on_receipt(
    tx: &mut Tx,
    receipt: &Receipt,
    step: impl FnOnce(&mut Tx, i64, &str) -> Result<bool, TxError>,
) -> Result<bool, TxError> {
    match receipt_seq(receipt) {
        Some(seq) => step(tx, seq, &receipt.0),
        None => Ok(false),
    }
}

impl WorkTx for PgTx<'_> {
    fn fire(&mut self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, TxError> {
        apply_firings(self.0, firings)
    }

    fn take(&mut self, max: usize, visibility: Dur, now: Timestamp) -> Result<Vec<Delivery>, TxError> {
        take_visible(self.0, max, visibility, now)
    }

    fn enqueue(&mut self, items: &[Dispatch]) -> Result<(), TxError> {
        insert_dispatches(self.0, items)
    }

    fn ack(&mut self, receipt: &Receipt) -> Result<bool, TxError> {
        on_receipt(self.0, receipt, delete_delivered)
    }

    fn extend(&mut self, receipt: &Receipt, until: Timestamp) -> Result<bool, TxError> {
        on_receipt(self.0, receipt, |tx, seq, receipt| {
            extend_delivered(tx, seq, receipt, until)
        })
    }

    fn renew_lease(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, TxError> {
        let renewal = LeaseRenewal {
            tenant: tenant.as_str(),
            run_id: run_id.as_str(),
            token,
            now,
            lease_until,
        };
        renew_lease(self.0, renewal)
    }

    fn complete(&mut self, done: &Completion) -> Result<Ended, TxError> {
        finish_attempt(self.0, done)
    }

    fn refusal(error: TxError) -> Result<StoreError, TxError> {
        match error {
            TxError::Store(refusal) => Ok(refusal),
            error => Err(error),
        }
    }

    fn complete_each(&mut self, done: &[Completion]) -> Result<Vec<Result<Ended, StoreError>>, TxError> {
        finish_attempts(self.0, done)
    }

    fn ack_each(&mut self, receipts: &[&Receipt]) -> Result<(), TxError> {
        delete_all_delivered(self.0, receipts)
    }

    fn park(&mut self, receipt: &Receipt, key: &str, fallback: Timestamp) -> Result<bool, TxError> {
        on_receipt(self.0, receipt, |tx, seq, receipt| {
            park_delivered(tx, seq, receipt, key, fallback)
        })
    }

    /// The key locked first (`locks`): a claim that found the key full and parks its message
    /// commits before this looks for parked messages, or counts after this commits.
    fn wake(&mut self, tenant: &TenantId, key: &str, n: usize, now: Timestamp) -> Result<usize, TxError> {
        advisory_locks(self.0, vec![key_lock(tenant.as_str(), key)])?;
        wake_parked(self.0, tenant.as_str(), key, n, now)
    }
}

#[async_trait]
impl WorkPort for PgWork {
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError> {
        if firings.is_empty() {
            return Ok(Vec::new());
        }
        let firings = firings.to_vec();
        // The enqueue notifies the listeners in this transaction.
        self.step(move |tx| one_transaction::fire(tx, &firings)).await
    }

    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError> {
        if request.max == 0 {
            return Ok(Vec::new());
        }
        let deadline = self.clock.now() + request.wait.to_chrono();
        // The first look with the receives of this process that come at the same time.
        match self.receives.receive(request.clone()).await {
            Ok(got) if !got.is_empty() || request.wait.is_zero() => return Ok(got),
            Ok(_) => {}
            // The database is away: the wait below looks again once its listener is back.
            Err(StoreError::Transient(_)) if !request.wait.is_zero() => {}
            Err(e) => return Err(WorkError::Store(e)),
        }
        let stop = request.stop.clone();
        let request = request.clone();
        self.poller
            .wait_then_take(Isolation::ReadCommitted, deadline, Some(&stop), move |tx, now| {
                one_transaction::receive(&mut PgTx(tx), &request, trunc_ms(now))
            })
            .await
            .map_err(|e| WorkError::Store(e.into_store()))
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        receipt: &Receipt,
        lease: Dur,
    ) -> Result<(Run, Timestamp), WorkError> {
        let now = trunc_ms(self.clock.now());
        let until = now + lease.to_chrono();
        let (tenant, run_id, receipt) = (tenant.clone(), run_id.clone(), receipt.clone());
        let run = self
            .step(move |tx| one_transaction::heartbeat(tx, (&tenant, &run_id, token), &receipt, now, until))
            .await?;
        Ok((run, until))
    }

    async fn complete(&self, settlement: &Settlement) -> Result<Ended, WorkError> {
        // Written with the completions that come at the same time, in one transaction. A
        // retry's message, a released run's or a woken one notifies the listeners in it (the
        // enqueue and the wake do), so whether one became receivable is not needed here.
        let (ended, _receivable) = self.completions.complete(settlement.clone()).await?;
        Ok(ended)
    }
}
