//! [`RunCopies`]: a run's item that travels in its SQS message. The process that wrote a run
//! and then sends its message (the sweeper that fired it, the worker whose attempt failed and
//! is retried) puts the item as it wrote it in the message; the worker that receives the
//! message claims from that copy instead of reading the item — one strongly consistent
//! `GetItem` less per run. The copy is only a first guess (the store's `written_runs`): the
//! claim's write is conditional on the copy's item version, so a run anyone wrote meanwhile
//! is read and decided again, and a forged or stale copy can never be written over the item.

use sked_core::ids::{RunId, TenantId};

/// Copies of runs for their messages, kept by the store that writes the runs.
pub trait RunCopies: Send + Sync {
    /// The run as this process last wrote it, encoded for its message, if kept (it is kept no
    /// longer).
    fn outgoing(&self, tenant: &TenantId, run_id: &RunId) -> Option<serde_json::Value>;

    /// A copy received with the run's message: the run's next read–decide–put starts from it
    /// (unless this process keeps a later one). A copy naming another run is ignored.
    fn incoming(&self, tenant: &TenantId, run_id: &RunId, copy: &serde_json::Value);
}
