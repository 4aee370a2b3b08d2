//! [`Recorder`]: the in-memory series behind `GET /metrics`, fed by the services' events
//! ([`Observer`]) and by the HTTP middleware. It owns the metric families' names, help texts
//! and buckets; [`super::exposition`] decides who sees which series.
//!
//! Series of runs are kept per tenant (the only label besides the small fixed sets `outcome`,
//! `reason`, `priority`, `route` and `status`): no job or run id ever becomes a label.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use sked_core::firing::SkipReason;
use sked_core::ids::TenantId;
use sked_core::ports::{Event, Observer, Outcome};
use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// Buckets of `sked_run_start_lag_seconds`: 1 ms to 10 min.
pub const LAG_BUCKETS: [f64; 18] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Buckets of `sked_sweep_duration_seconds` and `sked_http_request_duration_seconds`:
/// 0.5 ms to 30 s.
pub const DURATION_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0,
];

/// The skip reasons counted, in label order.
pub const SKIP_REASONS: [SkipReason; 6] = SkipReason::ALL;

/// One tenant's run series.
#[derive(Debug)]
pub struct TenantSeries {
    /// `sked_runs_fired_total`.
    pub fired: Counter,
    /// `sked_runs_started_total`.
    pub started: Counter,
    /// `sked_runs_finished_total`, by [`Outcome::ALL`].
    pub finished: [Counter; 4],
    /// `sked_retries_total`.
    pub retries: Counter,
    /// `sked_occurrences_skipped_total`, by [`SKIP_REASONS`].
    pub skipped: [Counter; SKIP_REASONS.len()],
    /// `sked_run_start_lag_seconds`.
    pub lag: Histogram,
    /// `sked_runs_running`: attempts this process's workers are running.
    pub running: Gauge,
}

impl Default for TenantSeries {
    fn default() -> Self {
        TenantSeries {
            fired: Counter::default(),
            started: Counter::default(),
            finished: Default::default(),
            retries: Counter::default(),
            skipped: Default::default(),
            lag: Histogram::new(LAG_BUCKETS),
            running: Gauge::default(),
        }
    }
}

/// The labels of `sked_http_requests_total`.
pub type HttpLabels = [(&'static str, String); 2];

/// Every series of this process.
pub struct Recorder {
    /// Run series per tenant, created at a tenant's first event.
    tenants: RwLock<BTreeMap<TenantId, Arc<TenantSeries>>>,
    /// `sked_workers`: worker tasks running in this process.
    pub(crate) workers: Gauge,
    /// `sked_sweep_duration_seconds`.
    pub(crate) sweep: Histogram,
    /// `sked_http_requests_total{route,status}`.
    pub(crate) http_requests: Family<HttpLabels, Counter>,
    /// `sked_http_request_duration_seconds{route}`.
    pub(crate) http_duration: Family<[(&'static str, String); 1], Histogram>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            tenants: RwLock::default(),
            workers: Gauge::default(),
            sweep: Histogram::new(DURATION_BUCKETS),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
        }
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// The series of `tenant`, created on first use.
    fn tenant(&self, tenant: &TenantId) -> Arc<TenantSeries> {
        if let Some(series) = self.tenants.read().unwrap_or_else(PoisonError::into_inner).get(tenant) {
            return series.clone();
        }
        self.tenants
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(tenant.clone())
            .or_default()
            .clone()
    }

    /// The tenants with series, and theirs; only `only`'s when given.
    pub fn tenants(&self, only: Option<&TenantId>) -> Vec<(TenantId, Arc<TenantSeries>)> {
        let tenants = self.tenants.read().unwrap_or_else(PoisonError::into_inner);
        match only {
            Some(t) => tenants.get(t).map(|s| vec![(t.clone(), s.clone())]).unwrap_or_default(),
            None => tenants.iter().map(|(t, s)| (t.clone(), s.clone())).collect(),
        }
    }

    /// Counts one HTTP request to `route` (a route template, or `unmatched`) answered with
    /// `status` after `elapsed`.
    pub fn http_request(&self, route: &str, status: u16, elapsed: Duration) {
        self.http_requests
            .get_or_create(&[("route", route.to_string()), ("status", status.to_string())])
            .inc();
        self.http_duration
            .get_or_create(&[("route", route.to_string())])
            .observe(elapsed.as_secs_f64());
    }
}

impl Observer for Recorder {
    fn observe(&self, event: &Event<'_>) {
        match *event {
            Event::Fired { tenant, runs } => {
                self.tenant(tenant).fired.inc_by(runs as u64);
            }
            Event::Skipped { tenant, reason } => {
                let i = SKIP_REASONS.iter().position(|r| *r == reason).unwrap_or(0);
                self.tenant(tenant).skipped[i].inc();
            }
            Event::Started { tenant, lag } => {
                let series = self.tenant(tenant);
                series.started.inc();
                series.lag.observe(lag.as_secs_f64());
                series.running.inc();
            }
            Event::Stopped { tenant } => {
                self.tenant(tenant).running.dec();
            }
            Event::Retried { tenant } => {
                self.tenant(tenant).retries.inc();
            }
            Event::Finished { tenant, outcome } => {
                let i = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
                self.tenant(tenant).finished[i].inc();
            }
            Event::Swept { duration } => self.sweep.observe(duration.as_secs_f64()),
            Event::WorkerUp => {
                self.workers.inc();
            }
            Event::WorkerDown => {
                self.workers.dec();
            }
        }
    }
}
