//! Fairness across tenants: the order in which a local queue serves the ready messages of
//! several tenants, so that one tenant's burst cannot hold back another tenant's due run.
//!
//! Tenants take **turns**, one message a turn. The queue numbers every turn and remembers, per
//! tenant, the number of the last turn it was served in. Each message served is the best
//! ready message (by [`dispatch_rank`], then enqueue order) of the tenant with a ready message
//! that was served **least recently** (never served counts as longest ago; among tenants
//! never served, or in a tie, the better rank goes first).
//!
//! So while a tenant has a ready message, no other tenant is served twice before it: a tenant
//! served once has become more recently served than the waiting one. Within a tenant, messages
//! keep the rank order (priority with aging); across tenants, turns come first: a tenant
//! cannot jump ahead of others by giving its runs a higher priority. A tenant that was idle
//! gets one turn at once, not a burst for the turns it missed. With one tenant the order is
//! exactly the rank order.
//!
//! This module only orders; the adapters keep the turns (the SQLite queue in a table, the
//! in-memory queue in a map) and fetch each tenant's ready messages in rank order.
//!
//! [`dispatch_rank`]: crate::ports::queue::dispatch_rank

use crate::ids::TenantId;
use std::collections::{HashMap, VecDeque};

/// One ready message, as the fair order sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready<K> {
    /// Its [`dispatch_rank`](crate::ports::queue::dispatch_rank): smaller is served first.
    pub rank: i64,
    /// Enqueue order, the tie-break after rank.
    pub seq: i64,
    /// What the adapter needs to lease it.
    pub key: K,
}

/// Per tenant, the number of the last turn in which a message of the tenant was served
/// (absent: never). Turn numbers only grow.
pub type Turns = HashMap<TenantId, u64>;

/// Takes up to `max` messages from `ready` (each tenant's ready messages in rank order, best
/// first), in the fair order of the module header, and records in `turns` the turn of each
/// message served. Returns them in serving order with their tenant.
pub fn take_in_turns<K>(
    turns: &mut Turns,
    ready: impl IntoIterator<Item = (TenantId, Vec<Ready<K>>)>,
    max: usize,
) -> Vec<(TenantId, K)> {
    let mut queues: Vec<(TenantId, VecDeque<Ready<K>>)> = ready
        .into_iter()
        .filter(|(_, messages)| !messages.is_empty())
        .map(|(tenant, messages)| (tenant, VecDeque::from(messages)))
        .collect();
    let mut last_turn = turns.values().copied().max().unwrap_or(0);
    let mut out = Vec::with_capacity(max.min(queues.iter().map(|(_, q)| q.len()).sum()));
    while out.len() < max {
        let next = queues
            .iter()
            .enumerate()
            .filter_map(|(i, (tenant, q))| {
                let served = turns.get(tenant).copied().unwrap_or(0);
                q.front().map(|m| (served, m.rank, m.seq, i))
            })
            .min();
        let Some((_, _, _, i)) = next else { break };
        let (tenant, queue) = &mut queues[i];
        let Some(message) = queue.pop_front() else { break };
        last_turn += 1;
        turns.insert(tenant.clone(), last_turn);
        out.push((tenant.clone(), message.key));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(tenant: &str, ranks: &[i64]) -> (TenantId, Vec<Ready<String>>) {
        let list = ranks
            .iter()
            .enumerate()
            .map(|(i, &rank)| Ready {
                rank,
                seq: rank * 10 + i as i64,
                key: format!("{tenant}{i}"),
            })
            .collect();
        (TenantId::from(tenant), list)
    }

    fn keys(taken: Vec<(TenantId, String)>) -> Vec<String> {
        taken.into_iter().map(|(_, k)| k).collect()
    }

    #[test]
    fn one_tenant_is_served_in_rank_order() {
        let mut turns = Turns::new();
        let got = take_in_turns(&mut turns, [msgs("a", &[1, 2, 3])], 10);
        assert_eq!(keys(got), ["a0", "a1", "a2"]);
    }

    #[test]
    fn tenants_alternate_whatever_their_ranks() {
        let mut turns = Turns::new();
        let got = take_in_turns(&mut turns, [msgs("a", &[1, 2, 3, 4]), msgs("b", &[50, 60])], 10);
        assert_eq!(keys(got), ["a0", "b0", "a1", "b1", "a2", "a3"]);
    }

    #[test]
    fn a_tenant_that_arrives_is_served_before_the_busy_tenant_goes_again() {
        let mut turns = Turns::new();
        // Tenant a alone for a while, one message a receive.
        for _ in 0..3 {
            assert_eq!(keys(take_in_turns(&mut turns, [msgs("a", &[1, 2, 3])], 1)), ["a0"]);
        }
        // Then b's message becomes ready, with a worse rank than all of a's: b goes next.
        let got = take_in_turns(&mut turns, [msgs("a", &[4, 5]), msgs("b", &[90])], 1);
        assert_eq!(keys(got), ["b0"]);
        let got = take_in_turns(&mut turns, [msgs("a", &[4, 5])], 2);
        assert_eq!(keys(got), ["a0", "a1"]);
    }

    #[test]
    fn the_least_recently_served_tenant_goes_first_even_with_a_worse_rank() {
        let mut turns = Turns::new();
        let got = take_in_turns(&mut turns, [msgs("a", &[1, 20]), msgs("b", &[10, 11])], 4);
        assert_eq!(keys(got), ["a0", "b0", "a1", "b1"], "never b twice while a waits");
    }

    #[test]
    fn an_idle_tenant_gets_one_turn_not_a_burst_of_the_turns_it_missed() {
        let mut turns = Turns::new();
        turns.insert(TenantId::from("a"), 100);
        turns.insert(TenantId::from("b"), 1);
        let got = take_in_turns(&mut turns, [msgs("a", &[1, 2, 3]), msgs("b", &[7, 8, 9])], 6);
        assert_eq!(keys(got), ["b0", "a0", "b1", "a1", "b2", "a2"]);
    }

    #[test]
    fn among_tenants_never_served_the_better_rank_goes_first() {
        let mut turns = Turns::new();
        let got = take_in_turns(&mut turns, [msgs("a", &[5]), msgs("b", &[3]), msgs("c", &[4])], 3);
        assert_eq!(keys(got), ["b0", "c0", "a0"]);
    }

    #[test]
    fn at_most_max_and_nothing_from_empty_tenants() {
        let mut turns = Turns::new();
        let got = take_in_turns(&mut turns, [msgs("a", &[1, 2]), msgs("b", &[])], 1);
        assert_eq!(keys(got), ["a0"]);
        assert!(!turns.contains_key(&TenantId::from("b")));
        assert!(take_in_turns::<String>(&mut turns, [], 5).is_empty());
    }
}
