//! The queue contract: every local [`DispatchQueue`] adapter must pass these cases.
//!
//! Each case takes a fresh, empty queue timed by a [`ManualClock`] reading
//! [`t0`](super::fixtures::t0), and checks one promise of the trait doc (in sked-core's
//! `ports/queue.rs`). Time moves only by `clock.advance`; real time appears only as
//! timeouts that turn a hang into a failure.
//! Run them all with [`queue_contract!`](crate::queue_contract).

pub use sked_core::ports::queue::DispatchQueue;

use super::fixtures::{self, at, dispatch};
use crate::clock::ManualClock;
use sked_core::duration::Dur;
use sked_core::ports::queue::{Delivery, Dispatch, QueueError};
use sked_core::timestamp::Timestamp;
use std::sync::Arc;
use std::time::Duration;

/// The queue under test.
pub type Queue = Arc<dyn DispatchQueue>;

/// Visibility used by the cases.
const VIS: Dur = Dur::secs(30);

/// Real time after which a receive that should have returned counts as hung.
const HANG: Duration = Duration::from_secs(5);

async fn recv(queue: &Queue, max: usize) -> Vec<Delivery> {
    tokio::time::timeout(HANG, queue.receive(max, VIS, Dur::ZERO))
        .await
        .expect("receive with wait 0 must not block")
        .expect("receive")
}

fn jobs(ds: &[Delivery]) -> Vec<String> {
    ds.iter()
        .map(|d| d.dispatch.run_id.0.split('@').next().unwrap_or_default().to_string())
        .collect()
}

/// With nothing queued, a receive with `wait` zero returns an empty vec at once.
pub async fn receive_empty_with_zero_wait_returns_at_once(_clock: Arc<ManualClock>, queue: Queue) {
    assert!(recv(&queue, 10).await.is_empty());
}

/// A message is not delivered before its `not_before`.
pub async fn receive_respects_not_before(clock: Arc<ManualClock>, queue: Queue) {
    let d = dispatch("a", 5, at(10));
    queue.enqueue(std::slice::from_ref(&d)).await.unwrap();
    assert!(recv(&queue, 10).await.is_empty());
    clock.advance(Dur::secs(9));
    assert!(recv(&queue, 10).await.is_empty());
    clock.advance(Dur::secs(1));
    let got = recv(&queue, 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dispatch, d);
    assert_eq!(got[0].receive_count, 1);
}

/// Among messages ready at the same instant, higher priority is served first.
pub async fn receive_orders_by_priority(_clock: Arc<ManualClock>, queue: Queue) {
    queue
        .enqueue(&[
            dispatch("low", 1, at(0)),
            dispatch("high", 9, at(0)),
            dispatch("mid", 5, at(0)),
        ])
        .await
        .unwrap();
    assert_eq!(jobs(&recv(&queue, 10).await), ["high", "mid", "low"]);
}

/// Aging: a priority-0 message ready for longer than `9 × AGING_STEP` beats a priority-9
/// message that just became ready.
pub async fn receive_ages_old_low_priority_first(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("old-low", 0, at(0))]).await.unwrap();
    queue
        .enqueue(&[dispatch("new-high", 9, at(46)), dispatch("newer-high", 9, at(50))])
        .await
        .unwrap();
    clock.advance(Dur::secs(60));
    // Ranks: old-low 0 s, new-high 46 − 45 = 1 s, newer-high 5 s.
    assert_eq!(jobs(&recv(&queue, 10).await), ["old-low", "new-high", "newer-high"]);
}

/// Messages of equal rank come in enqueue order.
pub async fn receive_equal_rank_in_enqueue_order(_clock: Arc<ManualClock>, queue: Queue) {
    for name in ["c", "a", "b"] {
        queue.enqueue(&[dispatch(name, 5, at(0))]).await.unwrap();
    }
    queue
        .enqueue(&[dispatch("e", 5, at(0)), dispatch("d", 5, at(0))])
        .await
        .unwrap();
    assert_eq!(jobs(&recv(&queue, 10).await), ["c", "a", "b", "e", "d"]);
}

/// At most `max` messages per receive; the rest stay for the next one.
pub async fn receive_respects_max(_clock: Arc<ManualClock>, queue: Queue) {
    let ds: Vec<_> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| dispatch(n, 5, at(0)))
        .collect();
    queue.enqueue(&ds).await.unwrap();
    assert_eq!(jobs(&recv(&queue, 2).await), ["a", "b"]);
    assert_eq!(jobs(&recv(&queue, 2).await), ["c", "d"]);
    assert_eq!(jobs(&recv(&queue, 2).await), ["e"]);
    assert!(recv(&queue, 2).await.is_empty());
}

/// `dispatch(job, priority, not_before)` of tenant `tenant`.
fn dispatch_of(tenant: &str, job: &str, priority: u8, not_before: Timestamp) -> Dispatch {
    Dispatch {
        tenant: fixtures::tenant(tenant),
        ..dispatch(job, priority, not_before)
    }
}

/// Several tenants take turns, one message a turn, whatever their priorities; within a
/// tenant the rank order holds.
pub async fn tenants_take_turns(_clock: Arc<ManualClock>, queue: Queue) {
    queue
        .enqueue(&[
            dispatch_of("a", "a1", 9, at(0)),
            dispatch_of("a", "a2", 9, at(0)),
            dispatch_of("a", "a3", 9, at(0)),
            dispatch_of("b", "b2", 0, at(0)),
            dispatch_of("b", "b1", 1, at(0)),
        ])
        .await
        .unwrap();
    assert_eq!(jobs(&recv(&queue, 10).await), ["a1", "b1", "a2", "b2", "a3"]);
}

/// One tenant's backlog does not hold back another tenant's run: a run of tenant b that
/// becomes ready while tenant a has many queued (better ranked) is served next, and then the
/// turns alternate.
pub async fn a_tenant_whose_run_becomes_ready_goes_before_a_busy_tenant_goes_again(
    clock: Arc<ManualClock>,
    queue: Queue,
) {
    let burst: Vec<_> = (0..50)
        .map(|i| dispatch_of("a", &format!("a{i:02}"), 9, at(0)))
        .collect();
    queue.enqueue(&burst).await.unwrap();
    queue
        .enqueue(&[dispatch_of("b", "b1", 0, at(1)), dispatch_of("b", "b2", 0, at(1))])
        .await
        .unwrap();
    assert_eq!(jobs(&recv(&queue, 2).await), ["a00", "a01"]);
    assert_eq!(jobs(&recv(&queue, 1).await), ["a02"]);
    clock.advance(Dur::secs(1));
    assert_eq!(jobs(&recv(&queue, 1).await), ["b1"], "b's run goes before a's next one");
    assert_eq!(jobs(&recv(&queue, 3).await), ["a03", "b2", "a04"]);
    assert_eq!(
        jobs(&recv(&queue, 2).await),
        ["a05", "a06"],
        "a alone again: rank order"
    );
}

/// A received message is invisible until its visibility ends, then delivered again with
/// `receive_count` 2 and a new receipt.
pub async fn leased_message_is_invisible_until_visibility_ends(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("a", 5, at(0))]).await.unwrap();
    let first = recv(&queue, 10).await;
    assert_eq!(first.len(), 1);
    assert!(recv(&queue, 10).await.is_empty(), "leased message must be invisible");
    clock.advance(Dur::secs(29));
    assert!(recv(&queue, 10).await.is_empty(), "still within visibility");
    clock.advance(Dur::secs(2));
    let second = recv(&queue, 10).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].receive_count, 2);
    assert_eq!(second[0].dispatch, first[0].dispatch);
    assert_ne!(second[0].receipt, first[0].receipt);
}

/// `ack` removes the message for good.
pub async fn ack_removes_message(clock: Arc<ManualClock>, queue: Queue) {
    queue
        .enqueue(&[dispatch("a", 5, at(0)), dispatch("b", 5, at(0))])
        .await
        .unwrap();
    let got = recv(&queue, 1).await;
    queue.ack(&got[0].receipt).await.unwrap();
    clock.advance(Dur::secs(120));
    assert_eq!(jobs(&recv(&queue, 10).await), ["b"], "acked message never comes back");
    clock.advance(Dur::secs(120));
    assert_eq!(jobs(&recv(&queue, 10).await), ["b"]);
}

/// `ack` and `extend` refuse receipts that are no longer current: acked, or expired and
/// redelivered.
pub async fn stale_receipts_are_refused(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("a", 5, at(0))]).await.unwrap();
    let first = recv(&queue, 1).await.remove(0);
    clock.advance(Dur::secs(31));
    let second = recv(&queue, 1).await.remove(0);
    assert!(
        matches!(queue.ack(&first.receipt).await, Err(QueueError::StaleReceipt)),
        "ack of redelivered receipt"
    );
    assert!(
        matches!(queue.extend(&first.receipt, VIS).await, Err(QueueError::StaleReceipt)),
        "extend of redelivered receipt"
    );
    queue.ack(&second.receipt).await.unwrap();
    assert!(
        matches!(queue.ack(&second.receipt).await, Err(QueueError::StaleReceipt)),
        "second ack"
    );
    assert!(
        matches!(queue.extend(&second.receipt, VIS).await, Err(QueueError::StaleReceipt)),
        "extend after ack"
    );
}

/// `extend` pushes visibility to now + `visibility`.
pub async fn extend_keeps_message_invisible(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("a", 5, at(0))]).await.unwrap();
    let got = recv(&queue, 1).await.remove(0);
    clock.advance(Dur::secs(20));
    queue.extend(&got.receipt, VIS).await.unwrap();
    clock.advance(Dur::secs(20)); // 40 s: past the first lease, within the extended one
    assert!(
        recv(&queue, 10).await.is_empty(),
        "extended message must stay invisible"
    );
    clock.advance(Dur::secs(11)); // 51 s: past the extension
    let again = recv(&queue, 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].receive_count, 2);
}

/// Enqueuing a run already queued keeps one message, with the earlier `not_before`.
pub async fn enqueue_dedupes_by_run(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("a", 5, at(20))]).await.unwrap();
    queue.enqueue(&[dispatch("a", 5, at(10))]).await.unwrap();
    queue.enqueue(&[dispatch("a", 5, at(30))]).await.unwrap();
    clock.advance(Dur::secs(10));
    let got = recv(&queue, 10).await;
    assert_eq!(got.len(), 1, "one message per run");
    assert_eq!(got[0].dispatch.not_before, at(10));
    queue.ack(&got[0].receipt).await.unwrap();
    clock.advance(Dur::secs(60));
    assert!(recv(&queue, 10).await.is_empty(), "no second copy");
}

/// Enqueuing a run already queued at another priority moves its message to that priority,
/// lower or higher (its job's priority changed before it started).
pub async fn reenqueue_takes_the_new_priority(_clock: Arc<ManualClock>, queue: Queue) {
    queue
        .enqueue(&[dispatch("a", 9, at(0)), dispatch("b", 5, at(0))])
        .await
        .unwrap();
    queue.enqueue(&[dispatch("a", 1, at(0))]).await.unwrap();
    let got = recv(&queue, 10).await;
    assert_eq!(jobs(&got), ["b", "a"], "a lowered priority is served after");
    assert_eq!(got[1].dispatch.priority, 1);
    for d in &got {
        queue.ack(&d.receipt).await.unwrap();
    }
    queue
        .enqueue(&[dispatch("c", 5, at(0)), dispatch("d", 1, at(0))])
        .await
        .unwrap();
    queue.enqueue(&[dispatch("d", 9, at(0))]).await.unwrap();
    assert_eq!(jobs(&recv(&queue, 10).await), ["d", "c"], "a raised one before");
}

/// Enqueuing a run whose message is leased makes the old receipt stale, and the message
/// takes the new `not_before` (a retry enqueued by the worker handling the run).
pub async fn reenqueue_of_leased_run_makes_receipt_stale(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("a", 5, at(0))]).await.unwrap();
    let first = recv(&queue, 1).await.remove(0);
    queue.enqueue(&[dispatch("a", 5, at(20))]).await.unwrap();
    assert!(
        recv(&queue, 10).await.is_empty(),
        "the retry waits for its own not_before"
    );
    clock.advance(Dur::secs(20));
    let retry = recv(&queue, 10).await;
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].dispatch.not_before, at(20));
    queue.extend(&retry[0].receipt, Dur::ZERO).await.unwrap();
    assert!(
        matches!(queue.ack(&first.receipt).await, Err(QueueError::StaleReceipt)),
        "ack of superseded receipt"
    );
    assert!(
        matches!(queue.extend(&first.receipt, VIS).await, Err(QueueError::StaleReceipt)),
        "extend of superseded receipt"
    );
    clock.advance(Dur::secs(31));
    let got = recv(&queue, 10).await;
    assert_eq!(got.len(), 1, "still one message for the run");
    queue.ack(&got[0].receipt).await.unwrap();
}

/// A receive waiting on a clock that never moves returns as soon as another task enqueues.
pub async fn long_poll_wakes_on_enqueue(_clock: Arc<ManualClock>, queue: Queue) {
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.receive(10, VIS, Dur::secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "receive with nothing queued must wait");
    queue.enqueue(&[dispatch("a", 5, at(0))]).await.unwrap();
    let got = tokio::time::timeout(HANG, waiting)
        .await
        .expect("long poll must wake on enqueue")
        .unwrap()
        .unwrap();
    assert_eq!(jobs(&got), ["a"]);
}

/// A waiting receive returns a queued message once the clock reaches its `not_before`.
pub async fn long_poll_wakes_when_clock_reaches_not_before(clock: Arc<ManualClock>, queue: Queue) {
    queue.enqueue(&[dispatch("a", 5, at(10))]).await.unwrap();
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.receive(10, VIS, Dur::secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "message not ready yet");
    clock.advance(Dur::secs(10));
    let got = tokio::time::timeout(HANG, waiting)
        .await
        .expect("long poll must wake when ready")
        .unwrap()
        .unwrap();
    assert_eq!(jobs(&got), ["a"]);
}

/// A waiting receive returns empty once `wait` has passed on the clock.
pub async fn long_poll_times_out_empty(clock: Arc<ManualClock>, queue: Queue) {
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.receive(10, VIS, Dur::secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    clock.advance(Dur::secs(31));
    let got = tokio::time::timeout(HANG, waiting)
        .await
        .expect("long poll must end after wait")
        .unwrap()
        .unwrap();
    assert!(got.is_empty());
}
