//! [`MemQueue`]: the in-memory [`DispatchQueue`].
//!
//! Keeps the local-queue contract of the trait doc: a tenant's ready messages served by
//! [`dispatch_rank`] then enqueue order, tenants in turns ([`sked_core::fairness`]), visibility leases, receive counts, deduplication
//! by run (a re-enqueue keeps one message, the earlier `not_before` and the new priority, and
//! makes a live receipt stale), and a long poll that waits by the injected [`Clock`] and wakes at once
//! on enqueue. A message's `ready_at` for ranking is its `not_before`.
//!
//! With a receive limit ([`MemQueue::with_receive_limit`]) it gives up a message as SQS's
//! redrive does: a message delivered that many times is moved aside at its next receive
//! ([`MemQueue::dead_letters`]), not delivered. A re-enqueue of a run counts as the new
//! message it is on SQS: its count starts again; so does a message parked on a concurrency
//! key (the one-transaction shape's wait, where a worker on SQS hands the run a new message).
//! State sits behind a std `Mutex`, never held across an `.await`.

use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::fairness::{Ready, Turns, take_in_turns};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::Clock;
use sked_core::ports::queue::{Delivery, Dispatch, DispatchQueue, QueueDepth, QueueError, Receipt, dispatch_rank};
use sked_core::timestamp::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// A dispatch queue in memory, timed by an injected clock.
pub struct MemQueue {
    /// Time for `not_before`, visibility and the long poll.
    clock: Arc<dyn Clock>,
    /// Messages and counters.
    state: Mutex<State>,
    /// Wakes waiting receivers when something is enqueued.
    enqueued: Notify,
}

/// The queue's contents.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// One message per run.
    messages: HashMap<(TenantId, RunId), Message>,
    /// Enqueue order of the next new message.
    next_seq: u64,
    /// Numbers receipts so each delivery's is unique.
    next_receipt: u64,
    /// Per tenant, the last turn it was served in (fair turns across tenants).
    turns: Turns,
    /// Every take that served something, when recording ([`MemQueue::recording`]).
    takes: Option<Vec<Take>>,
    /// Deliveries of one message before it is given up, if any.
    receive_limit: Option<u32>,
    /// The messages given up, in that order.
    dead_letters: Vec<Dispatch>,
}

/// One take of ready messages, as recorded for the simulation's fairness check: which
/// tenants had a ready message just before it, and whose messages it served, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Take {
    /// Tenants with ready messages when the take began, and how many each.
    pub ready: BTreeMap<TenantId, usize>,
    /// The tenant of each message served, in serving order.
    pub served: Vec<TenantId>,
}

/// One queued run.
#[derive(Debug, Clone)]
struct Message {
    /// What was enqueued (with the earliest `not_before` seen).
    dispatch: Dispatch,
    /// Enqueue order, the tie-break after rank.
    seq: u64,
    /// Invisible until then, while a delivery holds it.
    leased_until: Option<Timestamp>,
    /// The current delivery's receipt, if delivered.
    receipt: Option<String>,
    /// Deliveries so far.
    receive_count: u32,
    /// The concurrency key it is parked on ([`State::park`]), if any.
    parked_on: Option<String>,
}

impl Message {
    fn ready(&self, now: Timestamp) -> bool {
        self.dispatch.not_before <= now && self.leased_until.is_none_or(|t| t <= now)
    }

    /// When this message next becomes receivable.
    fn ready_at(&self) -> Timestamp {
        self.leased_until
            .map_or(self.dispatch.not_before, |t| t.max(self.dispatch.not_before))
    }
}

impl MemQueue {
    /// An empty queue timed by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        MemQueue {
            clock,
            state: Mutex::new(State::default()),
            enqueued: Notify::new(),
        }
    }

    /// An empty queue that also records every take ([`MemQueue::drain_takes`]).
    pub fn recording(clock: Arc<dyn Clock>) -> Self {
        let queue = MemQueue::new(clock);
        queue.lock().takes = Some(Vec::new());
        queue
    }

    /// This queue, giving up a message delivered `limit` times at its next receive (as SQS's
    /// redrive `maxReceiveCount` does).
    pub fn with_receive_limit(self, limit: u32) -> Self {
        self.lock().receive_limit = Some(limit);
        self
    }

    /// The messages given up so far ([`MemQueue::with_receive_limit`]), oldest first.
    pub fn dead_letters(&self) -> Vec<Dispatch> {
        self.lock().dead_letters.clone()
    }

    /// The takes recorded since the last call (none unless [`MemQueue::recording`]).
    pub fn drain_takes(&self) -> Vec<Take> {
        self.lock().takes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Messages held (leased or not), for assertions.
    pub fn len(&self) -> usize {
        self.lock().messages.len()
    }

    /// Whether no message is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The queue's state, locked (for a step of [`super::MemWork`] made with the store's).
    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.lock()
    }

    /// Wakes the long polls: something was just enqueued.
    pub(crate) fn notify_enqueued(&self) {
        self.enqueued.notify_waiters();
    }

    /// The long poll: `take` (given the clock's now; answering what it took and when the
    /// next message becomes ready) until it takes something, waiting up to `wait`.
    pub(crate) async fn poll<T>(
        &self,
        max: usize,
        wait: Dur,
        mut take: impl FnMut(Timestamp) -> (Vec<T>, Option<Timestamp>),
    ) -> Vec<T> {
        let deadline = self.clock.now() + wait.to_chrono();
        loop {
            // Register for the wake-up before looking, so an enqueue in between is not missed.
            let notified = self.enqueued.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (got, next_ready) = take(self.clock.now());
            if !got.is_empty() || max == 0 || wait.is_zero() || self.clock.now() >= deadline {
                return got;
            }
            let wake = next_ready.map_or(deadline, |t| t.min(deadline));
            tokio::select! {
                biased;
                _ = notified => {}
                _ = self.clock.sleep_until(wake) => {}
            }
        }
    }
}

impl State {
    /// Leases up to `max` messages ready at `now` for `visibility` (tenants in turns, rank
    /// order within one); also answers when the next message not ready now becomes ready.
    pub(crate) fn take(&mut self, now: Timestamp, max: usize, visibility: Dur) -> (Vec<Delivery>, Option<Timestamp>) {
        let st = self;
        st.give_up_spent(now);
        let mut ready: BTreeMap<TenantId, Vec<Ready<RunId>>> = BTreeMap::new();
        for ((tenant, run_id), m) in st.messages.iter().filter(|(_, m)| m.ready(now)) {
            ready.entry(tenant.clone()).or_default().push(Ready {
                rank: dispatch_rank(m.dispatch.priority, m.dispatch.not_before),
                seq: m.seq as i64,
                key: run_id.clone(),
            });
        }
        for messages in ready.values_mut() {
            messages.sort_by_key(|m| (m.rank, m.seq));
        }
        let ready_tenants: BTreeMap<TenantId, usize> = ready.iter().map(|(t, m)| (t.clone(), m.len())).collect();
        let taken = take_in_turns(&mut st.turns, ready, max);
        if let Some(takes) = st.takes.as_mut().filter(|_| !taken.is_empty()) {
            takes.push(Take {
                ready: ready_tenants,
                served: taken.iter().map(|(tenant, _)| tenant.clone()).collect(),
            });
        }
        let mut out = Vec::new();
        for key in taken {
            st.next_receipt += 1;
            let receipt = format!("{}/{}#{}", key.0, key.1, st.next_receipt);
            let Some(m) = st.messages.get_mut(&key) else { continue };
            m.leased_until = Some(now + visibility.to_chrono());
            m.receipt = Some(receipt.clone());
            m.receive_count += 1;
            out.push(Delivery {
                dispatch: m.dispatch.clone(),
                receipt: Receipt(receipt),
                receive_count: m.receive_count,
            });
        }
        let next = st.next_ready();
        (out, next)
    }

    /// Moves every ready message delivered as often as the receive limit allows to the dead
    /// letters.
    fn give_up_spent(&mut self, now: Timestamp) {
        let Some(limit) = self.receive_limit else {
            return;
        };
        let spent: Vec<(TenantId, RunId)> = self
            .messages
            .iter()
            .filter(|(_, m)| m.ready(now) && m.receive_count >= limit)
            .map(|(key, _)| key.clone())
            .collect();
        for key in spent {
            if let Some(m) = self.messages.remove(&key) {
                self.dead_letters.push(m.dispatch);
            }
        }
    }

    /// When the next message becomes ready: at or before `now` while one is ready (after a
    /// take that parked every message it took, with more left to take), else the earliest
    /// of the others.
    pub(crate) fn next_ready(&self) -> Option<Timestamp> {
        self.messages.values().map(Message::ready_at).min()
    }

    /// Adds messages (one per run: see the module doc).
    pub(crate) fn enqueue(&mut self, items: &[Dispatch]) {
        let st = self;
        for d in items {
            let key = (d.tenant.clone(), d.run_id.clone());
            if let Some(m) = st.messages.get_mut(&key) {
                // A waiting message keeps the earlier time; a leased one is being handled
                // (e.g. its run's retry is being enqueued) and takes the new time.
                m.dispatch.not_before = if m.receipt.is_some() {
                    d.not_before
                } else {
                    m.dispatch.not_before.min(d.not_before)
                };
                m.dispatch.priority = d.priority;
                // A re-enqueue supersedes a live delivery: its receipt goes stale and
                // the message is receivable again. It stands for a new message: its
                // receives count from none.
                m.leased_until = None;
                m.receipt = None;
                m.parked_on = None;
                m.receive_count = 0;
            } else {
                let seq = st.next_seq;
                st.next_seq += 1;
                st.messages.insert(
                    key,
                    Message {
                        dispatch: d.clone(),
                        seq,
                        leased_until: None,
                        receipt: None,
                        receive_count: 0,
                        parked_on: None,
                    },
                );
            }
        }
    }

    /// The message `receipt` is the current delivery of.
    fn delivered(&mut self, receipt: &Receipt) -> Option<&mut Message> {
        self.messages
            .values_mut()
            .find(|m| m.receipt.as_deref() == Some(receipt.0.as_str()))
    }

    /// Keeps the delivered message invisible until `until`; whether `receipt` was current.
    pub(crate) fn extend(&mut self, receipt: &Receipt, until: Timestamp) -> bool {
        self.delivered(receipt).map(|m| m.leased_until = Some(until)).is_some()
    }

    /// Sets the delivered message aside on `key` until `fallback` or a [`State::wake`];
    /// whether `receipt` was current.
    pub(crate) fn park(&mut self, receipt: &Receipt, key: &str, fallback: Timestamp) -> bool {
        self.delivered(receipt)
            .map(|m| {
                m.receipt = None;
                m.leased_until = Some(fallback);
                m.parked_on = Some(key.to_string());
                m.receive_count = 0;
            })
            .is_some()
    }

    /// Makes the first `n` messages of `tenant` parked on `key` (by rank, then enqueue order)
    /// ready at `now`; how many.
    pub(crate) fn wake(&mut self, tenant: &TenantId, key: &str, n: usize, now: Timestamp) -> usize {
        let mut parked: Vec<&mut Message> = self
            .messages
            .values_mut()
            .filter(|m| &m.dispatch.tenant == tenant && m.parked_on.as_deref() == Some(key))
            .collect();
        parked.sort_by_key(|m| (dispatch_rank(m.dispatch.priority, m.dispatch.not_before), m.seq));
        let woken = parked.len().min(n);
        for m in parked.into_iter().take(n) {
            m.parked_on = None;
            m.leased_until = Some(now);
        }
        woken
    }

    /// Removes the delivered message; whether `receipt` was current.
    pub(crate) fn ack(&mut self, receipt: &Receipt) -> bool {
        let key = self
            .delivered(receipt)
            .map(|m| (m.dispatch.tenant.clone(), m.dispatch.run_id.clone()));
        key.is_some_and(|key| self.messages.remove(&key).is_some())
    }
}

#[async_trait]
impl DispatchQueue for MemQueue {
    async fn enqueue(&self, items: &[Dispatch]) -> Result<(), QueueError> {
        self.lock().enqueue(items);
        self.enqueued.notify_waiters();
        Ok(())
    }

    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        Ok(self.poll(max, wait, |now| self.lock().take(now, max, visibility)).await)
    }

    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        let until = self.clock.now() + visibility.to_chrono();
        match self.lock().extend(receipt, until) {
            true => Ok(()),
            false => Err(QueueError::StaleReceipt),
        }
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        match self.lock().ack(receipt) {
            true => Ok(()),
            false => Err(QueueError::StaleReceipt),
        }
    }

    fn receive_limit(&self) -> Option<u32> {
        self.lock().receive_limit
    }

    async fn depth(&self) -> Result<Option<Vec<QueueDepth>>, QueueError> {
        let mut counts: BTreeMap<(TenantId, u8), u64> = BTreeMap::new();
        for message in self.lock().messages.values() {
            let d = &message.dispatch;
            *counts.entry((d.tenant.clone(), d.priority)).or_default() += 1;
        }
        Ok(Some(
            counts
                .into_iter()
                .map(|((tenant, priority), messages)| QueueDepth {
                    tenant,
                    priority,
                    messages,
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn dispatch(run: &str) -> Dispatch {
        Dispatch {
            tenant: TenantId::default(),
            run_id: RunId::from(run),
            priority: 5,
            not_before: sked_core::timestamp::parse("2026-12-01T10:00:00Z").unwrap(),
        }
    }

    /// With a receive limit of 2, a message is delivered twice and given up at the third
    /// receive; one enqueued again meanwhile (a new message on SQS) counts from none.
    #[tokio::test]
    async fn a_message_is_given_up_after_the_receive_limit_and_a_new_one_counts_afresh() {
        let clock = Arc::new(ManualClock::new(dispatch("a").not_before));
        let queue = MemQueue::new(clock.clone()).with_receive_limit(2);
        queue.enqueue(&[dispatch("a"), dispatch("b")]).await.unwrap();
        let receive_all = async || {
            clock.advance(Dur::secs(31));
            let mut got: Vec<(String, u32)> = queue
                .receive(10, Dur::secs(30), Dur::ZERO)
                .await
                .unwrap()
                .into_iter()
                .map(|d| (d.dispatch.run_id.0, d.receive_count))
                .collect();
            got.sort();
            got
        };
        assert_eq!(receive_all().await, [("a".into(), 1), ("b".into(), 1)]);
        assert_eq!(receive_all().await, [("a".into(), 2), ("b".into(), 2)]);
        queue.enqueue(&[dispatch("b")]).await.unwrap();
        assert_eq!(receive_all().await, [("b".to_string(), 1)]);
        assert_eq!(queue.dead_letters(), [dispatch("a")]);
        assert_eq!(queue.receive_limit(), Some(2));
    }
}
