//! Contract suites: the behaviour every adapter of a port must show, written once.
//!
//! - [`store`]: one `pub async fn` per case against `Arc<dyn JobStore>`; run them all with
//!   [`store_contract!`](crate::store_contract).
//! - [`queue`]: the same for `Arc<dyn DispatchQueue>` driven by a [`ManualClock`]; run them
//!   with [`queue_contract!`](crate::queue_contract).
//! - [`keys`]: the same for `Arc<dyn KeyStore>`; run them with
//!   [`keys_contract!`](crate::keys_contract).
//! - [`quotas`]: what a store that keeps quotas enforces in its own transactions, against the
//!   same store as `(Arc<dyn JobStore>, Arc<dyn QuotaStore>)`; run them with
//!   [`quota_contract!`](crate::quota_contract).
//! - [`concurrency`]: what a store decides in its claims for runs with a concurrency key,
//!   against `Arc<dyn JobStore>` on several threads; run them with
//!   [`concurrency_contract!`](crate::concurrency_contract).
//! - [`dependencies`]: what a store decides for `after` jobs in the transaction that ends an
//!   upstream run (on several threads); run them with
//!   [`dependency_contract!`](crate::dependency_contract).
//! - [`alerts`]: runs' failure alerts (due from the write that ends the run, saved on
//!   condition) and tenants' webhook secrets, against the same store as
//!   `(Arc<dyn JobStore>, Arc<dyn WebhookSecrets>)`; run them with
//!   [`alert_contract!`](crate::alert_contract).
//! - [`work`]: the same for a [`WorkPort`] over its store and queue on a [`ManualClock`],
//!   checked through the store and the queue; run them with
//!   [`work_contract!`](crate::work_contract).
//! - [`logs`]: the same for `Arc<dyn LogStore>` with a cap of [`logs::CAP`] bytes per
//!   attempt; run them with [`log_contract!`](crate::log_contract).
//! - [`claiming`]: claims as the cases make them (a batch's outcomes, racing claims).
//! - [`fixtures`]: the jobs, runs and instants the cases use (millisecond-exact, so every
//!   store can round-trip them).
//!
//! The macros expand to one `#[tokio::test]` per case inside a module named after the macro
//! (`store_contract`, `queue_contract`, …), so a failure names its case. They reach everything through `$crate::`,
//! so a user crate needs only `sked-testkit`, `sked-core` and `tokio` (with `macros` and `rt`).
//!
//! ```ignore
//! use std::sync::Arc;
//! use sked_core::ports::{DispatchQueue, JobStore};
//! use sked_testkit::{clock::ManualClock, memory::{MemQueue, MemStore}};
//!
//! sked_testkit::store_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);
//! sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move {
//!     Arc::new(MemQueue::new(clock)) as Arc<dyn DispatchQueue>
//! });
//! ```
//!
//! This module must not depend on any adapter: cases see only the port.
//!
//! [`ManualClock`]: crate::clock::ManualClock
//! [`WorkPort`]: sked_core::ports::WorkPort

pub mod alerts;
pub mod claiming;
pub mod concurrency;
pub mod dependencies;
pub mod fixtures;
pub mod keys;
pub mod logs;
pub mod queue;
pub mod quotas;
pub mod store;
pub mod work;

pub use fixtures::t0;

/// Expands to one `#[tokio::test]` per store contract case, in a module `store_contract`.
///
/// `$make` is evaluated in each test and called with no argument; it returns a future of a
/// fresh, empty store that coerces to `Arc<dyn JobStore>`:
/// `sked_testkit::store_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);`
#[macro_export]
macro_rules! store_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(store_contract, store, $make;
            create_jobs_inserts_all,
            create_jobs_is_all_or_nothing,
            create_jobs_conflicts_on_live_id,
            create_jobs_replaces_a_deleted_job,
            create_jobs_records_idempotency_key,
            create_jobs_failed_records_no_idempotency_key,
            create_jobs_reused_idempotency_key_conflicts,
            get_job_is_tenant_scoped,
            get_jobs_answers_each_like_get_job,
            update_job_compares_and_sets_version,
            update_job_unknown_is_not_found,
            update_job_conflicts_when_a_sweep_moved_next_fire_at,
            list_jobs_pages_with_cursors,
            list_jobs_filters_by_state,
            list_jobs_filters_by_labels,
            list_jobs_is_tenant_scoped,
            due_jobs_horizon_order_limit_across_tenants,
            due_jobs_only_active,
            next_due_at_is_earliest_active,
            fire_inserts_runs_and_advances_job,
            fire_twice_conflicts_and_creates_nothing,
            fire_conflicts_when_version_moved,
            fire_returns_only_inserted_runs,
            fire_cancels_listed_runs,
            fire_can_complete_the_job,
            fire_of_a_one_shot_reads_back_by_every_read,
            a_fired_one_shot_changed_before_its_claim_keeps_its_run,
            fire_applies_each_firing_on_its_own,
            insert_run_is_idempotent,
            insert_run_same_id_in_two_tenants,
            get_run_round_trips,
            list_runs_newest_first_with_cursors,
            list_runs_filters,
            active_runs_oldest_first,
            active_runs_answers_each_job_like_active_runs_of,
            claim_unknown_run_is_not_found,
            claim_before_not_before_is_not_yet,
            claim_answers_each_run_in_order,
            claim_without_read_jobs_answers_no_job,
            claim_reading_jobs_claims_or_holds_by_overlap_policy,
            claim_alone_waits_for_another_running_run_of_the_job,
            claim_alone_reading_jobs_holds_waits_or_claims,
            claim_starts_first_attempt,
            claim_while_leased_is_leased,
            claim_after_retry_starts_next_attempt,
            claim_after_lease_expiry_closes_lost_attempt,
            claim_last_attempt_lost_is_terminal_failed,
            claim_finished_run_is_terminal,
            claim_with_cancel_requested,
            heartbeat_extends_lease,
            heartbeat_reports_cancel_requested,
            heartbeat_fenced,
            complete_retry,
            complete_finish,
            complete_with_stale_token_is_fenced_and_changes_nothing,
            complete_only_if_expired_by,
            cancel_pending_run,
            cancel_running_run_requests_cancel,
            cancel_terminal_run_is_unchanged,
            cancel_unknown_run_is_not_found,
            expired_leases_across_tenants,
            stale_pending_oldest_first_across_tenants,
            defer_pending_moves_not_before_of_pending_runs_only,
            take_settings_reaches_unstarted_runs_only,
            claim_reading_jobs_holds_backfill_runs_that_take_turns,
            claim_reading_jobs_holds_runs_of_paused_jobs,
            claim_reading_jobs_holds_runs_of_deleted_jobs,
            claim_reading_jobs_holds_runs_at_times_the_timing_dropped,
            fire_writes_its_skip_records_and_a_window_reads_them_back,
        );
    };
}

/// Expands to one `#[tokio::test]` per queue contract case, in a module `queue_contract`.
///
/// `$make` is evaluated in each test and called with a fresh `Arc<ManualClock>` reading
/// [`t0`]; it returns a future of an empty queue timed by that clock, coercing to
/// `Arc<dyn DispatchQueue>`:
/// `sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move { Arc::new(MemQueue::new(clock)) as Arc<dyn DispatchQueue> });`
#[macro_export]
macro_rules! queue_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(queue_contract, queue, $make;
            receive_empty_with_zero_wait_returns_at_once,
            receive_respects_not_before,
            receive_orders_by_priority,
            receive_ages_old_low_priority_first,
            receive_equal_rank_in_enqueue_order,
            receive_respects_max,
            tenants_take_turns,
            a_tenant_whose_run_becomes_ready_goes_before_a_busy_tenant_goes_again,
            leased_message_is_invisible_until_visibility_ends,
            ack_removes_message,
            stale_receipts_are_refused,
            extend_keeps_message_invisible,
            enqueue_dedupes_by_run,
            reenqueue_takes_the_new_priority,
            reenqueue_of_leased_run_makes_receipt_stale,
            long_poll_wakes_on_enqueue,
            long_poll_wakes_when_clock_reaches_not_before,
            long_poll_times_out_empty,
        );
    };
}

/// Expands to one `#[tokio::test]` per work port contract case, in a module `work_contract`.
///
/// `$make` is evaluated in each test and called with a fresh `Arc<ManualClock>` reading
/// [`t0`]; it returns a future of [`WorkPorts`](work::WorkPorts): an empty store and queue
/// timed by that clock, the work port over them, and the clock itself:
///
/// ```ignore
/// sked_testkit::work_contract!(|clock: Arc<ManualClock>| async move {
///     let store: Arc<dyn JobStore> = Arc::new(MemStore::new());
///     let queue: Arc<dyn DispatchQueue> = Arc::new(MemQueue::new(clock.clone()));
///     let work = Arc::new(QueueThenStore::new(store.clone(), queue.clone(), clock.clone()));
///     WorkPorts { store, queue, work, clock }
/// });
/// ```
///
/// `work_contract!(some_module, $make)` puts the cases in `some_module` instead (for a second
/// shape of the port in one test crate).
#[macro_export]
macro_rules! work_contract {
    // A second shape in the same test crate needs a module name of its own.
    ($module:ident, $make:expr $(,)?) => {
        $crate::__contract_cases!($module, work, $make;
            fire_writes_runs_and_enqueues_exactly_the_created_ones,
            receive_claims_runs_with_their_jobs_and_holds_by_overlap_policy,
            receive_with_nothing_visible_answers_empty,
            a_stopped_receive_waits_no_more,
            a_run_received_twice_is_claimed_once,
            heartbeat_renews_the_lease_and_keeps_the_message_invisible,
            heartbeat_fenced_is_a_store_error,
            complete_finish_ends_the_run_and_removes_the_message,
            complete_retry_leaves_one_message_due_at_not_before,
            complete_fenced_changes_neither_run_nor_message,
        );
    };
    ($make:expr $(,)?) => {
        $crate::work_contract!(work_contract, $make);
    };
}

/// Expands to one `#[tokio::test]` per key store contract case, in a module `keys_contract`.
///
/// `$make` is called with no argument in each test and returns a future of a fresh, empty
/// store coercing to `Arc<dyn KeyStore>`.
#[macro_export]
macro_rules! keys_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(keys_contract, keys, $make;
            insert_key_reads_back_by_hash_and_id,
            insert_key_refuses_a_taken_id_or_hash,
            list_keys_per_tenant_oldest_first,
            revoke_key_marks_it_once,
        );
    };
}

/// Expands to one `#[tokio::test]` per quota contract case, in a module `quota_contract`.
///
/// `$make` is called with no argument in each test and returns a future of a fresh, empty
/// store as both ports, `(Arc<dyn JobStore>, Arc<dyn QuotaStore>)`.
#[macro_export]
macro_rules! quota_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(quota_contract, quotas, $make;
            put_quota_reads_back_and_replaces,
            create_jobs_past_max_active_jobs_writes_nothing,
            claims_past_max_concurrent_runs_answer_at_capacity,
            racing_claims_never_pass_max_concurrent_runs,
        );
    };
}

/// Expands to one `#[tokio::test]` per concurrency-key contract case, in a module
/// `concurrency_contract`, each on a runtime of four threads.
///
/// `$make` is called with no argument in each test and returns a future of a fresh, empty
/// store coercing to `Arc<dyn JobStore>`.
#[macro_export]
macro_rules! concurrency_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(concurrency_contract, concurrency, $make;
            claims_past_a_concurrency_key_limit_answer_key_at_limit,
            racing_claims_never_pass_a_concurrency_key_limit,
        );
    };
}

/// Expands to one multi-threaded `#[tokio::test]` per dependency contract case, in a module
/// `dependency_contract`; `$make` as for [`store_contract!`](crate::store_contract).
#[macro_export]
macro_rules! dependency_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(dependency_contract, dependencies, $make;
            an_ended_run_releases_its_downstream_at_its_nominal_time,
            a_fan_in_runs_once_every_upstream_ended,
            an_upstream_that_ends_otherwise_skips_and_the_skip_goes_down_the_chain,
            within_gives_up_an_occurrence_that_waits_too_long,
            a_paused_changed_or_deleted_downstream_is_not_run,
            racing_ends_of_a_fan_in_release_exactly_one_run,
        );
    };
}

/// Expands to one `#[tokio::test]` per alert contract case, in a module `alert_contract`.
///
/// `$make` is called with no argument in each test and returns a future of a fresh, empty
/// store as both ports, `(Arc<dyn JobStore>, Arc<dyn WebhookSecrets>)`.
#[macro_export]
macro_rules! alert_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(alert_contract, alerts, $make;
            an_ended_run_is_due_from_its_end_only_if_notify_asks,
            a_cancel_arms_the_alert_in_its_write,
            save_alert_is_conditional_on_the_due_it_read,
            a_firing_s_skipped_occurrences_are_due_with_their_record,
            webhook_secrets_read_back_per_tenant,
        );
    };
}

/// Expands to one `#[tokio::test]` per log store contract case, in a module `log_contract`.
///
/// `$make` is evaluated in each test and called with the cap, in bytes of line text per
/// attempt, the store must keep ([`logs::CAP`]); it returns a future of a fresh, empty store
/// coercing to `Arc<dyn LogStore>`:
/// `sked_testkit::log_contract!(|cap: u64| async move { Arc::new(MemLogs::with_cap(cap)) as Arc<dyn LogStore> });`
#[macro_export]
macro_rules! log_contract {
    ($make:expr $(,)?) => {
        $crate::__contract_cases!(log_contract, logs, $make;
            lines_read_back_in_order_with_a_stream_filter,
            tail_answers_the_last_matching_lines,
            a_follower_reads_from_its_cursor_while_the_writer_appends,
            the_cap_keeps_one_marker_and_finish_reports_it,
            a_log_exactly_at_the_cap_is_not_truncated,
            attempts_and_tenants_are_kept_apart,
            a_log_without_lines_reads_as_not_found_or_empty,
        );
    };
}

/// Shared body of the contract macros. Not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_cases {
    (store_contract, store, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod store_contract {
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let store: ::std::sync::Arc<dyn $crate::contract::store::JobStore> = ($make)().await;
                    $crate::contract::store::$case(store).await;
                }
            )+
        }
    };
    (alert_contract, alerts, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod alert_contract {
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let stores: $crate::contract::alerts::Stores = ($make)().await;
                    $crate::contract::alerts::$case(stores).await;
                }
            )+
        }
    };
    (quota_contract, quotas, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod quota_contract {
            use super::*;
            $(
                // Several threads, so that racing claims really run at once.
                #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let stores: $crate::contract::quotas::Stores = ($make)().await;
                    $crate::contract::quotas::$case(stores).await;
                }
            )+
        }
    };
    (concurrency_contract, concurrency, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod concurrency_contract {
            use super::*;
            $(
                // Several threads, so that racing claims really run at once.
                #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let store: ::std::sync::Arc<dyn $crate::contract::concurrency::JobStore> = ($make)().await;
                    $crate::contract::concurrency::$case(store).await;
                }
            )+
        }
    };
    (dependency_contract, dependencies, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod dependency_contract {
            use super::*;
            $(
                // Several threads, so that racing ends of a fan-in really run at once.
                #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let store: ::std::sync::Arc<dyn $crate::contract::dependencies::JobStore> = ($make)().await;
                    $crate::contract::dependencies::$case(store).await;
                }
            )+
        }
    };
    (log_contract, logs, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod log_contract {
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let logs: ::std::sync::Arc<dyn $crate::contract::logs::LogStore> =
                        ($make)($crate::contract::logs::CAP).await;
                    $crate::contract::logs::$case(logs).await;
                }
            )+
        }
    };
    (keys_contract, keys, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod keys_contract {
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let store: ::std::sync::Arc<dyn $crate::contract::keys::KeyStore> = ($make)().await;
                    $crate::contract::keys::$case(store).await;
                }
            )+
        }
    };
    ($module:ident, work, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod $module {
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let clock = ::std::sync::Arc::new($crate::clock::ManualClock::new($crate::contract::t0()));
                    let ports: $crate::contract::work::WorkPorts = ($make)(clock).await;
                    $crate::contract::work::$case(ports).await;
                }
            )+
        }
    };
    (queue_contract, queue, $make:expr; $($case:ident),+ $(,)?) => {
        #[allow(unused_imports)]
        mod queue_contract {
            use super::*;
            $(
                #[::tokio::test]
                async fn $case() {
                    let clock = ::std::sync::Arc::new($crate::clock::ManualClock::new($crate::contract::t0()));
                    let queue: ::std::sync::Arc<dyn $crate::contract::queue::DispatchQueue> =
                        ($make)(::std::sync::Arc::clone(&clock)).await;
                    $crate::contract::queue::$case(clock, queue).await;
                }
            )+
        }
    };
}
