//! [`PgQueue`]: the [`DispatchQueue`] over the `dispatch` table (migration 3), shared by every
//! worker on every host.
//!
//! - One row per (tenant, run): enqueue is an upsert, as SQLite's. A waiting message (no
//!   receipt) keeps the earlier `not_before`; a delivered one (a worker is handling it, e.g.
//!   enqueuing the run's retry) takes the new `not_before`. Either way it takes the new
//!   priority (a run's priority changes only when its job's does, before it starts), keeps
//!   its enqueue order (`seq`) and receive count, and loses its receipt (a live
//!   delivery goes stale) and any parking.
//! - `rank = dispatch_rank(priority, not_before)`, stored, so receive walks an index in serving
//!   order.
//! - Receive leases rows with `FOR UPDATE SKIP LOCKED` in a `READ COMMITTED` transaction:
//!   workers on many hosts receiving at once take disjoint messages and never wait for one
//!   another (a row another receive has locked is skipped, not waited for).
//! - Several tenants take turns ([`sked_core::fairness`]): when more than one tenant has
//!   messages queued (found by a loose index scan, one probe per tenant), receive locks up to
//!   `max` visible rows of each, serves them in turns by the turns recorded in
//!   `dispatch_turns`, and records the new turns — in the same transaction. Receives racing on
//!   several hosts may record the same turn; the order is then fair per receive, not across
//!   them. Rows locked but not served are released at commit. One tenant alone (the usual
//!   case) has its messages picked and leased by one statement; a pool remembers the tenant
//!   it last found alone, and its next receive sends that take — which takes nothing if
//!   another tenant has a message — with the loose scan in one round trip, so a one-tenant
//!   queue costs a receive one round trip less.
//! - Receipts are `"<seq>.<receive_count>"`: unique for ever, as `seq` is an identity never
//!   reused and the count only grows. Extend, ack, park are conditional on the receipt still
//!   being the row's current one.
//! - Wake-ups: every transaction that makes messages receivable calls
//!   `pg_notify('sked_dispatch')` (delivered at commit, to every host). A waiting receive
//!   hears it through the `listen` module, and also wakes on the injected clock reaching the
//!   earliest `visible_at` or its deadline, and on a fallback poll ([`DEFAULT_FALLBACK_POLL`]
//!   of real time) in case a notification was lost. A receive first takes what is visible at
//!   once, beside the others; only one that found nothing waits, and the receives of one
//!   process take turns to wait, so a notification wakes one of them, not every idle slot.
//!
//! The steps (`insert_dispatches`, `take_visible`, `extend_delivered`, `delete_delivered`,
//! `park_delivered`, `wake_parked`) are functions over a [`Tx`], so the one-transaction work
//! port can run them in the store's transactions. Time comes only from the [`Clock`] port;
//! real time only bounds how long a waiting receive trusts the notifications.

use crate::db::PgDb;
use crate::listen::Listener;
use crate::tx::{Isolation, Tx, TxError};
use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::fairness::{Ready, Turns, take_in_turns};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::queue::{AGING_STEP, Delivery, Dispatch, DispatchQueue, QueueDepth, QueueError, Receipt};
use sked_core::ports::{Clock, StoreError};
use sked_core::timestamp::{self, Timestamp};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The notification channel of the dispatch queue.
pub const CHANNEL: &str = "sked_dispatch";

/// How often a waiting receive looks again though no notification came: the bound on the
/// latency a lost notification (a dropped `LISTEN` connection) costs.
pub const DEFAULT_FALLBACK_POLL: Duration = Duration::from_millis(500);

/// How soon a receive looks again when messages are visible but another receive holds them
/// locked (its transaction will lease some and release the others in a moment).
const LOCKED_RETRY: Duration = Duration::from_millis(10);

/// The dispatch queue in PostgreSQL.
pub struct PgQueue {
    /// The shared pool.
    db: PgDb,
    /// Time for `not_before`, visibility and the long poll's deadline.
    clock: Arc<dyn Clock>,
    /// The long poll.
    poller: Poller,
}

impl std::fmt::Debug for PgQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgQueue").field("db", &self.db).finish_non_exhaustive()
    }
}

impl PgQueue {
    /// A queue in `db` (which may also back the store), timed by `clock`. Opens its `LISTEN`
    /// connection in the background: must be called within a Tokio runtime.
    pub fn new(db: PgDb, clock: Arc<dyn Clock>) -> Self {
        let poller = Poller::new(db.clone(), clock.clone());
        PgQueue { db, clock, poller }
    }

    /// Polls every `interval` (real time) while waiting, whatever the notifications say,
    /// instead of every [`DEFAULT_FALLBACK_POLL`].
    pub fn with_fallback_poll(mut self, interval: Duration) -> Self {
        self.poller.fallback_poll = interval;
        self
    }
}

/// The long poll of a receive (see the module doc), whatever a take does with the messages
/// it leases: [`PgQueue`] returns them; a work port can claim their runs in the same
/// transaction.
pub(crate) struct Poller {
    /// The shared pool.
    db: PgDb,
    /// Time for the deadline and the messages' `visible_at`.
    clock: Arc<dyn Clock>,
    /// Wake-ups from other sessions' commits.
    listener: Listener,
    /// Real time between looks while waiting, notified or not.
    pub(crate) fallback_poll: Duration,
    /// Held by the one receive of this process that looks and waits: an enqueue wakes one
    /// receive, not every idle one.
    turn: tokio::sync::Mutex<()>,
}

impl Poller {
    /// A long poll of `db`, timed by `clock`, listening on [`CHANNEL`].
    pub(crate) fn new(db: PgDb, clock: Arc<dyn Clock>) -> Self {
        let listener = Listener::start(db.config().clone(), CHANNEL);
        Poller {
            db,
            clock,
            listener,
            fallback_poll: DEFAULT_FALLBACK_POLL,
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// The earliest `visible_at` of all messages (ms), if there is any message.
    async fn earliest_visible(&self) -> Result<Option<i64>, TxError> {
        let conn = self.db.get().await?;
        let row = conn.query_one("SELECT min(visible_at) FROM dispatch", &[]).await?;
        Ok(row.get(0))
    }

    /// Runs `take` (which leases messages visible at the instant it is given, in the
    /// transaction it is given, at `isolation`) until it leases something, waiting up to
    /// `wait`; an empty vec if nothing came. Once `stop` is cancelled it waits no more (a take
    /// under way is finished and answered, never dropped).
    pub(crate) async fn poll<T, F>(
        &self,
        isolation: Isolation,
        wait: Dur,
        stop: Option<&CancellationToken>,
        take: F,
    ) -> Result<Vec<T>, TxError>
    where
        T: Send + 'static,
        F: Fn(&mut Tx, Timestamp) -> Result<Vec<T>, TxError> + Clone + Send + 'static,
    {
        let deadline = self.clock.now() + wait.to_chrono();
        if wait.is_zero() {
            return self.take_at(isolation, &take, self.clock.now()).await;
        }
        // While messages keep coming, receives take at once, side by side (`SKIP LOCKED`
        // keeps them apart); only one that found nothing waits for its turn to wait. (Taking
        // the turn first made every receive of the process wait for the one before it: a
        // 5,000-run burst drained at the pace of one receive transaction at a time.)
        match self.take_at(isolation, &take, self.clock.now()).await {
            Ok(got) if !got.is_empty() => return Ok(got),
            Ok(_) => {}
            // The database is away: the wait below looks again once its listener is back.
            Err(e) if e.is_transient() => {}
            Err(e) => return Err(e),
        }
        self.wait_then_take(isolation, deadline, stop, take).await
    }

    /// `take` at `now`, in a transaction of its own.
    async fn take_at<T, F>(&self, isolation: Isolation, take: &F, now: Timestamp) -> Result<Vec<T>, TxError>
    where
        T: Send + 'static,
        F: Fn(&mut Tx, Timestamp) -> Result<Vec<T>, TxError> + Clone + Send + 'static,
    {
        let take = take.clone();
        self.db.transaction_with(isolation, move |tx| take(tx, now)).await
    }

    /// The wait of [`Poller::poll`] once a first look found nothing: its turn to wait (one
    /// receive of this process at a time), then `take` again whenever a message may have
    /// come, until it leases something or `deadline` passes (an empty vec) or `stop` is
    /// cancelled.
    pub(crate) async fn wait_then_take<T, F>(
        &self,
        isolation: Isolation,
        deadline: Timestamp,
        stop: Option<&CancellationToken>,
        take: F,
    ) -> Result<Vec<T>, TxError>
    where
        T: Send + 'static,
        F: Fn(&mut Tx, Timestamp) -> Result<Vec<T>, TxError> + Clone + Send + 'static,
    {
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
            // Listening before looking: an enqueue committed after the look is then heard.
            self.listener.ready(self.fallback_poll).await;
            let notified = self.listener.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let now = self.clock.now();
            let got = self.take_at(isolation, &take, now).await?;
            if !got.is_empty() {
                return Ok(got);
            }
            if self.clock.now() >= deadline {
                return Ok(Vec::new());
            }
            let earliest = self.earliest_visible().await?.map(timestamp::from_ms);
            // Visible but not taken: another receive holds them locked for a moment.
            let (wake, poll) = match earliest {
                Some(t) if t <= now => (deadline, LOCKED_RETRY),
                Some(t) => (t.min(deadline), self.fallback_poll),
                None => (deadline, self.fallback_poll),
            };
            tokio::select! {
                _ = &mut stopped => return Ok(Vec::new()),
                _ = notified => {}
                _ = self.clock.sleep_until(wake) => {}
                _ = tokio::time::sleep(poll) => {}
            }
        }
    }
}

/// A visible message as read for leasing.
struct VisibleRow {
    /// Its row.
    seq: i64,
    /// Owner.
    tenant: String,
    /// The run.
    run_id: String,
    /// 0..=9.
    priority: i16,
    /// In ms.
    not_before: i64,
}

/// The columns [`visible_row`] reads, in its order, then `rank`.
const VISIBLE_COLUMNS: &str = "seq, tenant, run_id, priority, not_before, rank";

/// [`VISIBLE_COLUMNS`] of a leased message (`d`), then its receipt and receive count.
const LEASED_COLUMNS: &str = "d.seq, d.tenant, d.run_id, d.priority, d.not_before, d.rank, d.receipt, d.receive_count";

fn visible_row(row: &tokio_postgres::Row) -> VisibleRow {
    VisibleRow {
        seq: row.get(0),
        tenant: row.get(1),
        run_id: row.get(2),
        priority: row.get(3),
        not_before: row.get(4),
    }
}

/// Leases, in `tx`, up to `max` messages visible at `now` (in serving order: rank order
/// within a tenant, tenants in turns) for `visibility`, skipping rows other transactions hold.
pub(crate) fn take_visible(tx: &mut Tx, max: usize, visibility: Dur, now: Timestamp) -> Result<Vec<Delivery>, TxError> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let now_ms = now.timestamp_millis();
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    let until = now_ms.saturating_add(visibility.as_millis());
    let hint = tx.alone_in_queue.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let tenants = match hint {
        // The tenant found alone last time (the usual case: one tenant, receive after
        // receive): its messages picked and leased if it still is alone — the statement
        // checks that no other tenant has a message — and the tenants read in the same round
        // trip, for when it is not.
        Some(tenant) => {
            let (leased, queued) = tx.query_pair(
                (&TAKE_IF_ALONE, &[&tenant, &now_ms, &max, &until]),
                (QUEUED_TENANTS, &[]),
            )?;
            if !leased.is_empty() {
                return leased_in_order(leased);
            }
            queued.iter().map(|r| r.get(0)).collect()
        }
        None => queued_tenants(tx)?,
    };
    *tx.alone_in_queue.lock().unwrap_or_else(|e| e.into_inner()) = match tenants.as_slice() {
        [alone] => Some(alone.clone()),
        _ => None,
    };
    match tenants.as_slice() {
        [] => Ok(Vec::new()),
        // One tenant: its rank order is the serving order, and its messages are picked and
        // leased in one statement.
        [tenant] => leased_in_order(tx.query(&TAKE_ALONE, &[tenant, &now_ms, &max, &until])?),
        tenants => {
            let picked = take_in_turns_of(tx, tenants, now_ms, max)?;
            lease(tx, picked, until)
        }
    }
}

/// Whether a one-tenant take knows its tenant is alone in the queue, or checks it.
#[derive(Clone, Copy, PartialEq)]
enum Alone {
    /// Read just before, in this transaction.
    Known,
    /// Checked by the statement: it takes nothing if another tenant has a message (visible
    /// or not, as the tenants' read counts them).
    Checked,
}

/// The one-tenant take of a tenant the receive found alone ([`take_and_lease_sql`]).
static TAKE_ALONE: LazyLock<String> = LazyLock::new(|| take_and_lease_sql(Alone::Known));

/// The one-tenant take that checks its tenant is still alone ([`take_and_lease_sql`]).
static TAKE_IF_ALONE: LazyLock<String> = LazyLock::new(|| take_and_lease_sql(Alone::Checked));

/// The statement that leases up to `$3` of tenant `$1`'s messages visible at `$2`, in rank
/// order, until `$4`: picked (`FOR UPDATE SKIP LOCKED`) and leased in one statement.
fn take_and_lease_sql(alone: Alone) -> String {
    // Two index probes, not a scan of the tenant's own messages.
    let others = match alone {
        Alone::Known => "",
        Alone::Checked => {
            " AND NOT EXISTS (SELECT 1 FROM dispatch o WHERE o.tenant < $1)
              AND NOT EXISTS (SELECT 1 FROM dispatch o WHERE o.tenant > $1)"
        }
    };
    format!(
        "WITH picked AS (
             SELECT seq AS picked_seq FROM dispatch WHERE tenant = $1 AND visible_at <= $2{others}
             ORDER BY rank, seq LIMIT $3 FOR UPDATE SKIP LOCKED)
         UPDATE dispatch d SET {}
         FROM picked WHERE d.seq = picked.picked_seq
         RETURNING {LEASED_COLUMNS}",
        lease_set("$4")
    )
}

/// The deliveries of rows a one-tenant take leased, in serving order.
fn leased_in_order(mut rows: Vec<tokio_postgres::Row>) -> Result<Vec<Delivery>, TxError> {
    // RETURNING keeps no order: the serving order is the rank's, then the sequence's.
    rows.sort_by_key(|r| (r.get::<_, i64>(5), r.get::<_, i64>(0)));
    rows.iter()
        .map(|r| delivery(visible_row(r), r.get(6), r.get(7)))
        .collect()
}

/// The `SET` clause of a delivery: the message invisible until `until` (a parameter), its
/// receive count raised and its receipt "<seq>.<receive count>" (what [`receipt_seq`] reads),
/// no longer parked. Unqualified: the statement's other tables must have no column of these
/// names.
fn lease_set(until: &str) -> String {
    format!(
        "visible_at = {until}, receive_count = receive_count + 1,
         receipt = seq::text || '.' || (receive_count + 1)::text, parked_on = NULL"
    )
}

/// Leases the `picked` rows (locked by this transaction) until `until`, answering their
/// deliveries in the order picked.
fn lease(tx: &mut Tx, picked: Vec<VisibleRow>, until: i64) -> Result<Vec<Delivery>, TxError> {
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let seqs: Vec<i64> = picked.iter().map(|r| r.seq).collect();
    // A parked message whose fallback came is delivered like any other: no longer parked, so a
    // wake cannot make it visible again while it is being handled.
    let leased: HashMap<i64, (String, i32)> = tx
        .query(
            &format!(
                "UPDATE dispatch SET {} WHERE seq = ANY($1) RETURNING seq, receipt, receive_count",
                lease_set("$2")
            ),
            &[&seqs, &until],
        )?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    picked
        .into_iter()
        .map(|row| {
            let (receipt, count) = leased
                .get(&row.seq)
                .cloned()
                .ok_or_else(|| TxError::Codec(format!("message {} was not leased", row.seq)))?;
            delivery(row, receipt, count)
        })
        .collect()
}

/// The delivery of a leased message.
fn delivery(row: VisibleRow, receipt: String, receive_count: i32) -> Result<Delivery, TxError> {
    Ok(Delivery {
        dispatch: Dispatch {
            tenant: TenantId(row.tenant),
            run_id: RunId(row.run_id),
            priority: u8::try_from(row.priority).map_err(|e| TxError::Codec(e.to_string()))?,
            not_before: timestamp::from_ms(row.not_before),
        },
        receipt: Receipt(receipt),
        receive_count: u32::try_from(receive_count).map_err(|e| TxError::Codec(e.to_string()))?,
    })
}

/// The tenants with messages queued (visible or not), by a loose index scan of
/// `dispatch_by_tenant`: one probe per tenant, whatever the backlog.
fn queued_tenants(tx: &mut Tx) -> Result<Vec<String>, TxError> {
    let rows = tx.query(QUEUED_TENANTS, &[])?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The tenants with a message in the queue, by a loose scan of `dispatch_by_tenant`.
const QUEUED_TENANTS: &str = "WITH RECURSIVE t(tenant) AS (
         (SELECT tenant FROM dispatch ORDER BY tenant LIMIT 1)
         UNION ALL
         SELECT (SELECT d.tenant FROM dispatch d WHERE d.tenant > t.tenant ORDER BY d.tenant LIMIT 1)
         FROM t WHERE t.tenant IS NOT NULL
     )
     SELECT tenant FROM t WHERE tenant IS NOT NULL";

/// Up to `max` visible messages of several `tenants` in fair turns
/// ([`sked_core::fairness::take_in_turns`]), recording each served tenant's last turn.
fn take_in_turns_of(tx: &mut Tx, tenants: &[String], now_ms: i64, max: i64) -> Result<Vec<VisibleRow>, TxError> {
    let mut turns: Turns = tx
        .query(
            "SELECT tenant, turn FROM dispatch_turns WHERE tenant = ANY($1)",
            &[&tenants],
        )?
        .iter()
        .map(|r| (TenantId(r.get(0)), u64::try_from(r.get::<_, i64>(1)).unwrap_or(0)))
        .collect();
    let best_of = format!(
        "SELECT {VISIBLE_COLUMNS} FROM dispatch WHERE tenant = $1 AND visible_at <= $2
         ORDER BY rank, seq LIMIT $3 FOR UPDATE SKIP LOCKED"
    );
    let mut ready = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        let messages = tx
            .query(&best_of, &[tenant, &now_ms, &max])?
            .iter()
            .map(|r| Ready {
                rank: r.get(5),
                seq: r.get(0),
                key: visible_row(r),
            })
            .collect();
        ready.push((TenantId(tenant.clone()), messages));
    }
    let taken = take_in_turns(&mut turns, ready, usize::try_from(max).unwrap_or(usize::MAX));
    // Recorded in tenant order, so racing receives lock `dispatch_turns` rows in one order.
    let served: HashSet<&TenantId> = taken.iter().map(|(t, _)| t).collect();
    let mut served: Vec<&TenantId> = served.into_iter().collect();
    served.sort();
    let names: Vec<&str> = served.iter().map(|t| t.as_str()).collect();
    let numbers: Vec<i64> = served
        .iter()
        .map(|t| i64::try_from(turns[*t]).unwrap_or(i64::MAX))
        .collect();
    tx.execute(
        "INSERT INTO dispatch_turns (tenant, turn) SELECT * FROM unnest($1::text[], $2::bigint[])
         ON CONFLICT (tenant) DO UPDATE SET turn = greatest(dispatch_turns.turn, excluded.turn)",
        &[&names, &numbers],
    )?;
    Ok(taken.into_iter().map(|(_, row)| row).collect())
}

/// The row a receipt names (`<seq>.<count>`), if it is well formed.
pub(crate) fn receipt_seq(receipt: &Receipt) -> Option<i64> {
    receipt.0.split_once('.')?.0.parse().ok()
}

/// Tells every listening session, at commit, that messages may have become receivable.
fn notify(tx: &mut Tx) -> Result<(), TxError> {
    tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL])?;
    Ok(())
}

/// Enqueues `items` in `tx` (the upsert described in the module doc) and notifies the
/// listeners at commit. Several items of one run count as one: the earliest `not_before`, the
/// last one's priority, the place of the first.
pub(crate) fn insert_dispatches(tx: &mut Tx, items: &[Dispatch]) -> Result<(), TxError> {
    if items.is_empty() {
        return Ok(());
    }
    // One statement may change a row once: merge the items of one run first.
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut merged: Vec<(&str, &str, i16, i64)> = Vec::with_capacity(items.len());
    for d in items {
        let (priority, not_before) = (i16::from(d.priority), d.not_before.timestamp_millis());
        match index.entry((d.tenant.as_str(), d.run_id.as_str())) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let m = &mut merged[*e.get()];
                m.2 = priority;
                m.3 = m.3.min(not_before);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(merged.len());
                merged.push((d.tenant.as_str(), d.run_id.as_str(), priority, not_before));
            }
        }
    }
    let tenants: Vec<&str> = merged.iter().map(|m| m.0).collect();
    let runs: Vec<&str> = merged.iter().map(|m| m.1).collect();
    let priorities: Vec<i16> = merged.iter().map(|m| m.2).collect();
    let not_befores: Vec<i64> = merged.iter().map(|m| m.3).collect();
    let step = AGING_STEP.as_millis();
    // The new `not_before`: a waiting message keeps the earlier one, a delivered one takes the
    // new one. Every SET expression reads the row as it was before the update.
    tx.execute(
        "INSERT INTO dispatch AS d (tenant, run_id, priority, not_before, rank, visible_at)
         SELECT i.tenant, i.run_id, i.priority, i.not_before,
                i.not_before - least(i.priority, 9) * $5::bigint, i.not_before
         FROM unnest($1::text[], $2::text[], $3::smallint[], $4::bigint[])
              WITH ORDINALITY AS i(tenant, run_id, priority, not_before, n)
         ORDER BY i.n
         ON CONFLICT (tenant, run_id) DO UPDATE SET
           not_before = CASE WHEN d.receipt IS NULL THEN least(d.not_before, excluded.not_before)
                             ELSE excluded.not_before END,
           priority   = excluded.priority,
           rank       = CASE WHEN d.receipt IS NULL THEN least(d.not_before, excluded.not_before)
                             ELSE excluded.not_before END
                        - least(excluded.priority, 9) * $5::bigint,
           visible_at = CASE WHEN d.receipt IS NULL THEN least(d.not_before, excluded.not_before)
                             ELSE excluded.not_before END,
           receipt    = NULL,
           parked_on  = NULL",
        &[&tenants, &runs, &priorities, &not_befores, &step],
    )?;
    notify(tx)
}

/// Keeps delivered message `seq` invisible until `until` if `receipt` is still its current
/// delivery; whether it was.
pub(crate) fn extend_delivered(tx: &mut Tx, seq: i64, receipt: &str, until: Timestamp) -> Result<bool, TxError> {
    let n = tx.execute(
        "UPDATE dispatch SET visible_at = $3 WHERE seq = $1 AND receipt = $2",
        &[&seq, &receipt, &until.timestamp_millis()],
    )?;
    Ok(n > 0)
}

/// Removes message `seq` if `receipt` is still its current delivery; whether it did.
pub(crate) fn delete_delivered(tx: &mut Tx, seq: i64, receipt: &str) -> Result<bool, TxError> {
    let n = tx.execute(
        "DELETE FROM dispatch WHERE seq = $1 AND receipt = $2",
        &[&seq, &receipt],
    )?;
    Ok(n > 0)
}

/// [`delete_delivered`] for each of `receipts` (well formed or not: one that is not names
/// no delivery), all in one statement sent with the transaction's next one or its commit
/// ([`Tx::ack_later`]): nothing waits for what they deleted.
pub(crate) fn delete_all_delivered(tx: &mut Tx, receipts: &[&Receipt]) -> Result<(), TxError> {
    for receipt in receipts {
        if let Some(seq) = receipt_seq(receipt) {
            tx.ack_later(seq, &receipt.0);
        }
    }
    Ok(())
}

/// Deletes the delivered messages of `$1` (seqs) whose current delivery is the matching
/// receipt of `$2`: what [`Tx::ack_later`] sends.
pub(crate) const DELETE_DELIVERED: &str =
    "DELETE FROM dispatch WHERE (seq, receipt) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))";

/// Sets delivered message `seq` aside on its tenant's concurrency `key` if `receipt` is still
/// its current delivery (whether it was): unleased, invisible until `fallback` unless
/// [`wake_parked`] wakes it, its rank kept.
pub(crate) fn park_delivered(
    tx: &mut Tx,
    seq: i64,
    receipt: &str,
    key: &str,
    fallback: Timestamp,
) -> Result<bool, TxError> {
    let n = tx.execute(
        "UPDATE dispatch SET receipt = NULL, visible_at = $3, parked_on = $4 WHERE seq = $1 AND receipt = $2",
        &[&seq, &receipt, &fallback.timestamp_millis(), &key],
    )?;
    Ok(n > 0)
}

/// Makes the first `n` messages parked on `tenant`'s `key` (by rank, then enqueue order)
/// visible at `now`, and notifies the listeners at commit; how many. Rows another
/// transaction holds are skipped (their fallback still bounds their wait).
pub(crate) fn wake_parked(tx: &mut Tx, tenant: &str, key: &str, n: usize, now: Timestamp) -> Result<usize, TxError> {
    let limit = i64::try_from(n).unwrap_or(i64::MAX);
    let woken = tx.execute(
        "UPDATE dispatch SET visible_at = $4, parked_on = NULL
         WHERE seq IN (SELECT seq FROM dispatch WHERE tenant = $1 AND parked_on = $2
                       ORDER BY rank, seq LIMIT $3 FOR UPDATE SKIP LOCKED)",
        &[&tenant, &key, &limit, &now.timestamp_millis()],
    )?;
    if woken > 0 {
        notify(tx)?;
    }
    Ok(usize::try_from(woken).unwrap_or(usize::MAX))
}

/// A transaction's failure as the queue port's.
pub(crate) fn queue_error(e: TxError) -> QueueError {
    match e.into_store() {
        StoreError::Transient(e) => QueueError::Transient(e),
        other => QueueError::Other(Box::new(other)),
    }
}

impl PgQueue {
    /// Runs a conditional write on one delivery (`step(tx, seq, receipt)`), answering
    /// [`QueueError::StaleReceipt`] if the receipt is not (or no longer) a current delivery.
    async fn on_delivery<F>(&self, receipt: &Receipt, step: F) -> Result<(), QueueError>
    where
        F: Fn(&mut Tx, i64, &str) -> Result<bool, TxError> + Send + 'static,
    {
        let seq = receipt_seq(receipt).ok_or(QueueError::StaleReceipt)?;
        let receipt = receipt.0.clone();
        let done = self
            .db
            .transaction_with(Isolation::ReadCommitted, move |tx| step(tx, seq, &receipt))
            .await
            .map_err(queue_error)?;
        if done { Ok(()) } else { Err(QueueError::StaleReceipt) }
    }
}

#[async_trait]
impl DispatchQueue for PgQueue {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        if items.is_empty() {
            return Ok(());
        }
        // One transaction per message, in order: each row's upsert reads and writes that row
        // only, under its lock, and a transaction that re-arms a delivered message (the
        // reaper's stale runs) must not hold one message while it waits for another — a
        // completion group acknowledging several at once would be waiting for it in turn (a
        // deadlock, seen in the 300k-schedule bench, broken only after deadlock_timeout).
        for item in items {
            let item = item.clone();
            self.db
                .transaction_with(Isolation::ReadCommitted, move |tx| {
                    insert_dispatches(tx, std::slice::from_ref(&item))
                })
                .await
                .map_err(queue_error)?;
        }
        Ok(())
    }

    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.poller
            .poll(Isolation::ReadCommitted, wait, None, move |tx, now| {
                take_visible(tx, max, visibility, now)
            })
            .await
            .map_err(queue_error)
    }

    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        let until = self.clock.now() + visibility.to_chrono();
        self.on_delivery(receipt, move |tx, seq, receipt| {
            extend_delivered(tx, seq, receipt, until)
        })
        .await
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        self.on_delivery(receipt, delete_delivered).await
    }

    /// One pass over the `dispatch` table (the queue's messages only).
    async fn depth(&self) -> Result<Option<Vec<QueueDepth>>, QueueError> {
        let conn = self.db.get().await.map_err(|e| queue_error(e.into()))?;
        let rows = conn
            .query(
                "SELECT tenant, priority, count(*) FROM dispatch GROUP BY tenant, priority ORDER BY tenant, priority",
                &[],
            )
            .await
            .map_err(|e| queue_error(e.into()))?;
        let depth = rows
            .iter()
            .map(|r| QueueDepth {
                tenant: TenantId(r.get(0)),
                priority: u8::try_from(r.get::<_, i16>(1).clamp(0, 9)).unwrap_or(0),
                messages: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            })
            .collect();
        Ok(Some(depth))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    //! The steps only the work port calls (parking on a concurrency key and waking), run in
    //! transactions of their own here.
    use super::*;
    use crate::testing::postgres;
    use crate::{PgOptions, Tx};
    use sked_core::timestamp;

    fn at(secs: i64) -> Timestamp {
        timestamp::from_ms(1_800_000_000_000 + secs * 1000)
    }

    fn dispatch(job: &str) -> Dispatch {
        Dispatch {
            tenant: TenantId::from("t"),
            run_id: RunId::from(format!("{job}@x").as_str()),
            priority: 5,
            not_before: at(0),
        }
    }

    async fn run<T: Send + 'static>(db: &PgDb, f: impl FnMut(&mut Tx) -> Result<T, TxError> + Send + 'static) -> T {
        db.transaction_with(Isolation::ReadCommitted, f).await.unwrap()
    }

    async fn take(db: &PgDb, now: Timestamp) -> Vec<Delivery> {
        run(db, move |tx| take_visible(tx, 10, Dur::secs(30), now)).await
    }

    fn jobs(ds: &[Delivery]) -> Vec<&str> {
        ds.iter().map(|d| d.dispatch.run_id.as_str()).collect()
    }

    /// A pool remembers the tenant it last found alone, and takes that tenant's messages with
    /// the tenants' read in one round trip — only while it is still alone: once another tenant
    /// has messages, the receive serves the two in turns, as one without the hint would.
    #[tokio::test]
    async fn the_tenant_found_alone_is_taken_at_once_only_while_it_is_alone() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let of = |tenant: &str, job: &str| Dispatch {
            tenant: TenantId::from(tenant),
            ..dispatch(job)
        };
        let take_two = |db: &PgDb| {
            let db = db.clone();
            async move { run(&db, |tx| take_visible(tx, 2, Dur::secs(30), at(0))).await }
        };
        let hint = |db: &PgDb| db.alone_in_queue.lock().unwrap().clone();
        run(&db, move |tx| {
            insert_dispatches(tx, &[of("a", "a1"), of("a", "a2"), of("a", "a3"), of("a", "a4")])
        })
        .await;
        assert_eq!(hint(&db), None);
        assert_eq!(jobs(&take_two(&db).await), ["a1@x", "a2@x"]);
        assert_eq!(hint(&db).as_deref(), Some("a"), "a was alone");
        // Still alone: taken by the checked take.
        assert_eq!(jobs(&take_two(&db).await), ["a3@x", "a4@x"]);
        assert_eq!(hint(&db).as_deref(), Some("a"));

        run(&db, move |tx| {
            insert_dispatches(tx, &[of("a", "a5"), of("a", "a6"), of("b", "b1"), of("b", "b2")])
        })
        .await;
        let both = take_two(&db).await;
        let tenants: HashSet<&str> = both.iter().map(|d| d.dispatch.tenant.as_str()).collect();
        assert_eq!(
            tenants,
            HashSet::from(["a", "b"]),
            "in turns, not two of a: {:?}",
            jobs(&both)
        );
        assert_eq!(hint(&db), None, "a is no longer alone");
    }

    #[tokio::test]
    async fn parked_messages_wait_for_a_wake_or_their_fallback() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        run(&db, |tx| {
            insert_dispatches(tx, &[dispatch("a"), dispatch("b"), dispatch("c")])
        })
        .await;
        let got = take(&db, at(0)).await;
        assert_eq!(jobs(&got), ["a@x", "b@x", "c@x"]);

        // a and b set aside on key k; c's delivery goes on.
        for d in &got[..2] {
            let receipt = d.receipt.0.clone();
            let seq = receipt_seq(&d.receipt).unwrap();
            assert!(run(&db, move |tx| park_delivered(tx, seq, &receipt, "k", at(5))).await);
        }
        let stale = got[0].receipt.0.clone();
        let seq = receipt_seq(&got[0].receipt).unwrap();
        assert!(
            !run(&db, move |tx| park_delivered(tx, seq, &stale, "k", at(5))).await,
            "a parked message's receipt is no longer current"
        );
        assert!(take(&db, at(1)).await.is_empty(), "parked messages are not receivable");

        // One slot freed: the first parked message, in serving order, is woken.
        assert_eq!(run(&db, |tx| wake_parked(tx, "t", "k", 1, at(1))).await, 1);
        let woken = take(&db, at(1)).await;
        assert_eq!(jobs(&woken), ["a@x"]);
        assert_eq!(woken[0].receive_count, 2);

        // b's fallback comes: delivered, and no longer parked, so a wake cannot make it visible
        // again while it is being handled.
        assert_eq!(jobs(&take(&db, at(5)).await), ["b@x"]);
        assert_eq!(run(&db, |tx| wake_parked(tx, "t", "k", 5, at(6))).await, 0);
        assert!(take(&db, at(6)).await.is_empty());
    }

    #[tokio::test]
    async fn an_enqueue_unparks_its_run() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        run(&db, |tx| insert_dispatches(tx, &[dispatch("a")])).await;
        let got = take(&db, at(0)).await.remove(0);
        let seq = receipt_seq(&got.receipt).unwrap();
        let receipt = got.receipt.0.clone();
        assert!(run(&db, move |tx| park_delivered(tx, seq, &receipt, "k", at(60))).await);
        run(&db, |tx| insert_dispatches(tx, &[dispatch("a")])).await;
        assert_eq!(jobs(&take(&db, at(0)).await), ["a@x"], "receivable at its not_before");
        assert_eq!(run(&db, |tx| wake_parked(tx, "t", "k", 1, at(1))).await, 0);
    }
}
