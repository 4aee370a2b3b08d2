//! Fault injection at the ports: [`Faulty<P>`] wraps any store, queue, work port or clock,
//! delegates to it, and injects the faults a [`FaultPlan`] asks for, drawn from a seeded
//! [`SimRng`].
//!
//! - [`store`]: a process cut off for a while, transient errors (throttling) before or after
//!   the write took effect,
//!   conflicts on conditional writes, and yields that let concurrent callers interleave.
//! - [`queue`]: messages lost, duplicated, delivered late or out of order, transient errors.
//! - [`work`]: the work port's one-transaction steps failing before they take effect, or
//!   taking effect with their reply lost.
//! - [`clock`]: a per-process offset (skew) from the true time, re-drawn on demand.
//!
//! Only faults the design claims to survive are injected. Every injected fault is counted by
//! kind in [`FaultCounts`]. All wrappers of one simulation share one [`Chaos`]: its generator
//! is drawn in call order, which a single-threaded simulation makes deterministic.
//! Nothing here reads the wall clock or the system's randomness.

pub mod clock;
pub mod queue;
pub mod rng;
pub mod store;
pub mod work;

pub use rng::SimRng;

use sked_core::Timestamp;
use sked_core::ports::{Clock, Dispatch};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

/// Every kind of fault a simulation injects (port faults here, process faults by the
/// simulation itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A store call failed before it took effect (throttling, a busy database).
    StoreTransient,
    /// A store write took effect but its caller was told it failed (a lost reply).
    StoreTransientAfterCommit,
    /// A conditional store write was refused as a conflict.
    StoreConflict,
    /// A port call paused, letting other callers run in between.
    Interleave,
    /// An enqueued message vanished.
    QueueLost,
    /// An enqueued message was delivered again later.
    QueueDuplicated,
    /// An enqueued message arrived late.
    QueueLate,
    /// A receive answered its messages out of order.
    QueueReordered,
    /// A queue call failed (throttling).
    QueueTransient,
    /// A process's clock moved (skew re-drawn within the tolerated bound).
    ClockSkew,
    /// The true clock jumped forward (within the tolerated bound).
    ClockJump,
    /// A process was cut off from the store for a while (every call failed transiently).
    StorePartition,
    /// A worker died mid-attempt; its leases were left to expire.
    WorkerCrash,
    /// A worker stood still (GC pause, SIGSTOP), possibly past its lease, then resumed.
    WorkerPause,
    /// A sweeper died between writing runs and enqueueing them.
    SweeperCrash,
    /// Two sweepers swept at the same time.
    TwoSweepers,
    /// A payload that hangs until stopped.
    PayloadHang,
    /// A payload that fails.
    PayloadFail,
    /// A payload that runs longer than its job's timeout.
    PayloadOverTimeout,
}

impl FaultKind {
    /// A short name for reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            FaultKind::StoreTransient => "store_transient",
            FaultKind::StoreTransientAfterCommit => "store_transient_after_commit",
            FaultKind::StoreConflict => "store_conflict",
            FaultKind::Interleave => "interleave",
            FaultKind::QueueLost => "queue_lost",
            FaultKind::QueueDuplicated => "queue_duplicated",
            FaultKind::QueueLate => "queue_late",
            FaultKind::QueueReordered => "queue_reordered",
            FaultKind::QueueTransient => "queue_transient",
            FaultKind::ClockSkew => "clock_skew",
            FaultKind::ClockJump => "clock_jump",
            FaultKind::StorePartition => "store_partition",
            FaultKind::WorkerCrash => "worker_crash",
            FaultKind::WorkerPause => "worker_pause",
            FaultKind::SweeperCrash => "sweeper_crash",
            FaultKind::TwoSweepers => "two_sweepers",
            FaultKind::PayloadHang => "payload_hang",
            FaultKind::PayloadFail => "payload_fail",
            FaultKind::PayloadOverTimeout => "payload_over_timeout",
        }
    }
}

/// Faults injected so far, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts(pub BTreeMap<FaultKind, u64>);

impl FaultCounts {
    /// Counts one fault of `kind`.
    pub fn add(&mut self, kind: FaultKind) {
        *self.0.entry(kind).or_default() += 1;
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &FaultCounts) {
        for (k, n) in &other.0 {
            *self.0.entry(*k).or_default() += n;
        }
    }

    /// How many of `kind`.
    pub fn get(&self, kind: FaultKind) -> u64 {
        self.0.get(&kind).copied().unwrap_or(0)
    }

    /// All faults.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

impl fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={n}", k.as_str())?;
        }
        Ok(())
    }
}

/// How often each port fault strikes, per call (0 disables it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultPlan {
    /// A store call fails before taking effect.
    pub store_transient: f64,
    /// A store write takes effect but answers a transient error.
    pub store_transient_after_commit: f64,
    /// A job update or firing is refused as a conflict.
    pub store_conflict: f64,
    /// A port call yields once before running (lets concurrent callers interleave).
    pub interleave: f64,
    /// An enqueued message is lost.
    pub queue_lost: f64,
    /// An enqueued message is delivered again later.
    pub queue_duplicated: f64,
    /// An enqueued message is held back for up to `queue_late_max_ms`.
    pub queue_late: f64,
    /// Longest hold of a late or duplicated message, in ms.
    pub queue_late_max_ms: u64,
    /// A receive's batch comes back shuffled.
    pub queue_reordered: f64,
    /// A queue call fails.
    pub queue_transient: f64,
    /// Largest clock offset of a process from the true time, in ms (either way).
    pub max_skew_ms: u64,
}

impl FaultPlan {
    /// No faults at all.
    pub fn none() -> Self {
        FaultPlan {
            store_transient: 0.0,
            store_transient_after_commit: 0.0,
            store_conflict: 0.0,
            interleave: 0.0,
            queue_lost: 0.0,
            queue_duplicated: 0.0,
            queue_late: 0.0,
            queue_late_max_ms: 0,
            queue_reordered: 0.0,
            queue_transient: 0.0,
            max_skew_ms: 0,
        }
    }

    /// The default mix: every fault frequent enough to meet every other within a short run.
    pub fn standard() -> Self {
        FaultPlan {
            store_transient: 0.03,
            store_transient_after_commit: 0.01,
            store_conflict: 0.03,
            interleave: 0.15,
            queue_lost: 0.03,
            queue_duplicated: 0.03,
            queue_late: 0.05,
            queue_late_max_ms: 20_000,
            queue_reordered: 0.2,
            queue_transient: 0.02,
            max_skew_ms: 500,
        }
    }
}

/// The shared state of fault injection: the plan, the generator and the counts.
#[derive(Clone)]
pub struct Chaos {
    /// Shared by every wrapper of one simulation.
    inner: Arc<Mutex<ChaosState>>,
    /// The true time (for holding late messages).
    clock: Arc<dyn Clock>,
}

/// What a [`Chaos`] guards.
struct ChaosState {
    /// Where faults come from.
    rng: SimRng,
    /// How often they strike.
    plan: FaultPlan,
    /// Whether any strike at all (simulations turn faults off to let the system settle).
    enabled: bool,
    /// What struck so far.
    counts: FaultCounts,
}

impl Chaos {
    /// Fault injection following `plan`, drawing from `rng`, holding late messages by `clock`.
    pub fn new(rng: SimRng, plan: FaultPlan, clock: Arc<dyn Clock>) -> Self {
        Chaos {
            inner: Arc::new(Mutex::new(ChaosState {
                rng,
                plan,
                enabled: true,
                counts: FaultCounts::default(),
            })),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, ChaosState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns injection on or off.
    pub fn set_enabled(&self, on: bool) {
        self.lock().enabled = on;
    }

    /// Whether faults are being injected.
    pub fn enabled(&self) -> bool {
        self.lock().enabled
    }

    /// The plan.
    pub fn plan(&self) -> FaultPlan {
        self.lock().plan
    }

    /// Faults injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts.clone()
    }

    /// Counts a fault injected outside the wrappers (a crash, a pause).
    pub fn record(&self, kind: FaultKind) {
        self.lock().counts.add(kind);
    }

    /// Whether a fault of `kind` strikes now, with the probability `rate` picks from the plan;
    /// counts it if so.
    pub fn strike(&self, kind: FaultKind, rate: impl Fn(&FaultPlan) -> f64) -> bool {
        let mut st = self.lock();
        let p = rate(&st.plan);
        if !st.enabled || p <= 0.0 {
            return false;
        }
        let hit = st.rng.chance(p);
        if hit {
            st.counts.add(kind);
        }
        hit
    }

    /// A number in `lo..=hi` from the fault stream.
    pub fn range(&self, lo: u64, hi: u64) -> u64 {
        self.lock().rng.range(lo, hi)
    }

    /// Shuffles `items` in place from the fault stream.
    pub fn shuffle<T>(&self, items: &mut [T]) {
        let mut st = self.lock();
        for i in (1..items.len()).rev() {
            let j = st.rng.index(i + 1);
            items.swap(i, j);
        }
    }

    /// The true time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Yields once if an interleaving strikes, so other futures run before the call goes on.
    pub async fn maybe_yield(&self) {
        if self.strike(FaultKind::Interleave, |p| p.interleave) {
            YieldOnce(false).await;
        }
    }
}

/// A future that is pending once (waking itself) and then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A message held back by a faulty queue until `at`.
#[derive(Debug, Clone)]
struct Held {
    /// When it is handed to the real queue.
    at: Timestamp,
    /// What.
    dispatch: Dispatch,
}

/// Wraps a port `P` and injects faults into it (see the module header). The port traits are
/// implemented for `Faulty<dyn JobStore>`-like wrappers in [`store`], [`queue`] and [`clock`].
pub struct Faulty<P: ?Sized> {
    /// The real port.
    inner: Arc<P>,
    /// Where faults come from.
    chaos: Chaos,
    /// Late and duplicated messages, by the time they are due (queues only).
    held: Mutex<Vec<Held>>,
    /// This process's clock offset from the true time, in ms (clocks only).
    offset_ms: AtomicI64,
    /// Every call fails until then (a partition between this process and the port).
    cut_off_until: Mutex<Option<Timestamp>>,
}

impl<P: ?Sized> Faulty<P> {
    /// Wraps `inner`, injecting faults from `chaos`.
    pub fn new(inner: Arc<P>, chaos: Chaos) -> Self {
        Faulty {
            inner,
            chaos,
            held: Mutex::new(Vec::new()),
            offset_ms: AtomicI64::new(0),
            cut_off_until: Mutex::new(None),
        }
    }

    /// Cuts this process off from the port until `until` (true time); counts it.
    pub fn partition(&self, until: Timestamp) {
        *self.cut_off_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
        self.chaos.record(FaultKind::StorePartition);
    }

    /// Ends any partition now.
    pub fn heal(&self) {
        *self.cut_off_until.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether the process is cut off now.
    fn cut_off(&self) -> bool {
        let now = self.chaos.now();
        self.cut_off_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| now < t)
    }

    /// The wrapped port.
    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    /// The shared fault state.
    pub fn chaos(&self) -> &Chaos {
        &self.chaos
    }
}
