//! [`SqliteWork`]: the [`WorkPort`] of the local deployment, where the dispatch queue is a
//! table of the store's database: each step is one `BEGIN IMMEDIATE` transaction over both,
//! running [`sked_core::work::one_transaction`]'s step on `SqliteTx`.
//!
//! - `fire`: the firings' runs and their messages written together, so a crash can never
//!   leave a written run unqueued, and a sweep costs one write.
//! - `receive`: messages leased and their runs claimed (jobs read, overlap holds, fencing
//!   tokens) in the transaction that takes them — a worker under load makes one round trip
//!   per batch. Waiting is the queue's long poll (`Poller`).
//! - `heartbeat`: the run's lease and its message's visibility renewed together.
//! - `complete`: the attempt closed and its message removed (the run ends) or re-armed at
//!   the retry's `not_before` (the run retries), together; a fenced completion rolls back.
//!
//! The workers of a process wired to one [`SqliteWork`] share its long poll: while messages
//! keep coming they take at once (the writer commits their transactions together); once
//! none are left, one of them at a time looks and waits, so an enqueue wakes one poller, not
//! every idle worker.

use super::codec::ms;
use super::db::SqliteDb;
use super::error::TxError;
use super::queue::{
    Poller, delete_delivered, insert_dispatches, park_delivered, receipt_seq, take_visible, wake_parked,
};
use super::store::{SqliteTx, apply_firings, finish_attempt, renew_lease};
use async_trait::async_trait;
use rusqlite::params;
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

/// The work port over one SQLite database holding both the store and the queue.
pub struct SqliteWork {
    /// The shared database.
    db: Arc<SqliteDb>,
    /// Time of claims, leases and visibility.
    clock: Arc<dyn Clock>,
    /// The long poll of receives (one waits at a time).
    poller: Poller,
}

impl std::fmt::Debug for SqliteWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteWork")
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl SqliteWork {
    /// The work port over `db` (whose store is a [`super::SqliteStore`] and whose queue a
    /// [`super::SqliteQueue`]), timed by `clock`.
    pub fn new(db: Arc<SqliteDb>, clock: Arc<dyn Clock>) -> Self {
        let poller = Poller::new(db.clone(), clock.clone());
        SqliteWork { db, clock, poller }
    }

    /// Runs `step` in one write transaction (rolled back if it fails).
    async fn step<T, F>(&self, mut step: F) -> Result<T, WorkError>
    where
        T: Send + 'static,
        F: FnMut(&mut SqliteTx<'_>) -> Result<T, TxError> + Send + 'static,
    {
        self.db
            .write(move |conn| step(&mut SqliteTx(conn)))
            .await
            .map_err(|e| WorkError::Store(e.into_store()))
    }
}

impl WorkTx for SqliteTx<'_> {
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
        match receipt_seq(receipt) {
            Some(seq) => delete_delivered(self.0, seq, &receipt.0),
            None => Ok(false),
        }
    }

    fn extend(&mut self, receipt: &Receipt, until: Timestamp) -> Result<bool, TxError> {
        let Some(seq) = receipt_seq(receipt) else {
            return Ok(false);
        };
        let n = self
            .0
            .prepare_cached("UPDATE dispatch SET visible_at = ?3 WHERE seq = ?1 AND receipt = ?2")?
            .execute(params![seq, receipt.0, ms(until)])?;
        Ok(n > 0)
    }

    fn renew_lease(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, TxError> {
        renew_lease(self.0, tenant.as_str(), run_id.as_str(), token, now, lease_until)
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

    fn park(&mut self, receipt: &Receipt, key: &str, fallback: Timestamp) -> Result<bool, TxError> {
        match receipt_seq(receipt) {
            Some(seq) => park_delivered(self.0, seq, &receipt.0, key, fallback),
            None => Ok(false),
        }
    }

    fn wake(&mut self, tenant: &TenantId, key: &str, n: usize, now: Timestamp) -> Result<usize, TxError> {
        wake_parked(self.0, tenant.as_str(), key, n, now)
    }
}

#[async_trait]
impl WorkPort for SqliteWork {
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError> {
        let firings = firings.to_vec();
        let answers = self.step(move |tx| one_transaction::fire(tx, &firings)).await?;
        if answers.iter().flatten().any(|runs| !runs.is_empty()) {
            self.db.notify_enqueued();
        }
        Ok(answers)
    }

    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError> {
        if request.max == 0 {
            return Ok(Vec::new());
        }
        let stop = request.stop.clone();
        let request = request.clone();
        self.poller
            .poll(request.wait, Some(&stop), move |conn, now| {
                one_transaction::receive(&mut SqliteTx(conn), &request, trunc_ms(now))
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
        let settlement = settlement.clone();
        let (ended, receivable) = self.step(move |tx| one_transaction::complete(tx, &settlement)).await?;
        // A retry's message, a released run's, or a message woken on the run's concurrency key.
        if receivable {
            self.db.notify_enqueued();
        }
        Ok(ended)
    }
}
