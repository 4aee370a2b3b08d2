//! [`Poller`]: the long polls of one process's [`crate::SqsQueue`]. A receive that found
//! nothing waits here, and every receive waiting in the process (the worker loops share one
//! queue adapter) is served by at most one long poll per queue at a time: each up to
//! [`LONG_POLL`], asking for as many messages as the waiting receives want (at most 10). A poll
//! is a task of its own, never dropped: what it brings is kept until a receive takes it (a
//! dropped poll's messages would stay invisible for their whole visibility).
//!
//! So a message sent to any of the three queues is received as soon as SQS hands it to the
//! poll on that queue — where polls that went round the queues a second each could leave it
//! up to a second — and a quiet process makes three requests per [`LONG_POLL`], not a pass over
//! the queues and a poll every second for each worker loop (~4 requests a second a loop).
//!
//! Polls are renewed only while a receive waits. What a poll brings when none waits (its
//! receives gave up, or the worker is busy or stopping) is kept for the next receive for
//! [`UNWANTED_KEPT`], then handed back to SQS (visibility 0: any worker's poll may take it at
//! once) rather than left hidden for its whole visibility; deliveries kept past half their
//! visibility are let go, not handed out. Among messages kept from several queues, a receive
//! takes them in its order (high first, or low first on an aging turn); when polls on several
//! queues answer at once, the first answer may be taken before the others arrive.

use crate::sqs::{Lane, Lanes};
use sked_core::ports::{Delivery, QueueError};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long one poll waits for a message (SQS's longest).
pub const LONG_POLL: Duration = Duration::from_secs(20);

/// How long deliveries a poll brought when no receive waited are kept for the next one before
/// they are handed back to SQS.
pub const UNWANTED_KEPT: Duration = Duration::from_secs(1);

/// How long a failed poll waits before its queue is polled again.
const FAILED_POLL_PAUSE: Duration = Duration::from_secs(1);

/// What the polls share with the receives.
#[derive(Default)]
struct State {
    /// Deliveries brought and not taken, by lane, with when they came.
    kept: [VecDeque<(Instant, Delivery)>; 3],
    /// Whether a poll is out on each lane.
    polling: [bool; 3],
    /// Messages the waiting receives want, together.
    wanted: usize,
    /// The visibility (whole seconds) of the latest receive: what the polls ask for.
    visibility: i32,
    /// A poll's failure, for the next receive to answer.
    failure: Option<QueueError>,
}

fn slot(lane: Lane) -> usize {
    match lane {
        Lane::High => 0,
        Lane::Normal => 1,
        Lane::Low => 2,
    }
}

/// The long polls of one queue adapter (see the module's header).
pub struct Poller {
    lanes: Lanes,
    state: Mutex<State>,
    arrived: Notify,
}

impl Poller {
    /// Polls of `lanes`.
    pub(crate) fn new(lanes: Lanes) -> Arc<Self> {
        Arc::new(Poller {
            lanes,
            state: Mutex::default(),
            arrived: Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a poll is out on `lane` (a quick look at it would find nothing the poll does
    /// not bring).
    pub(crate) fn polling(&self, lane: Lane) -> bool {
        self.state().polling[slot(lane)]
    }

    /// Up to `max` kept deliveries, from the lanes in `order`.
    pub(crate) fn take(&self, max: usize, order: [Lane; 3], visibility: i32) -> Vec<Delivery> {
        let mut state = self.state();
        take_kept(&mut state, max, order, visibility)
    }

    /// Waits until `deadline` for deliveries (up to `max`, from the lanes in `order`), with
    /// polls out on every lane meanwhile. Empty when nothing came in time.
    pub(crate) async fn wait(
        self: &Arc<Self>,
        max: usize,
        order: [Lane; 3],
        visibility: i32,
        deadline: Instant,
    ) -> Result<Vec<Delivery>, QueueError> {
        let _wanted = Wanted::register(self, max, visibility);
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            {
                let mut state = self.state();
                if let Some(failure) = state.failure.take() {
                    return Err(failure);
                }
                let got = take_kept(&mut state, max, order, visibility);
                if !got.is_empty() {
                    return Ok(got);
                }
            }
            self.poll_every_lane();
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// Starts a poll on each lane that has none out.
    fn poll_every_lane(self: &Arc<Self>) {
        for lane in [Lane::High, Lane::Normal, Lane::Low] {
            let start = {
                let mut state = self.state();
                !std::mem::replace(&mut state.polling[slot(lane)], true)
            };
            if start {
                tokio::spawn(self.clone().keep_polling(lane));
            }
        }
    }

    /// Polls `lane` while a receive waits.
    async fn keep_polling(self: Arc<Self>, lane: Lane) {
        loop {
            let (want, visibility) = {
                let mut state = self.state();
                if state.wanted == 0 {
                    state.polling[slot(lane)] = false;
                    return;
                }
                (state.wanted.min(10), state.visibility)
            };
            let answer = self
                .lanes
                .receive_from(lane, want, visibility, LONG_POLL.as_secs() as i32)
                .await;
            let (failed, brought) = (answer.is_err(), answer.as_ref().map_or(0, Vec::len));
            let now = Instant::now();
            let unwanted = {
                let mut state = self.state();
                match answer {
                    Ok(deliveries) => state.kept[slot(lane)].extend(deliveries.into_iter().map(|d| (now, d))),
                    Err(e) => state.failure = Some(e),
                }
                brought > 0 && state.wanted == 0
            };
            self.arrived.notify_waiters();
            if unwanted {
                tokio::spawn(self.clone().hand_back(lane, now));
            }
            if failed {
                tokio::time::sleep(FAILED_POLL_PAUSE).await;
            }
        }
    }

    /// After [`UNWANTED_KEPT`], hands `lane`'s deliveries kept since `brought` or before back
    /// to SQS: no receive took them.
    async fn hand_back(self: Arc<Self>, lane: Lane, brought: Instant) {
        tokio::time::sleep(UNWANTED_KEPT).await;
        let kept: Vec<Delivery> = {
            let mut state = self.state();
            let kept = &mut state.kept[slot(lane)];
            let old = kept.iter().take_while(|(at, _)| *at <= brought).count();
            kept.drain(..old).map(|(_, d)| d).collect()
        };
        if kept.is_empty() {
            return;
        }
        if let Err(e) = self.lanes.hand_back(lane, &kept).await {
            // They show again when their visibility ends.
            tracing::warn!(queue = lane.as_str(), messages = kept.len(), error = %e, "kept messages not handed back");
        }
    }
}

/// Up to `max` of `state`'s kept deliveries from the lanes in `order`, those kept past half of
/// `visibility` (seconds) let go.
fn take_kept(state: &mut State, max: usize, order: [Lane; 3], visibility: i32) -> Vec<Delivery> {
    let fresh_after = Instant::now().checked_sub(Duration::from_secs(visibility.max(1) as u64) / 2);
    let mut got = Vec::new();
    for lane in order {
        let kept = &mut state.kept[slot(lane)];
        while got.len() < max {
            match kept.pop_front() {
                Some((at, _)) if fresh_after.is_some_and(|fresh| at < fresh) => {}
                Some((_, delivery)) => got.push(delivery),
                None => break,
            }
        }
    }
    got
}

/// A waiting receive's want, counted while it waits.
struct Wanted<'a> {
    poller: &'a Poller,
    max: usize,
}

impl<'a> Wanted<'a> {
    fn register(poller: &'a Poller, max: usize, visibility: i32) -> Self {
        let mut state = poller.state();
        state.wanted += max;
        state.visibility = visibility;
        Wanted { poller, max }
    }
}

impl Drop for Wanted<'_> {
    fn drop(&mut self) {
        let mut state = self.poller.state();
        state.wanted = state.wanted.saturating_sub(self.max);
    }
}
