//! [`Deletes`]: the acknowledgements of one process's [`crate::SqsQueue`], sent together. An ack
//! goes out at once when no delete is in flight; acks that arrive while one is out wait for
//! it ([`IN_FLIGHT`]) and then share the next request — up to ten of a queue in one
//! `DeleteMessageBatch` (group commit). So a worker whose attempts end one at a time sends a
//! `DeleteMessage` each, as before, and one whose attempts end together sends down to a tenth
//! of the requests; an ack waits at most one request longer. (Measured in the requests test,
//! a worker of 4 slots whose 20 runs end close together: 20 deletes → 16 + 2 batches. With 2
//! requests in flight nothing waited there; it pays with many slots per process.)
//!
//! Each ack is answered on its own, exactly as a lone `DeleteMessage` would answer it: an
//! entry the batch refused, and every entry of a batch that failed as a whole, is deleted
//! again alone, and that answer is its answer (a stale receipt stays
//! [`QueueError::StaleReceipt`]).

use crate::error::{classify, queue_error};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
use sked_core::ports::QueueError;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Delete requests out at once; acks that come meanwhile wait and go together. One: a
/// process's acks share requests whenever they overlap, at up to ten per round trip.
pub const IN_FLIGHT: usize = 1;

/// Most entries of one `DeleteMessageBatch` (SQS's limit).
const BATCH: usize = 10;

/// Error codes that mean a receipt handle no longer names a live delivery.
pub(crate) const STALE_CODES: &[&str] = &[
    "ReceiptHandleIsInvalid",
    "MessageNotInflight",
    "AWS.SimpleQueueService.MessageNotInflight",
    "InvalidParameterValue",
];

/// One ack waiting: its queue, receipt handle and where its answer goes.
struct Ack {
    url: String,
    handle: String,
    answer: oneshot::Sender<Result<(), QueueError>>,
}

/// The acks of one queue adapter, sent together (see the module's header).
#[derive(Debug)]
pub struct Deletes {
    client: Client,
    /// The sending task's inbox, started with the first ack (it needs the runtime).
    inbox: OnceLock<mpsc::UnboundedSender<Ack>>,
}

impl Deletes {
    /// The acks of queues reached through `client`.
    pub fn new(client: Client) -> Self {
        Deletes {
            client,
            inbox: OnceLock::new(),
        }
    }

    /// Deletes the message `handle` of queue `url`, with the acks that come with it.
    pub async fn ack(&self, url: &str, handle: &str) -> Result<(), QueueError> {
        let inbox = self.inbox.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(send_acks(self.client.clone(), rx));
            tx
        });
        let (answer, answered) = oneshot::channel();
        let ack = Ack {
            url: url.to_string(),
            handle: handle.to_string(),
            answer,
        };
        if inbox.send(ack).is_err() {
            return delete_one(&self.client, url, handle).await;
        }
        match answered.await {
            Ok(answer) => answer,
            Err(_) => delete_one(&self.client, url, handle).await,
        }
    }
}

/// The sending task: takes what is waiting whenever a request may go out, a batch per queue.
async fn send_acks(client: Client, mut inbox: mpsc::UnboundedReceiver<Ack>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = inbox.recv().await else { return };
        let mut by_queue: HashMap<String, Vec<Ack>> = HashMap::new();
        by_queue.entry(first.url.clone()).or_default().push(first);
        let mut taken = 1;
        while taken < BATCH * 3 {
            let Ok(ack) = inbox.try_recv() else { break };
            by_queue.entry(ack.url.clone()).or_default().push(ack);
            taken += 1;
        }
        let client = client.clone();
        tokio::spawn(async move {
            for (url, acks) in by_queue {
                for chunk in chunks(acks) {
                    send_batch(&client, &url, chunk).await;
                }
            }
            drop(slot);
        });
    }
}

/// `acks` in groups of at most [`BATCH`].
fn chunks(mut acks: Vec<Ack>) -> Vec<Vec<Ack>> {
    let mut out = Vec::new();
    while acks.len() > BATCH {
        let rest = acks.split_off(BATCH);
        out.push(acks);
        acks = rest;
    }
    out.push(acks);
    out
}

/// One request for `acks` of queue `url`, each answered; what the batch did not delete is
/// deleted alone.
async fn send_batch(client: &Client, url: &str, mut acks: Vec<Ack>) {
    if acks.len() == 1 {
        let ack = acks.pop().expect("one ack");
        let _ = ack.answer.send(delete_one(client, url, &ack.handle).await);
        return;
    }
    let entries: Vec<DeleteMessageBatchRequestEntry> = acks
        .iter()
        .enumerate()
        .filter_map(|(i, ack)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("a{i}"))
                .receipt_handle(&ack.handle)
                .build()
                .ok()
        })
        .collect();
    let deleted: Vec<String> = match client
        .delete_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
    {
        Ok(out) => out.successful.into_iter().map(|entry| entry.id).collect(),
        Err(_) => Vec::new(), // each is tried alone below, and answered as that goes
    };
    for (i, ack) in acks.into_iter().enumerate() {
        let answer = match deleted.contains(&format!("a{i}")) {
            true => Ok(()),
            false => delete_one(client, url, &ack.handle).await,
        };
        let _ = ack.answer.send(answer);
    }
}

/// One `DeleteMessage`.
async fn delete_one(client: &Client, url: &str, handle: &str) -> Result<(), QueueError> {
    client
        .delete_message()
        .queue_url(url)
        .receipt_handle(handle)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| queue_error(classify("sqs:DeleteMessage", e, |_| None), STALE_CODES))
}
