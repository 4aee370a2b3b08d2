//! The Grafana dashboard `deploy/grafana/sked.json` against the real exposition: it is an
//! importable dashboard (panels, every query on the `DS_PROMETHEUS` input), and every metric
//! its PromQL names — and every label it filters or groups by — is one the [`Recorder`] of
//! `GET /metrics` exposes, read from an exposition rendered here by the real encoder. A
//! renamed family or label fails here, not on an empty panel.

use serde_json::Value;
use sked_api::metrics::exposition::encode;
use sked_api::metrics::{Recorder, Scope};
use sked_core::firing::SkipReason;
use sked_core::ids::TenantId;
use sked_core::ports::{Event, Observer, Outcome, QueueDepth};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The `__inputs` name the dashboard's queries refer to as `${DS_PROMETHEUS}`.
const DATASOURCE_INPUT: &str = "DS_PROMETHEUS";

/// Labels Prometheus attaches to every scraped series (target labels), whatever the exposition.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

fn dashboard() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/sked.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// What one scrape exposes: each series name Prometheus stores (`sked_runs_fired_total`,
/// `sked_run_start_lag_seconds_bucket`, `sked_workers`) → its family (the `# TYPE` name) and
/// the label names its samples carry.
#[derive(Debug, Default)]
struct Exposed {
    series: BTreeMap<String, (String, BTreeSet<String>)>,
    families: BTreeMap<String, String>,
}

/// Renders the exposition of a recorder fed one event of each kind (so every family has
/// samples), as an operator's scrape with a queue that counts itself.
fn exposition() -> String {
    let recorder = Arc::new(Recorder::new());
    let tenant = TenantId::from("acme");
    let events = [
        Event::Fired {
            tenant: &tenant,
            runs: 2,
        },
        Event::Skipped {
            tenant: &tenant,
            reason: SkipReason::Overlap,
        },
        Event::Skipped {
            tenant: &tenant,
            reason: SkipReason::Misfire,
        },
        Event::Started {
            tenant: &tenant,
            lag: Duration::from_millis(20),
        },
        Event::Retried { tenant: &tenant },
        Event::Finished {
            tenant: &tenant,
            outcome: Outcome::Failed,
        },
        Event::Stopped { tenant: &tenant },
        Event::Swept {
            duration: Duration::from_millis(3),
        },
        Event::WorkerUp,
    ];
    for event in &events {
        recorder.observe(event);
    }
    recorder.http_request("/v1/jobs/{id}", 200, Duration::from_millis(4));
    let depth = vec![QueueDepth {
        tenant: tenant.clone(),
        priority: 5,
        messages: 3,
    }];
    encode(&recorder, &Scope::All, Some(depth))
}

/// The label names of a sample line's `{...}` (values may hold `,`, `{`, `}` and escapes).
fn sample_labels(inside: &str) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    let mut chars = inside.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let name = name.trim().trim_start_matches(',').trim();
        if name.is_empty() {
            return labels;
        }
        labels.insert(name.to_string());
        assert_eq!(chars.next(), Some('"'), "label {name} has no quoted value");
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                _ => {}
            }
        }
    }
}

/// The family a series name belongs to, and whether it is a histogram's `_bucket`, given the
/// `# TYPE` lines. A gauge's samples bear its name; a counter's bear `<name>_total` — the text
/// format 0.0.4 that `prometheus-client` writes puts `_total` in the `# TYPE` line already,
/// OpenMetrics leaves it out, so both are read; a histogram's are `<name>_bucket` (with
/// `le`), `_sum` and `_count`.
fn family_of<'a>(series: &str, families: &'a BTreeMap<String, String>) -> Option<(&'a str, bool)> {
    let suffixes: [(&str, &[&str]); 5] = [
        ("", &["gauge", "counter"]),
        ("_total", &["counter"]),
        ("_bucket", &["histogram"]),
        ("_sum", &["histogram"]),
        ("_count", &["histogram"]),
    ];
    suffixes.iter().find_map(|(suffix, kinds)| {
        let name = series.strip_suffix(suffix)?;
        let (family, kind) = families.get_key_value(name)?;
        let counter_sample = !suffix.is_empty() || kind != "counter" || family.ends_with("_total");
        (kinds.contains(&kind.as_str()) && counter_sample).then_some((family.as_str(), *suffix == "_bucket"))
    })
}

fn exposed() -> Exposed {
    let text = exposition();
    let mut exposed = Exposed::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE <name> <kind>");
            exposed.families.insert(name.to_string(), kind.trim().to_string());
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (name, labels) = match line.split_once('{') {
            Some((name, rest)) => (name, sample_labels(rest.rsplit_once('}').expect("closing }").0)),
            None => (line.split_whitespace().next().unwrap(), BTreeSet::new()),
        };
        let (family, is_bucket) = family_of(name, &exposed.families)
            .unwrap_or_else(|| panic!("sample {name} belongs to no # TYPE family:\n{text}"));
        assert!(!is_bucket || labels.contains("le"), "{name} without le");
        let entry = exposed
            .series
            .entry(name.to_string())
            .or_insert_with(|| (family.to_string(), BTreeSet::new()));
        entry.1.extend(labels);
    }
    for family in exposed.families.keys() {
        assert!(
            exposed.series.values().any(|(f, _)| f == family),
            "the fixture left family {family} without samples, so its labels are unknown:\n{text}"
        );
    }
    exposed
}

/// Every panel, those nested in collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels is an array") {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(nested);
        }
    }
    all
}

/// Every PromQL expression: the panels' targets and the query variables'.
fn expressions(dashboard: &Value) -> Vec<String> {
    let mut exprs: Vec<String> = panels(dashboard)
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .map(|t| t["expr"].as_str().expect("every target has an expr").to_string())
        .collect();
    for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        let query = &variable["query"];
        if let Some(q) = query.as_str().or_else(|| query["query"].as_str()) {
            exprs.push(q.to_string());
        }
    }
    exprs
}

/// What one PromQL expression uses: each `sked_*` metric with the label names of its
/// `{...}` matchers, and the label names of its `by (...)` / `without (...)` clauses and of
/// `label_values(metric, label)`.
#[derive(Debug, Default)]
struct Uses {
    metrics: Vec<(String, Vec<String>)>,
    grouping: Vec<String>,
}

/// Identifiers and punctuation of `expr`; quoted strings and numbers are dropped.
fn tokens(expr: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' || c == '`' {
            while let Some(d) = chars.next() {
                if d == '\\' {
                    chars.next();
                } else if d == c {
                    break;
                }
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let mut ident = c.to_string();
            while let Some(&d) = chars
                .peek()
                .filter(|d| d.is_ascii_alphanumeric() || **d == '_' || **d == ':')
            {
                ident.push(d);
                chars.next();
            }
            tokens.push(ident);
        } else if c.is_ascii_digit() || c == '.' {
            while chars.peek().is_some_and(|d| d.is_ascii_alphanumeric() || *d == '.') {
                chars.next();
            }
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    tokens
}

/// The identifiers between the `(`/`{` at `tokens[open]` and its closing bracket.
fn names_inside(tokens: &[String], open: usize, close: &str) -> Vec<String> {
    let is_name = |t: &&String| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    tokens[open + 1..]
        .iter()
        .take_while(|t| *t != close)
        .filter(is_name)
        .cloned()
        .collect()
}

fn uses(expr: &str) -> Uses {
    let tokens = tokens(expr);
    let mut uses = Uses::default();
    for (i, token) in tokens.iter().enumerate() {
        let next = tokens.get(i + 1).map(String::as_str);
        if token.starts_with("sked_") {
            let matchers = if next == Some("{") {
                names_inside(&tokens, i + 1, "}")
            } else {
                vec![]
            };
            uses.metrics.push((token.clone(), matchers));
        } else if (token == "by" || token == "without") && next == Some("(") {
            uses.grouping.extend(names_inside(&tokens, i + 1, ")"));
        } else if token == "label_values" && next == Some("(") {
            let args = names_inside(&tokens, i + 1, ")");
            uses.grouping
                .extend(args.into_iter().filter(|a| !a.starts_with("sked_")));
        }
    }
    uses
}

#[test]
fn the_dashboard_is_an_importable_object_whose_queries_all_use_the_prometheus_input() {
    let dashboard = dashboard();
    assert!(dashboard.is_object(), "the dashboard is a JSON object");
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "a current schemaVersion"
    );
    assert!(dashboard["id"].is_null(), "no id, so an import creates a new dashboard");
    assert!(!panels(&dashboard).is_empty(), "the dashboard has panels");

    let inputs = dashboard["__inputs"]
        .as_array()
        .expect("__inputs, for Dashboards → Import");
    assert!(
        inputs
            .iter()
            .any(|i| i["name"] == DATASOURCE_INPUT && i["type"] == "datasource" && i["pluginId"] == "prometheus"),
        "a Prometheus datasource input named {DATASOURCE_INPUT}: {inputs:?}"
    );
    let reference = format!("${{{DATASOURCE_INPUT}}}");
    let on_the_input =
        |datasource: &Value| datasource["type"] == "prometheus" && datasource["uid"] == reference.as_str();

    let mut queried = 0;
    for panel in panels(&dashboard) {
        let Some(targets) = panel["targets"].as_array() else {
            continue;
        };
        let title = &panel["title"];
        assert!(
            on_the_input(&panel["datasource"]),
            "panel {title}: datasource {}",
            panel["datasource"]
        );
        for target in targets {
            assert!(
                on_the_input(&target["datasource"]),
                "panel {title}: target datasource {}",
                target["datasource"]
            );
            assert!(
                target["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "panel {title}: an expr"
            );
        }
        queried += 1;
    }
    assert!(queried >= 10, "{queried} panels with queries");

    let variables = dashboard["templating"]["list"].as_array().expect("templating.list");
    let tenant = variables
        .iter()
        .find(|v| v["name"] == "tenant")
        .expect("a tenant variable");
    assert!(
        on_the_input(&tenant["datasource"]),
        "the tenant variable queries the input"
    );
    assert!(
        tenant["definition"]
            .as_str()
            .is_some_and(|d| d.starts_with("label_values(")),
        "tenant from label_values: {tenant}"
    );
}

#[test]
fn every_metric_and_label_the_queries_name_is_one_the_recorder_exposes() {
    let exposed = exposed();
    let dashboard = dashboard();
    let exprs = expressions(&dashboard);
    assert!(!exprs.is_empty());
    for expr in &exprs {
        let uses = uses(expr);
        assert!(!uses.metrics.is_empty(), "no sked_ metric in {expr}");
        for (metric, matchers) in &uses.metrics {
            let (family, labels) = exposed.series.get(metric).unwrap_or_else(|| {
                panic!(
                    "{metric} (in {expr}) is not exposed; the recorder's series are {:?}",
                    exposed.series.keys().collect::<Vec<_>>()
                )
            });
            let known = |label: &String| labels.contains(label) || TARGET_LABELS.contains(&label.as_str());
            for label in matchers.iter().chain(&uses.grouping) {
                assert!(
                    known(label),
                    "label {label} (in {expr}) is not on {metric} (family {family}), whose labels are {labels:?}"
                );
            }
        }
    }
}

#[test]
fn every_family_the_recorder_exposes_has_a_panel() {
    let exposed = exposed();
    let dashboard = dashboard();
    let charted: BTreeSet<&str> = expressions(&dashboard)
        .iter()
        .flat_map(|e| uses(e).metrics)
        .filter_map(|(metric, _)| exposed.series.get(&metric).map(|(family, _)| family.as_str()))
        .collect();
    let missing: Vec<_> = exposed
        .families
        .keys()
        .filter(|f| !charted.contains(f.as_str()))
        .collect();
    assert!(missing.is_empty(), "families without a panel: {missing:?}");
}

#[test]
fn the_query_reader_finds_metrics_matchers_and_grouping_labels() {
    let read = uses(
        r#"histogram_quantile(0.99, sum by (route, le) (rate(sked_x_bucket{tenant=~"a,b}", outcome!="sked_no"}[$__rate_interval])))"#,
    );
    assert_eq!(
        read.metrics,
        vec![(
            "sked_x_bucket".to_string(),
            vec!["tenant".to_string(), "outcome".to_string()]
        )]
    );
    assert_eq!(read.grouping, vec!["route".to_string(), "le".to_string()]);
    let labels = sample_labels(r#"route="/v1/jobs/{id}",status="200",note="a \"q\", b""#);
    assert_eq!(labels, ["note", "route", "status"].map(String::from).into());
}
