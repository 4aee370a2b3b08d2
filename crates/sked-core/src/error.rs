//! Errors the services answer with; the API maps each to a status and a JSON body.

use crate::ports::{LogError, QueueError, StoreError, WorkError};

/// One invalid field: a JSON path such as `schedule.cron` or `task.command.argv`, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FieldError {
    /// Dotted path of the field in the request body.
    pub field: String,
    /// What is wrong with it, for people.
    pub message: String,
}

impl FieldError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// One invalid entry of a batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BatchFieldError {
    /// Index of the entry in `jobs`.
    pub index: usize,
    /// Dotted path inside the entry.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// What a service call can answer besides success.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The request is invalid; nothing was written.
    #[error("invalid {}: {}", .0[0].field, .0[0].message)]
    Invalid(Vec<FieldError>),
    /// Some batch entries are invalid; nothing was written.
    #[error("{} invalid entries in batch", .0.len())]
    InvalidBatch(Vec<BatchFieldError>),
    /// Valid, but this deployment cannot do it (e.g. container tasks without ECS).
    #[error("{message}")]
    Unsupported {
        /// The field asking for it.
        field: String,
        /// Why, and what would make it work.
        message: String,
    },
    /// No such job or run for this tenant.
    #[error("{0} not found")]
    NotFound(String),
    /// No valid credentials: none given, unknown, or revoked.
    #[error("{0}")]
    Unauthenticated(String),
    /// Valid credentials whose role may not do this.
    #[error("{0}")]
    PermissionDenied(String),
    /// The request conflicts with current state (id taken with another body, stale version…).
    #[error("{0}")]
    Conflict(String),
    /// A limit of the tenant's quota: nothing was written. With `retry_after` (the submit
    /// rate), the same request passes after that long.
    #[error("{message}")]
    ResourceExhausted {
        /// Which limit, and its value.
        message: String,
        /// When the request may be sent again, if waiting helps.
        retry_after: Option<crate::duration::Dur>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Log storage failed.
    #[error(transparent)]
    Logs(#[from] LogError),
}

impl From<WorkError> for CoreError {
    fn from(e: WorkError) -> Self {
        match e {
            WorkError::Store(e) => CoreError::Store(e),
            WorkError::Queue(e) => CoreError::Queue(e),
        }
    }
}

impl CoreError {
    /// An `Invalid` error with one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        CoreError::Invalid(vec![FieldError::new(field, message)])
    }
}
