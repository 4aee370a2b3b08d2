//! Failure alerts: a job's `"notify": {"on": [...], "webhook": URL}`, the [`Alert`] each of its
//! runs carries from creation, and what becomes of it.
//!
//! - **Armed in the write that ends the run.** A run carries its job's `notify` from creation
//!   (as it carries its concurrency key; a changed `notify` applies to later runs). Whatever
//!   ends the run — a worker's completion, a claim that finds it over, a cancel, a skip at
//!   claim, an upstream that ended otherwise — goes through [`Run::arm_alert`], which sets the
//!   alert's `due` when the run's end is one of `on`. The alert is part of the run, so it is
//!   written in the same transaction as the end: no ended run without its alert, no alert
//!   without its end, and the run's completion never waits for a delivery.
//! - **Skipped occurrences** a firing passes over (misfire, overlap seen at firing) never become
//!   runs: their alert rides on the firing's skip record ([`crate::ledger::SkipRecord`]), one
//!   per record (consecutive occurrences skipped for one reason), armed by the firing's plan
//!   ([`arm_skips`]) and written in the firing's transaction.
//! - **Delivered at least once** by a notifier (`service::alerts`) that takes due alerts,
//!   leases each ([`Alert::lease`], a conditional save, so two notifiers never post one
//!   delivery together), posts the [`event`](DueAlert::body) signed with the tenant's
//!   secret ([`signature`]), and records the attempt ([`Alert::record`]): a 2xx ends it; any
//!   other answer or no answer is retried with doubling backoff, [`MAX_DELIVERIES`] tries in
//!   all. Every try is kept on the run (`deliveries`), so the API shows them.
//! - **Signed like Stripe's webhooks**: header `Sked-Signature: t=<unix seconds>,v1=<hex>`,
//!   where `v1` is HMAC-SHA256 of `"<t>.<body>"` under the tenant's webhook secret. A receiver
//!   recomputes it and compares, and refuses an old `t` to stop replays.

use crate::error::FieldError;
use crate::ids::{JobId, RunId, TenantId};
use crate::job::wire_enum;
use crate::ledger::{SKIPPED_AT_CLAIM, SkipRecord};
use crate::run::{Run, RunState};
use crate::timestamp::{self, Timestamp};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Tries of one alert in all (the first and its retries).
pub const MAX_DELIVERIES: usize = 10;
/// The longest pause between two tries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// How long a notifier holds an alert it is posting before another may take it.
pub const DELIVERY_LEASE: Duration = Duration::from_secs(60);
/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Sked-Signature";
/// The header naming the event (`failed`, `timed_out`, …).
pub const EVENT_HEADER: &str = "Sked-Event";
/// The header naming the delivery (the run id): the same for every try, so a receiver can
/// drop a repeat.
pub const DELIVERY_HEADER: &str = "Sked-Delivery";
/// Most distinct events in `on`.
const MAX_ON: usize = 5;

wire_enum!(
    /// A run's end that a job can be notified of.
    AlertOn {
        /// The run ended well.
        Succeeded = "succeeded",
        /// The run failed with no retry left.
        Failed = "failed",
        /// The run's last attempt passed its timeout.
        TimedOut = "timed_out",
        /// The run was cancelled.
        Cancelled = "cancelled",
        /// The occurrence did not run: skipped at claim by the overlap policy, or an `after`
        /// job's upstream did not end as it asks (or not in time), or its job was paused.
        Skipped = "skipped",
    }
);

impl AlertOn {
    /// The event `run`'s end is, if it has ended.
    pub fn of(run: &Run) -> Option<AlertOn> {
        Some(match run.state {
            RunState::Pending | RunState::Running => return None,
            RunState::Succeeded => AlertOn::Succeeded,
            RunState::Failed => AlertOn::Failed,
            RunState::TimedOut => AlertOn::TimedOut,
            RunState::Skipped => AlertOn::Skipped,
            RunState::Cancelled if run.reason.as_deref().is_some_and(|r| r.starts_with(SKIPPED_AT_CLAIM)) => {
                AlertOn::Skipped
            }
            _ => AlertOn::Cancelled,
        })
    }
}

/// A job's `notify`: which ends of its runs are posted to `webhook`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Notify {
    /// The ends to post: `succeeded`, `failed`, `timed_out`, `cancelled`, `skipped`.
    #[cfg_attr(feature = "utoipa", schema(min_items = 1, max_items = 5))]
    pub on: Vec<AlertOn>,
    /// Where: an absolute `http://` or `https://` URL.
    #[cfg_attr(feature = "utoipa", schema(max_length = 2048))]
    pub webhook: String,
}

impl Notify {
    /// Every invalid field, named as in a job's body (`notify.on`, `notify.webhook`).
    pub fn problems(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        let mut distinct = self.on.clone();
        distinct.sort_by_key(|e| e.as_str());
        distinct.dedup();
        if self.on.is_empty() || distinct.len() != self.on.len() || self.on.len() > MAX_ON {
            out.push(FieldError::new(
                "notify.on",
                "list each of succeeded, failed, timed_out, cancelled, skipped at most once, at least one",
            ));
        }
        if let Err(e) = crate::validate::check_url(&self.webhook) {
            out.push(FieldError::new("notify.webhook", e));
        }
        out
    }
}

wire_enum!(
    /// Where an alert's delivery stands.
    AlertState {
        /// The run has not ended as `on` asks (or not yet).
        Idle = "idle",
        /// Waiting for its next try (`due`).
        Pending = "pending",
        /// A try was answered 2xx.
        Delivered = "delivered",
        /// [`MAX_DELIVERIES`] tries failed.
        GaveUp = "gave_up",
    }
);

/// One try to deliver an alert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Delivery {
    /// When it was answered (or failed).
    #[serde(with = "timestamp::serde_ms")]
    #[cfg_attr(feature = "utoipa", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// The receiver's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A run's alert: its job's `notify` copied at creation, and its delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// What to post, and where.
    pub notify: Notify,
    /// The end it was armed for, once the run ended as `on` asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<AlertOn>,
    /// When the next try is due; `None` unless pending.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "timestamp::serde_ms_opt")]
    pub due: Option<Timestamp>,
    /// Where the delivery stands.
    pub state: AlertState,
    /// Every try, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deliveries: Vec<Delivery>,
}

/// What the receiver of a try answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP status.
    Status(u16),
    /// No answer (connection refused, timeout, …), for people.
    Failed(String),
}

impl Alert {
    /// A fresh alert for a run of a job that has `notify`.
    pub fn new(notify: Notify) -> Self {
        Alert {
            notify,
            event: None,
            due: None,
            state: AlertState::Idle,
            deliveries: Vec::new(),
        }
    }

    /// Makes the alert pending for `event`, its first try due at `at`.
    fn arm(&mut self, event: AlertOn, at: Timestamp) {
        self.event = Some(event);
        self.state = AlertState::Pending;
        self.due = Some(timestamp::trunc_ms(at));
    }

    /// Takes a due alert for one try at `now`: its `due` moves past the try's longest time, so
    /// no other notifier takes it meanwhile. `false` if it is not due.
    pub fn lease(&mut self, now: Timestamp) -> bool {
        match self.due {
            Some(due) if self.state == AlertState::Pending && due <= now => {
                self.due = Some(timestamp::trunc_ms(now + DELIVERY_LEASE));
                true
            }
            _ => false,
        }
    }

    /// Records a try answered at `at`: delivered on a 2xx, else due again after
    /// `backoff_base` doubled per earlier try (at most [`MAX_BACKOFF`]), or given up after
    /// [`MAX_DELIVERIES`] tries.
    pub fn record(&mut self, at: Timestamp, answer: Answer, backoff_base: Duration) {
        let at = timestamp::trunc_ms(at);
        let (status, error) = match answer {
            Answer::Status(s) => (Some(s), None),
            Answer::Failed(e) => (None, Some(e)),
        };
        let ok = status.is_some_and(|s| (200..300).contains(&s));
        self.deliveries.push(Delivery { at, status, error });
        let tries = self.deliveries.len();
        if ok {
            self.state = AlertState::Delivered;
            self.due = None;
        } else if tries >= MAX_DELIVERIES {
            self.state = AlertState::GaveUp;
            self.due = None;
        } else {
            let pause = backoff_base.saturating_mul(1 << (tries - 1).min(20)).min(MAX_BACKOFF);
            self.due = Some(at + pause);
        }
    }
}

impl Run {
    /// Arms the run's alert if the run has ended as its `notify.on` asks and the alert was not
    /// armed before: due at once, at the run's end. Every path that ends a run calls it.
    pub fn arm_alert(&mut self) {
        let Some(event) = AlertOn::of(self) else { return };
        let at = self.finished_at;
        if let Some(alert) = self.alert.as_mut()
            && alert.state == AlertState::Idle
            && alert.notify.on.contains(&event)
        {
            alert.arm(event, at.unwrap_or(self.created_at));
        }
    }
}

/// An alert that is due, with what it is about (what the store answers).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // read in small batches
pub enum DueAlert {
    /// A run that ended as its job's `notify.on` asks (its alert is `run.alert`).
    Run(Run),
    /// Occurrences of a job that a firing skipped (the alert is `record.alert`).
    Skipped {
        /// The job's tenant.
        tenant: TenantId,
        /// The job.
        job_id: JobId,
        /// The firing's skip record.
        record: SkipRecord,
    },
}

/// Where an alert is kept: what [`crate::ports::JobStore::save_alert`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertKey {
    /// A run's alert.
    Run {
        /// The tenant.
        tenant: TenantId,
        /// The run.
        run_id: RunId,
    },
    /// The alert of a job's skip record starting at `from`.
    Skipped {
        /// The tenant.
        tenant: TenantId,
        /// The job.
        job_id: JobId,
        /// The record's first occurrence.
        from: Timestamp,
    },
}

impl DueAlert {
    /// The alert itself.
    pub fn alert(&self) -> Option<&Alert> {
        match self {
            DueAlert::Run(run) => run.alert.as_ref(),
            DueAlert::Skipped { record, .. } => record.alert.as_ref(),
        }
    }

    /// The tenant whose secret signs it.
    pub fn tenant(&self) -> &TenantId {
        match self {
            DueAlert::Run(run) => &run.tenant,
            DueAlert::Skipped { tenant, .. } => tenant,
        }
    }

    /// Where it is kept.
    pub fn key(&self) -> AlertKey {
        match self {
            DueAlert::Run(run) => AlertKey::Run {
                tenant: run.tenant.clone(),
                run_id: run.run_id.clone(),
            },
            DueAlert::Skipped { tenant, job_id, record } => AlertKey::Skipped {
                tenant: tenant.clone(),
                job_id: job_id.clone(),
                from: record.from,
            },
        }
    }

    /// The `Sked-Delivery` header: the same for every try (a run's id; for skipped
    /// occurrences `<job>@<first skipped>.skipped`).
    pub fn delivery_id(&self) -> String {
        match self {
            DueAlert::Run(run) => run.run_id.to_string(),
            DueAlert::Skipped { job_id, record, .. } => {
                format!("{}.skipped", RunId::derive(job_id, record.from))
            }
        }
    }

    /// The body of `alert`'s next try (this alert as it stands).
    pub fn body(&self, alert: &Alert) -> Vec<u8> {
        let delivery = alert.deliveries.len() + 1;
        let event = match self {
            DueAlert::Run(run) => {
                let last = run.attempts.last();
                serde_json::json!({
                    "type": format!("run.{}", alert.event.map(|e| e.as_str()).unwrap_or("ended")),
                    "tenant": run.tenant,
                    "job_id": run.job_id,
                    "run_id": run.run_id,
                    "scheduled_for": timestamp::format(&run.scheduled_for),
                    "state": run.state.as_str(),
                    "reason": run.reason,
                    "attempts": run.attempt_count(),
                    "exit_code": last.and_then(|a| a.exit_code),
                    "http_status": last.and_then(|a| a.http_status),
                    "error": last.and_then(|a| a.error.as_deref()),
                    "finished_at": run.finished_at.as_ref().map(timestamp::format),
                    "delivery": delivery,
                })
            }
            DueAlert::Skipped { tenant, job_id, record } => serde_json::json!({
                "type": "occurrences.skipped",
                "tenant": tenant,
                "job_id": job_id,
                "from": timestamp::format(&record.from),
                "to": timestamp::format(&record.to),
                "count": record.count,
                "reason": record.reason.as_str(),
                "delivery": delivery,
            }),
        };
        serde_json::to_vec(&event).expect("an event serialises")
    }
}

/// The first `limit` of `due` (each with when it is due), earliest first (ties by delivery id):
/// how a store that reads several kinds of alert answers
/// [`crate::ports::JobStore::due_alerts`].
pub fn earliest_first(mut due: Vec<(Timestamp, DueAlert)>, limit: usize) -> Vec<DueAlert> {
    due.sort_by_cached_key(|(at, d)| (*at, d.delivery_id()));
    due.into_iter().take(limit).map(|(_, d)| d).collect()
}

/// Arms an alert on each of a firing's skip records of occurrences (not pauses) when the
/// job's `notify.on` lists `skipped`: due at `at`, the firing's time.
pub fn arm_skips(notify: Option<&Notify>, records: &mut [SkipRecord], at: Timestamp) {
    let Some(notify) = notify.filter(|n| n.on.contains(&AlertOn::Skipped)) else {
        return;
    };
    for record in records.iter_mut().filter(|r| !r.is_pause()) {
        let mut alert = Alert::new(notify.clone());
        alert.arm(AlertOn::Skipped, at);
        record.alert = Some(alert);
    }
}

/// The `Sked-Signature` header's value for `body` sent at `at` under `secret`:
/// `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
pub fn signature(secret: &str, at: Timestamp, body: &[u8]) -> String {
    let t = at.timestamp();
    format!("t={t},v1={}", hex_hmac(secret, t, body))
}

/// Whether `header` (a `Sked-Signature` value) signs `body` under `secret`; what a receiver
/// checks (it should also refuse a `t` far from its clock).
pub fn verify(secret: &str, header: &str, body: &[u8]) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1 = Some(v),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else { return false };
    let Ok(given) = decode_hex(v1) else { return false };
    mac(secret, t, body).verify_slice(&given).is_ok()
}

fn mac(secret: &str, t: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

fn hex_hmac(secret: &str, t: i64, body: &[u8]) -> String {
    mac(secret, t, body)
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_hex(s: &str) -> Result<Vec<u8>, ()> {
    if !s.len().is_multiple_of(2) {
        return Err(());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2).ok_or(())?, 16).map_err(|_| ()))
        .collect()
}

/// A new webhook secret: `whsec_` and 32 random bytes in hex.
pub fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("whsec_{hex}")
}

/// A tenant's webhook secret, kept where its jobs are. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    /// The secret.
    pub secret: String,
    /// When it was made.
    pub created_at: Timestamp,
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookSecret(***, {})", timestamp::format(&self.created_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Trigger;

    fn t(s: i64) -> Timestamp {
        timestamp::from_ms(1_800_000_000_000 + s * 1000)
    }

    fn notify(on: &[AlertOn]) -> Notify {
        Notify {
            on: on.to_vec(),
            webhook: "https://hooks.example/sked".into(),
        }
    }

    fn run_with(on: &[AlertOn]) -> Run {
        let mut r = Run::new_pending(
            TenantId::from("acme"),
            JobId::from("nightly"),
            t(0),
            Trigger::Schedule,
            5,
            t(0),
            1,
            t(0),
        );
        r.alert = Some(Alert::new(notify(on)));
        r
    }

    fn end(run: &mut Run, state: RunState, reason: Option<&str>) {
        run.state = state;
        run.finished_at = Some(t(5));
        run.reason = reason.map(str::to_string);
        run.arm_alert();
    }

    #[test]
    fn an_end_listed_in_on_arms_the_alert_due_at_the_end_and_others_do_not() {
        let mut r = run_with(&[AlertOn::Failed, AlertOn::Skipped]);
        end(&mut r, RunState::Failed, None);
        let a = r.alert.as_ref().unwrap();
        assert_eq!(
            (a.state, a.event, a.due),
            (AlertState::Pending, Some(AlertOn::Failed), Some(t(5)))
        );

        let mut ok = run_with(&[AlertOn::Failed]);
        end(&mut ok, RunState::Succeeded, None);
        assert_eq!(ok.alert.as_ref().unwrap().state, AlertState::Idle);

        let mut skipped = run_with(&[AlertOn::Skipped]);
        end(
            &mut skipped,
            RunState::Cancelled,
            Some("skipped: the previous run was still running"),
        );
        assert_eq!(skipped.alert.as_ref().unwrap().event, Some(AlertOn::Skipped));

        let mut cancelled = run_with(&[AlertOn::Skipped]);
        end(&mut cancelled, RunState::Cancelled, Some("by user"));
        assert_eq!(cancelled.alert.as_ref().unwrap().state, AlertState::Idle);
    }

    #[test]
    fn a_pending_run_or_one_already_armed_is_left_alone() {
        let mut r = run_with(&[AlertOn::Failed]);
        r.arm_alert();
        assert_eq!(r.alert.as_ref().unwrap().state, AlertState::Idle);
        end(&mut r, RunState::Failed, None);
        r.alert.as_mut().unwrap().state = AlertState::Delivered;
        r.alert.as_mut().unwrap().due = None;
        r.arm_alert();
        assert_eq!(r.alert.as_ref().unwrap().due, None);
    }

    #[test]
    fn a_try_leases_the_alert_and_failures_back_off_doubling_until_given_up() {
        let mut r = run_with(&[AlertOn::Failed]);
        end(&mut r, RunState::Failed, None);
        let a = r.alert.as_mut().unwrap();
        assert!(!a.lease(t(4)), "not due before the end");
        assert!(a.lease(t(5)));
        assert_eq!(a.due, Some(t(5) + DELIVERY_LEASE));
        assert!(!a.lease(t(6)), "held by the first try");
        let base = Duration::from_secs(2);
        a.record(t(6), Answer::Status(500), base);
        assert_eq!(a.due, Some(t(8)));
        assert!(a.lease(t(8)));
        a.record(t(8), Answer::Failed("connection refused".into()), base);
        assert_eq!(a.due, Some(t(12)));
        for i in 2..MAX_DELIVERIES {
            assert_eq!(a.state, AlertState::Pending, "try {i}");
            a.record(t(100 * i as i64), Answer::Status(503), base);
        }
        assert_eq!(
            (a.state, a.due, a.deliveries.len()),
            (AlertState::GaveUp, None, MAX_DELIVERIES)
        );
        assert!(!a.lease(t(100_000)));
    }

    #[test]
    fn a_2xx_delivers_and_the_pause_never_passes_the_cap() {
        let mut a = Alert::new(notify(&[AlertOn::Failed]));
        a.state = AlertState::Pending;
        for _ in 0..8 {
            a.record(t(0), Answer::Status(500), Duration::from_secs(3000));
        }
        assert_eq!(a.due, Some(t(0) + MAX_BACKOFF));
        a.record(t(1), Answer::Status(204), Duration::from_secs(1));
        assert_eq!((a.state, a.due), (AlertState::Delivered, None));
        assert_eq!(a.deliveries.last().unwrap().status, Some(204));
    }

    #[test]
    fn a_signature_verifies_with_its_secret_only_and_for_its_body_only() {
        let body = br#"{"type":"run.failed"}"#;
        let header = signature("whsec_one", t(0), body);
        assert!(header.starts_with(&format!("t={},v1=", t(0).timestamp())));
        assert!(verify("whsec_one", &header, body));
        assert!(!verify("whsec_two", &header, body));
        assert!(!verify("whsec_one", &header, br#"{"type":"run.succeeded"}"#));
        assert!(!verify("whsec_one", "t=1,v1=zz", body));
        assert!(!verify("whsec_one", "garbage", body));
    }

    #[test]
    fn notify_names_its_bad_fields() {
        let fields = |n: Notify| n.problems().into_iter().map(|p| p.field).collect::<Vec<_>>();
        assert!(fields(notify(&[AlertOn::Failed, AlertOn::TimedOut])).is_empty());
        assert_eq!(fields(notify(&[])), ["notify.on"]);
        assert_eq!(fields(notify(&[AlertOn::Failed, AlertOn::Failed])), ["notify.on"]);
        let mut bad = notify(&[AlertOn::Failed]);
        bad.webhook = "ftp://x".into();
        assert_eq!(fields(bad), ["notify.webhook"]);
    }

    #[test]
    fn the_event_names_the_run_and_its_try() {
        let mut r = run_with(&[AlertOn::Failed]);
        end(&mut r, RunState::Failed, Some("worker lost"));
        let a = r.alert.clone().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&DueAlert::Run(r.clone()).body(&a)).unwrap();
        assert_eq!(v["type"], "run.failed");
        assert_eq!(v["run_id"], r.run_id.as_str());
        assert_eq!(v["state"], "FAILED");
        assert_eq!(v["reason"], "worker lost");
        assert_eq!(v["delivery"], 1);
    }

    #[test]
    fn secrets_are_long_random_and_never_printed() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(a.len(), "whsec_".len() + 64);
        let s = WebhookSecret {
            secret: a.clone(),
            created_at: t(0),
        };
        assert!(!format!("{s:?}").contains(&a));
    }
}
