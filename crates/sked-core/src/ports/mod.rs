//! Ports: the traits the adapters implement (clock, store, queue, work, logs, executor,
//! keys, quotas, observer, alerts). Services in [`crate::service`] are written
//! against these only. Each adapter (in-memory in sked-testkit, SQLite in sked-embedded,
//! AWS in sked-aws) must pass the contract suites in sked-testkit.

pub mod alerts;
pub mod clock;
pub mod executor;
pub mod keys;
pub mod logs;
pub mod observer;
pub mod queue;
pub mod quotas;
pub mod store;
pub mod work;

pub use alerts::{WebhookPost, WebhookSecrets, WebhookSender};
pub use clock::{Clock, SystemClock};
pub use executor::{ExecRequest, ExecResult, Executor, StopReason};
pub use keys::KeyStore;
pub use logs::{
    LogError, LogKey, LogLine, LogPage, LogQuery, LogRetention, LogStore, LogStream, LogSummary, LogWriter,
};
pub use observer::{Event, NoObserver, Observer, Outcome};
pub use queue::{Delivery, Dispatch, DispatchQueue, QueueDepth, QueueError, Receipt};
pub use quotas::QuotaStore;
pub use store::{
    AttemptResult, CLAIM_CHECK_HORIZON, ClaimBatch, ClaimOutcome, Completion, Ended, FiredRunListing, Firing, JobClaim,
    JobFilter, JobStore, JobStoreExt, Page, PageRequest, RunFilter, RunTransition, StoreError, scheduled_up_to,
};
pub use work::{ReceiveRequest, Received, Settlement, WorkError, WorkPort};
