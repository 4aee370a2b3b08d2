//! One-shots' firings left unwritten (`docs/lean-layout.md`, step 1, behind
//! [`AwsConfig::unwritten_one_shots`](crate::AwsConfig)): what [`sked_core::unwritten_firing`]
//! decides, on this table (their claims: `super::claim_unwritten`).
//!
//! - **Firing**: a firing that [`can_leave_unwritten`] its job, of a tenant that does not
//!   count its active jobs, writes nothing. `fire` reads the job and the occurrence's run
//!   (one consistent `BatchGetItem` for the sweep's batch), answers the run the firing stands
//!   for ([`pending_run`]), and remembers the job; `firings_sent` marks it sent once its
//!   message is out.
//! - **Sent**: a job's unwritten firing is known sent — the job reads COMPLETED
//!   ([`job_after`]) and its run PENDING until either is written — when this process sent
//!   it and the job is unchanged, when the due watermark has passed its bucket (the sweep
//!   passes a bucket holding only sent jobs, never within the watermark's margin), or when
//!   the occurrence's run item exists (claimed before the mark, or by another process).
//! - **Send window**: before then the job reads as not fired, and only a claim shows the run:
//!   from the job as it then stands ([`due_run`]), since the message proves the firing.
//! - **Run writes**: a run shown but not written is a [`StoredRun`] of item version 0
//!   ([`ABSENT_RV`]); the read–decide–put loop (`runs`) puts it on condition the item does
//!   not exist, so of two writers one puts it and the other reads it and decides again.
//! - **Changes of the job** ([`DynamoStore::prepare_change`]): one read as fired puts the run
//!   first and marks the job [`SETTLED`]; one read as not fired is written only while no
//!   item holds the run (a claim may be putting it).
//! - **Listings**: a job's runs show the run at once; the listing across jobs (the `list`
//!   index of run items) once it is written ([`FiredRunListing::OnceWritten`]).
//!
//! [`FiredRunListing::OnceWritten`]: sked_core::ports::FiredRunListing::OnceWritten

use super::codec::{Item, Reader, StoredRun, is_job_item, job_from_item, key, ms, run_key};
use super::firing::MAX_DUE_AHEAD_MINUTES;
use super::keys::*;
use super::store::{DynamoStore, conflict};
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState};
use sked_core::ports::store::{Firing, StoreError};
use sked_core::schedule::Schedule;
use sked_core::timestamp::Timestamp;
use sked_core::unwritten_firing::{can_leave_unwritten, due_run, job_after, pending_run};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

/// The attribute of a job item (a number set) holding the nominal times (ms) of the runs
/// whose firings, left unwritten, changes of the job settled: a claim that put such a run
/// meanwhile keeps it, and the job's readers of active runs read them by key (they have no
/// `active` entry: `codec::KEYED`). Every change carries the set on, keeping the
/// [`MAX_SETTLED`] latest.
pub const SETTLED: &str = "settled";

/// Most times [`SETTLED`] keeps (a one-shot moved after each of its firings).
const MAX_SETTLED: usize = 32;

/// The times [`SETTLED`] holds on the job item `item`.
pub(super) fn settled_times(item: &Item) -> Vec<i64> {
    match item.get(SETTLED) {
        Some(AttributeValue::Ns(times)) => times.iter().filter_map(|t| t.parse().ok()).collect(),
        _ => Vec::new(),
    }
}

/// The [`SETTLED`] attribute holding `times` (the latest [`MAX_SETTLED`]), if any.
pub(super) fn settled_attribute(mut times: Vec<i64>) -> Option<AttributeValue> {
    times.sort_unstable();
    times.dedup();
    let keep = times.len().saturating_sub(MAX_SETTLED);
    let times: Vec<String> = times[keep..].iter().map(i64::to_string).collect();
    (!times.is_empty()).then_some(AttributeValue::Ns(times))
}

/// The item version of a run shown but not written: its put is conditional on the item's
/// absence, and writes it as version 1.
pub const ABSENT_RV: u64 = 0;

/// How old the watermark a view goes by may be: a job's bucket passed since shows as sent
/// by the run item's existence (a read), or, where no item holds the run yet, up to this late.
const WATERMARK_READ_EVERY_MS: i64 = 30_000;

/// Most jobs each of [`UnwrittenFirings`]'s maps remembers; a map is emptied when it reaches
/// this (a forgotten job is read again by the next sweep: a run not yet claimed is sent
/// again, a second message of the same run, and one claimed is found fired).
const MAX_REMEMBERED: usize = 100_000;

/// What tells a job's item unchanged since a firing left it unwritten: any write of the job
/// moves one of them (a change its version, a written firing its state or due time).
type JobMark = (u64, Option<Timestamp>, JobState);

fn mark_of(job: &Job) -> JobMark {
    (job.version, job.next_fire_at, job.state)
}

/// A job whose plain firing this process left unwritten: the job as read then (its mark),
/// and the minute of the due bucket holding it.
#[derive(Debug, Clone)]
struct LeftUnwritten {
    mark: JobMark,
    minute: i64,
}

type JobKey = (TenantId, JobId);

/// The firings this process left unwritten, and the due watermark as it last saw it.
#[derive(Debug)]
pub(super) struct UnwrittenFirings {
    /// Answered by `fire`, not yet reported sent.
    fired: Mutex<HashMap<JobKey, LeftUnwritten>>,
    /// Sent (or found fired): the watermark may pass their buckets.
    sent: Mutex<HashMap<JobKey, LeftUnwritten>>,
    /// The due watermark as last read or moved (it only moves forward); `i64::MIN` unknown.
    watermark: AtomicI64,
    /// When the watermark was last read for a view (epoch ms).
    read_at: AtomicI64,
}

impl Default for UnwrittenFirings {
    fn default() -> Self {
        UnwrittenFirings {
            fired: Mutex::default(),
            sent: Mutex::default(),
            watermark: AtomicI64::new(i64::MIN),
            read_at: AtomicI64::new(0),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn job_key(job: &Job) -> JobKey {
    (job.tenant.clone(), job.id.clone())
}

impl UnwrittenFirings {
    /// Notes the watermark read or moved to `minute`.
    pub(super) fn note_watermark(&self, minute: i64) {
        self.watermark.fetch_max(minute, Ordering::Relaxed);
        lock(&self.sent).retain(|_, left| left.minute >= minute);
    }

    /// The watermark as last seen, if seen.
    fn watermark(&self) -> Option<i64> {
        Some(self.watermark.load(Ordering::Relaxed)).filter(|&m| m != i64::MIN)
    }

    /// How many jobs of the due bucket `minute` this process knows sent.
    fn sent_in(&self, minute: i64) -> usize {
        lock(&self.sent).values().filter(|left| left.minute == minute).count()
    }

    /// Whether the watermark, as last seen, has passed the due bucket of the job item `item`.
    fn passed(&self, item: &Item) -> bool {
        due_minute_of(item).zip(self.watermark()).is_some_and(|(m, w)| m < w)
    }

    /// Whether `job` (as stored) is one this process knows sent, unchanged since.
    pub(super) fn known_sent(&self, job: &Job) -> bool {
        lock(&self.sent)
            .get(&job_key(job))
            .is_some_and(|left| left.mark == mark_of(job))
    }

    /// Remembers `job` (in its due bucket `minute`) as fired unwritten, or as sent.
    fn remember(&self, job: &Job, minute: i64, sent: bool) {
        let left = LeftUnwritten {
            mark: mark_of(job),
            minute,
        };
        let mut map = match sent {
            true => lock(&self.sent),
            false => lock(&self.fired),
        };
        if map.len() >= MAX_REMEMBERED {
            map.clear();
        }
        map.insert(job_key(job), left);
    }

    /// Marks sent the firings of `firings` this process left unwritten.
    pub(super) fn mark_sent(&self, firings: &[Firing]) {
        let mut fired = lock(&self.fired);
        let mut sent = lock(&self.sent);
        for f in firings {
            let k = (f.tenant.clone(), f.job_id.clone());
            if let Some(left) = fired.remove(&k) {
                if sent.len() >= MAX_REMEMBERED {
                    sent.clear();
                }
                sent.insert(k, left);
            }
        }
    }
}

/// Whether `firing` may be a plain one-shot firing (the job decides: [`can_leave_unwritten`]).
fn looks_plain(firing: &Firing) -> bool {
    firing.state == JobState::Completed
        && firing.next_fire_at.is_none()
        && firing.runs.len() == 1
        && firing.cancel.is_empty()
        && firing.skipped.is_empty()
}

/// The minute of the due bucket `item` (a job's) is filed in, if it is filed.
fn due_minute_of(item: &Item) -> Option<i64> {
    minute_of_due_pk(&Reader::new(item).s(GSI1_PK).ok()?)
}

/// The key of the run of `job`'s one-shot occurrence, if `job` is a one-shot.
fn occurrence_key(job: &Job) -> Option<Item> {
    let run = pending_run(job)?;
    run_key(&job.tenant, &run.run_id)
}

/// Whether `job` (as stored) may stand for a firing left unwritten: an ACTIVE one-shot,
/// filed due, no further ahead than a sweep reads.
fn may_be_unwritten(job: &Job, now_ms: i64) -> bool {
    matches!(job.spec.schedule, Schedule::At(_))
        && job.state == JobState::Active
        && job
            .next_fire_at
            .is_some_and(|t| ms(t) <= now_ms + (MAX_DUE_AHEAD_MINUTES + 10) * 60_000)
}

impl DynamoStore {
    fn unwritten(&self) -> Option<&UnwrittenFirings> {
        self.unwritten.as_deref()
    }

    /// The firings of `firings` left unwritten, answered (by index): plain one-shot firings
    /// whose job still applies. A firing whose occurrence's run exists is answered as a
    /// conflict (fired already), one whose job is gone as not found; the others are the
    /// caller's to write.
    pub(super) async fn fire_unwritten(
        &self,
        firings: &[Firing],
    ) -> Result<Vec<(usize, Result<Vec<sked_core::run::Run>, StoreError>)>, StoreError> {
        let Some(unwritten) = self.unwritten() else {
            return Ok(Vec::new());
        };
        let plain: Vec<usize> = (0..firings.len()).filter(|&i| looks_plain(&firings[i])).collect();
        if plain.is_empty() {
            return Ok(Vec::new());
        }
        let mut keys = Vec::with_capacity(plain.len() * 2);
        for &i in &plain {
            let f = &firings[i];
            keys.push(self.job_key(f.tenant.as_str(), f.job_id.as_str()));
            keys.extend(run_key(&f.tenant, &f.runs[0].run_id));
        }
        let items = self.batch_get(dedup(keys)).await?;
        let mut jobs: HashMap<JobKey, &Item> = HashMap::new();
        let mut runs: HashSet<(String, String)> = HashSet::new();
        for item in &items {
            match key_of(item) {
                Some(_) if is_job_item(item) => {
                    let job = job_from_item(item)?;
                    jobs.insert(job_key(&job), item);
                }
                Some(k) => {
                    runs.insert(k);
                }
                None => {}
            }
        }
        let mut answers = Vec::new();
        for i in plain {
            let f = &firings[i];
            let Some(item) = jobs.get(&(f.tenant.clone(), f.job_id.clone())) else {
                answers.push((i, Err(StoreError::NotFound)));
                continue;
            };
            let job = job_from_item(item)?;
            let minute = due_minute_of(item);
            let run_exists = run_key(&f.tenant, &f.runs[0].run_id)
                .and_then(|k| key_of(&k))
                .is_some_and(|k| runs.contains(&k));
            if run_exists || unwritten.passed(item) || unwritten.known_sent(&job) {
                // Fired already: sent, as far as the watermark goes.
                if let Some(minute) = minute {
                    unwritten.remember(&job, minute, true);
                }
                answers.push((i, Err(conflict(format!("job {} moved on", f.job_id)))));
                continue;
            }
            if !f.still_applies_to(&job) {
                answers.push((i, Err(conflict(format!("job {} moved on", f.job_id)))));
                continue;
            }
            let counts = self.tenant_limits(&f.tenant).await?.counting;
            let (Some(minute), false, true) = (minute, counts, can_leave_unwritten(&job, f)) else {
                continue;
            };
            let Some(run) = pending_run(&job) else {
                continue;
            };
            unwritten.remember(&job, minute, false);
            answers.push((i, Ok(vec![run])));
        }
        Ok(answers)
    }

    /// Marks sent what `firings` left unwritten (`JobStore::firings_sent`).
    pub(super) fn mark_sent(&self, firings: &[Firing]) {
        if let Some(unwritten) = self.unwritten() {
            unwritten.mark_sent(firings);
        }
    }

    /// Notes the due watermark read or moved.
    pub(super) fn note_watermark(&self, minute: i64) {
        if let Some(unwritten) = self.unwritten() {
            unwritten.note_watermark(minute);
        }
    }

    /// How many jobs of the due bucket `minute` this process knows sent (a due read of the
    /// minute passes them).
    pub(super) fn sent_in(&self, minute: i64) -> usize {
        self.unwritten().map_or(0, |u| u.sent_in(minute))
    }

    /// Whether the due item `item` is a job this process knows sent (left out of due reads;
    /// its bucket may be passed).
    pub(super) fn due_item_sent(&self, item: &Item) -> bool {
        self.unwritten()
            .is_some_and(|u| job_from_item(item).is_ok_and(|job| u.known_sent(&job)))
    }

    /// The jobs of `items` (job items) as reads show them: a one-shot whose unwritten firing
    /// is known sent, COMPLETED ([`job_after`]).
    pub(super) async fn jobs_shown(&self, items: &[Item]) -> Result<Vec<Job>, StoreError> {
        let mut jobs: Vec<Job> = items.iter().map(job_from_item).collect::<Result<_, _>>()?;
        let Some(unwritten) = self.unwritten() else {
            return Ok(jobs);
        };
        let now_ms = ms(self.now());
        let candidates: Vec<usize> = (0..jobs.len())
            .filter(|&i| may_be_unwritten(&jobs[i], now_ms))
            .collect();
        if candidates.is_empty() {
            return Ok(jobs);
        }
        self.fresh_watermark().await?;
        let (mut sent, unknown): (Vec<usize>, Vec<usize>) = candidates
            .into_iter()
            .partition(|&i| unwritten.passed(&items[i]) || unwritten.known_sent(&jobs[i]));
        // The others are sent if their occurrence's run item exists.
        let keys: Vec<Item> = unknown.iter().filter_map(|&i| occurrence_key(&jobs[i])).collect();
        if !keys.is_empty() {
            let found: HashSet<(String, String)> =
                self.batch_get(dedup(keys)).await?.iter().filter_map(key_of).collect();
            sent.extend(unknown.into_iter().filter(|&i| {
                occurrence_key(&jobs[i])
                    .and_then(|k| key_of(&k))
                    .is_some_and(|k| found.contains(&k))
            }));
        }
        for i in sent {
            jobs[i] = job_after(&jobs[i]);
        }
        Ok(jobs)
    }

    /// Whether `job` (its `item`) stands for a firing left unwritten that this process sent,
    /// or whose due bucket the watermark (as last read, at most [`WATERMARK_READ_EVERY_MS`]
    /// ago) has passed.
    async fn known_sent_or_passed(&self, job: &Job, item: &Item) -> Result<bool, StoreError> {
        let Some(unwritten) = self.unwritten() else {
            return Ok(false);
        };
        if !may_be_unwritten(job, ms(self.now())) {
            return Ok(false);
        }
        if unwritten.known_sent(job) {
            return Ok(true);
        }
        self.fresh_watermark().await?;
        Ok(unwritten.passed(item))
    }

    /// Reads the due watermark if this process last saw it over [`WATERMARK_READ_EVERY_MS`]
    /// ago (or never).
    async fn fresh_watermark(&self) -> Result<(), StoreError> {
        let Some(unwritten) = self.unwritten() else {
            return Ok(());
        };
        let now_ms = ms(self.now());
        if unwritten.watermark().is_none()
            || now_ms - unwritten.read_at.load(Ordering::Relaxed) > WATERMARK_READ_EVERY_MS
        {
            self.watermark().await?;
            unwritten.read_at.store(now_ms, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The run `run_id` shows while no item holds it: the run of its job's one-shot firing
    /// left unwritten and known sent — or, for a claim (`claiming`: its message proves the
    /// firing), the run the job still due has ([`due_run`]). Of item version [`ABSENT_RV`].
    pub(super) async fn shown_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        claiming: bool,
    ) -> Result<Option<StoredRun>, StoreError> {
        if self.unwritten().is_none() {
            return Ok(None);
        }
        let Some((job_id, _)) = run_id.parts() else {
            return Ok(None);
        };
        let Some(item) = self.job_item_of(tenant, &job_id).await? else {
            return Ok(None);
        };
        let job = job_from_item(&item)?;
        // No item holds the run: the job is sent only if this process sent it or the
        // watermark passed it. A claim needs no more than the job still due at the run's time.
        let run = match claiming {
            true => due_run(&job),
            false if self.known_sent_or_passed(&job, &item).await? => pending_run(&job),
            false => None,
        };
        Ok(run.filter(|run| &run.run_id == run_id).map(|run| StoredRun {
            rv: ABSENT_RV,
            ends_its_job: true,
            keyed: true,
            ..StoredRun::new(run)
        }))
    }

    /// A transaction's check that no item holds the run of key `run`.
    pub(super) fn absent_check(&self, run: Item) -> Result<TransactWriteItem, StoreError> {
        let check = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(run))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(crate::error::build_error)?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// The item of `tenant`'s job `job_id`, read strongly consistent.
    async fn job_item_of(&self, tenant: &TenantId, job_id: &JobId) -> Result<Option<Item>, StoreError> {
        self.get_item(self.job_key(tenant.as_str(), job_id.as_str())).await
    }
    /// The active runs of `job_id` read by key (`codec::KEYED`: no `active` entry): those of
    /// its one-shot time — shown, if its firing left unwritten is known sent and no item
    /// holds it — and of the times changes of it settled ([`SETTLED`]).
    pub(super) async fn keyed_runs_of(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<StoredRun>, StoreError> {
        if self.unwritten().is_none() {
            return Ok(Vec::new());
        }
        let Some(item) = self.job_item_of(tenant, job_id).await? else {
            return Ok(Vec::new());
        };
        let job = job_from_item(&item)?;
        let mut runs: Vec<StoredRun> = Vec::new();
        let mut keys: Vec<Item> = Vec::new();
        if let Some(run) = pending_run(&job) {
            // Its own time: stored, or shown.
            runs.extend(self.load_run(tenant, &run.run_id).await?);
        }
        let own = pending_run(&job).map(|run| ms(run.scheduled_for));
        for at in settled_times(&item).into_iter().filter(|&at| Some(at) != own) {
            keys.push(key(job_pk(tenant.as_str(), job_id.as_str()), run_sk(at)));
        }
        if !keys.is_empty() {
            for item in self.batch_get(dedup(keys)).await? {
                runs.push(super::codec::run_from_item(&item)?);
            }
        }
        runs.retain(|stored| stored.keyed && !stored.run.state.is_terminal());
        Ok(runs)
    }

    /// The run of `job_id`'s one-shot firing left unwritten and known sent, while no item
    /// holds it (for its job's run listing, `list_runs` of one job).
    pub(super) async fn unwritten_run_of(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
    ) -> Result<Option<StoredRun>, StoreError> {
        if self.unwritten().is_none() {
            return Ok(None);
        }
        let Some(item) = self.job_item_of(tenant, job_id).await? else {
            return Ok(None);
        };
        let job = job_from_item(&item)?;
        let Some(run) = pending_run(&job).filter(|_| may_be_unwritten(&job, ms(self.now()))) else {
            return Ok(None);
        };
        Ok(self
            .load_run(tenant, &run.run_id)
            .await?
            .filter(|stored| stored.rv == ABSENT_RV))
    }

    /// What a change of `tenant`'s job `job_id` (read at `expected_version`, with
    /// `expected` due) must carry where firings may be left unwritten:
    /// - a job read as fired whose firing was left unwritten and is known sent: its run is
    ///   put first (on condition no item holds it), so the change, which files the job again,
    ///   loses nothing; the change names the stored `next_fire_at` (its caller read none) and
    ///   marks the job [`SETTLED`] (a claim putting the run meanwhile keeps it:
    ///   `super::claim_unwritten`);
    /// - a job read as not fired that may stand for a firing left unwritten: the change is
    ///   written only while no item holds its run (a claim may be putting it).
    pub(super) async fn prepare_change(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        expected_version: u64,
        expected: Option<Timestamp>,
    ) -> Result<Change, StoreError> {
        let mut unchanged = Change {
            expected_next_fire_at: expected,
            settled: Vec::new(),
            run_absent: None,
        };
        if self.unwritten().is_none() {
            return Ok(unchanged);
        }
        let Some(item) = self.job_item_of(tenant, job_id).await? else {
            return Ok(unchanged);
        };
        unchanged.settled = settled_times(&item);
        let stored = job_from_item(&item)?;
        if stored.version != expected_version || !may_be_unwritten(&stored, ms(self.now())) {
            return Ok(unchanged);
        }
        if expected.is_some() {
            return Ok(Change {
                run_absent: occurrence_key(&stored),
                ..unchanged
            });
        }
        let [shown] = self
            .jobs_shown(std::slice::from_ref(&item))
            .await?
            .try_into()
            .map_err(|_| StoreError::Other("one job read, another number shown".into()))?;
        if shown.state == stored.state {
            return Ok(unchanged);
        }
        if let Some(run) = self.unwritten_run_of(tenant, job_id).await? {
            // Refused: another writer put it first.
            self.put_run(&run).await?;
        }
        let mut settled = unchanged.settled;
        settled.extend(pending_run(&stored).map(|run| ms(run.scheduled_for)));
        Ok(Change {
            expected_next_fire_at: stored.next_fire_at,
            settled,
            run_absent: None,
        })
    }
}

/// What a change of a job carries where firings may be left unwritten
/// ([`DynamoStore::prepare_change`]).
pub(super) struct Change {
    /// The `next_fire_at` the change's condition names.
    pub expected_next_fire_at: Option<Timestamp>,
    /// The nominal times (ms) of the runs whose firings changes of the job settled, this one
    /// included: the job's item carries them on as [`SETTLED`].
    pub settled: Vec<i64>,
    /// The key of a run no item may hold for the change to be written.
    pub run_absent: Option<Item>,
}

/// The primary key (`pk`, `sk`) of `item`.
fn key_of(item: &Item) -> Option<(String, String)> {
    let r = Reader::new(item);
    Some((r.s(PK).ok()?, r.s(SK).ok()?))
}

/// `keys` without repeats (a `BatchGetItem` refuses a key named twice).
pub(super) fn dedup(keys: Vec<Item>) -> Vec<Item> {
    let mut seen = HashSet::new();
    keys.into_iter().filter(|k| seen.insert(key_of(k))).collect()
}
