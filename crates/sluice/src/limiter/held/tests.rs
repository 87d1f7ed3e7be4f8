//! The batches' bookkeeping, and the mode on a store in another process: one store call per
//! batch, fail policies, and held units spent while the store is down.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use crate::algorithm::{Mode, S};
use crate::clock::ManualClock;
use crate::model::{FailPolicy, Limit, Rule};
use crate::store::{BlocksCursor, BlocksPage, LimitCall, StoreError, StoreReply};
use crate::{Limiter, MemoryStore, Store};

/// A global limit has no attributes.
const NONE: &[(&str, &str)] = &[];

fn key(identity: &str) -> LimitKey {
    LimitKey {
        rule: "hot".into(),
        limit_id: "global-gcra-1s".into(),
        identity: identity.into(),
    }
}

fn holdings(max: u64) -> Holdings {
    Holdings::new(
        &Name::interned("hot"),
        Batches::new(max, Duration::from_secs(1)),
        Algorithm::Gcra,
        Params::new(1000, S, 1000),
    )
}

/// Spends one unit of `k` at `now`, taking the batch the step asks for (from a store with
/// `left` units); returns the size asked for, if any.
fn spend_one(h: &Holdings, k: &LimitKey, now: Micros, left: &mut u64) -> (bool, Option<u64>) {
    let step = h.spend(k, 1, now);
    let admitted = step.spent.is_some();
    if let Some(size) = step.take {
        *left -= size;
        let cost = u64::from(!admitted);
        h.taken(k, took(size, cost, *left));
    }
    (admitted || step.take.is_some(), step.take)
}

fn took(k: u64, cost: u64, left: u64) -> Took {
    Took {
        k,
        cost,
        at_us: S,
        until_us: 2 * S,
        left,
        reset_after_us: Micros::ZERO,
    }
}

#[test]
fn the_size_grows_with_demand_and_shrinks_near_the_limit() {
    let h = holdings(64);
    let k = key("*");
    let mut left = 100_000;
    let mut sizes = Vec::new();
    for _ in 0..1000 {
        let (admitted, size) = spend_one(&h, &k, S, &mut left);
        assert!(admitted);
        sizes.extend(size);
        assert!(h.totals().0 <= 64, "never more than max held");
    }
    assert_eq!(sizes[..6], [2, 2, 4, 8, 16, 32], "doubling with demand");
    assert!(sizes.iter().all(|&size| size <= 64), "{sizes:?}");
    assert!(sizes.len() < 1000 / 32, "{} batches", sizes.len());
    // Near the limit: never more than half of what is left, then the exact path.
    h.observe(&k, 10);
    let asked = loop {
        if let Some(size) = h.spend(&k, 1, S).take {
            break size;
        }
    };
    assert_eq!(asked, 5);
    h.refused(&k, Some(2));
    let step = loop {
        let step = h.spend(&k, 1, S);
        if step.spent.is_none() {
            break step;
        }
    };
    assert_eq!(step.take, None, "2 left: the exact path");
}

#[test]
fn a_batch_that_ends_unspent_is_given_back_and_the_next_is_smaller() {
    let h = holdings(64);
    let k = key("*");
    assert_eq!(h.spend(&k, 1, S).take, Some(2));
    h.taken(&k, took(2, 1, 900));
    let step = h.spend(&k, 1, S);
    assert!(step.spent.is_some());
    assert_eq!(
        step.take,
        Some(2),
        "the batch is spent: the next one, ahead"
    );
    h.taken(&k, took(8, 0, 890));
    assert!(h.spend(&k, 1, S).spent.is_some());
    assert_eq!(h.totals(), (7, 0, 10));
    // Past its end (2 s): 1 of 8 spent, 7 back as admitted when the spent one has drained.
    let step = h.spend(&k, 1, 3 * S);
    assert!(step.spent.is_none());
    let back = &step.give_back[..];
    assert_eq!(back.len(), 1);
    assert_eq!((back[0].units, back[0].at_us), (7, S + Micros::new(1000)));
    assert_eq!(
        step.take,
        Some(2),
        "the next batch is half the size (4 → 2)"
    );
    assert_eq!(h.totals().0, 0);
}

#[test]
fn the_held_identities_are_bounded() {
    let h = holdings(64);
    for i in 0..MAX_HELD_KEYS {
        // Each identity is asked a batch for (and keeps its place while it is being taken).
        assert!(h.spend(&key(&i.to_string()), 1, S).take.is_some());
    }
    let step = h.spend(&key("one more"), 1, S);
    assert!(
        step.take.is_none() && step.spent.is_none(),
        "beyond the bound: the exact path"
    );
    assert!(h.end_batches(100 * S, false).is_empty());
}

/// Once the map is full of identities that hold units, a new identity costs the same however
/// many are held: room is reclaimed once per `RECLAIM_EVERY` turned away, not by a scan of the
/// whole map for each.
#[test]
fn a_new_identity_does_not_scan_a_full_map() {
    let h = holdings(64);
    for i in 0..MAX_HELD_KEYS {
        assert!(h.spend(&key(&i.to_string()), 1, S).take.is_some());
    }
    let newcomers = 5_000u64;
    for i in 0..newcomers {
        let step = h.spend(&key(&format!("new {i}")), 1, S);
        assert!(step.take.is_none() && step.spent.is_none());
    }
    let scanned = h.scanned.load(Ordering::Relaxed);
    assert!(
        scanned <= newcomers * 16 + MAX_HELD_KEYS as u64,
        "{scanned} entries scanned for {newcomers} new identities"
    );
    // An identity that no longer holds anything makes room, at the next reclaiming scan.
    h.refused(&key("0"), None);
    let admitted =
        (0..RECLAIM_EVERY).any(|i| h.spend(&key(&format!("late {i}")), 1, S).take.is_some());
    assert!(admitted, "room reclaimed within {RECLAIM_EVERY} newcomers");
}

/// The memory store as if it ran in another process, which can be switched off, counting the
/// decisions asked of it.
#[derive(Debug, Default)]
pub(super) struct Remote {
    pub(super) store: MemoryStore,
    pub(super) down: AtomicBool,
    pub(super) calls: AtomicU64,
}

impl Remote {
    fn check(&self) -> Result<(), StoreError> {
        match self.down.load(Ordering::SeqCst) {
            true => Err(StoreError::transient("remote", "connection refused")),
            false => Ok(()),
        }
    }
}

impl Store for std::sync::Arc<Remote> {
    fn name(&self) -> &'static str {
        "remote"
    }
    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.check()?;
        self.store.decide(calls, mode).await
    }
    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        self.store.reset(keys).await
    }
    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        self.store.block(key, duration).await
    }
    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.store.unblock(key).await
    }
    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.store.blocks(rule, cursor).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.check()
    }
    async fn give_back(&self, calls: &[GiveBackCall]) -> Result<(), StoreError> {
        self.check()?;
        self.store.give_back(calls).await
    }
}

fn remote_with(fail: FailPolicy) -> (std::sync::Arc<Remote>, Limiter) {
    let clock = ManualClock::at_2026();
    let remote = std::sync::Arc::new(Remote {
        store: MemoryStore::with_clock(std::sync::Arc::new(clock.clone())),
        ..Remote::default()
    });
    let limit = Limit::new(&[], "100000/1s".parse().unwrap(), Algorithm::Gcra)
        .with_batches(Batches::new(100, Duration::from_secs(1)));
    let mut rule = Rule::new(vec![limit]);
    rule.fail = Some(fail);
    let limiter = Limiter::builder(remote.clone())
        .clock(std::sync::Arc::new(clock))
        .rule("hot", rule)
        .build()
        .unwrap();
    (remote, limiter)
}

#[tokio::test]
async fn a_key_far_from_its_limit_costs_one_store_call_per_batch() {
    let (remote, limiter) = remote_with(FailPolicy::Open);
    for _ in 0..1000 {
        assert!(limiter.check("hot", NONE).await.unwrap().allowed);
    }
    // Batches doubling from 2 to 100, then 100 at a time.
    let calls = remote.calls.load(Ordering::SeqCst);
    assert!((10..=20).contains(&calls), "{calls} store calls");
}

#[tokio::test]
async fn held_units_are_spent_while_the_store_is_down_then_the_fail_policy_answers() {
    let (remote, limiter) = remote_with(FailPolicy::Closed);
    for _ in 0..3 {
        limiter.check("hot", NONE).await.unwrap();
    }
    let held = limiter.held_units()[0].held;
    assert!(held > 0);
    remote.down.store(true, Ordering::SeqCst);
    for _ in 0..held {
        let d = limiter.check("hot", NONE).await.unwrap();
        assert!(d.allowed && !d.degraded, "answered from the batch");
    }
    let d = limiter.check("hot", NONE).await.unwrap();
    assert!(!d.allowed && d.degraded, "fail closed: {d:?}");

    let (remote, limiter) = remote_with(FailPolicy::Open);
    remote.down.store(true, Ordering::SeqCst);
    let d = limiter.check("hot", NONE).await.unwrap();
    assert!(d.allowed && d.degraded, "fail open: {d:?}");
    assert_eq!(limiter.held_units()[0].held, 0, "nothing taken");
}

#[tokio::test]
async fn a_check_all_of_one_part_spends_batches_and_of_several_is_exact() {
    let (remote, limiter) = remote_with(FailPolicy::Open);
    let part = || crate::limiter::RuleCheck {
        rule: "hot",
        attrs: NONE,
        cost: 1,
    };
    let one = [part()];
    for _ in 0..1000 {
        assert!(limiter.check_all(&one).await.unwrap()[0].allowed);
    }
    let calls = remote.calls.load(Ordering::SeqCst);
    assert!((10..=20).contains(&calls), "{calls} store calls");
    let two = [part(), part()];
    assert!(limiter.check_all(&two).await.unwrap()[1].allowed);
    assert_eq!(
        remote.calls.load(Ordering::SeqCst),
        calls + 1,
        "several parts: one atomic store step"
    );
}
