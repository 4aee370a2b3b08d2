//! Metrics of the AWS deployment as CloudWatch embedded-metric-format (EMF) log lines: the
//! [`Observer`] port's adapter for the processes that run there (the ECS workers, the sweeper
//! function), with the names of the local `/metrics` families.
//!
//! [`EmfRecorder`] counts the services' events in memory; [`EmfRecorder::drain`] answers, once
//! per period, the JSON lines that CloudWatch Logs turns into metrics of namespace `sked`
//! (`SKED_METRICS_NAMESPACE`) when they reach a log group (stdout of a Lambda function or of an
//! ECS task with the `awslogs` driver). Each line carries the dimensions `Deployment` (the stack,
//! `SKED_DEPLOYMENT`) and `Service` (`sked-worker`, `sked-sweeper`), and, for the families
//! that have them locally, `outcome` or `reason`:
//!
//! - counters, as what happened since the last line (CloudWatch sums them):
//!   `sked_runs_fired_total`, `sked_runs_started_total`, `sked_runs_finished_total{outcome}`,
//!   `sked_retries_total`, `sked_occurrences_skipped_total{reason}`;
//! - gauges, as now: `sked_runs_running`, `sked_workers` (from a process with workers);
//! - distributions, as up to 100 values of the period (all of them when there were at most 100,
//!   else a uniform sample; EMF takes at most 100 values a metric and line):
//!   `sked_run_start_lag_seconds`, `sked_sweep_duration_seconds`.
//!
//! No tenant dimension: each distinct dimension set is a custom metric billed by the month, and
//! tenants are unbounded. A period with nothing to say writes only the gauges of a process
//! with workers, and nothing at all from one without (an idle sweeper tick).

use rand::Rng as _;
use serde_json::{Map, Value, json};
use sked_core::ports::{Event, Observer};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Most values of one distribution in one line (EMF's limit).
pub const MAX_VALUES: usize = 100;
/// The namespace when `SKED_METRICS_NAMESPACE` is not set.
pub const DEFAULT_NAMESPACE: &str = "sked";

/// Up to [`MAX_VALUES`] values of a period, a uniform sample of all it saw (algorithm R).
#[derive(Debug, Default)]
struct Sample {
    values: Vec<f64>,
    seen: u64,
}

impl Sample {
    fn add(&mut self, value: f64) {
        self.seen += 1;
        if self.values.len() < MAX_VALUES {
            self.values.push(value);
        } else {
            let slot = rand::rng().random_range(0..self.seen);
            if let Some(kept) = self.values.get_mut(slot as usize) {
                *kept = value;
            }
        }
    }
}

/// What a period saw.
#[derive(Debug, Default)]
struct Period {
    fired: u64,
    started: u64,
    retries: u64,
    finished: BTreeMap<&'static str, u64>,
    skipped: BTreeMap<&'static str, u64>,
    start_lag: Sample,
    sweep_duration: Sample,
}

/// Counts the services' events and writes them as EMF lines (see the module header).
#[derive(Debug)]
pub struct EmfRecorder {
    namespace: String,
    deployment: String,
    service: String,
    period: Mutex<Period>,
    /// Attempts started and not yet stopped, and worker tasks up (gauges).
    gauges: Mutex<(i64, i64)>,
}

impl EmfRecorder {
    /// A recorder for `service` (`sked-worker`, `sked-sweeper`) of `deployment`, writing into
    /// `namespace`.
    pub fn new(namespace: &str, deployment: &str, service: &str) -> Self {
        EmfRecorder {
            namespace: namespace.to_string(),
            deployment: deployment.to_string(),
            service: service.to_string(),
            period: Mutex::default(),
            gauges: Mutex::default(),
        }
    }

    /// A recorder for `service` named by the environment: `SKED_METRICS_NAMESPACE` (default
    /// `sked`) and `SKED_DEPLOYMENT` (default `sked`).
    pub fn from_env(service: &str) -> Self {
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        EmfRecorder::new(
            &var(crate::env::METRICS_NAMESPACE, DEFAULT_NAMESPACE),
            &var(crate::env::DEPLOYMENT, "sked"),
            service,
        )
    }

    /// The EMF lines of the period since the last call, stamped `now_ms`: one for the
    /// undimensioned families and the gauges (when there is any), one per outcome and per skip
    /// reason seen.
    pub fn drain(&self, now_ms: i64) -> Vec<String> {
        let period = std::mem::take(&mut *self.period.lock().unwrap_or_else(|e| e.into_inner()));
        let (running, workers) = *self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        // Gauges only from a process that has workers (the sweeper's would be custom metrics
        // that are always zero).
        let mut main = Vec::new();
        if (running, workers) != (0, 0) {
            main.push(("sked_runs_running", "Count", json!(running)));
            main.push(("sked_workers", "Count", json!(workers)));
        }
        for (name, count) in [
            ("sked_runs_fired_total", period.fired),
            ("sked_runs_started_total", period.started),
            ("sked_retries_total", period.retries),
        ] {
            if count > 0 {
                main.push((name, "Count", json!(count)));
            }
        }
        for (name, sample) in [
            ("sked_run_start_lag_seconds", &period.start_lag),
            ("sked_sweep_duration_seconds", &period.sweep_duration),
        ] {
            if !sample.values.is_empty() {
                main.push((name, "Seconds", json!(sample.values)));
            }
        }
        // A period with nothing to say (the sweeper's idle tick) writes no line at all.
        let mut lines: Vec<String> = (!main.is_empty())
            .then(|| self.line(now_ms, None, &main))
            .into_iter()
            .collect();
        for (label, name, counts) in [
            ("outcome", "sked_runs_finished_total", &period.finished),
            ("reason", "sked_occurrences_skipped_total", &period.skipped),
        ] {
            for (value, count) in counts {
                lines.push(self.line(now_ms, Some((label, value)), &[(name, "Count", json!(count))]));
            }
        }
        lines
    }

    /// One EMF document: `metrics` (name, unit, value) under the deployment and service
    /// dimensions, plus `extra` as a third.
    fn line(&self, now_ms: i64, extra: Option<(&str, &str)>, metrics: &[(&str, &str, Value)]) -> String {
        let mut dimensions = vec!["Deployment", "Service"];
        let mut doc = Map::new();
        doc.insert("Deployment".into(), json!(self.deployment));
        doc.insert("Service".into(), json!(self.service));
        if let Some((key, value)) = extra {
            dimensions.push(key);
            doc.insert(key.into(), json!(value));
        }
        let definitions: Vec<Value> = metrics
            .iter()
            .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
            .collect();
        for (name, _, value) in metrics {
            doc.insert((*name).to_string(), value.clone());
        }
        doc.insert(
            "_aws".into(),
            json!({
                "Timestamp": now_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [dimensions],
                    "Metrics": definitions,
                }],
            }),
        );
        Value::Object(doc).to_string()
    }

    /// Writes the period's lines on stdout (where the Lambda runtime and the ECS `awslogs`
    /// driver pick them up).
    pub fn print(&self, now_ms: i64) {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for line in self.drain(now_ms) {
            // A closed stdout loses the metrics, never the process.
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
}

impl Observer for EmfRecorder {
    fn observe(&self, event: &Event<'_>) {
        let gauges = |running: i64, workers: i64| {
            let mut g = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
            g.0 += running;
            g.1 += workers;
        };
        match *event {
            Event::WorkerUp => return gauges(0, 1),
            Event::WorkerDown => return gauges(0, -1),
            Event::Stopped { .. } => return gauges(-1, 0),
            Event::Started { .. } => gauges(1, 0),
            _ => {}
        }
        let mut period = self.period.lock().unwrap_or_else(|e| e.into_inner());
        match *event {
            Event::Fired { runs, .. } => period.fired += runs as u64,
            Event::Started { lag, .. } => {
                period.started += 1;
                period.start_lag.add(lag.as_secs_f64());
            }
            Event::Retried { .. } => period.retries += 1,
            Event::Finished { outcome, .. } => *period.finished.entry(outcome.as_str()).or_default() += 1,
            Event::Skipped { reason, .. } => *period.skipped.entry(reason.as_str()).or_default() += 1,
            Event::Swept { duration } => period.sweep_duration.add(duration.as_secs_f64()),
            Event::Stopped { .. } | Event::WorkerUp | Event::WorkerDown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::firing::SkipReason;
    use sked_core::ids::TenantId;
    use sked_core::ports::Outcome;
    use std::time::Duration;

    fn parsed(lines: &[String]) -> Vec<Value> {
        lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// The metric names a document declares, in order.
    fn declared(doc: &Value) -> Vec<String> {
        doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_period_becomes_emf_documents_with_the_local_names_and_dimensions() {
        let emf = EmfRecorder::new("sked", "prod", "sked-worker");
        let t = TenantId::from("acme");
        emf.observe(&Event::WorkerUp);
        emf.observe(&Event::Fired { tenant: &t, runs: 3 });
        for ms in [5, 15] {
            emf.observe(&Event::Started {
                tenant: &t,
                lag: Duration::from_millis(ms),
            });
        }
        emf.observe(&Event::Stopped { tenant: &t });
        emf.observe(&Event::Finished {
            tenant: &t,
            outcome: Outcome::Failed,
        });
        emf.observe(&Event::Retried { tenant: &t });
        emf.observe(&Event::Skipped {
            tenant: &t,
            reason: SkipReason::Overlap,
        });
        let docs = parsed(&emf.drain(1_700_000_000_000));
        assert_eq!(docs.len(), 3, "{docs:?}");
        let main = &docs[0];
        let directive = &main["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(main["_aws"]["Timestamp"], 1_700_000_000_000i64);
        assert_eq!(directive["Namespace"], "sked");
        assert_eq!(directive["Dimensions"], json!([["Deployment", "Service"]]));
        assert_eq!(
            (&main["Deployment"], &main["Service"]),
            (&json!("prod"), &json!("sked-worker"))
        );
        assert_eq!(
            declared(main),
            [
                "sked_runs_running",
                "sked_workers",
                "sked_runs_fired_total",
                "sked_runs_started_total",
                "sked_retries_total",
                "sked_run_start_lag_seconds"
            ]
        );
        // Every declared metric has its value at the top level.
        for name in declared(main) {
            assert!(!main[&name].is_null(), "{name} has no value");
        }
        assert_eq!(main["sked_runs_fired_total"], 3);
        assert_eq!(main["sked_runs_running"], 1, "two started, one stopped");
        assert_eq!(main["sked_workers"], 1);
        assert_eq!(main["sked_run_start_lag_seconds"], json!([0.005, 0.015]));
        let finished = &docs[1];
        assert_eq!(
            finished["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Deployment", "Service", "outcome"]])
        );
        assert_eq!(
            (&finished["outcome"], &finished["sked_runs_finished_total"]),
            (&json!("failed"), &json!(1))
        );
        assert_eq!(
            (&docs[2]["reason"], &docs[2]["sked_occurrences_skipped_total"]),
            (&json!("overlap"), &json!(1))
        );

        // The next period starts from nothing but keeps the gauges.
        let next = parsed(&emf.drain(1_700_000_060_000));
        assert_eq!(next.len(), 1);
        assert_eq!(declared(&next[0]), ["sked_runs_running", "sked_workers"]);
    }

    #[test]
    fn a_busy_period_keeps_at_most_a_hundred_values_of_a_distribution() {
        let emf = EmfRecorder::new("sked", "d", "sked-sweeper");
        for i in 0..1_000 {
            emf.observe(&Event::Swept {
                duration: Duration::from_millis(i),
            });
        }
        let docs = parsed(&emf.drain(0));
        let values = docs[0]["sked_sweep_duration_seconds"].as_array().unwrap();
        assert_eq!(values.len(), MAX_VALUES);
        assert!(values.iter().all(|v| (0.0..1.0).contains(&v.as_f64().unwrap())));
    }
}
