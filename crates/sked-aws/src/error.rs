//! What an AWS call's failure means to sked: every SDK error is classified once, here, into
//! the ports' error kinds, and the SDK error stays attached as the source.
//!
//! - a condition that did not hold (`ConditionalCheckFailedException`, or a transaction
//!   cancelled for one) is the caller's to interpret (conflict, fenced, not found), so it comes
//!   back as [`Failure::Condition`];
//! - throttling, provisioned-throughput and request limits, transaction conflicts, 5xx answers,
//!   timeouts and connection failures are [`Failure::Transient`];
//! - everything else is [`Failure::Other`].
//!
//! This module must not decide store semantics (that is `dynamo::store`'s job).

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use sked_core::ports::{QueueError, StoreError};
use std::error::Error as StdError;

/// A boxed error that can cross threads.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// One failed AWS call: which operation, the service's error code, and the SDK error.
#[derive(Debug, thiserror::Error)]
#[error("{op} failed ({}): {message}", code.as_deref().unwrap_or("no error code"))]
pub struct CallError {
    /// The operation, e.g. `dynamodb:TransactWriteItems`.
    pub op: &'static str,
    /// The service's error code, when it answered with one.
    pub code: Option<String>,
    /// The SDK error with its whole chain, for people.
    pub message: String,
    /// The SDK error.
    #[source]
    pub source: BoxError,
}

/// What a failed call means.
#[derive(Debug)]
pub enum Failure {
    /// A condition expression did not hold. For a cancelled transaction, which of its items
    /// failed their condition (by index into the request).
    Condition {
        /// Indexes of the transaction items whose condition failed (empty for single-item
        /// writes).
        failed_items: Vec<usize>,
        /// The call.
        error: CallError,
    },
    /// Worth retrying.
    Transient(CallError),
    /// Anything else.
    Other(CallError),
}

impl Failure {
    /// The call error inside.
    pub fn into_call(self) -> CallError {
        match self {
            Failure::Condition { error, .. } | Failure::Transient(error) | Failure::Other(error) => error,
        }
    }

    /// As a store error; a condition failure becomes `Conflict` with `what` as its message.
    pub fn into_store(self, what: impl FnOnce() -> String) -> StoreError {
        match self {
            Failure::Condition { .. } => StoreError::Conflict(what()),
            Failure::Transient(e) => StoreError::Transient(Box::new(e)),
            Failure::Other(e) => StoreError::Other(Box::new(e)),
        }
    }
}

/// Service error codes that mean "try again later".
const TRANSIENT_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ThrottlingError",
    "ProvisionedThroughputExceededException",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
    "InternalServerError",
    "InternalFailure",
    "InternalError",
    "ServiceUnavailable",
    "TransactionConflictException",
    "TransactionConflict",
    "TransactionInProgressException",
    "RequestThrottled",
    "KMSThrottlingException",
    "OverLimit",
];

/// Whether a service error code means "try again later".
pub fn is_transient_code(code: &str) -> bool {
    TRANSIENT_CODES.contains(&code)
}

/// Classifies any SDK error. `condition_items` extracts, for a cancelled transaction, the
/// per-item cancellation codes (`None` when the error is not a cancellation).
pub fn classify<E>(
    op: &'static str,
    err: SdkError<E>,
    condition_items: impl FnOnce(&E) -> Option<Vec<Option<String>>>,
) -> Failure
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let (code, reasons, transport, message) = match &err {
        SdkError::ServiceError(se) => {
            let e = se.err();
            let message = e
                .message()
                .map_or_else(|| DisplayErrorContext(e).to_string(), str::to_string);
            (e.code().map(str::to_string), condition_items(e), false, message)
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            (None, None, true, DisplayErrorContext(&err).to_string())
        }
        _ => (None, None, false, DisplayErrorContext(&err).to_string()),
    };
    let status_5xx = err.raw_response().is_some_and(|r| r.status().is_server_error());
    let error = CallError {
        op,
        code: code.clone(),
        message,
        source: Box::new(err),
    };
    if let Some(reasons) = reasons {
        let failed: Vec<usize> = reasons
            .iter()
            .enumerate()
            .filter(|(_, c)| c.as_deref() == Some("ConditionalCheckFailed"))
            .map(|(i, _)| i)
            .collect();
        let transient = reasons.iter().flatten().any(|c| is_transient_code(c));
        return if !failed.is_empty() {
            Failure::Condition {
                failed_items: failed,
                error,
            }
        } else if transient {
            Failure::Transient(error)
        } else {
            Failure::Other(error)
        };
    }
    match code.as_deref() {
        Some("ConditionalCheckFailedException") => Failure::Condition {
            failed_items: Vec::new(),
            error,
        },
        Some(c) if is_transient_code(c) => Failure::Transient(error),
        _ if transport || status_5xx => Failure::Transient(error),
        _ => Failure::Other(error),
    }
}

/// A queue error from a call failure; `stale_codes` are the codes that mean the receipt is no
/// longer current.
pub fn queue_error(f: Failure, stale_codes: &[&str]) -> QueueError {
    let call = match f {
        Failure::Transient(e) => return QueueError::Transient(Box::new(e)),
        other => other.into_call(),
    };
    if call.code.as_deref().is_some_and(|c| stale_codes.contains(&c)) {
        QueueError::StaleReceipt
    } else {
        QueueError::Other(Box::new(call))
    }
}

/// A request that could not even be built (a missing required field: a bug here).
pub fn build_error(e: impl StdError + Send + Sync + 'static) -> StoreError {
    StoreError::Other(Box::new(e))
}
