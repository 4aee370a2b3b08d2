//! The DynamoDB store: one table holds every tenant's jobs, runs and idempotency keys.
//!
//! Module map: [`store`] ([`DynamoStore`] and its `JobStore` impl, with the methods short
//! enough to read there), `plumbing` (the DynamoDB requests the rest is built from), `runs` (a
//! run's read–decide–put loop), `claim` (claims), `firing` (the due index, its watermark, and
//! firings), `fire_together` (firings written in shared transactions), `create_fired` (a job
//! created due at once, written with its first firing), `listing` (job and run listings),
//! [`codec`] (items ↔ jobs and runs), [`keys`],
//! [`quotas`], [`slots`], `dependencies` (the `after` schedule), `ledger` (skip records), `live`
//! (the running runs' index the reaper reads), `lone` (runs whose end reads no edges),
//! `alerts` (runs' due alerts, webhook secrets), [`sweep_lease`], `written_runs` (the runs this
//! process wrote last, a read–decide–put's first guess), `undo_create` (what a refused batch
//! create wrote before it was refused, undone), `unwritten` (one-shots' firings left
//! unwritten, behind `AwsConfig::unwritten_one_shots`; `claim_unwritten`, their
//! runs' claims), [`layout`] (how the table keys jobs, recorded in it), [`migrate_job_keys`]
//! (a table's jobs moved from per-job keys to tenant shards).
//!
//! # Table layout
//!
//! Primary key: `pk` (S, partition), `sk` (S, sort). Billing on demand. TTL attribute `ttl`
//! (epoch seconds). Times are milliseconds since the epoch; in keys they are zero-padded to 15
//! digits so text order is time order.
//!
//! | item | `pk` | `sk` | other attributes |
//! |---|---|---|---|
//! | job | `T#<tenant>#J#<job>` | `JOB` | `spec` (JSON), `state`, `next_fire_at`, `version`, `labels` (map), times, `lone` while no job's `after` names it (`lone`) |
//! | job, keyed by tenant shards (`JobKeys::TenantShards`) | `T#<tenant>#JOBS#<shard>` (`keys::JOB_SHARDS`, FNV-1a of `tenant#job`) | `<job>` | the same |
//! | run | `T#<tenant>#J#<job>` | `RUN#<scheduled_for>` | `run_state` (`state` too once ended; items written before `run_state` have `state` only), `not_before`, `priority`, `attempts` (JSON), `lease_owner`/`lease_token`/`lease_expires`, `cancel_requested`, `reason`, `last_token`, `rv`, `ttl` once terminal, `logs` (attempt → a small finished log's JSON lines, [`crate::logs::FoldedLogs`]), `lone` if fired while its job was (its end reads no edges) |
//! | idempotency key | `T#<tenant>#IDEM#<key>` | `IDEM` | `fingerprint`, `job_ids` (list), `ttl` |
//! | due watermark | `SWEEP` | `WATERMARK` | `minute`: due buckets before it are empty |
//! | layout marker | `SWEEP` | `LAYOUT` | `job_keys`: how the table keys jobs, recorded by its first process ([`layout`]) |
//! | sweeper lease | `SWEEP` | `LEASE#<n>` | `owner`, `expires_at`, `ttl` ([`sweep_lease`]) |
//! | tenant's quota | `T#<tenant>#TENANT` | `QUOTA` | `quota` (JSON), `active_jobs` once counted ([`quotas`]) |
//! | concurrency slot | `T#<tenant>#TENANT` | `SLOT#<i>` | `slot_run`, `slot_token` ([`quotas`]) |
//! | dependency edge | `T#<tenant>#J#<upstream>` | `AFTER#<downstream>` | `downstream` ([`dependencies`]) |
//! | waiting occurrence | `T#<tenant>#J#<downstream>` | `WAIT#<T>` | `deadline`, `ttl` ([`dependencies`]) |
//! | skip record (ledger) | `T#<tenant>#J#<job>` | `SKIP#<from>` | `to`, `count`, `reason`, `ttl` ([`ledger`]) |
//! | webhook secret | `T#<tenant>#TENANT` | `WEBHOOK_SECRET` | `secret`, `created_at` ([`alerts`]) |
//! | small finished log | `T#<tenant>#LOG#<run>` | `ATTEMPT#<n>` | `lines`, `bytes`, `truncated`, `ttl` ([`crate::logs`]) |
//!
//! How a table keys its jobs is fixed at its first use ([`layout`]): per job (the default)
//! or by tenant shards, where a tenant's jobs are listed by the table's own keys (one
//! consistent `Query` per shard, merged by id) and have no `list` entry — one index write
//! less per job created. Either way a job's runs, edges, waits and skip records stay under
//! `T#<tenant>#J#<job>`, and every read of a job by its id goes through one key
//! (`DynamoStore::job_key`).
//!
//! A job and its runs share a partition (keyed per job): a job's history is one `Query` on `pk` with
//! `begins_with(sk, "RUN#")`, newest first by reading backwards. A run's key follows from its
//! id (`<job>@<nominal time>`), so a second sweep of the same occurrence names the same item.
//!
//! # Indexes (both sparse: an item carries an index's keys only while it belongs there)
//!
//! **`sched`** (`gsi1pk`, `gsi1sk`; projection ALL) — what the sweeper and reaper scan:
//!
//! | holds | `gsi1pk` | `gsi1sk` | while |
//! |---|---|---|---|
//! | due jobs | `DUE#<yyyyMMddHHmm>#<shard>` | `<next_fire_at>#<tenant>#<job>` | job ACTIVE with a `next_fire_at` |
//! | pending runs written before 2026-12-04 (evening; still read, never written) | `PENDING#<shard>` | `<not_before>#<scheduled_for>#<tenant>#<run>` | run PENDING |
//! | waiting `after` occurrences | `WAITING#<shard>` | `<deadline>#<tenant>#<job>#<T>` | until decided |
//! | ended runs with a pending alert | `ALERT#<shard>` | `<alert_due>#<tenant>#<run>` | alert pending ([`alerts`]) |
//!
//! The due key is **time-bucketed and sharded**: one minute's due jobs spread over `shards`
//! partitions (shard = FNV-1a of `tenant#job` mod shards), so a busy minute stays under a
//! partition's write limit. A job is filed under the minute **10 minutes before** its
//! `next_fire_at` (`keys::DUE_FILED_AHEAD_MS`, the sweeper's default look-ahead: the minute
//! it must be fired in), or under the minute it is written if that is later (a job due sooner,
//! or overdue — created in the past, resumed — is filed "now"); its sort key keeps the real due
//! time. So no write lands in a minute older than its writer's clock, the **watermark** can
//! move forward safely, and a sweep reads the buckets up to about now rather than up to its
//! horizon: `due_jobs` queries every bucket from the watermark to `max(now + 2 minutes,
//! horizon − 10 minutes)` (a minute's shards in parallel, oldest minute first, stopping once a
//! full batch is found; at most 24 hours past now), then moves the watermark to the first
//! bucket still holding a due job, but never closer than 2 minutes to now (clock skew between
//! writers and the sweeper, and index propagation, must fit in that margin). A bucket holds
//! jobs due up to 10 minutes past its minute: one whose jobs may not all be due by the horizon
//! (a sweeper looking less than 10 minutes ahead) is passed only after a query finds it
//! empty. (Buckets written before 2026-12-03 hold jobs under their own minute: a subset of
//! the rule, read in time.) `next_due_at` reads the buckets up to now, then later ones and at
//! most 15 minutes past now; a job due later is answered as `None` (callers sleep their
//! maximum, 60 s, and look again).
//!
//! **`live`** (`gsi3pk`, `gsi3sk`; keys only) — active runs, for the reaper and the repair
//! pass ([`live`]):
//!
//! | holds | `gsi3pk` | `gsi3sk` | while |
//! |---|---|---|---|
//! | pending runs | `RUNNING#<shard>` | its `not_before` | run PENDING |
//! | running runs | `RUNNING#<shard>` | its `not_before` while its lease expires less than 5 minutes after it, then the start of the 5-minute step its lease expires in ([`keys::live_sk`]) | run RUNNING |
//!
//! A run's entry is written by its firing and left where it is by a claim on time (no index
//! write); a heartbeat extends the lease by seconds and leaves it too, until the expiry
//! crosses into the next step. The reaper reads the entries filed by now and decides on each
//! run's item; the repair pass reads those filed by its time. A run fired unwritten
//! (`unwritten`; `codec::KEYED`) has no entry: its queue message alone carries it.
//!
//! **`list`** (`gsi2pk`, `gsi2sk`; projection INCLUDE `state`, `labels`) — listings:
//!
//! | holds | `gsi2pk` | `gsi2sk` |
//! |---|---|---|
//! | a tenant's jobs (keyed per job) | `T#<tenant>#JOBS` | `<job id>` |
//! | a tenant's runs | `T#<tenant>#RUNS#<shard>` | `<scheduled_for>#<run id>` |
//!
//! Listings filter on the projected attributes in the index, then read the page's full items
//! with a consistent `BatchGetItem`; heartbeats and other writes that change neither key nor
//! projected attribute cost the index nothing. A job's `state` is projected; a run keeps its
//! state in `run_state` and carries `state` only once ended (`codec::LISTED_STATE`), so its
//! claim costs the index nothing either. A run listing of one job reads the job's
//! partition of the table instead (consistent). Runs of a tenant are sharded by run id and the
//! shards merged, so one tenant's run inserts do not all hit one index partition.
//!
//! # Writes
//!
//! - A transaction of one item is sent as that item's own `PutItem`/`UpdateItem`/`DeleteItem`
//!   (same condition): a transaction bills each item twice.
//! - Jobs: `create_jobs` is one `TransactWriteItems` (each put conditional on
//!   `attribute_not_exists(pk) OR state = DELETED`, the idempotency key on
//!   `attribute_not_exists`). A batch of more than 100 writes is split into transactions, and
//!   what earlier ones wrote is undone if a later one is refused (`undo_create`: its jobs
//!   left DELETED, its idempotency key removed, the active-jobs count given back) —
//!   all-or-nothing for the caller, but a reader may glimpse the first chunk meanwhile. `update_job` is a put conditional on
//!   `version`. For a tenant with a quota, creates, updates, firings and claims add the quota's
//!   items to their transactions ([`quotas`]).
//! - `fire` is one `TransactWriteItems` per firing — or one for many firings of a tenant that
//!   cancel nothing (`fire_together`; a group refused is written again one firing at a
//!   time): the job update conditional on `version` and `next_fire_at` (it also moves the due keys), the cancelled runs' puts conditional on their
//!   `rv`, and the new runs' puts conditional on `attribute_not_exists`. Existing runs are
//!   left out beforehand (a consistent `BatchGetItem`); a run created meanwhile cancels the
//!   transaction with `ConditionalCheckFailed` at its index, and the firing is retried without
//!   it. A firing of more than 99 writes (its at most 96 new runs with the runs it cancels) writes the
//!   excess runs first in transactions that each check the job's condition, then the last one
//!   with the job update.
//! - Runs: read (consistent), changed by sked-core's lifecycle functions, put back on
//!   condition `rv = <read rv>` (and `rv` + 1). Fencing tokens grow per run (`last_token`).
//! - Terminal runs get `ttl` = finished + `run_retention`; idempotency keys `ttl` = created +
//!   `idempotency_retention`.
//!
//! Cursors are opaque (hex) encodings of the last item's listing position (job id; or
//! scheduled time and run id), from which each shard's query resumes.

mod alerts;
mod claim;
mod claim_unwritten;
pub mod codec;
mod create_fired;
mod dependencies;
mod fire_together;
mod firing;
mod item_json;
pub mod keys;
pub mod layout;
mod ledger;
mod listing;
mod live;
mod lone;
pub mod migrate_job_keys;
mod plumbing;
pub mod quotas;
mod runs;
pub mod slots;
pub mod store;
pub mod sweep_lease;
mod undo_create;
mod unwritten;
mod written_runs;

pub use store::DynamoStore;
