//! [`Driver`]: a tiny single-threaded executor that polls the simulation's futures in a fixed
//! order, so that the same inputs always give the same interleaving.
//!
//! Each task has a flag its waker sets; [`Driver::run_until_stalled`] polls flagged tasks in
//! id order, round after round, until none is flagged — the exact moment the simulated
//! system has nothing left to do until the clock moves. Tasks belong to an owner (a worker)
//! so a crash can drop them all and a pause can freeze them. It must not use tokio's
//! scheduler or timers, whose order and randomness are not ours to fix.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

/// Most polling rounds one `run_until_stalled` may take before it is called a livelock.
const MAX_ROUNDS: usize = 100_000;

/// Set by a task's waker; cleared when the task is polled.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One spawned future.
struct Task {
    /// The work.
    future: Pin<Box<dyn Future<Output = ()>>>,
    /// Set when it should be polled.
    flag: Arc<Flag>,
    /// Its waker (made once).
    waker: Waker,
    /// Who runs it (a worker's index); crashes and pauses act per owner.
    owner: usize,
}

/// The simulation's executor.
#[derive(Default)]
pub struct Driver {
    /// Live tasks by id; ids grow, so iteration order is spawn order.
    tasks: BTreeMap<u64, Task>,
    /// The next task id.
    next_id: u64,
    /// Owners whose tasks are not polled for now.
    frozen: std::collections::BTreeSet<usize>,
}

impl Driver {
    /// An executor with no tasks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a task run by `owner`; it is polled at the next round.
    pub fn spawn(&mut self, owner: usize, future: impl Future<Output = ()> + 'static) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        self.tasks.insert(
            id,
            Task {
                future: Box::pin(future),
                flag,
                waker,
                owner,
            },
        );
        id
    }

    /// Tasks of `owner` still alive.
    pub fn count_of(&self, owner: usize) -> usize {
        self.tasks.values().filter(|t| t.owner == owner).count()
    }

    /// Drops every task of `owner` (a crash: their futures never run again).
    pub fn kill(&mut self, owner: usize) -> usize {
        let ids: Vec<u64> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.owner == owner)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            self.tasks.remove(id);
        }
        ids.len()
    }

    /// Stops polling `owner`'s tasks until [`Driver::thaw`].
    pub fn freeze(&mut self, owner: usize) {
        self.frozen.insert(owner);
    }

    /// Polls `owner`'s tasks again (each once, whatever woke meanwhile).
    pub fn thaw(&mut self, owner: usize) {
        if self.frozen.remove(&owner) {
            for t in self.tasks.values().filter(|t| t.owner == owner) {
                t.flag.0.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Whether `owner` is frozen.
    pub fn is_frozen(&self, owner: usize) -> bool {
        self.frozen.contains(&owner)
    }

    /// One round: polls every flagged, unfrozen task once, in id order. Returns whether any
    /// task was polled.
    fn round(&mut self) -> bool {
        let ids: Vec<u64> = self
            .tasks
            .iter()
            .filter(|(_, t)| !self.frozen.contains(&t.owner) && t.flag.0.load(Ordering::Relaxed))
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            let Some(task) = self.tasks.get_mut(id) else { continue };
            task.flag.0.store(false, Ordering::Relaxed);
            let waker = task.waker.clone();
            let mut cx = Context::from_waker(&waker);
            if task.future.as_mut().poll(&mut cx).is_ready() {
                self.tasks.remove(id);
            }
        }
        !ids.is_empty()
    }

    /// Polls until no task can make progress without the clock moving.
    pub fn run_until_stalled(&mut self) {
        for _ in 0..MAX_ROUNDS {
            if !self.round() {
                return;
            }
        }
        panic!("simulation livelock: tasks kept waking each other for {MAX_ROUNDS} rounds");
    }

    /// Runs `future` to its end, letting the spawned tasks run whenever it waits. Panics if
    /// it waits on something only the clock could bring (the simulation's own calls never
    /// should).
    pub fn block_on<F: Future>(&mut self, future: F) -> F::Output {
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        for _ in 0..MAX_ROUNDS {
            if flag.0.swap(false, Ordering::Relaxed)
                && let Poll::Ready(out) = future.as_mut().poll(&mut cx)
            {
                return out;
            }
            if !self.round() && !flag.0.load(Ordering::Relaxed) {
                panic!("simulation stalled: a driven call waits for something that cannot happen");
            }
        }
        panic!("simulation livelock in a driven call");
    }
}
