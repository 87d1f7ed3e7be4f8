//! Hot keys: units taken from the store in batches and spent in this process, for the limits
//! that opt in ([`Batches`]).
//!
//! A key that every node asks about on every request costs the store one call per decision, all
//! on the one shard that holds it. A limit with `batch` instead takes `k` units at once with the
//! store's ordinary decision (the same scripts' maths, a cost of `k`, with the limit's block and
//! penalty left out so that a refused batch changes nothing), admits the next requests from them
//! here, and gives back what it did not spend (`Store::give_back`) when the batch's hold time
//! ends, when the rule changes or is reloaded away, and when the node stops
//! ([`Limiter::give_back_batches`](super::Limiter::give_back_batches)).
//!
//! Invariants:
//! - a unit is counted in the store when its batch is granted, before it is spent: the node never
//!   admits more than the store granted it, so the limit is never exceeded through held units;
//!   what held units change is *when* they count (README, "Hot keys", states the bound);
//! - a batch is spent only until its hold time has passed since it was asked for (and, on a
//!   fixed window, until the window it was counted in ends), on this node's clock;
//! - the size adapts: it doubles when a batch was spent before its end (demand), halves when one
//!   ended unspent, never takes a node's held units (both batches) above `max`, and never asks for
//!   more than half of what the store last said was left, so near the limit every decision is the
//!   exact per-decision path;
//! - every denial comes from the exact path (the store, with block, penalty, denial cache and
//!   fail policy as for any limit): a request the held units cannot cover is decided there;
//! - one batch is asked for at a time per key: the next one once the batch being spent is down
//!   to a quarter (so requests rarely find nothing held), by the request that noticed, after it
//!   was decided; each batch keeps its own end; a request that finds nothing held while a batch
//!   is being asked for waits for that batch (at most the store's timeout, then the exact path)
//!   instead of making a store call of its own, so a burst on a cold key costs one call;
//! - a batch being asked for always ends, granted, refused, failed or abandoned (the asking
//!   request dropped mid-call): every end wakes the requests waiting for it;
//! - at most [`MAX_HELD_KEYS`] identities per rule hold units or sizes; beyond, the exact path.
//!   Room for a new identity in a full map is reclaimed (identities holding nothing and asking
//!   for nothing forgotten) once per [`RECLAIM_EVERY`] new identities turned away, so a new
//!   identity costs the same however many are held (a scan of the map, amortized), never a scan
//!   of 10,000 entries each under the rule's lock.
//!
//! # Layout
//! - `mod.rs` (this file): [`Holdings`], the batches of one rule, and their bookkeeping;
//! - `decide`: the decision from a held batch, the batch taken, the give-backs, and the batches
//!   carried over a reload;
//! - `asking`: a batch being asked for, and the requests waiting for it;
//! - `meters`: the metrics of one rule's batches.

mod asking;
mod decide;
mod meters;

pub use decide::HeldUnits;
pub(super) use decide::{Answer, carry_over, observe};
use meters::HeldMeters;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::algorithm::Params;
use crate::model::{Algorithm, Batches, Micros, Name};
use crate::store::{GiveBackCall, LimitKey};

/// The most identities of one rule whose batches (or batch sizes) a node keeps.
pub const MAX_HELD_KEYS: usize = 10_000;

/// New identities turned away by a full map between two scans that reclaim room in it: each
/// turned-away identity pays for at most `MAX_HELD_KEYS / RECLAIM_EVERY` (16) entries scanned.
const RECLAIM_EVERY: u64 = (MAX_HELD_KEYS / 16) as u64;

/// The batches a node holds for one rule's limit, by identity.
#[derive(Debug)]
pub(crate) struct Holdings {
    batches: Batches,
    algorithm: Algorithm,
    params: Params,
    keys: Mutex<HashMap<LimitKey, Holding>>,
    /// Units held now, over every identity.
    held: AtomicU64,
    /// Units given back since the start.
    given_back: AtomicU64,
    /// Units taken since the start.
    taken: AtomicU64,
    /// Whether the background task that gives back ended batches runs.
    pub(super) sweeping: AtomicBool,
    /// New identities turned away by the full map since room was last reclaimed.
    turned_away: AtomicU64,
    /// Entries the reclaiming scans visited (what a test measures).
    #[cfg(test)]
    pub(super) scanned: AtomicU64,
    /// Bumped each time a batch being asked for ends (granted or not): wakes the requests that
    /// wait for it.
    landed: watch::Sender<u64>,
    meters: HeldMeters,
}

/// One batch: units the store granted at once.
#[derive(Debug, Clone, Copy, Default)]
struct Batch {
    /// Units not spent yet.
    units: u64,
    /// Units the batch was taken for.
    taken: u64,
    /// The store's time of the take.
    at_us: Micros,
    /// This node's time after which the batch is not spent.
    until_us: Micros,
}

/// One identity's batches and what the next one should be.
#[derive(Debug, Clone, Copy)]
struct Holding {
    /// The batch being spent.
    current: Batch,
    /// A batch taken before the current one ran out, spent once it has.
    next: Option<Batch>,
    /// The next batch's size, before the other caps.
    size: u64,
    /// What the store last said was left.
    left: u64,
    /// The store's last `reset_after`, for the decisions answered here.
    reset_after_us: Micros,
    /// A batch is being asked for.
    taking: bool,
}

impl Holding {
    fn new() -> Holding {
        Holding {
            current: Batch::default(),
            next: None,
            size: 2,
            left: u64::MAX,
            reset_after_us: Micros::ZERO,
            taking: false,
        }
    }

    fn units(&self) -> u64 {
        self.current.units + self.next.map_or(0, |b| b.units)
    }
}

/// What a request gets from the held batches, and what to do about them.
#[derive(Debug, Default)]
pub(super) struct Step {
    /// The request was admitted from a batch.
    pub spent: Option<Spent>,
    /// Units of ended batches to give back.
    pub give_back: Vec<GiveBackCall>,
    /// A batch to ask for: before the request is decided when it was not admitted (`None`
    /// then means the exact path, or waiting), after it when the current batch runs low.
    pub take: Option<u64>,
    /// Nothing held, and a batch is on its way: changes when it lands (or fails).
    pub wait: Option<watch::Receiver<u64>>,
}

/// A request answered from a held batch: what the decision reports.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spent {
    pub remaining: u64,
    pub reset_after_us: Micros,
}

impl Holdings {
    pub(crate) fn new(rule: &Name, batches: Batches, algorithm: Algorithm, params: Params) -> Self {
        Holdings {
            batches,
            algorithm,
            params,
            keys: Mutex::new(HashMap::new()),
            held: AtomicU64::new(0),
            given_back: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            sweeping: AtomicBool::new(false),
            turned_away: AtomicU64::new(0),
            #[cfg(test)]
            scanned: AtomicU64::new(0),
            landed: watch::Sender::new(0),
            meters: HeldMeters::new(rule),
        }
    }

    /// The hold time, µs.
    pub(super) fn hold_us(&self) -> Micros {
        Micros::from(self.batches.hold)
    }

    /// Units held now, units given back and units taken since the start.
    pub(crate) fn totals(&self) -> (u64, u64, u64) {
        (
            self.held.load(Ordering::Relaxed),
            self.given_back.load(Ordering::Relaxed),
            self.taken.load(Ordering::Relaxed),
        )
    }

    /// Spends `cost` units of `key`'s batches at `now` if they hold them; ends the batches that
    /// cannot serve any more, and says whether to ask for a batch.
    pub(super) fn spend(&self, key: &LimitKey, cost: u64, now: Micros) -> Step {
        let mut keys = self.keys.lock();
        if !keys.contains_key(key) && keys.len() >= MAX_HELD_KEYS {
            // Reclaiming scans every identity: once per `RECLAIM_EVERY` turned away.
            if self
                .turned_away
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(RECLAIM_EVERY)
            {
                #[cfg(test)]
                self.scanned.fetch_add(keys.len() as u64, Ordering::Relaxed);
                keys.retain(|_, h| h.units() > 0 || h.taking);
            }
            if keys.len() >= MAX_HELD_KEYS {
                return Step::default();
            }
        }
        let h = keys.entry(key.clone()).or_insert_with(Holding::new);
        let mut step = Step::default();
        loop {
            let b = &mut h.current;
            if b.units >= cost && now < b.until_us {
                b.units -= cost;
                self.held.fetch_sub(cost, Ordering::Relaxed);
                self.meters.held.decrement(cost as f64);
                self.meters.spent.increment(1);
                step.spent = Some(Spent {
                    remaining: h.left.saturating_add(h.units()),
                    reset_after_us: h.reset_after_us,
                });
                break;
            }
            if b.taken > 0 {
                // A batch spent before its end asks for a bigger one; one that ended unspent,
                // smaller.
                let back = self.end(key, b);
                h.size = match back {
                    Some(_) => h.size / 2,
                    None => h.size.saturating_mul(2),
                }
                .clamp(1, self.batches.max);
                step.give_back.extend(back);
            }
            h.current = Batch::default();
            match h.next.take() {
                Some(next) => h.current = next,
                None => break,
            }
        }
        // Asked for while nothing is held (the request then waits for it), or ahead, once the
        // batch being spent is down to a quarter, so that requests rarely find it empty.
        let low = h.next.is_none() && h.current.units <= h.current.taken / 4;
        if !h.taking && (step.spent.is_none() || low) {
            // Never more than `max` held at once, the batch being spent included.
            let k = h.size.min(self.batches.max - h.units()).min(h.left / 2);
            if k > cost {
                h.taking = true;
                step.take = Some(k);
            }
        } else if h.taking && step.spent.is_none() && cost < self.batches.max {
            // Subscribed under the lock that saw `taking`: the batch's end cannot be missed.
            step.wait = Some(self.landed.subscribe());
        }
        step
    }

    /// Ends a batch, returning the give-back of its unspent units (if any).
    fn end(&self, key: &LimitKey, b: &mut Batch) -> Option<GiveBackCall> {
        if b.units == 0 {
            return None;
        }
        let units = std::mem::take(&mut b.units);
        self.held.fetch_sub(units, Ordering::Relaxed);
        self.meters.held.decrement(units as f64);
        Some(self.give_back_call(key, b.at_us, b.taken - units, units))
    }

    /// The give-back of `units` of a batch taken at `at_us` of which `spent` were spent.
    ///
    /// A draining state weighs the batch as `taken − drained`: it is given back as `units`
    /// admitted when the spent ones have drained (`at_us` + their time at the rate, rounded
    /// down so as to give back no more than is due), which takes off what a settlement of the
    /// batch at its spent units would. A window gets the units back while the window lasts.
    fn give_back_call(
        &self,
        key: &LimitKey,
        at_us: Micros,
        spent: u64,
        units: u64,
    ) -> GiveBackCall {
        let at_us = match self.algorithm {
            Algorithm::FixedWindow => at_us,
            _ => {
                let p = &self.params;
                let drain = u128::from(spent) * u128::from(p.window_us.get()) / u128::from(p.count);
                at_us.saturating_add(Micros::new(u64::try_from(drain).unwrap_or(u64::MAX)))
            }
        };
        GiveBackCall {
            key: key.clone(),
            algorithm: self.algorithm,
            params: self.params,
            units,
            at_us,
        }
    }

    /// Records a batch taken for `key`: spent next, or after the one being spent.
    pub(super) fn taken(&self, key: &LimitKey, took: Took) {
        self.taken.fetch_add(took.k, Ordering::Relaxed);
        self.meters.taken.increment(took.k);
        self.meters.takes.increment(1);
        let units = took.k - took.cost;
        self.held.fetch_add(units, Ordering::Relaxed);
        self.meters.held.increment(units as f64);
        let mut keys = self.keys.lock();
        let h = keys.entry(key.clone()).or_insert_with(Holding::new);
        let batch = Batch {
            units,
            taken: took.k,
            at_us: took.at_us,
            until_us: took.until_us,
        };
        // Each batch keeps its own end: a unit is never spent later than `hold` after its own
        // batch was asked for.
        if h.current.units > 0 {
            h.next = Some(batch);
        } else {
            if h.current.taken > 0 {
                // The batch it replaces was spent: demand.
                h.size = h.size.saturating_mul(2).clamp(1, self.batches.max);
            }
            h.current = batch;
        }
        h.left = took.left;
        h.reset_after_us = took.reset_after_us;
        h.taking = false;
        drop(keys);
        self.landed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records a batch the store refused (or could not be asked for): `left` is what the store
    /// said was left, if it answered.
    pub(super) fn refused(&self, key: &LimitKey, left: Option<u64>) {
        self.meters.refused.increment(1);
        let mut keys = self.keys.lock();
        if let Some(h) = keys.get_mut(key) {
            h.taking = false;
            h.size = (h.size / 2).max(1);
            if let Some(left) = left {
                h.left = left;
            }
        }
        drop(keys);
        self.landed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records a batch whose asking was dropped before the store answered: what the store did
    /// is unknown (units it may have granted stay counted there until they drain: under-, never
    /// over-admission), and the key may ask again.
    pub(super) fn abandoned(&self, key: &LimitKey) {
        if let Some(h) = self.keys.lock().get_mut(key) {
            h.taking = false;
        }
        self.landed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records what an exact decision said was left.
    pub(super) fn observe(&self, key: &LimitKey, left: u64) {
        if let Some(h) = self.keys.lock().get_mut(key) {
            h.left = left;
        }
    }

    /// Ends every batch whose hold time has passed at `now` (or every batch, with `all`),
    /// returning their give-backs, and forgets identities idle for long.
    pub(super) fn end_batches(&self, now: Micros, all: bool) -> Vec<GiveBackCall> {
        let mut keys = self.keys.lock();
        let mut calls = Vec::new();
        let idle = self.hold_us().saturating_mul(16);
        keys.retain(|key, h| {
            for b in std::iter::once(&mut h.current).chain(h.next.as_mut()) {
                if all || now >= b.until_us {
                    calls.extend(self.end(key, b));
                }
            }
            let last = h.next.map_or(h.current.until_us, |b| b.until_us);
            h.taking || h.units() > 0 || now < last.saturating_add(idle)
        });
        calls
    }

    /// Counts units given back.
    pub(super) fn gave_back(&self, units: u64) {
        self.given_back.fetch_add(units, Ordering::Relaxed);
        self.meters.given_back.increment(units);
    }
}

/// A batch the store granted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Took {
    pub k: u64,
    pub cost: u64,
    pub at_us: Micros,
    pub until_us: Micros,
    pub left: u64,
    pub reset_after_us: Micros,
}

#[cfg(test)]
mod choice_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wait_tests;
