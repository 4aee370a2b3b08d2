//! One scrape of `GET /metrics`: which series a principal sees ([`Scope`]), and their text in
//! the Prometheus format (0.0.4), encoded by `prometheus-client` from a registry made for
//! this scrape.
//!
//! An operator key sees every tenant's run series and the process-wide ones (workers,
//! sweeps, HTTP requests); any other key sees its own tenant's run series only — each series
//! carries a `tenant` label, so a Prometheus scraping with an operator key can still filter
//! by tenant. The queue depth comes from the queue port ([`DispatchQueue::depth`]), counted
//! over the queue's messages, never over jobs or runs; a queue that cannot count cheaply
//! (SQS) leaves the family without samples.
//!
//! [`DispatchQueue::depth`]: sked_core::ports::DispatchQueue::depth

use super::recorder::{Recorder, SKIP_REASONS, TenantSeries};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sked_core::auth::{Principal, Role};
use sked_core::ids::TenantId;
use sked_core::ports::{Outcome, QueueDepth};
use std::fmt::Error;
use std::sync::Arc;

/// The `Content-Type` of the answer.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// What a scrape may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every tenant's series and the process-wide ones (operator keys).
    All,
    /// One tenant's run series.
    Tenant(TenantId),
}

impl Scope {
    /// The scope of a request made as `principal`.
    pub fn of(principal: &Principal) -> Scope {
        if principal.may(Role::Operator) {
            Scope::All
        } else {
            Scope::Tenant(principal.tenant.clone())
        }
    }

    fn tenant(&self) -> Option<&TenantId> {
        match self {
            Scope::All => None,
            Scope::Tenant(t) => Some(t),
        }
    }
}

/// The text of one scrape of `recorder` by `scope`, with the queue's `depth` when the queue
/// could count itself.
pub fn encode(recorder: &Arc<Recorder>, scope: &Scope, depth: Option<Vec<QueueDepth>>) -> String {
    let visible = |t: &TenantId| scope.tenant().is_none_or(|only| only == t);
    let snapshot = Snapshot {
        recorder: recorder.clone(),
        tenants: recorder.tenants(scope.tenant()),
        depth: depth.map(|d| d.into_iter().filter(|d| visible(&d.tenant)).collect()),
        process_wide: *scope == Scope::All,
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut text = String::new();
    // Writing to a String cannot fail; an encoder error would be a bug in the families here.
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
        tracing::error!(error = %e, "metrics could not be encoded");
    }
    text
}

/// The series one scrape encodes.
#[derive(Debug)]
struct Snapshot {
    recorder: Arc<Recorder>,
    tenants: Vec<(TenantId, Arc<TenantSeries>)>,
    depth: Option<Vec<QueueDepth>>,
    process_wide: bool,
}

impl Snapshot {
    /// One family with a series per visible tenant (`tenant` label, then `extra`'s labels),
    /// whose metric `pick` chooses.
    fn per_tenant<M: EncodeMetric>(
        &self,
        encoder: &mut DescriptorEncoder,
        family: Family<'_>,
        extra: &[(&'static str, &'static str)],
        pick: impl Fn(&TenantSeries) -> &M,
    ) -> Result<(), Error> {
        let mut metric = encoder.encode_descriptor(family.name, family.help, None, family.kind)?;
        for (tenant, series) in &self.tenants {
            let mut labels = vec![("tenant", tenant.as_str())];
            labels.extend_from_slice(extra);
            pick(series).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// A family's name (without `_total` for counters: the encoder adds it), help and type.
struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: MetricType,
}

const fn family<'a>(name: &'a str, help: &'a str, kind: MetricType) -> Family<'a> {
    Family { name, help, kind }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let e = &mut encoder;
        self.per_tenant(
            e,
            family(
                "sked_runs_fired",
                "Runs created and handed to the queue (sweeps, direct firing, triggers, timeout handlers)",
                MetricType::Counter,
            ),
            &[],
            |s| &s.fired,
        )?;
        self.per_tenant(
            e,
            family(
                "sked_runs_started",
                "Attempts claimed and started by this process's workers",
                MetricType::Counter,
            ),
            &[],
            |s| &s.started,
        )?;
        {
            let mut metric = e.encode_descriptor(
                "sked_runs_finished",
                "Runs that reached a terminal state, by outcome",
                None,
                MetricType::Counter,
            )?;
            for (tenant, series) in &self.tenants {
                for (outcome, counter) in Outcome::ALL.iter().zip(&series.finished) {
                    let labels = [("tenant", tenant.as_str()), ("outcome", outcome.as_str())];
                    counter.encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        self.per_tenant(
            e,
            family(
                "sked_retries",
                "Attempts that failed, timed out or lost their worker, followed by another attempt",
                MetricType::Counter,
            ),
            &[],
            |s| &s.retries,
        )?;
        {
            let mut metric = e.encode_descriptor("sked_occurrences_skipped", "Occurrences that did not run, by reason (overlap: the overlap policy, at firing or at claim; misfire: the misfire policy after downtime)", None, MetricType::Counter)?;
            for (tenant, series) in &self.tenants {
                for (reason, counter) in SKIP_REASONS.iter().zip(&series.skipped) {
                    let labels = [("tenant", tenant.as_str()), ("reason", reason.as_str())];
                    counter.encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        self.per_tenant(e, family("sked_run_start_lag_seconds", "How long after it was due (nominal time plus jitter, or the end of a retry's backoff) an attempt started", MetricType::Histogram), &[], |s| &s.lag)?;
        {
            let mut metric = e.encode_descriptor(
                "sked_queue_depth",
                "Messages in the dispatch queue (waiting, fired ahead, in flight), by priority",
                None,
                MetricType::Gauge,
            )?;
            for depth in self.depth.iter().flatten() {
                let priority = depth.priority.to_string();
                let labels = [("tenant", depth.tenant.as_str()), ("priority", priority.as_str())];
                metric.encode_family(&labels)?.encode_gauge(&(depth.messages as i64))?;
            }
        }
        self.per_tenant(
            e,
            family(
                "sked_runs_running",
                "Attempts this process's workers are running",
                MetricType::Gauge,
            ),
            &[],
            |s| &s.running,
        )?;
        if !self.process_wide {
            return Ok(());
        }
        let recorder = &self.recorder;
        recorder.workers.encode(e.encode_descriptor(
            "sked_workers",
            "Worker tasks running in this process",
            None,
            MetricType::Gauge,
        )?)?;
        recorder.sweep.encode(e.encode_descriptor(
            "sked_sweep_duration_seconds",
            "How long one sweep (one batch of due jobs) took",
            None,
            MetricType::Histogram,
        )?)?;
        recorder.http_requests.encode(e.encode_descriptor(
            "sked_http_requests",
            "HTTP requests answered, by route template and status",
            None,
            MetricType::Counter,
        )?)?;
        recorder.http_duration.encode(e.encode_descriptor(
            "sked_http_request_duration_seconds",
            "Time to answer an HTTP request (to its headers), by route template",
            None,
            MetricType::Histogram,
        )?)?;
        Ok(())
    }
}
