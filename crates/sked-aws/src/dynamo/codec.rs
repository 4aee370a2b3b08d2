//! Jobs and runs to DynamoDB items and back, with the index keys each item carries in its
//! current state (see the table layout in [`super`]).
//!
//! Index keys are derived here and only here, so an item never carries a key its state does
//! not call for: a job is in the due index only while ACTIVE with a `next_fire_at`; a run is
//! in the pending index only while PENDING and in the running index only while RUNNING.
//! This module must not talk to DynamoDB.

use super::keys::*;
use super::lone::LONE;
use crate::config::{JobKeys, RunListedState};
use aws_sdk_dynamodb::types::AttributeValue;
use sked_core::alert::Alert;
use sked_core::concurrency::Concurrency;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::ports::StoreError;
use sked_core::run::{Attempt, Lease, Run, RunState, Trigger};
use sked_core::schedule::Schedule;
use sked_core::timestamp::{Timestamp, from_ms, trunc_ms};
use std::collections::HashMap;
use std::str::FromStr;

/// One DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// An item that does not decode: written by something else, or a bug.
#[derive(Debug, thiserror::Error)]
#[error("malformed item {key}: {problem}")]
pub struct CodecError {
    /// The item's key.
    pub key: String,
    /// What is wrong.
    pub problem: String,
}

impl From<CodecError> for StoreError {
    fn from(e: CodecError) -> Self {
        StoreError::Other(Box::new(e))
    }
}

/// A string attribute.
pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute.
pub fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Milliseconds of an instant.
pub fn ms(t: Timestamp) -> i64 {
    t.timestamp_millis()
}

/// The primary key of an item.
pub fn key(pk: String, sk: String) -> Item {
    HashMap::from([(PK.to_string(), s(pk)), (SK.to_string(), s(sk))])
}

/// Reads attributes out of an item, naming the item in errors.
pub struct Reader<'a> {
    item: &'a Item,
}

impl<'a> Reader<'a> {
    /// A reader over `item`.
    pub fn new(item: &'a Item) -> Self {
        Reader { item }
    }

    fn err(&self, problem: String) -> CodecError {
        let part = |k: &str| {
            self.item
                .get(k)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        CodecError {
            key: format!("{}/{}", part(PK), part(SK)),
            problem,
        }
    }

    /// An optional string.
    pub fn opt_s(&self, name: &str) -> Result<Option<String>, CodecError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
            Some(_) => Err(self.err(format!("{name} is not a string"))),
        }
    }

    /// A required string.
    pub fn s(&self, name: &str) -> Result<String, CodecError> {
        self.opt_s(name)?.ok_or_else(|| self.err(format!("{name} missing")))
    }

    /// An optional number.
    pub fn opt_n<T: FromStr>(&self, name: &str) -> Result<Option<T>, CodecError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::N(v)) => v
                .parse()
                .map(Some)
                .map_err(|_| self.err(format!("{name} is not a valid number"))),
            Some(_) => Err(self.err(format!("{name} is not a number"))),
        }
    }

    /// A required number.
    pub fn n<T: FromStr>(&self, name: &str) -> Result<T, CodecError> {
        self.opt_n(name)?.ok_or_else(|| self.err(format!("{name} missing")))
    }

    /// A required instant (milliseconds).
    pub fn ts(&self, name: &str) -> Result<Timestamp, CodecError> {
        self.n::<i64>(name).map(from_ms)
    }

    /// An optional instant (milliseconds).
    pub fn opt_ts(&self, name: &str) -> Result<Option<Timestamp>, CodecError> {
        Ok(self.opt_n::<i64>(name)?.map(from_ms))
    }

    /// A required wire enum.
    pub fn parse<T: FromStr<Err = String>>(&self, name: &str) -> Result<T, CodecError> {
        self.s(name)?.parse().map_err(|e: String| self.err(e))
    }

    /// A JSON string attribute.
    pub fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, CodecError> {
        serde_json::from_str(&self.s(name)?).map_err(|e| self.err(format!("{name}: {e}")))
    }

    /// An optional string attribute holding JSON.
    pub fn opt_json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, CodecError> {
        self.opt_s(name)?
            .map(|v| serde_json::from_str(&v).map_err(|e| self.err(format!("{name}: {e}"))))
            .transpose()
    }

    /// An optional boolean (absent is false).
    pub fn flag(&self, name: &str) -> Result<bool, CodecError> {
        match self.item.get(name) {
            None => Ok(false),
            Some(AttributeValue::Bool(b)) => Ok(*b),
            Some(_) => Err(self.err(format!("{name} is not a boolean"))),
        }
    }

    /// A list of strings.
    pub fn string_list(&self, name: &str) -> Result<Vec<String>, CodecError> {
        match self.item.get(name) {
            Some(AttributeValue::L(items)) => items
                .iter()
                .map(|v| {
                    v.as_s()
                        .cloned()
                        .map_err(|_| self.err(format!("{name} holds a non-string")))
                })
                .collect(),
            _ => Err(self.err(format!("{name} is not a list"))),
        }
    }
}

fn json_error(what: &str, e: serde_json::Error) -> StoreError {
    StoreError::Other(format!("cannot encode {what}: {e}").into())
}

/// Where a job is filed in the due index: the minute [`DUE_FILED_AHEAD_MS`] before its
/// `next_fire_at` — the minute a sweeper looking that far ahead must fire it — or the minute
/// it is written if that is later (a job due within the lead, or overdue, is filed under
/// "now", so the sweeper's watermark never has to go back in time; its sort key keeps the
/// real due time). A sweep then reads the buckets up to about now, not up to its horizon.
pub fn due_minute(next_fire_ms: i64, now_ms: i64) -> i64 {
    epoch_minute(next_fire_ms - DUE_FILED_AHEAD_MS).max(epoch_minute(now_ms))
}

/// The `sched` index keys a job carries (only while it waits to fire).
pub fn job_due_keys(
    job_tenant: &str,
    job_id: &str,
    state: JobState,
    next_fire_at: Option<Timestamp>,
    now: Timestamp,
    shards: u32,
) -> Option<(String, String)> {
    let nfa = next_fire_at.filter(|_| state == JobState::Active)?;
    let shard = shard_of(&format!("{job_tenant}#{job_id}"), shards);
    Some((
        due_pk(due_minute(ms(nfa), ms(now)), shard),
        due_sk(ms(nfa), job_tenant, job_id),
    ))
}

/// How a store lays out job items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLayout {
    /// Shards of the due index.
    pub shards: u32,
    /// Where job items are keyed.
    pub keys: JobKeys,
    /// Seconds an ended run is kept (the runs' TTL after they finished).
    pub run_retention_secs: i64,
}

/// How long past its time (or its end) a job item that is done is kept beyond its runs'
/// retention, where jobs are keyed by tenant shards: longer than a run of a one-shot can still
/// need its job — its attempts, their timeouts and backoffs, a wait for a concurrency slot —
/// in any but an absurd case.
pub const JOB_KEPT_PAST_ITS_RUNS: i64 = 30 * 86_400;

/// The TTL of a job's item, where jobs are keyed by tenant shards (each shard may hold at most
/// 10 GB, so done jobs must go): a one-shot ACTIVE (its firing may be left unwritten, after
/// which the item is never written again) from its time, a job COMPLETED or DELETED from now,
/// each its runs' retention, [`JOB_KEPT_PAST_ITS_RUNS`] and its attempts' timeouts later. A
/// PAUSED job and a recurring ACTIVE one have none (a pause rewrites the item without it).
pub(super) fn job_ttl(job: &Job, now: Timestamp, layout: &JobLayout) -> Option<i64> {
    if layout.keys != JobKeys::TenantShards {
        return None;
    }
    let from = match job.state {
        JobState::Active if matches!(job.spec.schedule, Schedule::At(_)) => job.next_fire_at.unwrap_or(now).max(now),
        JobState::Completed | JobState::Deleted => now,
        _ => return None,
    };
    let attempts = i64::from(job.spec.max_retries).saturating_add(1);
    let timeouts = attempts.saturating_mul(job.spec.timeout.as_millis() / 1000);
    Some(
        from.timestamp()
            .saturating_add(layout.run_retention_secs)
            .saturating_add(JOB_KEPT_PAST_ITS_RUNS)
            .saturating_add(timeouts),
    )
}

/// A job's item, keyed as `layout` says, filed in the due index as of `now`; listed through
/// the `list` index only where its own key does not list it ([`JobKeys::PerJob`]), else given
/// a TTL once done ([`job_ttl`]).
pub fn job_item(job: &Job, now: Timestamp, layout: &JobLayout) -> Result<Item, StoreError> {
    let JobLayout { shards, keys, .. } = *layout;
    let (t, id) = (job.tenant.as_str(), job.id.as_str());
    let spec = serde_json::to_string(&job.spec).map_err(|e| json_error("job spec", e))?;
    let labels = job.spec.labels.iter().map(|(k, v)| (k.clone(), s(v.clone()))).collect();
    let (pk, sk) = job_item_key(keys, t, id);
    let mut item = key(pk, sk);
    item.extend([
        ("kind".to_string(), s("job")),
        ("tenant".into(), s(t)),
        ("job_id".into(), s(id)),
        ("spec".into(), s(spec)),
        ("state".into(), s(job.state.as_str())),
        ("version".into(), n(job.version)),
        ("created_at".into(), n(ms(job.created_at))),
        ("updated_at".into(), n(ms(job.updated_at))),
        ("labels".into(), AttributeValue::M(labels)),
    ]);
    if keys == JobKeys::PerJob {
        item.insert(GSI2_PK.into(), s(jobs_list_pk(t)));
        item.insert(GSI2_SK.into(), s(id));
    }
    if let Some(ttl) = job_ttl(job, now, layout) {
        item.insert(TTL.into(), n(ttl));
    }
    if let Some(nfa) = job.next_fire_at {
        item.insert("next_fire_at".into(), n(ms(nfa)));
    }
    if let Some((pk, sk)) = job_due_keys(t, id, job.state, job.next_fire_at, now, shards) {
        item.insert(GSI1_PK.into(), s(pk));
        item.insert(GSI1_SK.into(), s(sk));
    }
    Ok(item)
}

/// Whether `item` is a job's (by its `kind`, or — items written before `kind` was — its sort
/// key), whichever way the table keys jobs.
pub fn is_job_item(item: &Item) -> bool {
    let r = Reader::new(item);
    r.s("kind")
        .map_or_else(|_| r.s(SK).is_ok_and(|sk| sk == JOB_SK), |kind| kind == "job")
}

/// A job from its item.
pub fn job_from_item(item: &Item) -> Result<Job, StoreError> {
    let r = Reader::new(item);
    let spec: JobSpec = r.json("spec")?;
    Ok(Job {
        tenant: TenantId(r.s("tenant")?),
        id: JobId(r.s("job_id")?),
        spec,
        state: r.parse("state")?,
        next_fire_at: r.opt_ts("next_fire_at")?,
        version: r.n("version")?,
        created_at: r.ts("created_at")?,
        updated_at: r.ts("updated_at")?,
    })
}

/// The attribute holding a run's state, whatever it is.
pub const RUN_STATE: &str = "run_state";

/// The attribute the `list` index projects for filters on state (a job's state; a run's only
/// once it has ended, unless the store runs with [`RunListedState::Always`]). A run's claim,
/// which moves it from PENDING to RUNNING, then leaves its `list` entry as it was — no index
/// write — and its end writes the entry once, as before. Listings of PENDING or RUNNING runs
/// find them as the entries without it ([`super::listing`]).
pub const LISTED_STATE: &str = "state";

/// Whether a run in `state` carries it as [`LISTED_STATE`] whatever the store's
/// [`RunListedState`] is or was: a run that ended otherwise than SUCCEEDED. A listing filtered
/// on such a state filters in the index; on any other, it keeps the copies without one.
pub fn listed_in_every_mode(state: RunState) -> bool {
    state.is_terminal() && state != RunState::Succeeded
}

/// A run as stored: the run, the highest fencing token ever handed out for it, and the
/// item version every read-modify-write is conditional on.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The run.
    pub run: Run,
    /// Highest token handed out so far.
    pub last_token: u64,
    /// Item version (`rv`), bumped by every write.
    pub rv: u64,
    /// Finished logs kept in the run's item, by attempt: JSON lines ([`crate::logs::FoldedLogs`]).
    pub logs: FoldedLogLines,
    /// Fired while no job's `after` named its job: its end releases nothing and reads no
    /// edges (`lone`, [`super::lone`]).
    pub lone: bool,
    /// The one run of the firing that ended its job (a one-shot's run): it keeps its entry
    /// in the `active` local index when it ends ([`ENDS_ITS_JOB`]).
    pub ends_its_job: bool,
    /// Read by its key, never through the `active` local index ([`KEYED`]).
    pub keyed: bool,
}

/// The attribute (`true`, or absent) of a run read by its key, with no entry in the `active`
/// local index: the run of a one-shot whose firing was left unwritten (`super::unwritten`),
/// first put by its claim or another write of it. Its job's readers of active runs read it
/// by the key of its job's one-shot time, or of a time a change of the job settled
/// (`runs::active_stored_runs`), so the entry and its write unit are spared.
///
/// Nor has such a run a `live` entry (two write units: its claim's put, its end's delete):
/// the reaper and the repair pass never see it. Its queue message is what finds it — every
/// step that lets a message go while the run goes on sends it a new one first (a retry, a
/// wait behind a lease, a deferral; the dead-letter handler too), a worker's death shows the
/// message again when its lease ends and the next claim takes the run over — handing the run
/// a new message, so that deaths never add up to the redrive's receive limit
/// (`sked_core::ports::DispatchQueue::receive_limit`) — and a wait beyond SQS's longest delay
/// hops from message to message (`sked_core::ports::queue::LONGEST_DEFER`). (Withdrawn for a
/// day, 2026-12-05, when a takeover kept the old message: `aws_crash` had one dead-lettered
/// with attempts left.)
pub const KEYED: &str = "keyed";

/// The attribute (`true`, or absent) of a run fired alone by the firing that ended its job —
/// a one-shot's run, or the last occurrence of a schedule that ends. Such a run keeps its
/// entry in the `active` local index when it ends: leaving the entry where it is saves the
/// index delete of its end (one write unit). The index stays small — no later occurrence of
/// the job follows such a run until the job is changed, so a job has one such entry per
/// change at most — and its readers read every entry's item and keep the runs still PENDING
/// or RUNNING (`runs::active_stored_runs`), so an ended run there is passed.
pub const ENDS_ITS_JOB: &str = "ends_job";

/// A run item's folded logs: attempt → JSON lines.
pub type FoldedLogLines = std::collections::BTreeMap<u32, String>;

/// The run item's attribute holding its folded logs (a map: attempt → JSON lines).
pub const FOLDED_LOGS: &str = "logs";

impl StoredRun {
    /// A run as first written: no token handed out, version 1, no log.
    pub fn new(run: Run) -> Self {
        StoredRun {
            run,
            last_token: 0,
            rv: 1,
            logs: FoldedLogLines::new(),
            lone: false,
            ends_its_job: false,
            keyed: false,
        }
    }
}

/// The primary key of a run, or `None` when the run id is not one sked derives.
pub fn run_key(tenant: &TenantId, run_id: &RunId) -> Option<Item> {
    let (job, at) = run_id.parts()?;
    Some(key(job_pk(tenant.as_str(), job.as_str()), run_sk(ms(at))))
}

/// A run with every instant truncated to milliseconds (what a read gives back).
pub fn truncated(run: &Run) -> Run {
    let mut r = run.clone();
    r.scheduled_for = trunc_ms(r.scheduled_for);
    r.not_before = trunc_ms(r.not_before);
    r.created_at = trunc_ms(r.created_at);
    r.started_at = r.started_at.map(trunc_ms);
    r.finished_at = r.finished_at.map(trunc_ms);
    for a in &mut r.attempts {
        a.started_at = trunc_ms(a.started_at);
        a.finished_at = a.finished_at.map(trunc_ms);
    }
    if let Some(l) = &mut r.lease {
        l.expires_at = trunc_ms(l.expires_at);
    }
    r
}

/// How a store lays out run items: its table's shards, how long ended runs are kept, and which
/// runs carry [`LISTED_STATE`].
#[derive(Debug, Clone, Copy)]
pub struct RunLayout {
    /// Shards of the sharded index keys.
    pub shards: u32,
    /// Seconds an ended run is kept (its TTL after it finished).
    pub retention_secs: i64,
    /// Which runs carry [`LISTED_STATE`].
    pub listed_state: RunListedState,
}

/// A run's item. Terminal runs get a TTL of `layout.retention_secs` after they finished.
pub fn run_item(stored: &StoredRun, layout: &RunLayout) -> Result<Item, StoreError> {
    let RunLayout {
        shards,
        retention_secs,
        listed_state,
    } = *layout;
    let run = &stored.run;
    let (t, id) = (run.tenant.as_str(), run.run_id.as_str());
    let attempts = serde_json::to_string(&run.attempts).map_err(|e| json_error("attempts", e))?;
    let mut item = key(job_pk(t, run.job_id.as_str()), run_sk(ms(run.scheduled_for)));
    item.extend([
        ("kind".to_string(), s("run")),
        ("tenant".into(), s(t)),
        ("run_id".into(), s(id)),
        ("job_id".into(), s(run.job_id.as_str())),
        ("scheduled_for".into(), n(ms(run.scheduled_for))),
        ("trigger".into(), s(run.trigger.as_str())),
        (RUN_STATE.into(), s(run.state.as_str())),
        ("priority".into(), n(run.priority)),
        ("not_before".into(), n(ms(run.not_before))),
        ("max_attempts".into(), n(run.max_attempts)),
        ("created_at".into(), n(ms(run.created_at))),
        ("attempts".into(), s(attempts)),
        ("cancel_requested".into(), AttributeValue::Bool(run.cancel_requested)),
        ("last_token".into(), n(stored.last_token)),
        ("rv".into(), n(stored.rv)),
    ]);
    let shard = shard_of(&format!("{t}#{id}"), shards);
    item.insert(GSI2_PK.into(), s(runs_list_pk(t, shard)));
    item.insert(GSI2_SK.into(), s(runs_list_sk(ms(run.scheduled_for), id)));
    if let Some(v) = run.started_at {
        item.insert("started_at".into(), n(ms(v)));
    }
    if let Some(v) = run.finished_at {
        item.insert("finished_at".into(), n(ms(v)));
    }
    if let Some(v) = &run.reason {
        item.insert("reason".into(), s(v.clone()));
    }
    if let Some(c) = &run.concurrency {
        item.insert("concurrency_key".into(), s(c.key.clone()));
        item.insert("concurrency_limit".into(), n(c.limit));
    }
    if let Some(l) = &run.lease {
        item.insert("lease_owner".into(), s(l.owner.as_str()));
        item.insert("lease_token".into(), n(l.token));
        item.insert("lease_expires".into(), n(ms(l.expires_at)));
    }
    if (!run.state.is_terminal() || stored.ends_its_job) && !stored.keyed {
        item.insert(ACTIVE_SK.into(), s(run_sk(ms(run.scheduled_for))));
    }
    match (run.state, &run.lease) {
        // A run fired unwritten is carried by its queue message alone: no `live` entry.
        (RunState::Pending | RunState::Running, _) if stored.keyed => {}
        (RunState::Pending, _) => {
            item.insert(GSI3_PK.into(), s(running_pk(shard)));
            item.insert(GSI3_SK.into(), s(live_sk(ms(run.not_before), None)));
        }
        (RunState::Running, Some(l)) => {
            item.insert(GSI3_PK.into(), s(running_pk(shard)));
            let sk = live_sk(ms(run.not_before), Some(ms(l.expires_at)));
            item.insert(GSI3_SK.into(), s(sk));
        }
        (state, _) if state.is_terminal() => {
            if let Some(due) = run.alert.as_ref().and_then(|a| a.due) {
                item.insert(GSI1_PK.into(), s(alerts_pk(shard)));
                item.insert(GSI1_SK.into(), s(alerts_sk(ms(due), t, id)));
            }
        }
        _ => {}
    }
    if let Some(alert) = &run.alert {
        item.extend(alert_attributes(alert)?);
    }
    if stored.lone {
        item.insert(LONE.into(), AttributeValue::Bool(true));
    }
    if stored.ends_its_job {
        item.insert(ENDS_ITS_JOB.into(), AttributeValue::Bool(true));
    }
    if stored.keyed {
        item.insert(KEYED.into(), AttributeValue::Bool(true));
    }
    if !stored.logs.is_empty() {
        let by_attempt = stored.logs.iter().map(|(a, lines)| (a.to_string(), s(lines.clone())));
        item.insert(FOLDED_LOGS.into(), AttributeValue::M(by_attempt.collect()));
    }
    let listed = match listed_state {
        RunListedState::Ended => run.state.is_terminal(),
        RunListedState::Always => true,
        RunListedState::Unsuccessful => listed_in_every_mode(run.state),
    };
    if listed {
        item.insert(LISTED_STATE.into(), s(run.state.as_str()));
    }
    if run.state.is_terminal() {
        let end = run.finished_at.unwrap_or(run.created_at);
        item.insert(TTL.into(), n(end.timestamp() + retention_secs));
    }
    Ok(item)
}

/// The attributes of a run's alert: `alert` (JSON) and, while pending, `alert_due`.
pub fn alert_attributes(alert: &Alert) -> Result<Vec<(String, AttributeValue)>, StoreError> {
    let json = serde_json::to_string(alert).map_err(|e| json_error("alert", e))?;
    let mut out = vec![("alert".to_string(), s(json))];
    if let Some(due) = alert.due {
        out.push(("alert_due".into(), n(ms(due))));
    }
    Ok(out)
}

/// A run from its item.
pub fn run_from_item(item: &Item) -> Result<StoredRun, StoreError> {
    let r = Reader::new(item);
    let attempts: Vec<Attempt> = r.json("attempts")?;
    let lease = match r.opt_s("lease_owner")? {
        Some(owner) => Some(Lease {
            owner: WorkerId(owner),
            token: r.n("lease_token")?,
            expires_at: r.ts("lease_expires")?,
        }),
        None => None,
    };
    let trigger: Trigger = r.parse("trigger")?;
    let run = Run {
        tenant: TenantId(r.s("tenant")?),
        run_id: RunId(r.s("run_id")?),
        job_id: JobId(r.s("job_id")?),
        scheduled_for: r.ts("scheduled_for")?,
        trigger,
        // Items written before `run_state` existed carry the state in `state` alone.
        state: match r.opt_s(RUN_STATE)? {
            Some(_) => r.parse(RUN_STATE)?,
            None => r.parse(LISTED_STATE)?,
        },
        priority: r.n("priority")?,
        not_before: r.ts("not_before")?,
        max_attempts: r.n("max_attempts")?,
        created_at: r.ts("created_at")?,
        started_at: r.opt_ts("started_at")?,
        finished_at: r.opt_ts("finished_at")?,
        attempts,
        lease,
        cancel_requested: r.flag("cancel_requested")?,
        reason: r.opt_s("reason")?,
        concurrency: match r.opt_s("concurrency_key")? {
            Some(key) => Some(Concurrency {
                key,
                limit: r.n("concurrency_limit")?,
            }),
            None => None,
        },
        alert: r.opt_json("alert")?,
    };
    let logs = match item.get(FOLDED_LOGS) {
        None => FoldedLogLines::new(),
        Some(AttributeValue::M(by_attempt)) => by_attempt
            .iter()
            .map(|(attempt, lines)| match (attempt.parse::<u32>(), lines.as_s()) {
                (Ok(attempt), Ok(lines)) => Ok((attempt, lines.clone())),
                _ => Err(r.err(format!("{FOLDED_LOGS}: attempt {attempt} is not a log"))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(r.err(format!("{FOLDED_LOGS} is not a map")).into()),
    };
    Ok(StoredRun {
        run,
        last_token: r.n("last_token")?,
        rv: r.n("rv")?,
        logs,
        lone: r.flag(LONE)?,
        ends_its_job: r.flag(ENDS_ITS_JOB)?,
        keyed: r.flag(KEYED)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sked_core::timestamp::parse;

    const LAYOUT: RunLayout = RunLayout {
        shards: 4,
        retention_secs: 60,
        listed_state: RunListedState::Ended,
    };

    fn at(s: &str) -> Timestamp {
        parse(s).unwrap()
    }

    /// Job `j` of tenant `t` on `schedule`, running `true` with 2 retries of 10 minutes, in
    /// `state`, due at `schedule`'s `at` (or 2026-03-02), written at `now`.
    fn job_of(schedule: serde_json::Value, state: JobState, now: Timestamp) -> Job {
        let next = schedule["at"].as_str().unwrap_or("2026-03-02T00:00:00Z");
        Job {
            tenant: TenantId::from("t"),
            id: JobId::from("j"),
            next_fire_at: Some(at(next)),
            spec: serde_json::from_value(json!({
                "schedule": schedule, "task": {"command": {"argv": ["true"]}},
                "max_retries": 2, "timeout": "10m"
            }))
            .unwrap(),
            state,
            version: 1,
            created_at: now,
            updated_at: now,
        }
    }

    fn job_layout(keys: JobKeys) -> JobLayout {
        JobLayout {
            shards: 4,
            keys,
            run_retention_secs: 86_400,
        }
    }

    /// Keyed per job, a job's item is beside its runs and listed through `list`; keyed by
    /// tenant shards, it is in one of its tenant's shards, sorted by its id, with no `list`
    /// entry — and it reads back the same either way.
    #[test]
    fn a_job_item_is_keyed_as_the_table_keys_jobs() {
        let now = at("2026-03-01T00:00:00Z");
        let job = job_of(json!({"at": "2026-03-01T00:10:00Z"}), JobState::Active, now);
        let per_job = job_item(&job, now, &job_layout(JobKeys::PerJob)).unwrap();
        let sharded = job_item(&job, now, &job_layout(JobKeys::TenantShards)).unwrap();
        let keys = |item: &Item| (Reader::new(item).s(PK).unwrap(), Reader::new(item).s(SK).unwrap());
        assert_eq!(keys(&per_job), ("T#t#J#j".to_string(), "JOB".to_string()));
        let shard = shard_of("t#j", JOB_SHARDS);
        assert_eq!(keys(&sharded), (format!("T#t#JOBS#{shard}"), "j".to_string()));
        assert!(per_job.contains_key(GSI2_PK) && per_job.contains_key(GSI2_SK));
        assert!(!sharded.contains_key(GSI2_PK) && !sharded.contains_key(GSI2_SK));
        assert!(sharded.contains_key(GSI1_PK), "still filed in `sched`");
        assert!(is_job_item(&per_job) && is_job_item(&sharded));
        assert_eq!(job_from_item(&sharded).unwrap(), job_from_item(&per_job).unwrap());
    }

    /// Keyed by tenant shards, a job item that is done, or a one-shot's (whose item may never
    /// be written again once its firing is left unwritten), expires: its time (or its end),
    /// then its runs' retention, [`JOB_KEPT_PAST_ITS_RUNS`] and its attempts' timeouts. A
    /// paused job and a recurring one do not; keyed per job, none does.
    #[test]
    fn a_job_item_keyed_by_tenant_shards_expires_once_its_runs_cannot_need_it() {
        let now = at("2026-03-01T00:00:00Z");
        let ttl = |job: &Job, keys| {
            job_item(job, now, &job_layout(keys))
                .unwrap()
                .get(TTL)
                .map(|v| v.as_n().unwrap().parse::<i64>().unwrap())
        };
        let one_shot = json!({"at": "2026-03-02T00:00:00Z"});
        let kept = 86_400 + JOB_KEPT_PAST_ITS_RUNS + 3 * 600;
        let at_its_time = at("2026-03-02T00:00:00Z").timestamp();
        let shards = JobKeys::TenantShards;
        assert_eq!(
            ttl(&job_of(one_shot.clone(), JobState::Active, now), shards),
            Some(at_its_time + kept)
        );
        assert_eq!(
            ttl(&job_of(one_shot.clone(), JobState::Completed, now), shards),
            Some(now.timestamp() + kept)
        );
        assert_eq!(
            ttl(&job_of(one_shot.clone(), JobState::Deleted, now), shards),
            Some(now.timestamp() + kept)
        );
        assert_eq!(ttl(&job_of(one_shot.clone(), JobState::Paused, now), shards), None);
        let hourly = json!({"cron": "0 * * * *"});
        assert_eq!(ttl(&job_of(hourly, JobState::Active, now), shards), None);
        assert_eq!(ttl(&job_of(one_shot, JobState::Active, now), JobKeys::PerJob), None);
    }

    #[test]
    fn overdue_jobs_are_filed_under_the_minute_they_are_written() {
        let due = ms(at("2026-03-01T00:00:30Z"));
        let now = ms(at("2026-03-01T00:05:10Z"));
        assert_eq!(due_minute(due, now), epoch_minute(now));
    }

    #[test]
    fn jobs_are_filed_the_filing_lead_before_they_are_due() {
        let now = ms(at("2026-03-01T00:05:10Z"));
        assert_eq!(DUE_FILED_AHEAD_MS, 10 * 60_000);
        // Due within the lead: filed now. Due later: the lead before.
        assert_eq!(due_minute(now + 120_000, now), epoch_minute(now));
        assert_eq!(due_minute(now + DUE_FILED_AHEAD_MS, now), epoch_minute(now));
        assert_eq!(
            due_minute(now + DUE_FILED_AHEAD_MS + 120_000, now),
            epoch_minute(now) + 2
        );
        let tomorrow = ms(at("2026-03-02T09:00:00Z"));
        assert_eq!(due_minute(tomorrow, now), epoch_minute(tomorrow) - 10);
    }

    #[test]
    fn runs_carry_only_the_index_keys_of_their_state() {
        let mut run = Run::new_pending(
            "t".into(),
            "j".into(),
            at("2026-03-01T00:00:00Z"),
            Trigger::Schedule,
            5,
            at("2026-03-01T00:00:00Z"),
            2,
            at("2026-03-01T00:00:00Z"),
        );
        let stored = |run: &Run| StoredRun::new(run.clone());
        let item = run_item(&stored(&run), &LAYOUT).unwrap();
        assert!(!item.contains_key(GSI1_PK), "pending runs are filed in `live`");
        assert!(item[GSI3_PK].as_s().unwrap().starts_with("RUNNING#"));
        let pending_key = item[GSI3_SK].clone();
        assert_eq!(pending_key.as_s().unwrap(), &pad_ms(ms(at("2026-03-01T00:00:00Z"))));
        assert!(!item.contains_key(TTL));
        assert_eq!(run_from_item(&item).unwrap(), stored(&run));
        run.state = RunState::Running;
        run.lease = Some(Lease {
            owner: "w".into(),
            token: 1,
            expires_at: at("2026-03-01T00:00:15Z"),
        });
        let item = run_item(&stored(&run), &LAYOUT).unwrap();
        assert_eq!(item[GSI3_SK], pending_key, "claimed on time: the entry stays");
        run.lease = Some(Lease {
            owner: "w".into(),
            token: 1,
            expires_at: at("2026-03-01T00:07:30Z"),
        });
        let item = run_item(&stored(&run), &LAYOUT).unwrap();
        assert!(!item.contains_key(GSI1_PK), "a running run leaves the sched index");
        assert!(item[GSI3_PK].as_s().unwrap().starts_with("RUNNING#"));
        assert_eq!(item[GSI3_SK].as_s().unwrap(), &pad_ms(ms(at("2026-03-01T00:05:00Z"))));
        assert_eq!(run_from_item(&item).unwrap(), stored(&run));
        run.lease = None;
        run.state = RunState::Succeeded;
        run.finished_at = Some(at("2026-03-01T00:01:00Z"));
        let item = run_item(&stored(&run), &LAYOUT).unwrap();
        assert!(!item.contains_key(GSI1_PK));
        assert!(!item.contains_key(GSI3_PK));
        assert_eq!(
            item[TTL].as_n().unwrap(),
            &(at("2026-03-01T00:02:00Z").timestamp()).to_string()
        );
    }

    /// A run fired unwritten ([`KEYED`]) is in neither the `live` nor the `active` index,
    /// PENDING or RUNNING: its claim and its end write neither.
    #[test]
    fn a_keyed_run_is_in_no_index_of_active_runs() {
        let t = at("2026-03-01T00:00:00Z");
        let mut run = Run::new_pending("t".into(), "j".into(), t, Trigger::Schedule, 5, t, 2, t);
        let keyed = |run: &Run| StoredRun {
            keyed: true,
            ..StoredRun::new(run.clone())
        };
        let written = run_item(&StoredRun::new(run.clone()), &LAYOUT).unwrap();
        assert!(
            written.contains_key(GSI3_PK) && written.contains_key(ACTIVE_SK),
            "a written run is in both"
        );
        let pending = run_item(&keyed(&run), &LAYOUT).unwrap();
        run.state = RunState::Running;
        run.lease = Some(Lease {
            owner: "w".into(),
            token: 1,
            expires_at: at("2026-03-01T00:07:30Z"),
        });
        let running = run_item(&keyed(&run), &LAYOUT).unwrap();
        for item in [&pending, &running] {
            assert!(!item.contains_key(GSI3_PK) && !item.contains_key(GSI3_SK));
            assert!(!item.contains_key(ACTIVE_SK));
            assert!(item.contains_key(GSI2_PK), "listed across jobs once written");
        }
        assert_eq!(run_from_item(&running).unwrap(), keyed(&run));
    }

    /// The `list` index projects `state`: a run carries it only once ended, so the claim (PENDING
    /// to RUNNING) changes nothing the index holds; `run_state` always holds the state, and an
    /// item written before `run_state` existed reads its state from `state`.
    #[test]
    fn a_run_carries_its_listed_state_only_once_ended() {
        let t = at("2026-03-01T00:00:00Z");
        let mut run = Run::new_pending("t".into(), "j".into(), t, Trigger::Schedule, 5, t, 2, t);
        let list_copy = |item: &Item| -> Vec<(String, AttributeValue)> {
            let projected = [GSI2_PK, GSI2_SK, LISTED_STATE, "labels"];
            let mut copy: Vec<_> = item
                .iter()
                .filter(|(name, _)| projected.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            copy.sort_by(|a, b| a.0.cmp(&b.0));
            copy
        };
        let pending = run_item(&StoredRun::new(run.clone()), &LAYOUT).unwrap();
        assert_eq!(pending[RUN_STATE].as_s().unwrap(), "PENDING");
        assert!(!pending.contains_key(LISTED_STATE));
        run.state = RunState::Running;
        run.lease = Some(Lease {
            owner: "w".into(),
            token: 1,
            expires_at: at("2026-03-01T00:00:30Z"),
        });
        let running = run_item(&StoredRun::new(run.clone()), &LAYOUT).unwrap();
        assert_eq!(
            list_copy(&running),
            list_copy(&pending),
            "the claim writes nothing to `list`"
        );
        run.lease = None;
        run.state = RunState::Failed;
        run.finished_at = Some(at("2026-03-01T00:01:00Z"));
        let ended = run_item(&StoredRun::new(run.clone()), &LAYOUT).unwrap();
        assert_eq!(ended[LISTED_STATE].as_s().unwrap(), "FAILED");
        assert_eq!(ended[RUN_STATE].as_s().unwrap(), "FAILED");

        let mut written_before = ended.clone();
        written_before.remove(RUN_STATE);
        assert_eq!(run_from_item(&written_before).unwrap().run.state, RunState::Failed);
        let always = RunLayout {
            listed_state: RunListedState::Always,
            ..LAYOUT
        };
        let mut running_for_old_readers = run.clone();
        running_for_old_readers.state = RunState::Running;
        running_for_old_readers.finished_at = None;
        let item = run_item(&StoredRun::new(running_for_old_readers), &always).unwrap();
        assert_eq!(
            item[LISTED_STATE].as_s().unwrap(),
            "RUNNING",
            "`always`: every run carries it"
        );

        let mut pending_before = pending.clone();
        pending_before.remove(RUN_STATE);
        pending_before.insert(LISTED_STATE.into(), s("PENDING"));
        assert_eq!(run_from_item(&pending_before).unwrap().run.state, RunState::Pending);

        let unsuccessful = RunLayout {
            listed_state: RunListedState::Unsuccessful,
            ..LAYOUT
        };
        let failed = run_item(&StoredRun::new(run.clone()), &unsuccessful).unwrap();
        assert_eq!(
            failed[LISTED_STATE].as_s().unwrap(),
            "FAILED",
            "`unsuccessful`: a failure is listed"
        );
        run.state = RunState::Succeeded;
        let succeeded = run_item(&StoredRun::new(run.clone()), &unsuccessful).unwrap();
        assert_eq!(
            list_copy(&succeeded),
            list_copy(&pending),
            "`unsuccessful`: a success's end writes nothing to `list`"
        );
        assert_eq!(run_from_item(&succeeded).unwrap().run.state, RunState::Succeeded);
    }
}
