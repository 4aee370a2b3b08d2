//! Cron through the autumn repeat end to end, on in-memory ports and a manual
//! clock: what `preview` lists for a job is exactly what the sweeper fires, and the two passes
//! of a repeated wall-clock time are two runs with two run ids (derived from the UTC instant).

use chrono::Timelike;
use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::schedule::DstPolicy;
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemPorts, MemStore};
use std::collections::BTreeSet;
use std::sync::Arc;

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    ports: Ports,
    sked: Sked,
    tenant: TenantId,
}

impl Harness {
    fn at(now: &str) -> Self {
        let MemPorts { ports, clock, store } = MemPorts::at(now);
        let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
        Harness {
            clock,
            store,
            ports,
            sked,
            tenant: TenantId::default(),
        }
    }

    async fn create(&self, id: &str, spec: serde_json::Value) -> sked_core::Job {
        let new = NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(spec).unwrap(),
        };
        self.sked.create_job(&self.tenant, new, None).await.unwrap().job
    }

    async fn preview(&self, id: &str, count: usize) -> Vec<Timestamp> {
        self.sked
            .preview_job(&self.tenant, &JobId::from(id), count)
            .await
            .unwrap()
    }

    /// Sweeps once a minute (no look-ahead) until `until`.
    async fn sweep_every_minute_until(&self, until: &str) {
        let until = utc(until);
        let sweeper = Sweeper::new(self.ports.clone(), SweepSignal::default(), SweeperConfig::default());
        while self.clock.now() < until {
            self.clock.advance(Dur::secs(60));
            sweeper.sweep_once().await.unwrap();
        }
    }

    /// The runs of job `id`: (nominal time, run id), in time order.
    fn runs(&self, id: &str) -> Vec<(Timestamp, RunId)> {
        let mut runs: Vec<(Timestamp, RunId)> = self
            .store
            .all_runs()
            .into_iter()
            .filter(|r| r.job_id.as_str() == id)
            .map(|r| (r.scheduled_for, r.run_id))
            .collect();
        runs.sort();
        runs
    }
}

fn utc(s: &str) -> Timestamp {
    timestamp::parse(s).unwrap()
}

fn quarter_hourly(dst: Option<serde_json::Value>) -> serde_json::Value {
    let mut spec = json!({
        "schedule": {"cron": "*/15 * * * *", "timezone": "Europe/Berlin"},
        "task": {"command": {"argv": ["true"]}},
        // No worker runs them here: every occurrence makes a run of its own.
        "overlap": "allow",
    });
    if let Some(dst) = dst {
        spec["dst"] = dst;
    }
    spec
}

/// The wall-clock hour in Berlin.
fn berlin_hour(t: &Timestamp) -> u32 {
    t.with_timezone(&chrono_tz::Europe::Berlin).hour()
}

#[tokio::test]
async fn every_15_minutes_by_default_fires_both_passes_of_the_repeat_as_previewed_with_distinct_run_ids() {
    // 00:40 CEST on 2027-10-31; clocks go back at 03:00 CEST (01:00Z).
    let h = Harness::at("2027-10-30T22:40:00Z");
    let job = h.create("quarter", quarter_hourly(None)).await;
    assert_eq!(job.spec.dst, DstPolicy::default());
    assert_eq!(
        serde_json::to_value(job.spec.dst).unwrap(),
        json!({"gap": "auto", "repeat": "auto"})
    );

    // 00:45 CEST … 03:00 CET: fourteen quarter hours of real time, eight on the wall clock 02.
    let previewed = h.preview("quarter", 14).await;
    let want: Vec<Timestamp> = (0..14)
        .map(|i| utc("2027-10-30T22:45:00Z") + chrono::Duration::minutes(15 * i))
        .collect();
    assert_eq!(previewed, want, "every quarter hour of real time");
    assert_eq!(previewed.iter().filter(|t| berlin_hour(t) == 2).count(), 8);

    h.sweep_every_minute_until("2027-10-31T02:00:00Z").await;
    let runs = h.runs("quarter");
    let fired: Vec<Timestamp> = runs.iter().map(|(t, _)| *t).collect();
    assert_eq!(fired, previewed, "the sweeper fires exactly what preview listed");
    let ids: BTreeSet<&RunId> = runs.iter().map(|(_, id)| id).collect();
    assert_eq!(ids.len(), runs.len(), "one run id per pass");
    for (t, id) in &runs {
        assert_eq!(*id, RunId::derive(&JobId::from("quarter"), *t));
    }
    // 02:00 CEST and 02:00 CET: the same wall clock, two runs.
    assert!(ids.contains(&RunId::from("quarter@20271031T000000.000Z")));
    assert!(ids.contains(&RunId::from("quarter@20271031T010000.000Z")));
}

#[tokio::test]
async fn a_written_once_policy_fires_the_first_pass_only_as_previewed() {
    let h = Harness::at("2027-10-30T22:40:00Z");
    h.create("first-pass", quarter_hourly(Some(json!({"repeat": "once"}))))
        .await;
    let previewed = h.preview("first-pass", 10).await;
    // 00:45 … 02:45 CEST (9), then 03:00 CET: the second pass is not fired.
    assert_eq!(previewed.iter().filter(|t| berlin_hour(t) == 2).count(), 4);
    assert_eq!(previewed[8], utc("2027-10-31T00:45:00Z"));
    assert_eq!(previewed[9], utc("2027-10-31T02:00:00Z"));

    h.sweep_every_minute_until("2027-10-31T02:00:00Z").await;
    let fired: Vec<Timestamp> = h.runs("first-pass").iter().map(|(t, _)| *t).collect();
    assert_eq!(fired, previewed);
}
