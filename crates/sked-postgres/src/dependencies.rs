//! The `after` schedule on PostgreSQL ([`sked_core::dependency`] holds its rules): the
//! `job_after` edges (which jobs run after which, kept by every write of a job), the waits of
//! occurrences with a `within`, and [`DependencyTx`] on the current transaction, so that the
//! transaction that ends a run also writes what it released.
//!
//! As SQLite's, a released run is enqueued by the transaction that releases it (the queue is
//! a table of this database, `dispatch`), whichever write ended its upstream — a completion,
//! a cancellation, a claim that found its run expired or replaced, an expired wait — so it
//! does not wait for the repair pass, and the listeners are notified at that commit.
//! Enqueuing again what `complete` and `cancel_run` answer (as a caller with a separate
//! queue does) merges with that message.
//! Must not: decide which occurrence runs — `sked-core` does.

use crate::codec::{RunRow, get, load_job, ms, ts};
use crate::queue::insert_dispatches;
use crate::store::PgTx;
use crate::tx::{Tx, TxError};
use sked_core::dependency::{self, DependencyTx, Wait};
use sked_core::ids::{JobId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ports::{Dispatch, Ended};
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;

/// Keeps the edges of `jobs` (as just written) in `job_after`: one row per upstream a job's
/// live `after` names, none once it names none or is DELETED.
pub(crate) fn write_edges(tx: &mut Tx, jobs: &[Job]) -> Result<(), TxError> {
    let tenants: Vec<&str> = jobs.iter().map(|j| j.tenant.as_str()).collect();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    tx.execute(
        "DELETE FROM job_after WHERE (tenant, downstream) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
        &[&tenants, &ids],
    )?;
    let edges: Vec<(&str, &str, &str)> = jobs
        .iter()
        .filter(|j| j.state != JobState::Deleted)
        .flat_map(|j| {
            let after = j.spec.schedule.after().map(|a| a.jobs.as_slice()).unwrap_or_default();
            after
                .iter()
                .map(move |upstream| (j.tenant.as_str(), upstream.as_str(), j.id.as_str()))
        })
        .collect();
    if edges.is_empty() {
        return Ok(());
    }
    let tenants: Vec<&str> = edges.iter().map(|e| e.0).collect();
    let upstreams: Vec<&str> = edges.iter().map(|e| e.1).collect();
    let downstreams: Vec<&str> = edges.iter().map(|e| e.2).collect();
    tx.execute(
        "INSERT INTO job_after (tenant, upstream, downstream)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING",
        &[&tenants, &upstreams, &downstreams],
    )?;
    Ok(())
}

/// The live jobs whose `after` names `upstream`, in id order. The edges first (an index
/// probe, which almost always finds none: this runs for every run that ends), then the jobs.
pub(crate) fn downstream_jobs(tx: &mut Tx, tenant: &str, upstream: &str) -> Result<Vec<Job>, TxError> {
    // Seen with a run this transaction ends (`locks::lock_runs_to_end`): no edge.
    if tx.no_downstream.contains(&(tenant.to_string(), upstream.to_string())) {
        return Ok(Vec::new());
    }
    let rows = tx.query(
        "SELECT downstream FROM job_after WHERE tenant = $1 AND upstream = $2 ORDER BY downstream",
        &[&tenant, &upstream],
    )?;
    let mut jobs = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: &str = get(row, 0)?;
        if let Some(job) = load_job(tx, tenant, id)?.filter(|j| j.state != JobState::Deleted) {
            jobs.push(job);
        }
    }
    Ok(jobs)
}

/// `run` as just written in this transaction, with what its end released (nothing unless it
/// ended): downstream runs written, and enqueued, in this transaction.
pub(crate) fn ended(tx: &mut Tx, run: Run) -> Result<Ended, TxError> {
    let released = if run.state.is_terminal() {
        dependency::release(&mut PgTx(tx), &run)?
    } else {
        Vec::new()
    };
    Ok(Ended { run, released })
}

/// Up to `$2` waits whose deadline is before `$1`, earliest first (a plain read; rows for
/// [`wait_from_row`]).
pub(crate) const EXPIRED_WAITS: &str = "SELECT tenant, job_id, scheduled_for, deadline FROM after_waits
     WHERE deadline < $1 ORDER BY deadline, job_id LIMIT $2";

/// Decodes a row of `tenant, job_id, scheduled_for, deadline`.
pub(crate) fn wait_from_row(row: &tokio_postgres::Row) -> Result<Wait, TxError> {
    Ok(Wait {
        tenant: TenantId(get(row, 0)?),
        job_id: JobId(get(row, 1)?),
        scheduled_for: ts(get(row, 2)?),
        deadline: ts(get(row, 3)?),
    })
}

impl DependencyTx for PgTx<'_> {
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
        self.0.execute(
            "INSERT INTO after_waits (tenant, job_id, scheduled_for, deadline) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
            &[
                &wait.tenant.as_str(),
                &wait.job_id.as_str(),
                &ms(wait.scheduled_for),
                &ms(wait.deadline),
            ],
        )?;
        Ok(())
    }

    /// Locked until the transaction ends (`locks`): upstreams ending at once decide it in turn.
    fn lock_occurrence(&mut self, tenant: &TenantId, job_id: &JobId, t: Timestamp) -> Result<(), TxError> {
        crate::locks::lock_occurrence(self.0, tenant, job_id, t)
    }

    fn delete_wait(&mut self, tenant: &TenantId, job_id: &JobId, scheduled_for: Timestamp) -> Result<(), TxError> {
        self.0.execute(
            "DELETE FROM after_waits WHERE tenant = $1 AND job_id = $2 AND scheduled_for = $3",
            &[&tenant.as_str(), &job_id.as_str(), &ms(scheduled_for)],
        )?;
        Ok(())
    }
}
