//! [`SqsQueue`] against a real moto server, in real time with short delays. The queue contract
//! suite of sked-testkit assumes a manual clock and the local queue's dedupe by run, which
//! SQS does not have; these cases check what SQS does promise: routing by priority, delays,
//! visibility and redelivery, extend, ack, and redrive to the DLQ.

mod common;

use sked_aws::{AwsClients, AwsConfig, SqsQueue};
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::ports::queue::EARLY_DELIVERY;
use sked_core::ports::{Clock, Dispatch, DispatchQueue, QueueError, SystemClock};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn dispatch(job: &str, priority: u8, delay_ms: i64) -> Dispatch {
    let now = SystemClock.now();
    Dispatch {
        tenant: TenantId::from("t1"),
        run_id: RunId::derive(&JobId::from(job), now),
        priority,
        not_before: now + chrono::Duration::milliseconds(delay_ms),
    }
}

async fn setup(max_receive_count: u32) -> (AwsClients, AwsConfig, SqsQueue) {
    let mut config = common::fresh_config();
    config.max_receive_count = max_receive_count;
    let clients = sked_aws::connect(&config).await;
    config.queues = sked_aws::bootstrap::create_queues(&clients.sqs, &config)
        .await
        .expect("create queues");
    let queue = SqsQueue::new(clients.sqs.clone(), &config, Arc::new(SystemClock));
    (clients, config, queue)
}

/// How many messages a queue holds (visible or not), as SQS counts them.
async fn depth(clients: &AwsClients, url: &str) -> u32 {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = clients
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .expect("get attributes");
    let attrs = out.attributes.unwrap_or_default();
    [
        A::ApproximateNumberOfMessages,
        A::ApproximateNumberOfMessagesNotVisible,
        A::ApproximateNumberOfMessagesDelayed,
    ]
    .iter()
    .map(|a| attrs.get(a).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0))
    .sum()
}

const VIS: Dur = Dur::secs(1);
const NO_WAIT: Dur = Dur::ZERO;

#[tokio::test]
async fn priorities_route_to_their_queue_and_high_is_received_first() {
    let (clients, config, queue) = setup(5).await;
    queue
        .enqueue(&[dispatch("low", 1, 0), dispatch("normal", 5, 0), dispatch("high", 9, 0)])
        .await
        .unwrap();
    assert_eq!(depth(&clients, &config.queues.high).await, 1);
    assert_eq!(depth(&clients, &config.queues.normal).await, 1);
    assert_eq!(depth(&clients, &config.queues.low).await, 1);
    let got = queue.receive(1, Dur::secs(30), NO_WAIT).await.unwrap();
    assert_eq!(got.len(), 1);
    assert!(got[0].dispatch.run_id.as_str().starts_with("high@"));
    assert_eq!((got[0].dispatch.tenant.as_str(), got[0].dispatch.priority), ("t1", 9));
    assert!(got[0].receipt.0.starts_with("high|"));
    assert_eq!(got[0].receive_count, 1);
    let got = queue.receive(10, Dur::secs(30), NO_WAIT).await.unwrap();
    let ids: Vec<&str> = got.iter().map(|d| d.dispatch.run_id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids[0].starts_with("normal@") && ids[1].starts_with("low@"),
        "rank order: {ids:?}"
    );
}

#[tokio::test]
async fn every_fourth_receive_starts_from_low() {
    let (_, _, queue) = setup(5).await;
    let highs: Vec<Dispatch> = (0..4).map(|i| dispatch(&format!("h{i}"), 9, 0)).collect();
    queue.enqueue(&highs).await.unwrap();
    queue.enqueue(&[dispatch("low", 0, 0)]).await.unwrap();
    let mut lanes = Vec::new();
    for _ in 0..4 {
        let got = queue.receive(1, Dur::secs(30), NO_WAIT).await.unwrap();
        lanes.push(got[0].receipt.0.split('|').next().unwrap().to_string());
    }
    assert_eq!(lanes, ["high", "high", "high", "low"]);
}

#[tokio::test]
async fn delay_is_honoured_and_long_poll_waits_for_it() {
    // Due in 4 s: SQS delays are whole seconds, and the adapter makes the message visible
    // one to two seconds early (EARLY_DELIVERY; the worker holds it until its time), so it
    // is hidden for 2 s.
    let (_, _, queue) = setup(5).await;
    let enqueued = Instant::now();
    queue.enqueue(&[dispatch("later", 5, 4_000)]).await.unwrap();
    assert!(
        queue.receive(1, VIS, NO_WAIT).await.unwrap().is_empty(),
        "not before its delay"
    );
    let got = queue.receive(1, Dur::secs(30), Dur::secs(6)).await.unwrap();
    assert_eq!(got.len(), 1, "delivered once the delay passed");
    let waited = enqueued.elapsed();
    let earliest = Duration::from_millis(4_000 - EARLY_DELIVERY.as_millis() as u64);
    assert!(
        waited >= earliest - Duration::from_millis(100),
        "delivered after {waited:?}, more than {EARLY_DELIVERY} before it was due"
    );
}

/// SQS delays a message at most 15 minutes: a run due later is sent that far (its worker hands
/// it on to a new message until its time), never dropped — a run fired unwritten has no other
/// record the reaper reads.
#[tokio::test]
async fn runs_due_beyond_fifteen_minutes_are_sent_at_the_longest_delay() {
    let (clients, config, queue) = setup(5).await;
    queue.enqueue(&[dispatch("far", 5, 16 * 60 * 1000)]).await.unwrap();
    queue.enqueue(&[dispatch("near", 5, 14 * 60 * 1000)]).await.unwrap();
    assert_eq!(depth(&clients, &config.queues.normal).await, 2);
    assert!(queue.receive(2, VIS, NO_WAIT).await.unwrap().is_empty(), "both delayed");
}

#[tokio::test]
async fn an_unacked_message_comes_back_with_receive_count_two() {
    let (_, _, queue) = setup(5).await;
    queue.enqueue(&[dispatch("a", 5, 0)]).await.unwrap();
    let first = queue.receive(1, VIS, NO_WAIT).await.unwrap();
    assert_eq!(first[0].receive_count, 1);
    assert!(
        queue.receive(1, VIS, NO_WAIT).await.unwrap().is_empty(),
        "invisible while leased"
    );
    let again = queue.receive(1, VIS, Dur::secs(5)).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].dispatch, first[0].dispatch);
    assert_eq!(again[0].receive_count, 2);
    assert_ne!(again[0].receipt, first[0].receipt);
}

#[tokio::test]
async fn ack_removes_the_message() {
    let (clients, config, queue) = setup(5).await;
    queue.enqueue(&[dispatch("a", 5, 0)]).await.unwrap();
    let got = queue.receive(1, VIS, NO_WAIT).await.unwrap();
    queue.ack(&got[0].receipt).await.unwrap();
    assert_eq!(depth(&clients, &config.queues.normal).await, 0);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(queue.receive(1, VIS, NO_WAIT).await.unwrap().is_empty());
}

#[tokio::test]
async fn extend_keeps_the_message_invisible() {
    let (_, _, queue) = setup(5).await;
    queue.enqueue(&[dispatch("a", 5, 0)]).await.unwrap();
    let got = queue.receive(1, VIS, NO_WAIT).await.unwrap();
    queue.extend(&got[0].receipt, Dur::secs(30)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(queue.receive(1, VIS, NO_WAIT).await.unwrap().is_empty(), "still leased");
    queue.ack(&got[0].receipt).await.unwrap();
}

/// What SQS (here: moto) says about receipts that are no longer current. Real SQS accepts a
/// second DeleteMessage of the same handle; the store's fencing, not the queue, is what makes
/// a stale worker harmless. Printed for the record; only malformed receipts must be refused.
#[tokio::test]
async fn stale_receipts() {
    let (_, _, queue) = setup(5).await;
    queue.enqueue(&[dispatch("a", 5, 0)]).await.unwrap();
    let got = queue.receive(1, VIS, NO_WAIT).await.unwrap();
    queue.ack(&got[0].receipt).await.unwrap();
    let second_ack = queue.ack(&got[0].receipt).await;
    let extend_after_ack = queue.extend(&got[0].receipt, Dur::secs(5)).await;
    eprintln!("moto: ack after ack = {second_ack:?}; extend after ack = {extend_after_ack:?}");
    assert!(
        !matches!(second_ack, Err(QueueError::Transient(_))),
        "never transient: {second_ack:?}"
    );
    let bogus = sked_core::ports::Receipt("nonsense".into());
    assert!(matches!(queue.ack(&bogus).await, Err(QueueError::StaleReceipt)));
    assert!(matches!(queue.extend(&bogus, VIS).await, Err(QueueError::StaleReceipt)));
}

/// Acks that come together share `DeleteMessageBatch` requests (`sked_aws::sqs_deletes`), and
/// each is answered on its own: 20 messages acked at once with a receipt SQS refuses among
/// them take a few requests, not 21; every message is gone; only the refused receipt answers
/// an error, the one a lone `DeleteMessage` gives it.
#[tokio::test]
async fn acks_that_come_together_share_batch_deletes_and_are_answered_each() {
    let (clients, mut config, _) = setup(5).await;
    let counter = sked_aws::RequestCounter::new();
    config.request_counter = Some(counter.clone());
    let counted = sked_aws::connect(&config).await;
    let queue = SqsQueue::new(counted.sqs.clone(), &config, Arc::new(SystemClock));
    let sent: Vec<Dispatch> = (0..20).map(|i| dispatch(&format!("j{i}"), 5, 0)).collect();
    queue.enqueue(&sent).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 20 {
        got.extend(queue.receive(10, VIS, Dur::secs(1)).await.unwrap());
    }
    counter.reset();
    let refused = sked_core::ports::Receipt("normal|not-a-receipt-handle".into());
    let receipts: Vec<&sked_core::ports::Receipt> = got.iter().map(|d| &d.receipt).chain([&refused]).collect();
    let answers = futures::future::join_all(receipts.iter().map(|r| queue.ack(r))).await;
    assert!(answers[..20].iter().all(Result::is_ok), "{answers:?}");
    assert!(
        matches!(answers[20], Err(QueueError::StaleReceipt)),
        "{:?}",
        answers[20]
    );
    let requests = counter.of("SQS", "DeleteMessage") + counter.of("SQS", "DeleteMessageBatch");
    assert!(counter.of("SQS", "DeleteMessageBatch") >= 2, "{:?}", counter.snapshot());
    assert!(requests <= 5, "{requests} requests: {:?}", counter.snapshot());
    assert_eq!(depth(&clients, &config.queues.normal).await, 0);
}

#[tokio::test]
async fn after_max_receive_count_the_message_moves_to_the_dlq() {
    let (clients, config, queue) = setup(2).await;
    queue.enqueue(&[dispatch("poison", 8, 0)]).await.unwrap();
    for n in 1..=2 {
        let got = queue.receive(1, VIS, Dur::secs(5)).await.unwrap();
        assert_eq!(got.len(), 1, "delivery {n}");
        assert_eq!(got[0].receive_count, n);
    }
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        queue.receive(1, VIS, NO_WAIT).await.unwrap().is_empty(),
        "gone from high"
    );
    assert_eq!(depth(&clients, &config.queues.dlq).await, 1, "in the DLQ");
    assert_eq!(depth(&clients, &config.queues.high).await, 0);
}

/// A queue on fresh queues whose requests are counted, and its counter.
async fn counted_queue() -> (SqsQueue, sked_aws::RequestCounter) {
    let counter = sked_aws::RequestCounter::new();
    let mut config = common::fresh_config();
    config.request_counter = Some(counter.clone());
    let clients = sked_aws::connect(&config).await;
    config.queues = sked_aws::bootstrap::create_queues(&clients.sqs, &config)
        .await
        .expect("create queues");
    let queue = SqsQueue::new(clients.sqs.clone(), &config, Arc::new(SystemClock));
    counter.reset();
    (queue, counter)
}

/// Idle receives (a worker's, whose wait is 1 s) wait on the process's long polls: the first
/// looks at the three queues once and starts one poll on each; the receives after it, alone or
/// several at once (a process's worker loops), make no request while those polls are out (20 s
/// each). Where each receive made a pass and a 1 s poll (4 requests a second a loop), a quiet
/// process now makes 3 requests per 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_receives_share_one_long_poll_per_queue() {
    let (queue, counter) = counted_queue().await;
    assert!(queue.receive(4, Dur::secs(30), Dur::secs(1)).await.unwrap().is_empty());
    assert_eq!(counter.of("SQS", "ReceiveMessage"), 6, "{:?}", counter.snapshot());
    let (a, b) = tokio::join!(
        queue.receive(4, Dur::secs(30), Dur::secs(1)),
        queue.receive(4, Dur::secs(30), Dur::secs(1)),
    );
    assert!(a.unwrap().is_empty() && b.unwrap().is_empty());
    assert!(queue.receive(4, Dur::secs(30), Dur::secs(1)).await.unwrap().is_empty());
    assert_eq!(counter.of("SQS", "ReceiveMessage"), 6, "{:?}", counter.snapshot());
}

/// A message sent to any queue while a receive waits is received as soon as SQS hands it to
/// that queue's poll, long before the receive's wait ends (polls that went round the queues a
/// second each could leave it up to a second); and one brought after the waiting receives
/// gave up is kept for the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_while_receives_wait_is_received_from_any_queue_at_once() {
    let (queue, counter) = counted_queue().await;
    let polls_out = async || {
        while counter.of("SQS", "ReceiveMessage") < 6 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    for priority in [0, 5, 9] {
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move {
                let started = Instant::now();
                let got = queue.receive(4, Dur::secs(30), Dur::secs(20)).await.unwrap();
                (got, started.elapsed())
            }
        });
        polls_out().await;
        let sent = dispatch(&format!("p{priority}"), priority, 0);
        queue.enqueue(std::slice::from_ref(&sent)).await.unwrap();
        let (got, waited) = waiting.await.unwrap();
        assert_eq!(got.len(), 1, "priority {priority}");
        assert_eq!(got[0].dispatch.run_id, sent.run_id);
        assert!(
            waited < Duration::from_secs(10),
            "priority {priority}: waited {waited:?}"
        );
    }

    // No receive waits; the polls out bring the message, and the next receive takes it.
    assert!(queue.receive(4, Dur::secs(30), Dur::secs(1)).await.unwrap().is_empty());
    let sent = dispatch("later", 5, 0);
    queue.enqueue(std::slice::from_ref(&sent)).await.unwrap();
    let got = queue.receive(4, Dur::secs(30), Dur::secs(5)).await.unwrap();
    assert_eq!(
        got.iter().map(|d| &d.dispatch.run_id).collect::<Vec<_>>(),
        [&sent.run_id]
    );
}

/// A message a poll brought when no receive of its process waited (its worker busy, or
/// stopping) is handed back to SQS a second later, for any worker's poll to take at once — not
/// left hidden for its whole visibility (30 s here): another process receives it, its second
/// delivery, well within its 10 s wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_no_receive_of_its_process_wanted_is_handed_back() {
    let (clients, config, busy) = setup(5).await;
    let other = SqsQueue::new(clients.sqs.clone(), &config, Arc::new(SystemClock));
    assert!(busy.receive(4, Dur::secs(30), Dur::secs(1)).await.unwrap().is_empty());
    // The busy process's polls are out, and none of its receives waits.
    let sent = dispatch("unwanted", 5, 0);
    busy.enqueue(std::slice::from_ref(&sent)).await.unwrap();
    let hidden = async || {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = clients
            .sqs
            .get_queue_attributes()
            .queue_url(&config.queues.normal)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("attributes");
        let attrs = out.attributes.unwrap_or_default();
        attrs.get(&A::ApproximateNumberOfMessagesNotVisible).map(String::as_str) == Some("1")
    };
    while !hidden().await {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = other.receive(4, Dur::secs(30), Dur::secs(10)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dispatch.run_id, sent.run_id);
    assert_eq!(got[0].receive_count, 2, "brought by the busy process's poll first");
}

/// Every message carries its tenant as the message group, which makes the standard queues SQS
/// fair queues (one tenant's backlog does not raise the others' dwell time). moto keeps the
/// group id but does not reorder by it: what can be checked here is the tag.
#[tokio::test]
async fn each_message_carries_its_tenant_as_message_group() {
    use aws_sdk_sqs::types::MessageSystemAttributeName as A;
    let (clients, config, queue) = setup(5).await;
    let mut other = dispatch("b", 5, 0);
    other.tenant = TenantId::from("t2");
    queue.enqueue(&[dispatch("a", 5, 0), other]).await.unwrap();
    let out = clients
        .sqs
        .receive_message()
        .queue_url(&config.queues.normal)
        .max_number_of_messages(10)
        .message_system_attribute_names(A::MessageGroupId)
        .send()
        .await
        .expect("receive");
    let mut groups: Vec<String> = out
        .messages
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.attributes.as_ref()?.get(&A::MessageGroupId).cloned())
        .collect();
    groups.sort();
    assert_eq!(groups, ["t1", "t2"]);
}
