//! [`SqliteQueue`]: the [`DispatchQueue`] over the `dispatch` table.
//!
//! - One row per (tenant, run): enqueue is an upsert. A waiting message (no receipt) keeps
//!   the earlier `not_before`; a delivered one (receipt set: a worker is handling it, e.g.
//!   enqueuing the run's retry) takes the new `not_before`. Either way it takes the new
//!   priority (a run's priority changes only when its job's does, before it starts), keeps
//!   its enqueue order (`seq`) and receive count, and loses its receipt (a live
//!   delivery goes stale and the message is receivable from its `not_before`). All SET
//!   expressions of the upsert read the row as it was before the update.
//! - `rank = dispatch_rank(priority, not_before)`, stored so receive walks the index
//!   `(rank, seq, visible_at)` in serving order and stops after `max` visible rows.
//! - Several tenants take turns ([`sked_core::fairness`]): when more than one tenant has
//!   messages queued (found by a skip scan of `dispatch_by_tenant`, one seek per tenant),
//!   receive reads up to `max` visible rows of each in rank order and the turn each was
//!   last served in (`dispatch_turns`), serves them in turns and records the turns, in the
//!   same transaction. Its cost grows with the number of tenants that have messages queued;
//!   with one tenant it is the plain index walk.
//! - Receive leases rows in one `BEGIN IMMEDIATE` transaction: `visible_at = now +
//!   visibility`, `receive_count + 1`, receipt `"<seq>.<receive_count>"` — unique for
//!   ever, because `seq` is never reused (AUTOINCREMENT) and the count only grows.
//! - Extend and ack are conditional on the receipt still being the row's current one.
//! - Long poll: waits on an in-process [`tokio::sync::Notify`] woken by every enqueue
//!   through the same [`SqliteDb`], on the injected clock reaching the earliest
//!   `visible_at` or the deadline, and re-checks every [`POLL_INTERVAL`] of tokio time
//!   for enqueues by other processes. Idle polls only read; they take no write lock. Only
//!   right after a receive that got messages does the next one take at once, without that
//!   read-only look (under load it saves a round trip per batch; the first empty take ends it).

use super::codec::{ms, ts};
use super::db::SqliteDb;
use super::error::TxError;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use sked_core::duration::Dur;
use sked_core::fairness::{Ready, Turns, take_in_turns};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::Clock;
use sked_core::ports::queue::{AGING_STEP, Delivery, Dispatch, DispatchQueue, QueueDepth, QueueError, Receipt};
use sked_core::timestamp::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often a waiting receive looks for messages enqueued by other processes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The dispatch queue in the SQLite file.
pub struct SqliteQueue {
    /// The shared database.
    db: Arc<SqliteDb>,
    /// Time for `not_before`, visibility and the long poll's deadline.
    clock: Arc<dyn Clock>,
    /// The long poll.
    poller: Poller,
}

/// The long poll of a receive (see the module doc), whatever a take does with the messages
/// it leases: [`SqliteQueue`] returns them, [`super::SqliteWork`] claims their runs in the
/// same transaction.
pub(crate) struct Poller {
    /// The shared database.
    db: Arc<SqliteDb>,
    /// Time for the deadline and the messages' `visible_at`.
    clock: Arc<dyn Clock>,
    /// Whether the last receive got messages (the next one then takes without a look first).
    busy: AtomicBool,
    /// Held by the one receive that looks and waits: the receives of one process wait their
    /// turn to poll, so an enqueue wakes one of them, not every idle one (each of which would
    /// otherwise look, then queue a write on the single writer for the same few messages).
    /// Takes while messages keep coming do not wait for it, so the writer can commit them
    /// together.
    turn: tokio::sync::Mutex<()>,
}

impl Poller {
    /// A long poll of `db`, timed by `clock`.
    pub(crate) fn new(db: Arc<SqliteDb>, clock: Arc<dyn Clock>) -> Self {
        Poller {
            db,
            clock,
            busy: AtomicBool::new(false),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether any message is visible at `now`, and the earliest `visible_at` of all.
    async fn peek(&self, now: i64) -> Result<(bool, Option<i64>), TxError> {
        self.db
            .read(move |conn| {
                let visible = conn
                    .prepare_cached("SELECT 1 FROM dispatch WHERE visible_at <= ?1 LIMIT 1")?
                    .query_row([now], |_| Ok(()))
                    .optional()?
                    .is_some();
                let earliest: Option<i64> = conn
                    .prepare_cached("SELECT min(visible_at) FROM dispatch")?
                    .query_row([], |r| r.get(0))?;
                Ok((visible, earliest))
            })
            .await
    }

    /// Runs `take` (which leases messages visible at the instant it is given, in the write
    /// transaction it is given) once something is visible, waiting up to `wait`; an empty
    /// vec if nothing came. Once `stop` is cancelled it waits no more (a take under way is
    /// finished and answered, never dropped).
    pub(crate) async fn poll<T, F>(
        &self,
        wait: Dur,
        stop: Option<&CancellationToken>,
        take: F,
    ) -> Result<Vec<T>, TxError>
    where
        T: Send + 'static,
        F: Fn(&Connection, Timestamp) -> Result<Vec<T>, TxError> + Clone + Send + 'static,
    {
        let deadline = self.clock.now() + wait.to_chrono();
        let take_now = |now: Timestamp| {
            let take = take.clone();
            self.db.write(move |tx| take(tx, now))
        };
        // While messages keep coming, the last receive found some: take at once, without
        // the read-only look first (one round trip less per batch under load).
        if self.busy.load(Ordering::Relaxed) {
            let got = take_now(self.clock.now()).await?;
            if !got.is_empty() {
                return Ok(got);
            }
            self.busy.store(false, Ordering::Relaxed);
        }
        let stopped = async {
            match stop {
                Some(stop) => stop.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stopped);
        let _turn = tokio::select! {
            turn = self.turn.lock() => turn,
            _ = &mut stopped => return Ok(Vec::new()),
        };
        loop {
            // Register for the wake-up before looking, so an enqueue in between is not missed.
            let notified = self.db.enqueued().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let now = self.clock.now();
            let (visible, earliest) = self.peek(ms(now)).await?;
            if visible {
                let got = take_now(now).await?;
                if !got.is_empty() {
                    self.busy.store(true, Ordering::Relaxed);
                    return Ok(got);
                }
                // Another process took them first; look again.
                continue;
            }
            if wait.is_zero() || self.clock.now() >= deadline {
                return Ok(Vec::new());
            }
            let wake = earliest.map(ts).map_or(deadline, |t| t.min(deadline));
            tokio::select! {
                _ = &mut stopped => return Ok(Vec::new()),
                _ = notified => {}
                _ = self.clock.sleep_until(wake) => {}
                _ = tokio::time::sleep(POLL_INTERVAL) => {}
            }
        }
    }
}

impl std::fmt::Debug for SqliteQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteQueue")
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl SqliteQueue {
    /// A queue in `db` (which may also back a [`super::SqliteStore`]), timed by `clock`.
    pub fn new(db: Arc<SqliteDb>, clock: Arc<dyn Clock>) -> Self {
        let poller = Poller::new(db.clone(), clock.clone());
        SqliteQueue { db, clock, poller }
    }

    /// Messages held (leased or not), for assertions and metrics (queue depth).
    pub async fn depth(&self) -> Result<u64, QueueError> {
        self.db
            .read(|conn| {
                let n: i64 = conn
                    .prepare_cached("SELECT count(*) FROM dispatch")?
                    .query_row([], |r| r.get(0))?;
                Ok(n as u64)
            })
            .await
            .map_err(TxError::into_queue)
    }
}

/// Leases, in the current transaction, up to `max` messages visible at `now` (in serving
/// order: rank order within a tenant, tenants in turns) for `visibility`. Also used by
/// [`super::SqliteWork`] to receive and claim in one transaction.
pub(crate) fn take_visible(
    conn: &Connection,
    max: usize,
    visibility: Dur,
    now: Timestamp,
) -> Result<Vec<Delivery>, TxError> {
    let now_ms = ms(now);
    let max = max.min(i64::MAX as usize) as i64;
    let tenants = queued_tenants(conn)?;
    let picked = if tenants.len() <= 1 {
        // One tenant (the usual case): its rank order is the serving order.
        let mut stmt = conn.prepare_cached(
            "SELECT seq, tenant, run_id, priority, not_before, receive_count
             FROM dispatch INDEXED BY dispatch_receive
             WHERE visible_at <= ?1 ORDER BY rank, seq LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![now_ms, max], visible_row)?;
        rows.collect::<Result<Vec<_>, _>>()?
    } else {
        take_in_turns_of(conn, &tenants, now_ms, max)?
    };
    let until = now_ms.saturating_add(visibility.as_millis());
    // A message received (after its fallback) is no longer parked: a wake of its key must not
    // make it visible again while a worker handles it.
    let mut lease = conn.prepare_cached(
        "UPDATE dispatch SET visible_at = ?2, receipt = ?3, receive_count = ?4, parked_on = NULL WHERE seq = ?1",
    )?;
    let mut out = Vec::with_capacity(picked.len());
    for row in picked {
        let count = row.receive_count + 1;
        let receipt = format!("{}.{count}", row.seq);
        lease.execute(params![row.seq, until, receipt, count])?;
        let priority = u8::try_from(row.priority).map_err(|e| TxError::bad(e.to_string()))?;
        out.push(Delivery {
            dispatch: Dispatch {
                tenant: TenantId(row.tenant),
                run_id: RunId(row.run_id),
                priority,
                not_before: ts(row.not_before),
            },
            receipt: Receipt(receipt),
            receive_count: count as u32,
        });
    }
    Ok(out)
}

/// A visible message as read for leasing.
struct VisibleRow {
    seq: i64,
    tenant: String,
    run_id: String,
    priority: i64,
    not_before: i64,
    receive_count: i64,
}

/// Reads `seq, tenant, run_id, priority, not_before, receive_count`.
fn visible_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<VisibleRow> {
    Ok(VisibleRow {
        seq: row.get(0)?,
        tenant: row.get(1)?,
        run_id: row.get(2)?,
        priority: row.get(3)?,
        not_before: row.get(4)?,
        receive_count: row.get(5)?,
    })
}

/// The tenants with messages queued (visible or not), by a skip scan of
/// `dispatch_by_tenant`: one index seek per tenant, whatever the backlog.
fn queued_tenants(conn: &Connection) -> Result<Vec<String>, TxError> {
    let mut stmt = conn.prepare_cached(
        "WITH RECURSIVE t(tenant) AS (
             SELECT min(tenant) FROM dispatch
             UNION ALL
             SELECT (SELECT min(tenant) FROM dispatch WHERE tenant > t.tenant) FROM t WHERE t.tenant IS NOT NULL
         )
         SELECT tenant FROM t WHERE tenant IS NOT NULL",
    )?;
    let tenants = stmt.query_map([], |r| r.get(0))?;
    Ok(tenants.collect::<Result<Vec<String>, _>>()?)
}

/// Up to `max` visible messages of several `tenants` in fair turns
/// ([`sked_core::fairness::take_in_turns`]), recording each served tenant's last turn.
fn take_in_turns_of(conn: &Connection, tenants: &[String], now_ms: i64, max: i64) -> Result<Vec<VisibleRow>, TxError> {
    let mut turns = Turns::new();
    let mut ready = Vec::with_capacity(tenants.len());
    {
        let mut turn_of = conn.prepare_cached("SELECT turn FROM dispatch_turns WHERE tenant = ?1")?;
        let mut best_of = conn.prepare_cached(
            "SELECT seq, tenant, run_id, priority, not_before, receive_count, rank
             FROM dispatch INDEXED BY dispatch_by_tenant
             WHERE tenant = ?1 AND visible_at <= ?2 ORDER BY rank, seq LIMIT ?3",
        )?;
        for tenant in tenants {
            let turn: Option<i64> = turn_of.query_row([tenant], |r| r.get(0)).optional()?;
            let messages = best_of
                .query_map(params![tenant, now_ms, max], |r| {
                    Ok(Ready {
                        rank: r.get(6)?,
                        seq: r.get(0)?,
                        key: visible_row(r)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let tenant = TenantId(tenant.clone());
            if let Some(turn) = turn {
                turns.insert(tenant.clone(), turn as u64);
            }
            ready.push((tenant, messages));
        }
    }
    let taken = take_in_turns(&mut turns, ready, max as usize);
    let mut record = conn.prepare_cached(
        "INSERT INTO dispatch_turns (tenant, turn) VALUES (?1, ?2)
         ON CONFLICT (tenant) DO UPDATE SET turn = excluded.turn",
    )?;
    let mut served = std::collections::HashSet::new();
    for (tenant, _) in &taken {
        if served.insert(tenant.clone()) {
            record.execute(params![tenant.as_str(), turns[tenant] as i64])?;
        }
    }
    Ok(taken.into_iter().map(|(_, row)| row).collect())
}

/// The row a receipt names (`<seq>.<count>`), if it is well formed.
pub(crate) fn receipt_seq(receipt: &Receipt) -> Option<i64> {
    receipt.0.split_once('.')?.0.parse().ok()
}

#[async_trait]
impl DispatchQueue for SqliteQueue {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        if items.is_empty() {
            return Ok(());
        }
        let items = items.to_vec();
        self.db
            .write(move |tx| insert_dispatches(tx, &items))
            .await
            .map_err(TxError::into_queue)?;
        self.db.notify_enqueued();
        Ok(())
    }

    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.poller
            .poll(wait, None, move |tx, now| take_visible(tx, max, visibility, now))
            .await
            .map_err(TxError::into_queue)
    }

    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        let seq = receipt_seq(receipt).ok_or(QueueError::StaleReceipt)?;
        let receipt = receipt.0.clone();
        let until = ms(self.clock.now()).saturating_add(visibility.as_millis());
        self.db
            .write(move |tx| {
                let n = tx
                    .prepare_cached("UPDATE dispatch SET visible_at = ?3 WHERE seq = ?1 AND receipt = ?2")?
                    .execute(params![seq, receipt, until])?;
                if n == 0 {
                    Err(TxError::Queue(QueueError::StaleReceipt))
                } else {
                    Ok(())
                }
            })
            .await
            .map_err(TxError::into_queue)
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        let seq = receipt_seq(receipt).ok_or(QueueError::StaleReceipt)?;
        let receipt = receipt.0.clone();
        self.db
            .write(move |tx| {
                if delete_delivered(tx, seq, &receipt)? {
                    Ok(())
                } else {
                    Err(TxError::Queue(QueueError::StaleReceipt))
                }
            })
            .await
            .map_err(TxError::into_queue)
    }

    /// One pass over the `dispatch` table (the queue's messages only; never `jobs` or `runs`),
    /// on a reader connection.
    async fn depth(&self) -> Result<Option<Vec<QueueDepth>>, QueueError> {
        self.db
            .read(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT tenant, priority, count(*) FROM dispatch GROUP BY tenant, priority ORDER BY tenant, priority",
                )?;
                let rows = stmt
                    .query_map([], |r| {
                        Ok(QueueDepth {
                            tenant: TenantId(r.get(0)?),
                            priority: u8::try_from(r.get::<_, i64>(1)?.clamp(0, 9)).unwrap_or(0),
                            messages: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some(rows))
            })
            .await
            .map_err(TxError::into_queue)
    }
}

/// Enqueues `items` in the current transaction (the upsert described in the module doc).
/// Also used by [`super::SqliteWork`] to enqueue the runs a sweep writes, in its transaction;
/// the caller wakes this process's long polls once committed.
pub(crate) fn insert_dispatches(conn: &Connection, items: &[Dispatch]) -> Result<(), TxError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO dispatch (tenant, run_id, priority, not_before, rank, visible_at, receipt, receive_count)
         VALUES (?1, ?2, ?3, ?4, ?4 - min(?3, 9) * ?5, ?4, NULL, 0)
         ON CONFLICT (tenant, run_id) DO UPDATE SET
           not_before = iif(receipt IS NULL, min(not_before, excluded.not_before), excluded.not_before),
           priority   = excluded.priority,
           rank       = iif(receipt IS NULL, min(not_before, excluded.not_before), excluded.not_before)
                        - min(excluded.priority, 9) * ?5,
           visible_at = iif(receipt IS NULL, min(not_before, excluded.not_before), excluded.not_before),
           receipt    = NULL,
           parked_on  = NULL",
    )?;
    let step = AGING_STEP.as_millis();
    for d in items {
        stmt.execute(params![
            d.tenant.as_str(),
            d.run_id.as_str(),
            i64::from(d.priority),
            ms(d.not_before),
            step
        ])?;
    }
    Ok(())
}

/// Sets delivered message `seq` aside on `tenant`'s concurrency `key` if `receipt` is still
/// its current delivery (whether it was): unleased, invisible until `fallback` unless
/// [`wake_parked`] wakes it, its rank kept.
pub(crate) fn park_delivered(
    conn: &Connection,
    seq: i64,
    receipt: &str,
    key: &str,
    fallback: Timestamp,
) -> Result<bool, TxError> {
    let n = conn
        .prepare_cached(
            "UPDATE dispatch SET receipt = NULL, visible_at = ?3, parked_on = ?4 WHERE seq = ?1 AND receipt = ?2",
        )?
        .execute(params![seq, receipt, ms(fallback), key])?;
    Ok(n > 0)
}

/// Makes the first `n` messages parked on `tenant`'s `key` (by rank, then enqueue order)
/// visible at `now`; how many. Looked up first and written by primary key: a completion of
/// a keyed run calls this whether or not anything is parked, and an UPDATE with a subquery
/// costs its transaction a statement journal even when it matches nothing (a burst of keyed
/// runs drained 25% slower with it).
pub(crate) fn wake_parked(
    conn: &Connection,
    tenant: &str,
    key: &str,
    n: usize,
    now: Timestamp,
) -> Result<usize, TxError> {
    let parked: Vec<i64> = conn
        .prepare_cached(
            "SELECT seq FROM dispatch INDEXED BY dispatch_parked
             WHERE tenant = ?1 AND parked_on = ?2 ORDER BY rank, seq LIMIT ?3",
        )?
        .query_map(params![tenant, key, n as i64], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut wake = conn.prepare_cached("UPDATE dispatch SET visible_at = ?2, parked_on = NULL WHERE seq = ?1")?;
    for seq in &parked {
        wake.execute(params![seq, ms(now)])?;
    }
    Ok(parked.len())
}

/// Removes message `seq` if `receipt` is still its current delivery; whether it did. Also
/// used by [`super::SqliteWork`] to ack in the transaction that completes the run.
pub(crate) fn delete_delivered(conn: &Connection, seq: i64, receipt: &str) -> Result<bool, TxError> {
    let n = conn
        .prepare_cached("DELETE FROM dispatch WHERE seq = ?1 AND receipt = ?2")?
        .execute(params![seq, receipt])?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    //! Parking on a concurrency key, which only the work port does, run in writes of their own.
    use super::*;
    use sked_core::timestamp;

    fn at(secs: i64) -> Timestamp {
        timestamp::from_ms(1_800_000_000_000 + secs * 1000)
    }

    #[tokio::test]
    async fn a_parked_message_received_after_its_fallback_is_no_longer_parked() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(SqliteDb::open(dir.path().join("sked.db")).unwrap());
        let dispatch = Dispatch {
            tenant: TenantId::from("t"),
            run_id: RunId::from("a@x"),
            priority: 5,
            not_before: at(0),
        };
        db.write(move |conn| insert_dispatches(conn, std::slice::from_ref(&dispatch)))
            .await
            .unwrap();
        let first = db
            .write(|conn| take_visible(conn, 10, Dur::secs(30), at(0)))
            .await
            .unwrap()
            .remove(0);
        let (seq, receipt) = (receipt_seq(&first.receipt).unwrap(), first.receipt.0.clone());
        assert!(
            db.write(move |conn| park_delivered(conn, seq, &receipt, "k", at(5)))
                .await
                .unwrap()
        );
        // Its fallback comes: received again, and handled by a worker from now on.
        let again = db
            .write(|conn| take_visible(conn, 10, Dur::secs(30), at(5)))
            .await
            .unwrap();
        assert_eq!(again.len(), 1);
        // A slot of the key frees: nothing parked is left to wake, and nothing is visible.
        assert_eq!(db.write(|conn| wake_parked(conn, "t", "k", 5, at(6))).await.unwrap(), 0);
        assert!(
            db.write(|conn| take_visible(conn, 10, Dur::secs(30), at(6)))
                .await
                .unwrap()
                .is_empty()
        );
    }
}
