//! [`FoldedLogs`]: a small finished log handed, in one worker process, from its attempt's log
//! writer to the completion that ends its run, so that it is written in the run's own item by
//! the write that ends the run (`logs`, a map of attempt to JSON lines) instead of as an item
//! of its own: one request and one write unit less per printing run. A log is folded when its
//! JSON lines are at most [`FOLD_MAX_BYTES`] (a run item with such a log still costs one or
//! two write units: never more than the two writes it replaces), and only into the write that
//! ends the run; a run that will be retried, and a completion that was refused or failed, get
//! the log as its own item ([`super::inline`]) — before the run's write for a retry, so a
//! reader who sees the attempt ended finds its log, as before.
//!
//! A log waits here only between its writer's `finish` and its attempt's completion, which
//! follow each other in the worker; at most [`MAX_HELD`] wait (past that the writer writes the
//! item itself). A worker that dies between the two loses that attempt's lines with its result:
//! the reaper records the attempt as lost, as it would have without the lines.
//!
//! Reads look in the run's item first ([`super::inline::InlineLogs::get_folded`]).

use super::inline::{InlineLog, InlineLogs};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::{LogError, LogKey};
use std::collections::HashMap;
use std::sync::Mutex;

/// Largest finished log (its JSON lines) folded into its run's item.
pub const FOLD_MAX_BYTES: usize = 400;

/// Most logs waiting for their completion at once.
pub const MAX_HELD: usize = 4096;

/// Finished logs waiting for the completion that ends their run (see the module's header).
#[derive(Debug)]
pub struct FoldedLogs {
    /// By run: a run has one attempt running at a time.
    held: Mutex<HashMap<(TenantId, RunId), (LogKey, InlineLog)>>,
    /// Where a log goes when it cannot be folded.
    own_items: InlineLogs,
}

impl FoldedLogs {
    /// Folded logs of the table `table`; a log that cannot be folded is kept `retention_days`
    /// as an item of its own.
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>, retention_days: u32) -> Self {
        FoldedLogs {
            held: Mutex::default(),
            own_items: InlineLogs {
                client,
                table: table.into(),
                retention_days,
            },
        }
    }

    /// Holds `log` for its attempt's completion; gives it back when [`MAX_HELD`] are waiting.
    pub(crate) fn hold(&self, key: LogKey, log: InlineLog) -> Result<(), InlineLog> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.len() >= MAX_HELD {
            return Err(log);
        }
        held.insert((key.tenant.clone(), key.run_id.clone()), (key, log));
        Ok(())
    }

    /// The log waiting for `run_id`'s completion, if any: its attempt and JSON lines.
    pub(crate) fn take(&self, tenant: &TenantId, run_id: &RunId) -> Option<(LogKey, InlineLog)> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&(tenant.clone(), run_id.clone()))
    }

    /// Writes a log its completion did not fold as an item of its own.
    pub(crate) async fn write_own_item(&self, key: &LogKey, log: InlineLog) -> Result<(), LogError> {
        self.own_items.put(key, log).await
    }
}
