//! The queue contract (sked-testkit) against [`PgQueue`], each case on a fresh database of
//! this binary's private cluster; and what only a shared database can show: queues on two
//! pools (two hosts) receiving at once never get the same message, and a receive waiting on
//! one pool is woken by an enqueue committed through another.

use sked_core::duration::Dur;
use sked_core::ports::Clock;
use sked_core::ports::queue::{Dispatch, DispatchQueue};
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgOptions, PgQueue};
use sked_testkit::clock::ManualClock;
use sked_testkit::contract::fixtures::{at, dispatch, t0, tenant};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

async fn connect(url: &str) -> PgDb {
    PgDb::connect(url, &PgOptions::default()).await.expect("connect")
}

sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move {
    let db = connect(&postgres().fresh_database()).await;
    Arc::new(PgQueue::new(db, clock as Arc<dyn Clock>)) as Arc<dyn DispatchQueue>
});

/// Real time after which a receive that should have returned counts as hung.
const HANG: Duration = Duration::from_secs(20);

/// Two hosts (a pool and a queue each, on one database) receive concurrently, several
/// receives each, until every message of three tenants has been delivered: no message is
/// delivered twice, none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queues_on_two_pools_receiving_at_once_never_get_the_same_message() {
    let url = postgres().fresh_database();
    let clock = Arc::new(ManualClock::new(t0()));
    let hosts: Vec<Arc<PgQueue>> = vec![
        Arc::new(PgQueue::new(connect(&url).await, clock.clone())),
        Arc::new(PgQueue::new(connect(&url).await, clock.clone())),
    ];
    const N: usize = 300;
    let items: Vec<Dispatch> = (0..N)
        .map(|i| Dispatch {
            tenant: tenant(["a", "b", "c"][i % 3]),
            ..dispatch(&format!("job{i:03}"), (i % 10) as u8, at(0))
        })
        .collect();
    hosts[0].enqueue(&items).await.unwrap();

    let mut receivers = Vec::new();
    for host in &hosts {
        for _ in 0..3 {
            let host = host.clone();
            receivers.push(tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let batch = host.receive(7, Dur::secs(60), Dur::ZERO).await.unwrap();
                    if batch.is_empty() {
                        return got;
                    }
                    got.extend(batch.into_iter().map(|d| d.dispatch.run_id.0));
                }
            }));
        }
    }
    let mut all = Vec::new();
    for r in receivers {
        all.extend(tokio::time::timeout(HANG, r).await.expect("receivers hung").unwrap());
    }
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a message was delivered twice");
    assert_eq!(all.len(), N, "every message delivered once");
    // Nothing was left behind: every message is leased (visible only after its lease).
    assert!(hosts[1].receive(10, Dur::secs(60), Dur::ZERO).await.unwrap().is_empty());
}

/// A clock that says when someone starts waiting on it: a receive does so only after it
/// found nothing to take.
struct Watched {
    /// The time.
    clock: Arc<ManualClock>,
    /// One message per `sleep_until` begun.
    waiting: tokio::sync::mpsc::UnboundedSender<()>,
}

#[async_trait::async_trait]
impl Clock for Watched {
    fn now(&self) -> sked_core::timestamp::Timestamp {
        self.clock.now()
    }

    async fn sleep_until(&self, deadline: sked_core::timestamp::Timestamp) {
        let _ = self.waiting.send(());
        self.clock.sleep_until(deadline).await;
    }
}

/// A receive waiting on one pool, whose fallback poll is an hour and whose clock never moves,
/// returns the message another pool enqueues once it waits: only the notification can have
/// woken it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_receive_is_woken_by_an_enqueue_from_another_pool() {
    let url = postgres().fresh_database();
    let clock = Arc::new(ManualClock::new(t0()));
    let (waiting_tx, mut waiting_rx) = tokio::sync::mpsc::unbounded_channel();
    let watched = Arc::new(Watched {
        clock: clock.clone(),
        waiting: waiting_tx,
    });
    let hour = Duration::from_secs(3600);
    let waiter = Arc::new(PgQueue::new(connect(&url).await, watched).with_fallback_poll(hour));
    let other = PgQueue::new(connect(&url).await, clock.clone());

    let received = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.receive(10, Dur::secs(60), Dur::secs(3600)).await }
    });
    tokio::time::timeout(HANG, waiting_rx.recv())
        .await
        .expect("the receive never started waiting");
    assert!(!received.is_finished(), "nothing to receive yet");
    other.enqueue(&[dispatch("woken", 5, at(0))]).await.unwrap();
    let got = tokio::time::timeout(HANG, received)
        .await
        .expect("the waiting receive was not woken")
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dispatch, dispatch("woken", 5, at(0)));
}
