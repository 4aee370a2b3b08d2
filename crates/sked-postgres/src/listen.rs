//! [`Listener`]: PostgreSQL's `LISTEN` on a connection of its own, turned into an in-process
//! wake-up ([`tokio::sync::Notify`]) for the receives waiting in this process.
//!
//! Any transaction that makes a message receivable (an enqueue, a wake of parked messages)
//! calls `pg_notify` on the channel in that transaction; PostgreSQL delivers it to every
//! listening session when (and only if) the transaction commits, so a worker on another host
//! hears of an enqueue as soon as it can receive it. tokio-postgres hands notifications out
//! through its `Connection` (`poll_message`): a task drives the connection, forwards each one
//! to the `Notify`, and, when the connection drops, connects again after [`RECONNECT`].
//!
//! A notification can still be missed (the connection was down, or the process was busy
//! elsewhere when it came): waiters also wake on every (re)connection and poll on a timer of
//! their own, so a lost notification costs latency, never a message. What it must not do:
//! decide anything about messages; it only says "look again".

use crate::db::ConnectConfig;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, futures::Notified, watch};
use tokio_postgres::AsyncMessage;
use tokio_util::sync::{CancellationToken, DropGuard};

/// How long after losing (or failing to open) its connection the listener tries again.
pub const RECONNECT: Duration = Duration::from_secs(1);

/// A `LISTEN` on one channel, kept open by a background task until the listener is dropped.
pub(crate) struct Listener {
    /// Woken on each notification on the channel, and each time the `LISTEN` is (re)established.
    wake: Arc<Notify>,
    /// Whether the `LISTEN` is in effect right now.
    listening: watch::Receiver<bool>,
    /// Stops the background task when the listener is dropped.
    _stop: DropGuard,
}

impl Listener {
    /// Starts listening on `channel` (a lower-case SQL identifier) over a connection opened
    /// from `config` (TLS as the pool's). Must be called within a Tokio runtime: the task runs
    /// on it.
    pub(crate) fn start(mut config: ConnectConfig, channel: &'static str) -> Listener {
        // An idle connection whose peer vanished (a host gone, a NAT entry dropped) is noticed
        // in about a minute, not after the operating system's two hours.
        config
            .pg
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .keepalives_interval(Duration::from_secs(10))
            .keepalives_retries(3);
        let wake = Arc::new(Notify::new());
        let (listening_tx, listening) = watch::channel(false);
        let stop = CancellationToken::new();
        let task = listen(config, channel, wake.clone(), listening_tx);
        let stopped = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stopped.cancelled() => {}
                _ = task => {}
            }
        });
        Listener {
            wake,
            listening,
            _stop: stop.drop_guard(),
        }
    }

    /// A wake-up to wait for: register it (`enable`) before looking at the queue, so a
    /// notification that comes in between is not lost.
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// Returns once the `LISTEN` is in effect, or after `within` if it is not (the database
    /// is unreachable: the caller polls instead).
    pub(crate) async fn ready(&self, within: Duration) {
        let mut listening = self.listening.clone();
        let _ = tokio::time::timeout(within, listening.wait_for(|l| *l)).await;
    }
}

/// The background task: connect, `LISTEN`, forward notifications until the connection ends,
/// then again after [`RECONNECT`]. Runs until cancelled.
async fn listen(config: ConnectConfig, channel: &'static str, wake: Arc<Notify>, listening: watch::Sender<bool>) {
    loop {
        match config.pg.connect(config.tls.clone()).await {
            Ok((client, mut connection)) => {
                // The connection must be polled for the client's `LISTEN` to go through; the
                // same polling yields the notifications.
                let drive = async {
                    while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                        match message {
                            Ok(AsyncMessage::Notification(n)) if n.channel() == channel => wake.notify_waiters(),
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(error = %e, "the LISTEN connection failed; reconnecting");
                                break;
                            }
                        }
                    }
                };
                let subscribe = async {
                    match client.batch_execute(&format!("LISTEN {channel}")).await {
                        Ok(()) => {
                            listening.send_replace(true);
                            // Whatever was enqueued while no one listened: look now.
                            wake.notify_waiters();
                            std::future::pending::<()>().await;
                        }
                        Err(e) => tracing::warn!(error = %e, "LISTEN failed; reconnecting"),
                    }
                };
                tokio::select! {
                    _ = drive => {}
                    _ = subscribe => {}
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not open the LISTEN connection; retrying"),
        }
        listening.send_replace(false);
        // Notifications may have been lost while the connection was down: look again.
        wake.notify_waiters();
        tokio::time::sleep(RECONNECT).await;
    }
}
