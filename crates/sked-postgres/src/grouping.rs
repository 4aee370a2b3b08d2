//! [`Groups`]: requests of one kind that come while others are being served, served together
//! — the mechanism of the work port's group commits (`group`: completions; `receive_group`:
//! receives), as SQLite's writer commits the writes that queued up behind it together.
//!
//! A request joins the queue of waiting ones; if fewer than `parallel` groups are being
//! served, a task is started that takes up to `most` waiting requests at a time and serves
//! them (one call of `serve` for the group), until none wait. So nothing waits for a group
//! to fill: a lone request is served at once, and under load a group is what queued while the
//! previous one was being served.
//!
//! The serving task is spawned, not run in a caller's future: a caller dropped while it waits
//! (a worker shutting down) cancels neither the group's transaction nor the others' answers.

use sked_core::ports::StoreError;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// How a group is served: one answer per request, in the requests' order.
pub(crate) type Serve<R, A> = Arc<dyn Fn(Vec<R>) -> Pin<Box<dyn Future<Output = Vec<A>> + Send>> + Send + Sync>;

/// A request waiting for its group.
struct Waiting<R, A> {
    request: R,
    answer: oneshot::Sender<A>,
}

/// The waiting requests and how many groups are being served.
struct Queue<R, A> {
    waiting: Vec<Waiting<R, A>>,
    serving: usize,
}

/// Requests served in groups (see the module's header); cheap to clone.
pub(crate) struct Groups<R, A> {
    queue: Arc<Mutex<Queue<R, A>>>,
    serve: Serve<R, A>,
    /// Most requests in one group.
    most: usize,
    /// Most groups served at once.
    parallel: usize,
}

impl<R, A> Clone for Groups<R, A> {
    fn clone(&self) -> Self {
        Groups {
            queue: self.queue.clone(),
            serve: self.serve.clone(),
            most: self.most,
            parallel: self.parallel,
        }
    }
}

impl<R: Send + 'static, A: Send + 'static> Groups<R, A> {
    /// Groups of at most `most` requests, at most `parallel` served at once, each by `serve`.
    pub(crate) fn new(most: usize, parallel: usize, serve: Serve<R, A>) -> Self {
        Groups {
            queue: Arc::new(Mutex::new(Queue {
                waiting: Vec::new(),
                serving: 0,
            })),
            serve,
            most: most.max(1),
            parallel: parallel.max(1),
        }
    }

    /// Serves `request` with whatever other requests are served at the same time; `None` if
    /// its group's serving panicked.
    pub(crate) async fn submit(&self, request: R) -> Option<A> {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.waiting.push(Waiting { request, answer });
            let start = queue.serving < self.parallel;
            if start {
                queue.serving += 1;
            }
            start
        };
        if start {
            tokio::spawn(self.clone().serve_groups());
        }
        answered.await.ok()
    }

    /// Serves groups of waiting requests until none wait.
    async fn serve_groups(self) {
        loop {
            let group = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.waiting.is_empty() {
                    queue.serving -= 1;
                    return;
                }
                let n = queue.waiting.len().min(self.most);
                queue.waiting.drain(..n).collect::<Vec<_>>()
            };
            let (requests, answers): (Vec<R>, Vec<oneshot::Sender<A>>) =
                group.into_iter().map(|w| (w.request, w.answer)).unzip();
            // In a task of its own: a group that panics answers its requests nothing (each
            // caller gets `None`) and the groups after it are still served.
            let Ok(served) = tokio::spawn((self.serve)(requests)).await else {
                continue;
            };
            for (answer, sender) in served.into_iter().zip(answers) {
                // The caller may have gone (shut down): its request is served all the same.
                let _ = sender.send(answer);
            }
        }
    }
}

/// A group's failure as the answer of each of its `n` requests (`wrap`ped): the failure
/// itself for the last, the same again for the others — a transient failure as transient,
/// anything else as `Other`, with the same message.
pub(crate) fn each_failed<A>(error: StoreError, n: usize, wrap: impl Fn(StoreError) -> A) -> Vec<A> {
    let again = |e: &StoreError| match e {
        StoreError::Transient(source) => StoreError::Transient(source.to_string().into()),
        other => StoreError::Other(other.to_string().into()),
    };
    let mut answers: Vec<A> = (1..n).map(|_| wrap(again(&error))).collect();
    answers.push(wrap(error));
    answers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that come while a group is served wait and go together into the next; a
    /// group whose serving panics answers its requests `None`, and later requests are still
    /// served.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_that_wait_are_served_together_and_a_panic_wedges_nothing() {
        let (release, released) = tokio::sync::watch::channel(false);
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let groups: Groups<u32, u32> = Groups::new(
            8,
            1,
            Arc::new(move |requests: Vec<u32>| {
                let (mut released, seen) = (released.clone(), seen.clone());
                Box::pin(async move {
                    seen.lock().unwrap().push(requests.len());
                    // The first group (request 0) is held until the others have queued.
                    if requests == [0] {
                        released.wait_for(|go| *go).await.unwrap();
                    }
                    assert!(!requests.contains(&99), "a bug in serving");
                    requests.iter().map(|r| r * 10).collect()
                })
            }),
        );
        let first = tokio::spawn({
            let groups = groups.clone();
            async move { groups.submit(0).await }
        });
        while sizes.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let waiting: Vec<_> = (1..=5)
            .map(|i| {
                let groups = groups.clone();
                tokio::spawn(async move { groups.submit(i).await })
            })
            .collect();
        while groups.queue.lock().unwrap().waiting.len() < 5 {
            tokio::task::yield_now().await;
        }
        release.send(true).unwrap();
        assert_eq!(first.await.unwrap(), Some(0));
        for (i, answer) in (1..=5).zip(waiting) {
            assert_eq!(answer.await.unwrap(), Some(i * 10));
        }
        assert_eq!(*sizes.lock().unwrap(), vec![1, 5], "the five that waited went together");

        assert_eq!(groups.submit(99).await, None, "a group that panicked answers nothing");
        assert_eq!(groups.submit(7).await, Some(70), "and the next group is served");
    }
}
