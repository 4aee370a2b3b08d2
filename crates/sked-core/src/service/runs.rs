//! Run actions: read, list, cancel, and read or follow an attempt's log.

use super::Sked;
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ids::{RunId, TenantId};
use crate::ports::{
    Event, LogError, LogKey, LogLine, LogPage, LogQuery, LogStream, Outcome, Page, PageRequest, RunFilter,
};
use crate::run::Run;
use futures::stream::{self, BoxStream, StreamExt};

/// How often a follow looks for new lines while the attempt runs.
const FOLLOW_POLL: Dur = Dur::millis(200);

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
        self.ports
            .store
            .get_run(tenant, run_id)
            .await?
            .ok_or_else(|| CoreError::NotFound(format!("run {run_id}")))
    }

    /// A page of runs, newest first (one job's with `filter.job_id`, else across jobs).
    pub async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, CoreError> {
        Ok(self.ports.store.list_runs(tenant, filter, page).await?)
    }

    /// Cancels a run: PENDING never starts; RUNNING is stopped by its worker and ends
    /// CANCELLED. Cancelling a run that has ended is a `Conflict`.
    pub async fn cancel_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Run, CoreError> {
        let run = self.get_run(tenant, run_id).await?;
        if run.state.is_terminal() {
            return Err(CoreError::Conflict(format!("run {run_id} already ended {}", run.state)));
        }
        let ended = self
            .ports
            .store
            .cancel_run(tenant, run_id, self.now(), "cancelled by user")
            .await?;
        super::enqueue_released(&self.ports, &ended).await;
        let cancelled = ended.run;
        // A waiting run ends here; a running one when its worker has stopped it.
        if let Some(outcome) = Outcome::of(cancelled.state) {
            tracing::info!(%tenant, job_id = %cancelled.job_id, %run_id, attempt = cancelled.attempt_count(), "run cancelled");
            self.ports.observe(Event::Finished { tenant, outcome });
        }
        Ok(cancelled)
    }

    /// Reads an attempt's log (the latest attempt if none is named). A run that has not
    /// started yet has an empty log.
    pub async fn read_logs(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        request: &LogRequest,
    ) -> Result<LogPage, CoreError> {
        let run = self.get_run(tenant, run_id).await?;
        let Some(attempt) = pick_attempt(&run, request.attempt)? else {
            return Ok(LogPage::default());
        };
        let query = LogQuery {
            stream: request.stream,
            tail: request.tail,
            after: None,
        };
        self.read_page(&log_key(&run, attempt), &query).await
    }

    /// Streams an attempt's log: what is there (honouring `tail`), then new lines as they
    /// are written, ending once the attempt has ended and its last lines were sent. Without
    /// an attempt number it follows the latest attempt, waiting for the first to start.
    pub async fn follow_logs(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        request: &LogRequest,
    ) -> Result<BoxStream<'static, LogLine>, CoreError> {
        let run = self.get_run(tenant, run_id).await?;
        pick_attempt(&run, request.attempt)?;
        let state = Follow {
            sked: self.clone(),
            tenant: tenant.clone(),
            run_id: run_id.clone(),
            request: request.clone(),
            cursor: None,
            done: false,
        };
        let pages = stream::unfold(state, |mut follow| async move {
            if follow.done {
                return None;
            }
            let lines = follow.next_lines().await;
            Some((stream::iter(lines), follow))
        });
        Ok(pages.flatten().boxed())
    }

    async fn read_page(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, CoreError> {
        match self.ports.logs.read(key, query).await {
            Err(LogError::NotFound) => Ok(LogPage {
                cursor: query.after.unwrap_or(0),
                ..LogPage::default()
            }),
            other => Ok(other?),
        }
    }
}

/// The attempt a log request is about: the one named, or the latest (`None` before any).
fn pick_attempt(run: &Run, wanted: Option<u32>) -> Result<Option<u32>, CoreError> {
    match wanted {
        Some(n) if n == 0 || n > run.attempt_count() => {
            Err(CoreError::NotFound(format!("attempt {n} of run {}", run.run_id)))
        }
        Some(n) => Ok(Some(n)),
        None => Ok(Some(run.attempt_count()).filter(|n| *n > 0)),
    }
}

fn log_key(run: &Run, attempt: u32) -> LogKey {
    LogKey {
        tenant: run.tenant.clone(),
        run_id: run.run_id.clone(),
        attempt,
    }
}

/// A follow in progress.
struct Follow {
    sked: Sked,
    tenant: TenantId,
    run_id: RunId,
    request: LogRequest,
    /// Where the next read starts; `None` before the first read.
    cursor: Option<u64>,
    done: bool,
}

impl Follow {
    /// The next batch of lines, waiting for some while the attempt runs; sets `done` once
    /// the attempt has ended and everything was read (or on an error).
    async fn next_lines(&mut self) -> Vec<LogLine> {
        loop {
            let Ok(run) = self.sked.get_run(&self.tenant, &self.run_id).await else {
                self.done = true;
                return Vec::new();
            };
            // Without a number, follow the latest attempt at the time it first exists.
            let attempt = self.request.attempt.or(Some(run.attempt_count()).filter(|n| *n > 0));
            self.request.attempt = attempt;
            let ended = match attempt {
                Some(n) => run
                    .attempts
                    .get(n as usize - 1)
                    .is_some_and(|a| a.finished_at.is_some()),
                None => run.state.is_terminal(),
            };
            if let Some(n) = attempt {
                let query = match self.cursor {
                    None => LogQuery {
                        stream: self.request.stream,
                        tail: self.request.tail,
                        after: None,
                    },
                    Some(after) => LogQuery {
                        stream: self.request.stream,
                        tail: None,
                        after: Some(after),
                    },
                };
                let Ok(page) = self.sked.read_page(&log_key(&run, n), &query).await else {
                    self.done = true;
                    return Vec::new();
                };
                self.cursor = Some(page.cursor);
                if !page.lines.is_empty() {
                    return page.lines;
                }
            }
            if ended {
                self.done = true;
                return Vec::new();
            }
            let clock = &self.sked.ports.clock;
            clock.sleep_until(clock.now() + FOLLOW_POLL.to_chrono()).await;
        }
    }
}
