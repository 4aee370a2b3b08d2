//! Small statistics and the result record every scenario prints.

use serde_json::{Map, Value, json};

/// Percentiles of a sample in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Percentiles of `values` (nearest rank); all zero for an empty sample.
    pub fn of(values: &mut [f64]) -> Self {
        if values.is_empty() {
            return Summary::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Summary {
            n: values.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: values[values.len() - 1],
        }
    }

    /// `{"n": …, "p50": …, "p99": …, "max": …}`, rounded to 0.1 ms.
    pub fn json(&self) -> Value {
        json!({"n": self.n, "p50": round1(self.p50), "p99": round1(self.p99), "max": round1(self.max)})
    }
}

/// `x` rounded to one decimal.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// One scenario's figures: printed as a JSON line and as a row of the summary table.
#[derive(Debug, Clone)]
pub struct Record {
    /// Scenario name (`burst`, `stream`, …).
    pub scenario: String,
    /// Executor (`noop`, `true`, `sleep`) or `-`.
    pub executor: String,
    /// Size parameter (jobs, pending runs, schedules, worker processes, …).
    pub size: String,
    /// Every figure, in insertion order.
    pub fields: Map<String, Value>,
    /// The figures shown in the table, already formatted.
    pub headline: String,
    /// The figure repeats are ranked by (the table shows the median repeat).
    pub key: f64,
}

impl Record {
    /// An empty record.
    pub fn new(scenario: &str, executor: &str, size: impl ToString) -> Self {
        Record {
            scenario: scenario.into(),
            executor: executor.into(),
            size: size.to_string(),
            fields: Map::new(),
            headline: String::new(),
            key: 0.0,
        }
    }

    /// Adds a figure.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.fields.insert(key.into(), value.into());
        self
    }

    /// The JSON line.
    pub fn json_line(&self) -> String {
        let mut m = Map::new();
        m.insert("scenario".into(), self.scenario.clone().into());
        m.insert("executor".into(), self.executor.clone().into());
        m.insert("size".into(), self.size.clone().into());
        m.extend(self.fields.clone());
        Value::Object(m).to_string()
    }
}

/// The readable table of all records.
pub fn table(records: &[Record]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<11} {:<6} {:>9}  {}\n",
        "scenario", "exec", "size", "figures"
    ));
    out.push_str(&format!("{}\n", "-".repeat(100)));
    for r in records {
        out.push_str(&format!(
            "{:<11} {:<6} {:>9}  {}\n",
            r.scenario, r.executor, r.size, r.headline
        ));
    }
    out
}

/// This process's resident set size and its peak, in MiB, from /proc/self/status.
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&mut v);
        assert_eq!((s.n, s.p50, s.p99, s.max), (100, 50.0, 99.0, 100.0));
        assert_eq!(Summary::of(&mut []).n, 0);
    }
}
