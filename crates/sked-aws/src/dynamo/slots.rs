//! Slot pools on DynamoDB: the items that bound how many runs hold something at once — a
//! tenant's `max_concurrent_runs` (pool `T#<tenant>#TENANT`) and a concurrency key's limit
//! (pool `T#<tenant>#CKEY#<key>`, [`sked_core::concurrency`]).
//!
//! A pool's partition holds `SLOT#<i>`: the run and fencing token that last took slot `i`. A
//! slot is free when that attempt no longer occupies one
//! ([`occupies_slot`](sked_core::quota::occupies_slot) with the same token): heartbeats and
//! completions never touch slots. A claim reads the pool's slots and their runs (consistent),
//! and with one free takes it in the claim's own transaction on condition that the slot is
//! as read; racing claims cannot take one slot twice. Slots at or past a lowered limit are
//! checked, not taken. A run counts against its tenant's pool (when capped) and its key's
//! pool (when it has one); a claim takes a slot of each in the one transaction.

use super::codec::{Item, Reader, key, n, run_from_item, run_key, s};
use super::keys::{PK, SK, SLOT_SK_PREFIX, concurrency_pk, slot_sk, tenant_pk};
use super::plumbing::QuerySpec;
use super::quotas::TenantLimits;
use super::store::DynamoStore;
use crate::error::build_error;
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};
use sked_core::attempt::ClaimOutcome;
use sked_core::ids::RunId;
use sked_core::ports::StoreError;
use sked_core::quota::occupies_slot;
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;
use std::collections::HashMap;

/// One pool a claim must take a slot of.
struct SlotPool {
    /// Its partition.
    pk: String,
    /// Slots `0..max` may be taken.
    max: u64,
    /// The claim's answer when every slot is held.
    full: ClaimOutcome,
}

impl SlotPool {
    /// The pools `run` counts against: its tenant's when capped, its key's when it has one.
    fn of(run: &Run, limits: &TenantLimits) -> Vec<SlotPool> {
        let tenant = run.tenant.as_str();
        let capped = limits.quota.max_concurrent_runs.map(|max| SlotPool {
            pk: tenant_pk(tenant),
            max,
            full: ClaimOutcome::AtCapacity,
        });
        let keyed = run.concurrency.as_ref().map(|c| SlotPool {
            pk: concurrency_pk(tenant, &c.key),
            max: u64::from(c.limit),
            full: ClaimOutcome::KeyAtLimit { key: c.key.clone() },
        });
        capped.into_iter().chain(keyed).collect()
    }
}

/// One slot item as read.
struct Slot {
    index: u64,
    run_id: RunId,
    token: u64,
}

impl Slot {
    fn from_item(item: &Item) -> Result<Slot, StoreError> {
        let r = Reader::new(item);
        let sk = r.s(SK)?;
        let index = sk
            .strip_prefix(SLOT_SK_PREFIX)
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| StoreError::Other(format!("malformed slot key {sk}").into()))?;
        Ok(Slot {
            index,
            run_id: RunId(r.s("slot_run")?),
            token: r.n("slot_token")?,
        })
    }

    /// Whether the attempt that took this slot still occupies one at `now`.
    fn held(&self, runs: &HashMap<RunId, Run>, now: Timestamp) -> bool {
        runs.get(&self.run_id)
            .is_some_and(|run| occupies_slot(run, now) && run.lease.as_ref().is_some_and(|l| l.token == self.token))
    }
}

impl DynamoStore {
    /// What a claim that would start attempt `token` of `run` at `now` must add to its
    /// transaction for the slots `run` counts against: the writes that take a free slot of
    /// each pool (and check the slots past a lowered limit); none when it counts against
    /// none; `Err` with the claim's answer when a pool has every slot held (start nothing).
    pub(super) async fn take_slots(
        &self,
        run: &Run,
        token: u64,
        now: Timestamp,
        limits: &TenantLimits,
    ) -> Result<Result<Vec<TransactWriteItem>, ClaimOutcome>, StoreError> {
        let mut writes = Vec::new();
        for pool in SlotPool::of(run, limits) {
            match self.take_slot(&pool, run, token, now).await? {
                Some(taken) => writes.extend(taken),
                None => return Ok(Err(pool.full)),
            }
        }
        Ok(Ok(writes))
    }

    /// The writes that take a free slot of `pool` for attempt `token` of `run`; `None` when
    /// every slot is held.
    async fn take_slot(
        &self,
        pool: &SlotPool,
        run: &Run,
        token: u64,
        now: Timestamp,
    ) -> Result<Option<Vec<TransactWriteItem>>, StoreError> {
        let mut q = QuerySpec::new(None, "#pk = :pk AND begins_with(#sk, :slot)")
            .name("#pk", PK)
            .name("#sk", SK)
            .value(":pk", s(pool.pk.clone()))
            .value(":slot", s(SLOT_SK_PREFIX));
        q.consistent = true;
        let slots: Vec<Slot> = self
            .query(&q, usize::MAX)
            .await?
            .iter()
            .map(Slot::from_item)
            .collect::<Result<_, _>>()?;
        let holders = slots
            .iter()
            .filter_map(|slot| run_key(&run.tenant, &slot.run_id))
            .collect();
        let runs: HashMap<RunId, Run> = self
            .batch_get(holders)
            .await?
            .iter()
            .map(|item| run_from_item(item).map(|stored| (stored.run.run_id.clone(), stored.run)))
            .collect::<Result<_, _>>()?;
        let occupied: Vec<&Slot> = slots.iter().filter(|slot| slot.held(&runs, now)).collect();
        if occupied.len() as u64 >= pool.max {
            return Ok(None);
        }
        // Fewer occupied than `max`: one of the first `max` is free.
        let Some(free) = (0..pool.max).find(|i| occupied.iter().all(|slot| slot.index != *i)) else {
            return Ok(None);
        };
        let unchanged = |slot: &Slot| vec![(":run", s(slot.run_id.as_str())), (":token", n(slot.token))];
        const AS_READ: &str = "slot_run = :run AND slot_token = :token";
        let mut item = key(pool.pk.clone(), slot_sk(free));
        item.extend([
            ("kind".to_string(), s("slot")),
            ("slot_run".into(), s(run.run_id.as_str())),
            ("slot_token".into(), n(token)),
        ]);
        let mut writes = vec![match slots.iter().find(|slot| slot.index == free) {
            Some(seen) => self.put(item, AS_READ, unchanged(seen))?,
            None => self.put(item, "attribute_not_exists(pk)", vec![])?,
        }];
        for slot in occupied.iter().filter(|slot| slot.index >= pool.max) {
            let mut check = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(key(pool.pk.clone(), slot_sk(slot.index))))
                .condition_expression(AS_READ);
            for (name, value) in unchanged(slot) {
                check = check.expression_attribute_values(name, value);
            }
            writes.push(
                TransactWriteItem::builder()
                    .condition_check(check.build().map_err(build_error)?)
                    .build(),
            );
        }
        Ok(Some(writes))
    }
}
