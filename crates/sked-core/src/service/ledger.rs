//! The occurrence ledger through the service ([`crate::ledger`] holds the rules): a page of a
//! job's occurrences, the explanation of the one nearest an instant, and the pause records
//! the ledger reads.

use super::Sked;
use crate::error::CoreError;
use crate::ids::{JobId, TenantId};
use crate::job::Job;
use crate::ledger::{self, Occurrence, SkipRecord};
use crate::ports::{PageRequest, RunFilter, StoreError};
use crate::run::Run;
use crate::timestamp::{self, Timestamp};

/// Most skip records one page reads; a page meeting more is cut at the oldest it read.
const MAX_RECORDS: usize = 10_000;
/// The default start of a ledger window: the epoch (occurrences before a job's creation exist:
/// an `at` in the past, a backfill).
const EARLIEST: Timestamp = chrono::DateTime::UNIX_EPOCH;
/// Most pages `why` reads looking for the first occurrence after an instant.
const MAX_WHY_PAGES: usize = 10;

/// What a page of the ledger asks for.
#[derive(Debug, Clone, Default)]
pub struct LedgerQuery {
    /// Occurrences at or after this (default: all, including those before the job's creation:
    /// an `at` in the past, a backfill of earlier times).
    pub since: Option<Timestamp>,
    /// Occurrences before this (default: now).
    pub until: Option<Timestamp>,
    /// At most this many (default 100, at most [`ledger::MAX_PAGE`]).
    pub limit: usize,
    /// A `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A page of the ledger, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerPage {
    /// The occurrences.
    pub items: Vec<Occurrence>,
    /// Where the next (older) page starts; `None` on the last.
    pub next_cursor: Option<String>,
}

/// The occurrence nearest an instant, explained.
#[derive(Debug, Clone, PartialEq)]
pub struct Why {
    /// The occurrence.
    pub occurrence: Occurrence,
    /// One sentence on what became of it.
    pub explanation: String,
}

impl Sked {
    /// A page of `id`'s occurrences (another tenant's job is `NotFound`).
    pub async fn occurrences(&self, tenant: &TenantId, id: &JobId, q: &LedgerQuery) -> Result<LedgerPage, CoreError> {
        let job = self.get_job(tenant, id).await?;
        let since = q.since.unwrap_or(EARLIEST);
        let mut until = q.until.unwrap_or_else(|| self.now());
        if let Some(cursor) = &q.cursor {
            let ms: i64 = cursor
                .parse()
                .map_err(|_| StoreError::BadCursor(format!("{cursor:?} is not a cursor this listing issued")))?;
            until = until.min(timestamp::from_ms(ms));
        }
        let limit = q.limit.clamp(1, ledger::MAX_PAGE);
        self.ledger_page(&job, (since, until), limit).await
    }

    /// The occurrence of `id` nearest `at` (the latest at or before it if equally near), and
    /// what became of it; `NotFound` if the job has none yet.
    pub async fn why(&self, tenant: &TenantId, id: &JobId, at: Timestamp) -> Result<Why, CoreError> {
        let job = self.get_job(tenant, id).await?;
        let now = self.now();
        let before = self
            .ledger_page(&job, (EARLIEST, at + chrono::Duration::milliseconds(1)), 1)
            .await?
            .items
            .into_iter()
            .next();
        // The first occurrence after `at`, no further away than the one before it.
        let mut until = match &before {
            Some(b) => now.min(at + (at - b.scheduled_for) + chrono::Duration::milliseconds(1)),
            None => now,
        };
        let mut after = None;
        for _ in 0..MAX_WHY_PAGES {
            if until <= at {
                break;
            }
            let page = self.ledger_page(&job, (at, until), ledger::MAX_PAGE).await?;
            after = page.items.last().cloned().or(after);
            match page.next_cursor.and_then(|c| c.parse::<i64>().ok()) {
                Some(ms) => until = timestamp::from_ms(ms),
                None => break,
            }
        }
        let nearest = [before, after]
            .into_iter()
            .flatten()
            .min_by_key(|o| ((o.scheduled_for - at).num_milliseconds().abs(), o.scheduled_for > at));
        let Some(occurrence) = nearest else {
            return Err(CoreError::NotFound(format!("an occurrence of job {id}")));
        };
        let run = match &occurrence.run_id {
            Some(run_id) => self.ports.store.get_run(tenant, run_id).await?,
            None => None,
        };
        let explanation = ledger::explain(&job, &occurrence, run.as_ref());
        Ok(Why {
            occurrence,
            explanation,
        })
    }

    /// The newest `limit` occurrences of `job` in `[since, until)`.
    async fn ledger_page(
        &self,
        job: &Job,
        (since, until): (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<LedgerPage, CoreError> {
        let filter = RunFilter {
            job_id: Some(job.id.clone()),
            since: Some(since),
            until: Some(until),
            ..RunFilter::default()
        };
        // Runs alone fill the page down to the oldest one read: skip records are read from there.
        let request = PageRequest {
            cursor: None,
            limit: limit + 1,
        };
        let runs: Vec<Run> = self.ports.store.list_runs(&job.tenant, &filter, &request).await?.items;
        let mut floor = match runs.len() > limit {
            true => runs.iter().map(|r| r.scheduled_for).min().unwrap_or(since),
            false => since,
        };
        let records: Vec<SkipRecord> = self
            .ports
            .store
            .skip_records(&job.tenant, &job.id, (floor, until), MAX_RECORDS)
            .await?;
        if records.len() == MAX_RECORDS
            && let Some(oldest) = records.iter().map(|r| r.from).min()
        {
            floor = floor.max(oldest);
        }
        let (items, more) = ledger::page(job, &runs, &records, (floor, until), limit);
        let cut = more || floor > since;
        let next_cursor = match (cut, items.last()) {
            (true, Some(last)) => Some(last.scheduled_for.timestamp_millis().to_string()),
            _ => None,
        };
        Ok(LedgerPage { items, next_cursor })
    }

    /// Closes the open pause record of `id` at `at` (the resume).
    pub(super) async fn close_pause(&self, tenant: &TenantId, id: &JobId, at: Timestamp) -> Result<(), CoreError> {
        let open = ledger::open();
        let window = (open - chrono::Duration::milliseconds(1), open);
        let records = self.ports.store.skip_records(tenant, id, window, MAX_RECORDS).await?;
        let closed: Vec<SkipRecord> = records
            .into_iter()
            .filter(SkipRecord::is_pause)
            .map(|mut pause| {
                pause.to = timestamp::trunc_ms(at);
                pause
            })
            .collect();
        if !closed.is_empty() {
            self.ports.store.record_skips(tenant, id, &closed).await?;
        }
        Ok(())
    }
}
