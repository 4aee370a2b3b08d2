//! The local deployment's store and dispatch queue, in one SQLite file.
//!
//! [`SqliteDb`] opens the file (WAL, `synchronous = NORMAL`, busy timeout, foreign keys,
//! migrations by `PRAGMA user_version`); [`SqliteStore`] implements
//! [`sked_core::ports::JobStore`] and [`SqliteQueue`] implements
//! [`sked_core::ports::DispatchQueue`] over the same file; [`SqliteWork`] implements
//! [`sked_core::ports::WorkPort`] with each step of a run's hand-over (a sweep's runs and
//! their messages, a receive and its claims, a heartbeat, a completion and its ack) in one
//! transaction over both tables. So `sked server` and any number
//! of `sked worker` processes share one database. Everything that must hold across
//! processes is a condition checked inside a `BEGIN IMMEDIATE` transaction — never an
//! in-process lock.
//!
//! Module map: `db` (connections, transactions), [`schema`] (migrations), `codec`
//! (rows ↔ domain values), [`store`], [`queue`], [`work`], [`keys`], `quotas` (the store's
//! [`sked_core::ports::QuotaStore`] and its checks), `alerts` (runs' due alerts and
//! tenants' webhook secrets), [`error`].
//!
//! # Table layout (schema version 4)
//!
//! All instants are INTEGER milliseconds since the Unix epoch (UTC); enums are stored by
//! their wire names. Tables are `STRICT`. `PRAGMA application_id` is `0x736B6564`
//! ("sked").
//!
//! `jobs` — one row per (tenant, job id), any state (DELETED rows are kept for history).
//!
//! | column | type | meaning |
//! |---|---|---|
//! | tenant, id | TEXT | primary key |
//! | state | TEXT | `ACTIVE` / `PAUSED` / `COMPLETED` / `DELETED` |
//! | next_fire_at | INTEGER NULL | next nominal fire time |
//! | version | INTEGER | optimistic-lock version |
//! | created_at, updated_at | INTEGER | |
//! | labels | TEXT | JSON object, a copy of `spec.labels` for `json_each` filters |
//! | spec | TEXT | the normalised [`sked_core::JobSpec`] as JSON |
//!
//! Index `jobs_due (next_fire_at, tenant, id) WHERE state = 'ACTIVE'` serves `due_jobs`
//! and `next_due_at`.
//!
//! `runs` — one row per (tenant, run id).
//!
//! | column | type | meaning |
//! |---|---|---|
//! | tenant, run_id | TEXT | primary key |
//! | job_id | TEXT | |
//! | scheduled_for | INTEGER | nominal time |
//! | trigger_kind | TEXT | `schedule` / `manual` / `handler` |
//! | state | TEXT | `PENDING` / `RUNNING` / `SUCCEEDED` / `FAILED` / `TIMED_OUT` / `CANCELLED` |
//! | priority | INTEGER | 0..=9 |
//! | not_before | INTEGER | earliest claim |
//! | max_attempts | INTEGER | |
//! | created_at | INTEGER | |
//! | started_at, finished_at | INTEGER NULL | |
//! | lease_owner, lease_token, lease_expires | TEXT / INTEGER / INTEGER, all NULL or all set | the live lease |
//! | cancel_requested | INTEGER | 0/1 |
//! | reason | TEXT NULL | |
//! | attempts | TEXT | JSON array of `{attempt, worker, started_at, finished_at?, outcome?, exit_code?, http_status?, error?, log_bytes, log_truncated}` (instants in ms, outcome by wire name) |
//! | last_token | INTEGER | highest fencing token handed out for this run |
//! | concurrency_key, concurrency_limit | TEXT / INTEGER NULL (schema version 5) | the concurrency key copied from the job |
//! | alert | TEXT NULL (schema version 8) | JSON of the run's [`sked_core::alert::Alert`] (its job's `notify`, the delivery tries) |
//! | alert_due | INTEGER NULL (schema version 8) | when the alert's next try is due; set only while it is pending |
//!
//! Indexes: `runs_by_job (tenant, job_id, scheduled_for, run_id)` and
//! `runs_by_time (tenant, scheduled_for, run_id)` for history pages (walked backwards);
//! `runs_active (tenant, job_id, scheduled_for, run_id) WHERE state IN ('PENDING','RUNNING')`
//! for overlap checks; `runs_leases (lease_expires) WHERE state = 'RUNNING'` for the
//! reaper; `runs_pending (not_before) WHERE state = 'PENDING'` for the repair pass;
//! `runs_alerts_due (alert_due) WHERE alert_due IS NOT NULL` for the notifier.
//!
//! `webhook_secrets` (schema version 8) — tenant TEXT primary key; secret TEXT (kept: alerts
//! are signed with it); created_at INTEGER.
//!
//! `idempotency_keys` — (tenant, key) primary key; fingerprint TEXT; job_ids TEXT (JSON
//! array of job ids); created_at INTEGER.
//!
//! `api_keys` (schema version 2) — one row per API key: id TEXT primary key; hash TEXT UNIQUE
//! (SHA-256 of the secret, which is never stored); tenant, role, name TEXT; created_at
//! INTEGER; revoked_at INTEGER NULL. Index `api_keys_by_tenant (tenant, created_at, id)`.
//!
//! `tenant_quotas` (schema version 3) — one row per tenant with a quota: tenant TEXT primary
//! key; max_active_jobs, max_concurrent_runs INTEGER NULL; rate_per_second REAL NULL and
//! rate_burst INTEGER NULL (both set or both NULL). NULL is no limit.
//!
//! `tenant_usage` (schema version 3) — tenant TEXT primary key; active_jobs INTEGER: the
//! tenant's jobs in state ACTIVE or PAUSED, kept by the triggers `jobs_usage_insert`,
//! `jobs_usage_update` (of `state`) and `jobs_usage_delete`. Runs holding a slot of
//! `max_concurrent_runs` are counted at each claim through `runs_leases` instead: a lease
//! that expires frees its slot without any write.
//!
//! `dispatch` — the queue, one row per (tenant, run_id) (UNIQUE).
//!
//! | column | type | meaning |
//! |---|---|---|
//! | seq | INTEGER PRIMARY KEY AUTOINCREMENT | enqueue order; never reused |
//! | tenant, run_id | TEXT | the run |
//! | priority | INTEGER | 0..=9 |
//! | not_before | INTEGER | not delivered before |
//! | rank | INTEGER | `dispatch_rank(priority, not_before)`: serving order |
//! | visible_at | INTEGER | receivable from (= not_before, or the lease end once received) |
//! | receipt | TEXT NULL | `"<seq>.<receive_count>"` of the current delivery |
//! | receive_count | INTEGER | deliveries so far |
//!
//! Indexes: `dispatch_receive (rank, seq, visible_at)` (receive walks it in order and
//! filters visibility in the index); `dispatch_visible (visible_at)` (is anything
//! visible, and when is the next); `dispatch_by_tenant (tenant, rank, seq, visible_at)`
//! (schema version 4: which tenants have messages, and each one's in serving order).
//!
//! `dispatch_turns` (schema version 4) — tenant TEXT primary key; turn INTEGER: the number of
//! the last turn in which a message of the tenant was served ([`sked_core::fairness`]).
//! Written only while several tenants have messages queued.

mod alerts;
mod codec;
mod db;
mod dependencies;
pub mod error;
pub mod keys;
mod ledger;
pub mod queue;
mod quotas;
pub mod schema;
pub mod store;
pub mod work;

pub use db::{SqliteDb, SqliteOptions};
pub use error::OpenError;
pub use keys::SqliteKeys;
pub use queue::SqliteQueue;
pub use store::SqliteStore;
pub use work::SqliteWork;
