//! Transactions the rules of `sked-core` drive: [`PgDb::transaction`] runs a closure on a
//! blocking thread with a [`Tx`] whose statements block on the async connection, so the
//! core's synchronous transaction traits (`ClaimTx`, `DependencyTx`, `WorkTx`) are implemented
//! here as they are for SQLite, and the decisions stay written once in `sked-core`.
//!
//! Transactions are `SERIALIZABLE` unless the caller asks otherwise ([`PgDb::transaction`]): a
//! closure reads, decides and writes as if it were alone — the guarantee the SQLite store gets
//! from its file lock — and PostgreSQL aborts the one that would break that (SQLSTATE 40001).
//! The run's hand-over instead runs at `READ COMMITTED` ([`PgDb::locking_transaction`]) and
//! locks what it decides on ([`crate::locks`]), which aborts nothing but a rare deadlock
//! (40P01). Either way the closure is then run again from the start on a new transaction, up
//! to [`MAX_TRIES`] times — as it is when its pooled connection turns out dead before the
//! `COMMIT` was sent (the server restarted since it was last used). A closure must therefore depend only on what it captured and what
//! it reads in its transaction (`FnMut`). Answers are returned only after `COMMIT` succeeded.

use crate::codec::RunRow;
use crate::db::{PgDb, PoolError};
use crate::locks::LockedForClaims;
use deadpool_postgres::Object;
use sked_core::ports::StoreError;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

/// Most runs of one transaction's closure before its serialization failure is returned (as
/// [`StoreError::Transient`]).
pub const MAX_TRIES: u32 = 20;

/// A transaction's isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// As if alone: the default for anything that reads, decides and writes.
    Serializable,
    /// Each statement sees what committed before it; for writes whose conditions are in the
    /// statements themselves (`UPDATE … WHERE`, `FOR UPDATE SKIP LOCKED`).
    ReadCommitted,
}

impl Isolation {
    /// What opens the transaction (sent in one round trip with its first statement).
    ///
    /// The hand-over's transactions (`READ COMMITTED`) find and lock rows by key — runs, jobs,
    /// messages, often a batch of keys joined from `unnest` — so they plan without sequential
    /// scans wherever an index serves. Their statements are prepared once per connection; in a
    /// database that fills fast (a burst into a new deployment, before autovacuum's first
    /// `ANALYZE`), a plan made while `runs` held a few hundred rows scanned the whole table
    /// for each batch's keys once it held thousands (hash joins over `unnest`: most of the
    /// server's time in a 5,000-run burst; see BENCHMARKS.md). They plan generically
    /// (`plan_cache_mode = force_generic_plan`): every run key is looked up by all its columns
    /// (`codec::RUN_KEYS_IN`, tested on a plan made on an empty `runs`), and every partial
    /// index they use is named by literals a generic plan can match, so the plan made on the
    /// first execution serves whatever the table holds — where PostgreSQL's own choice
    /// (`auto`) planned most executions again (~25% of the statements' time in a 20,000-run
    /// burst, `pg_stat_statements`). Forcing custom plans planned every one (~28%).
    fn begin(self) -> &'static str {
        match self {
            Isolation::Serializable => "BEGIN ISOLATION LEVEL SERIALIZABLE",
            Isolation::ReadCommitted => {
                "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL enable_seqscan = off; SET LOCAL plan_cache_mode = force_generic_plan"
            }
        }
    }
}

/// A transaction's failure: a refusal decided inside it (rolled back, returned as is), or the
/// database's.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// A decision of the closure (not found, conflict, fenced, …).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A statement failed.
    #[error("PostgreSQL: {}", describe(.0))]
    Pg(#[from] tokio_postgres::Error),
    /// No connection could be had.
    #[error("PostgreSQL connection: {0}")]
    Pool(#[from] PoolError),
    /// A value could not be encoded or decoded.
    #[error("codec: {0}")]
    Codec(String),
}

impl TxError {
    /// Whether running the closure again on a new transaction may succeed.
    fn is_retryable(&self) -> bool {
        matches!(self, TxError::Pg(e) if lost_a_race(e))
    }

    /// Whether the connection it ran on is gone: closed, terminated by the server (a restart:
    /// SQLSTATE 57P01) or failed underneath. The pool hands out such a connection until it
    /// has noticed (an idle connection learns of a restart only when next used).
    fn is_dead_connection(&self) -> bool {
        matches!(self, TxError::Pg(e) if e.is_closed()
            || e.code() == Some(&SqlState::ADMIN_SHUTDOWN)
            || io_underneath(e))
    }

    /// Whether it is transient: a pool that could not hand out a connection, a lost
    /// connection (closed, or an I/O error underneath), a database that refuses connections,
    /// is short of resources or is shutting down (SQLSTATE classes 08, 53, 57P), or a
    /// transaction that kept losing races.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            TxError::Pool(_) => true,
            TxError::Pg(e) => {
                let unavailable = |code: &str| ["08", "53", "57P"].iter().any(|class| code.starts_with(class));
                e.is_closed() || lost_a_race(e) || e.code().is_some_and(|c| unavailable(c.code())) || io_underneath(e)
            }
            TxError::Store(_) | TxError::Codec(_) => false,
        }
    }

    /// As a port's error: refusals as they are; a transient failure ([`TxError::is_transient`])
    /// as [`StoreError::Transient`] (the API answers 503); anything else — a failed statement,
    /// a row that does not decode — is `Other`.
    pub fn into_store(self) -> StoreError {
        let transient = self.is_transient();
        match self {
            TxError::Store(e) => e,
            TxError::Pool(e) => StoreError::Transient(Box::new(e)),
            TxError::Pg(e) if transient => StoreError::Transient(Box::new(e)),
            TxError::Pg(e) => StoreError::Other(Box::new(e)),
            TxError::Codec(e) => StoreError::Other(e.into()),
        }
    }
}

/// The server's own message when there is one (tokio-postgres's `Display` says only "db
/// error" and keeps it in the source), else the error as it displays.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// Whether the connection failed underneath: an I/O error (refused, reset, timed out).
fn io_underneath(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// A serialization failure or a deadlock: PostgreSQL aborted this transaction for another's.
fn lost_a_race(e: &tokio_postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
    )
}

impl From<TxError> for StoreError {
    fn from(e: TxError) -> Self {
        e.into_store()
    }
}

/// One open transaction, used from a blocking thread: each statement blocks on the async
/// connection (prepared once per connection and cached).
pub struct Tx {
    client: Object,
    handle: Handle,
    /// The `BEGIN` not sent yet: it goes with the first statement, in its round trip.
    begin: Option<&'static str>,
    /// What a claim batch's lock step read ([`crate::locks::lock_claims`]).
    pub(crate) claims: LockedForClaims,
    /// Jobs (tenant, id) that this transaction saw no `after` edge from when it locked runs
    /// of them to end them ([`crate::locks::lock_runs_to_end`]): their ends release nothing.
    pub(crate) no_downstream: HashSet<(String, String)>,
    /// Writes this transaction made and has not sent yet: sent in the round trip of its next
    /// statement, or of its `COMMIT`, ahead of it.
    unsent: Unsent,
    /// The tenant a receive on this pool last found alone in the queue ([`PgDb`]'s).
    pub(crate) alone_in_queue: Arc<Mutex<Option<String>>>,
}

/// Writes whose answer no decision waits for, held until the transaction's next statement
/// (or its `COMMIT`) and sent in its round trip, ahead of it: what that statement reads sees
/// them, as if each had been sent at once, and a claim batch or a completion group costs one
/// round trip for its runs, its acknowledgements and its `COMMIT` together.
#[derive(Default)]
struct Unsent {
    /// Runs written ([`Tx::write_run`]): one `UPDATE` for all.
    runs: Vec<RunRow>,
    /// Delivered messages acknowledged, as (seq, receipt) ([`Tx::ack_later`]): one `DELETE`.
    acks: Vec<(i64, String)>,
}

/// What goes ahead of a transaction's next statement: its `BEGIN` if none was sent, and its
/// unsent writes with their prepared statements.
struct Ahead {
    begin: Option<&'static str>,
    writes: Unsent,
    update_runs: Option<Statement>,
    delete_acked: Option<Statement>,
}

impl Tx {
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.handle.block_on(f)
    }

    /// The statement, prepared on this connection once (outside the transaction the first
    /// time: preparing changes no data).
    fn prepare(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        self.block_on(self.client.prepare_cached(sql))
    }

    /// What must go ahead of the next statement (taken: it is sent with that statement).
    fn take_ahead(&mut self) -> Result<Ahead, TxError> {
        let writes = std::mem::take(&mut self.unsent);
        let update_runs = (!writes.runs.is_empty())
            .then(|| self.prepare(crate::codec::UPDATE_RUNS))
            .transpose()?;
        let delete_acked = (!writes.acks.is_empty())
            .then(|| self.prepare(crate::queue::DELETE_DELIVERED))
            .transpose()?;
        Ok(Ahead {
            begin: self.begin.take(),
            writes,
            update_runs,
            delete_acked,
        })
    }

    /// Runs a statement's request with what goes `ahead` of it in one round trip: every
    /// request is written before any answer is read (`biased` polls them in order, so they are
    /// sent in order, and the server runs them in order). The first error in that order is the
    /// answer (a statement after a failed one fails only because the transaction aborted).
    fn run<T>(
        &self,
        ahead: Ahead,
        statement: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, TxError> {
        let Ahead {
            begin,
            writes,
            update_runs,
            delete_acked,
        } = ahead;
        if begin.is_none() && update_runs.is_none() && delete_acked.is_none() {
            return Ok(self.block_on(statement)?);
        }
        let runs = RunRow::update_columns(&writes.runs);
        let run_params = runs.params();
        let (seqs, receipts): (Vec<i64>, Vec<&str>) = writes.acks.iter().map(|(s, r)| (*s, r.as_str())).unzip();
        let client = &self.client;
        let (began, updated, acked, answer) = self.block_on(async {
            tokio::join!(
                biased;
                async {
                    match begin {
                        Some(begin) => client.batch_execute(begin).await,
                        None => Ok(()),
                    }
                },
                async {
                    match &update_runs {
                        Some(update) => client.execute(update, &run_params).await,
                        None => Ok(0),
                    }
                },
                async {
                    match &delete_acked {
                        Some(delete) => client.execute(delete, &[&seqs, &receipts]).await.map(drop),
                        None => Ok(()),
                    }
                },
                statement
            )
        });
        began?;
        // Every run written was read in this transaction (and matched on its own key): a
        // write that finds no row is a fault, never a write to drop silently.
        let updated = updated?;
        if update_runs.is_some() && updated != writes.runs.len() as u64 {
            return Err(TxError::Codec(format!(
                "{} runs written, {updated} rows matched",
                writes.runs.len()
            )));
        }
        acked?;
        Ok(answer?)
    }

    /// Overwrites a run's stored row ([`crate::codec::UPDATE_RUNS`]) — sent with the other
    /// runs written before the transaction's next statement (or its commit), in its round
    /// trip. A later write of the same run replaces this one.
    pub(crate) fn write_run(&mut self, row: RunRow) {
        match self.unsent.runs.iter_mut().find(|unsent| unsent.same_run(&row)) {
            Some(unsent) => *unsent = row,
            None => self.unsent.runs.push(row),
        }
    }

    /// Acknowledges the delivered message `seq` if `receipt` is still its current delivery
    /// ([`crate::queue::DELETE_DELIVERED`]) — sent with the other acknowledgements before the
    /// transaction's next statement (or its commit), in its round trip.
    pub(crate) fn ack_later(&mut self, seq: i64, receipt: &str) {
        self.unsent.acks.push((seq, receipt.to_string()));
    }

    /// Runs `sql`, answering every row.
    pub fn query(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, TxError> {
        let stmt = self.prepare(sql)?;
        let ahead = self.take_ahead()?;
        self.run(ahead, self.client.query(&stmt, params))
    }

    /// Runs two statements that do not depend on each other in one round trip (the `first`
    /// sent, and run, before the `second`), answering the rows of each.
    pub fn query_pair(
        &mut self,
        first: (&str, &[&(dyn ToSql + Sync)]),
        second: (&str, &[&(dyn ToSql + Sync)]),
    ) -> Result<(Vec<Row>, Vec<Row>), TxError> {
        let (one, two) = (self.prepare(first.0)?, self.prepare(second.0)?);
        let ahead = self.take_ahead()?;
        let client = &self.client;
        self.run(ahead, async {
            let (a, b) = tokio::join!(biased; client.query(&one, first.1), client.query(&two, second.1));
            Ok((a?, b?))
        })
    }

    /// Runs `sql`, answering its row if there is one (an error if there are several).
    pub fn query_opt(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, TxError> {
        let stmt = self.prepare(sql)?;
        let ahead = self.take_ahead()?;
        self.run(ahead, self.client.query_opt(&stmt, params))
    }

    /// Runs `sql`, answering its one row.
    pub fn query_one(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, TxError> {
        let stmt = self.prepare(sql)?;
        let ahead = self.take_ahead()?;
        self.run(ahead, self.client.query_one(&stmt, params))
    }

    /// Runs `sql`, answering how many rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, TxError> {
        let stmt = self.prepare(sql)?;
        let ahead = self.take_ahead()?;
        self.run(ahead, self.client.execute(&stmt, params))
    }

    /// Ends the transaction: `COMMIT`, with the writes not sent yet ahead of it in its round
    /// trip (nothing if no statement began it and nothing is unsent).
    fn commit(&mut self) -> Result<(), TxError> {
        let ahead = self.take_ahead()?;
        let unsent = ahead.update_runs.is_some() || ahead.delete_acked.is_some();
        if ahead.begin.is_some() && !unsent {
            return Ok(());
        }
        self.run(ahead, self.client.batch_execute("COMMIT"))
    }

    /// Rolls the transaction back, if a statement began it.
    fn rollback(&mut self) {
        if self.begin.take().is_none() {
            // After a failed COMMIT the transaction has ended already; ROLLBACK is then a
            // harmless warning.
            let _ = self.simple("ROLLBACK");
        }
    }

    fn simple(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.block_on(self.client.batch_execute(sql))
    }
}

impl PgDb {
    /// Runs `f` in one `SERIALIZABLE` transaction and commits; see the module's header.
    pub async fn transaction<T, F>(&self, f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> Result<T, TxError> + Send + 'static,
    {
        self.transaction_with(Isolation::Serializable, f).await
    }

    /// Runs `f`, which follows the lock discipline of [`crate::locks`], in one `READ
    /// COMMITTED` transaction and commits; see the module's header.
    pub async fn locking_transaction<T, F>(&self, f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> Result<T, TxError> + Send + 'static,
    {
        self.transaction_with(Isolation::ReadCommitted, f).await
    }

    /// Runs `f` in one transaction at `isolation` and commits; see the module's header.
    pub async fn transaction_with<T, F>(&self, isolation: Isolation, mut f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> Result<T, TxError> + Send + 'static,
    {
        let db = self.clone();
        let handle = Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut tries = 0;
            loop {
                tries += 1;
                let client = handle.block_on(db.get())?;
                let mut tx = Tx {
                    client,
                    handle: handle.clone(),
                    begin: Some(isolation.begin()),
                    claims: LockedForClaims::default(),
                    no_downstream: HashSet::new(),
                    unsent: Unsent::default(),
                    alone_in_queue: db.alone_in_queue.clone(),
                };
                let (result, before_commit) = match f(&mut tx) {
                    Ok(answer) => (tx.commit().map(|()| answer), false),
                    Err(e) => (Err(e), true),
                };
                match result {
                    Ok(answer) => return Ok(answer),
                    Err(e) => {
                        tx.rollback();
                        // A connection found dead before the COMMIT was sent: nothing of the
                        // transaction can have committed, so it runs again on another one.
                        let again = e.is_retryable() || (before_commit && e.is_dead_connection());
                        if !again || tries >= MAX_TRIES {
                            return Err(e);
                        }
                    }
                }
                // Let the winner finish before trying again (1, 2, 4 … ms, at most 32).
                std::thread::sleep(Duration::from_millis(1 << tries.min(5)));
            }
        })
        .await
        .map_err(|e| TxError::Codec(format!("transaction thread: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    //! Writes held for the next statement: seen by it, committed with it, and a failed one
    //! fails its transaction whatever was sent after it in the same round trip.
    use super::*;
    use crate::codec::load_run;
    use crate::testing::postgres;
    use crate::{PgOptions, PgStore};
    use sked_core::ports::JobStore;
    use sked_core::run::{Run, RunState};
    use sked_testkit::contract::fixtures::{job, run};

    /// A store on a fresh database holding job `a` of tenant `t1` and one PENDING run of it.
    async fn one_run() -> (PgDb, PgStore, Run) {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let store = PgStore::new(db.clone());
        store.create_jobs(&[job("t1", "a")], None).await.unwrap();
        let pending = run("t1", "a", 0);
        assert!(store.insert_run(&pending).await.unwrap());
        (db, store, pending)
    }

    /// `run` as stored now.
    async fn stored(store: &PgStore, run: &Run) -> Run {
        store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn a_held_write_is_seen_by_the_next_statement_and_committed_with_the_commit() {
        let (db, store, pending) = one_run().await;
        let mut cancelled = pending.clone();
        cancelled.state = RunState::Cancelled;
        let seen = db
            .locking_transaction(move |tx| {
                tx.write_run(RunRow::new(&cancelled, 0)?);
                let seen = load_run(tx, "t1", cancelled.run_id.as_str())?.map(|s| s.run.state);
                // Written again after the read: held for the commit, in its round trip.
                tx.write_run(RunRow::new(&cancelled, 0)?);
                Ok(seen)
            })
            .await
            .unwrap();
        assert_eq!(seen, Some(RunState::Cancelled));
        assert_eq!(stored(&store, &pending).await.state, RunState::Cancelled);
    }

    #[tokio::test]
    async fn a_held_write_that_fails_fails_its_transaction_though_its_commit_was_sent() {
        let (db, store, pending) = one_run().await;
        let mut cancelled = pending.clone();
        cancelled.state = RunState::Cancelled;
        // PostgreSQL refuses a NUL in text: the runs' one UPDATE fails.
        let mut refused = pending.clone();
        refused.run_id.0.push('\0');
        let answer = db
            .locking_transaction(move |tx| {
                tx.execute("SELECT 1", &[])?;
                tx.write_run(RunRow::new(&cancelled, 0)?);
                tx.write_run(RunRow::new(&refused, 0)?);
                Ok(())
            })
            .await;
        assert!(matches!(answer, Err(TxError::Pg(_))), "{answer:?}");
        assert_eq!(
            stored(&store, &pending).await.state,
            RunState::Pending,
            "nothing committed"
        );
    }
}
