//! The log retention pass ([`LogPruner`]) against a scripted store and a manual clock: the
//! cutoff is the clock's now minus the retention, batches are asked for while they come back
//! full, and passes run at start and then every interval of the clock's time.

use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::ports::{LogError, LogRetention};
use sked_core::service::log_retention::{LogPruner, LogRetentionConfig};
use sked_core::timestamp::{Timestamp, parse};
use sked_testkit::clock::ManualClock;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

fn t0() -> Timestamp {
    parse("2026-03-01T00:00:00Z").unwrap()
}

/// A store that answers each call with the next of `batches` (then 0) and records the
/// cutoffs it was asked for.
struct Scripted {
    batches: Mutex<Vec<u64>>,
    cutoffs: Mutex<Vec<(Timestamp, usize)>>,
    calls: watch::Sender<usize>,
}

impl Scripted {
    fn new(batches: &[u64]) -> Arc<Self> {
        Arc::new(Scripted {
            batches: Mutex::new(batches.iter().rev().copied().collect()),
            cutoffs: Mutex::new(Vec::new()),
            calls: watch::Sender::new(0),
        })
    }

    fn cutoffs(&self) -> Vec<(Timestamp, usize)> {
        self.cutoffs.lock().unwrap().clone()
    }

    async fn wait_for_calls(&self, n: usize) {
        let _ = self.calls.subscribe().wait_for(|c| *c >= n).await;
    }
}

#[async_trait]
impl LogRetention for Scripted {
    async fn remove_before(&self, cutoff: Timestamp, limit: usize) -> Result<u64, LogError> {
        self.cutoffs.lock().unwrap().push((cutoff, limit));
        let batch = self.batches.lock().unwrap().pop().unwrap_or(0);
        self.calls.send_modify(|c| *c += 1);
        Ok(batch)
    }
}

fn config() -> LogRetentionConfig {
    LogRetentionConfig {
        keep: Dur::secs(30 * 86_400),
        interval: Dur::secs(3_600),
        batch: 3,
    }
}

#[tokio::test]
async fn a_pass_removes_before_now_minus_keep_while_batches_come_back_full() {
    let store = Scripted::new(&[3, 3, 1, 3]);
    let clock = Arc::new(ManualClock::new(t0()));
    let pruner = LogPruner::new(store.clone(), clock, config());

    assert_eq!(pruner.prune_once().await.unwrap(), 7);
    let cutoff = t0() - chrono::Duration::days(30);
    assert_eq!(
        store.cutoffs(),
        vec![(cutoff, 3); 3],
        "stops after the first short batch"
    );
}

#[tokio::test]
async fn an_error_ends_the_pass() {
    struct Failing;
    #[async_trait]
    impl LogRetention for Failing {
        async fn remove_before(&self, _: Timestamp, _: usize) -> Result<u64, LogError> {
            Err(LogError::Io("disk gone".into()))
        }
    }
    let pruner = LogPruner::new(Arc::new(Failing), Arc::new(ManualClock::new(t0())), config());
    assert!(pruner.prune_once().await.is_err());
}

/// Passes at start and then every interval of the clock's time, each with the cutoff of its
/// own instant. Paused tokio time only serves to let every task run until idle: the pruner
/// waits on the manual clock, never on a timer.
#[tokio::test(start_paused = true)]
async fn passes_run_at_start_and_then_every_interval_of_the_clock() {
    let store = Scripted::new(&[]);
    let clock = Arc::new(ManualClock::new(t0()));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(LogPruner::new(store.clone(), clock.clone(), config()).run(shutdown.clone()));
    let settle = || tokio::time::sleep(std::time::Duration::from_secs(1));

    store.wait_for_calls(1).await;
    clock.advance(Dur::secs(3_599));
    settle().await;
    assert_eq!(store.cutoffs().len(), 1, "no pass before the interval is up");

    let second = clock.advance(Dur::secs(1));
    store.wait_for_calls(2).await;
    assert_eq!(
        store.cutoffs(),
        vec![
            (t0() - chrono::Duration::days(30), 3),
            (second - chrono::Duration::days(30), 3)
        ]
    );

    shutdown.cancel();
    task.await.unwrap();
}
