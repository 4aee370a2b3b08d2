//! Run actions: read, list, cancel, and read or follow an attempt's log.

use super::Sked;
use crate::error::CoreError;
use crate::ids::{RunId, TenantId};
use crate::ports::{LogLine, LogPage, LogStream, Page, PageRequest, RunFilter};
use crate::run::Run;
use futures::stream::BoxStream;

/// What part of a run's log to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRequest {
    /// Attempt number; the latest if absent.
    pub attempt: Option<u32>,
    /// Only this stream; both if absent.
    pub stream: Option<LogStream>,
    /// Only the last N lines.
    pub tail: Option<usize>,
}

impl Sked {
    /// One run.
    pub async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Run, CoreError> {
        let _ = (tenant, run_id);
        todo!()
    }

    /// A page of runs, newest first (one job's with `filter.job_id`, else across jobs).
    pub async fn list_runs(&self, tenant: &TenantId, filter: &RunFilter, page: &PageRequest) -> Result<Page<Run>, CoreError> {
        let _ = (tenant, filter, page);
        todo!()
    }

    /// Cancels a run: PENDING never starts; RUNNING is stopped by its worker and ends
    /// CANCELLED. Cancelling a terminal run is a `Conflict`.
    pub async fn cancel_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Run, CoreError> {
        let _ = (tenant, run_id);
        todo!()
    }

    /// Reads an attempt's log (the latest attempt if none is named).
    pub async fn read_logs(&self, tenant: &TenantId, run_id: &RunId, request: &LogRequest) -> Result<LogPage, CoreError> {
        let _ = (tenant, run_id, request);
        todo!()
    }

    /// Streams an attempt's log: what is there (honouring `tail`), then new lines as they
    /// are written, ending once the attempt has ended and its last lines were sent.
    pub async fn follow_logs(&self, tenant: &TenantId, run_id: &RunId, request: &LogRequest) -> Result<BoxStream<'static, LogLine>, CoreError> {
        let _ = (tenant, run_id, request);
        todo!()
    }
}
