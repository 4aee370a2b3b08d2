//! The `after` schedule on SQLite ([`sked_core::dependency`] holds its rules): the
//! `job_after` edges (which jobs run after which, kept by every write of a job), the waits of
//! occurrences with a `within`, and [`DependencyTx`] on the current transaction, so that the
//! transaction that ends a run also writes what it released.

use super::codec::{RunRow, load_job, ms, ts};
use super::error::TxError;
use super::queue::insert_dispatches;
use super::store::SqliteTx;
use rusqlite::{Connection, params};
use sked_core::dependency::{self, DependencyTx, Wait};
use sked_core::ids::{JobId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ports::{Dispatch, Ended};
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;

/// Keeps the edges of `job` (as just written) in `job_after`: one row per upstream its live
/// `after` names, none once it names none or is DELETED.
pub(crate) fn write_edges(conn: &Connection, job: &Job) -> Result<(), TxError> {
    conn.prepare_cached("DELETE FROM job_after WHERE tenant = ?1 AND downstream = ?2")?
        .execute([job.tenant.as_str(), job.id.as_str()])?;
    if job.state == JobState::Deleted {
        return Ok(());
    }
    if let Some(after) = job.spec.schedule.after() {
        let mut insert = conn.prepare_cached(
            "INSERT INTO job_after (tenant, upstream, downstream) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        )?;
        for upstream in &after.jobs {
            insert.execute([job.tenant.as_str(), upstream.as_str(), job.id.as_str()])?;
        }
    }
    Ok(())
}

/// The live jobs whose `after` names `upstream`, in id order. The edges first (an index
/// probe, which almost always finds none: this runs for every run that ends), then the jobs.
pub(crate) fn downstream_jobs(conn: &Connection, tenant: &str, upstream: &str) -> Result<Vec<Job>, TxError> {
    let downstream: Vec<String> = conn
        .prepare_cached("SELECT downstream FROM job_after WHERE tenant = ?1 AND upstream = ?2 ORDER BY downstream")?
        .query_map([tenant, upstream], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut jobs = Vec::with_capacity(downstream.len());
    for id in &downstream {
        if let Some(job) = load_job(conn, tenant, id)?.filter(|j| j.state != JobState::Deleted) {
            jobs.push(job);
        }
    }
    Ok(jobs)
}

/// `run` as just written in this transaction, with what its end released (nothing unless it
/// ended): downstream runs written, and — the queue being in this database — enqueued.
pub(crate) fn ended(conn: &Connection, run: Run) -> Result<Ended, TxError> {
    let released = if run.state.is_terminal() {
        dependency::release(&mut SqliteTx(conn), &run)?
    } else {
        Vec::new()
    };
    Ok(Ended { run, released })
}

/// Up to `limit` waits whose deadline is before `now`, earliest first.
pub(crate) fn expired_waits(conn: &Connection, now: Timestamp, limit: usize) -> Result<Vec<Wait>, TxError> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut stmt = conn.prepare_cached(
        "SELECT tenant, job_id, scheduled_for, deadline FROM after_waits WHERE deadline < ?1
         ORDER BY deadline, job_id LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![ms(now), limit], |r| {
        Ok(Wait {
            tenant: TenantId(r.get(0)?),
            job_id: JobId(r.get(1)?),
            scheduled_for: ts(r.get(2)?),
            deadline: ts(r.get(3)?),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

impl DependencyTx for SqliteTx<'_> {
    fn downstream_jobs(&mut self, tenant: &TenantId, upstream: &JobId) -> Result<Vec<Job>, TxError> {
        downstream_jobs(self.0, tenant.as_str(), upstream.as_str())
    }

    fn insert_run(&mut self, run: &Run) -> Result<bool, TxError> {
        let inserted = RunRow::new(run, 0)?.insert(self.0)?;
        // The queue is in this database: a released run is enqueued by the transaction that
        // releases it, whichever write ended its upstream.
        if inserted && !run.state.is_terminal() {
            insert_dispatches(self.0, &[Dispatch::from(run)])?;
        }
        Ok(inserted)
    }

    fn put_wait(&mut self, wait: &Wait) -> Result<(), TxError> {
        self.0
            .prepare_cached(
                "INSERT INTO after_waits (tenant, job_id, scheduled_for, deadline) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO NOTHING",
            )?
            .execute(params![
                wait.tenant.as_str(),
                wait.job_id.as_str(),
                ms(wait.scheduled_for),
                ms(wait.deadline)
            ])?;
        Ok(())
    }

    fn delete_wait(&mut self, tenant: &TenantId, job_id: &JobId, scheduled_for: Timestamp) -> Result<(), TxError> {
        self.0
            .prepare_cached("DELETE FROM after_waits WHERE tenant = ?1 AND job_id = ?2 AND scheduled_for = ?3")?
            .execute(params![tenant.as_str(), job_id.as_str(), ms(scheduled_for)])?;
        Ok(())
    }
}
