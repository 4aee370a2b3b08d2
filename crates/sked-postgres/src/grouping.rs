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
    /// its group's task ended without answering (it panicked).
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
            for (answer, sender) in (self.serve)(requests).await.into_iter().zip(answers) {
                // The caller may have gone (shut down): its request is served all the same.
                let _ = sender.send(answer);
            }
        }
    }
}
