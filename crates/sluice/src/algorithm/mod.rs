//! The pure algorithms: state and time in, new state and decision out. No I/O, no async.
//!
//! Every store runs these (the memory store directly, the Redis store as Lua that restates the
//! same arithmetic and is tested against it). Time is [`Micros`] since the Unix epoch.
//!
//! What a store needs is public here, each item by one path: [`decide`] (one decision over all
//! the limits of a request: each limit's algorithm, with its block and penalty) and
//! [`decide_one`] (the same for one limit), over [`KeyState`]s and [`LimitStep`]s, answering
//! [`LimitOutcome`]s; [`settle`] (a reservation charged at its actual cost); [`release`] and
//! [`renew`] (a concurrency limit's leases). [`Mode::Peek`] answers the same without consuming
//! the state; `Mode` is the one representation of "consume or only look", from the API
//! ([`crate::Check`]) down to the Redis scripts, which receive it as `'apply'`/`'peek'`.
//!
//! # Layout
//! - `mod.rs` (this file): [`Params`], [`Outcome`], [`Level`] (the buckets' draining level) and
//!   [`AlgoState`], which dispatches to the algorithm of a limit;
//! - one module per algorithm, each exposing `decide(state, now, params, cost, mode) -> Outcome`
//!   to this crate: `sliding_log`, `sliding_window`, `fixed_window`, `token_bucket`, `gcra`,
//!   `leaky_bucket`, `concurrency` (leases; it takes the lease's token too, and has `release`
//!   and `renew`), each tested against a reference model written differently
//!   (`reference_models`);
//! - `block`: block locks; `penalty`: violations, warnings and bans ([`PenaltyParams`]);
//! - `step`: one decision over all the limits of a request;
//! - `settle`: a reservation charged at its actual cost ([`Settlement`]);
//! - `runtime`: numbers given to one identity at run time ([`RuntimeNumbers`]).

pub(crate) mod block;
pub(crate) mod concurrency;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
pub(crate) mod leaky_bucket;
pub(crate) mod penalty;
#[cfg(test)]
mod reference_models;
pub(crate) mod runtime;
pub(crate) mod settle;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod step;
pub(crate) mod token_bucket;

pub use concurrency::{BadToken, LeaseToken, release, renew};
pub use penalty::PenaltyParams;
pub use runtime::RuntimeNumbers;
pub use settle::{Settlement, settle};
pub use step::{KeyState, LimitOutcome, LimitStep, Mode, decide, decide_one};

use crate::model::{Algorithm, Micros, Period};

/// One second, so that tests write their times as `100 * S`.
#[cfg(test)]
pub(crate) const S: Micros = Micros::from_secs(1);

/// A limit's numbers, in the units the algorithms compute in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Units per window (the rate's count).
    pub count: u64,
    /// Window length.
    pub window_us: Micros,
    /// The most units that may be outstanding at once: `burst` for the bucket algorithms,
    /// `limit` for the others.
    pub capacity: u64,
    /// Whether denied requests are recorded too (counting algorithms only).
    pub count_denied: bool,
    /// A quota's calendar period (`fixed_window` only): its windows are the period's, and
    /// `window_us` is only the longest one.
    pub period: Option<&'static Period>,
    /// A quota that admits past itself (`over: allow`): its denial denies nothing (its step is
    /// a shadow's), and it counts every request that passes, past the quota too.
    pub admits_over: bool,
}

impl Params {
    /// Params without `count_denied`.
    pub fn new(count: u64, window_us: Micros, capacity: u64) -> Params {
        Params {
            count,
            window_us,
            capacity,
            count_denied: false,
            period: None,
            admits_over: false,
        }
    }

    /// One node's share of these numbers when `nodes` nodes decide the limit apart: the count
    /// and the capacity divided among them, rounded down but never below one unit, so that the
    /// nodes together admit at most the limit (or one unit each, when the limit is smaller than
    /// the fleet). The window is the limit's.
    pub fn share(self, nodes: std::num::NonZeroU32) -> Params {
        let n = u64::from(nodes.get());
        Params {
            count: (self.count / n).max(1),
            capacity: (self.capacity / n).max(1),
            ..self
        }
    }

    /// GCRA's spacing between units, rounded up to whole µs.
    pub fn emission_interval_us(&self) -> Micros {
        Micros::new(self.window_us.get().div_ceil(self.count))
    }

    /// Time for `units` to drain at the rate, rounded up to whole µs.
    pub fn time_to_drain(&self, units: f64) -> Micros {
        Micros::new(
            (units * self.window_us.get() as f64 / self.count as f64)
                .ceil()
                .max(0.0) as u64,
        )
    }
}

/// One algorithm's answer for one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The units fit.
    pub allowed: bool,
    /// Units left after this decision.
    pub remaining: u64,
    /// Until the limit is back to full.
    pub reset_after_us: Micros,
    /// When denied: the earliest wait after which the same request fits.
    pub retry_after_us: Option<Micros>,
    /// Shaping delay (leaky bucket).
    pub delay_us: Micros,
    /// How long the state must be kept; after that it is equivalent to no state.
    pub ttl_us: Micros,
}

impl Outcome {
    /// An answer without shaping delay, whose state matters until the limit is full again.
    pub fn unshaped(
        allowed: bool,
        remaining: u64,
        reset_after_us: Micros,
        retry_after_us: Option<Micros>,
    ) -> Outcome {
        Outcome {
            allowed,
            remaining,
            reset_after_us,
            retry_after_us,
            delay_us: Micros::ZERO,
            ttl_us: reset_after_us,
        }
    }
}

/// Units counted in a window or bucket stop growing here (only `count_denied` ever gets there).
/// It is above any limit ([`crate::model::MAX_COUNT`]), so every decision is the same as with the
/// full count, and it keeps counts far from overflow, in Rust and in the Redis scripts (2^53).
pub const COUNT_CAP: u64 = 1 << 24;

/// Float tolerance (in units) for the level comparisons of token and leaky bucket. Draining by
/// fractions (`elapsed * limit / window`) leaves rounding noise of a few ulps; without it a
/// request retried exactly after `retry_after` could be denied by 1e-15 of a unit.
pub const LEVEL_EPSILON: f64 = 1e-6;

/// A level that drains at the rate, for token bucket (units used) and leaky bucket (queue).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Level {
    /// Units in the bucket at `last_us`, fractions kept.
    pub level: f64,
    /// When `level` was computed.
    pub last_us: Micros,
}

impl Level {
    /// The level at `now`. A clock that steps back drains nothing rather than filling up.
    pub fn drained(&self, now: Micros, p: &Params) -> f64 {
        let elapsed = now.saturating_sub(self.last_us).get() as f64;
        (self.level - elapsed * p.count as f64 / p.window_us.get() as f64).max(0.0)
    }
}

/// The state of one key for whichever algorithm its limit uses.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub enum AlgoState {
    /// No history.
    #[default]
    Empty,
    /// See `sliding_log`.
    SlidingLog(sliding_log::State),
    /// See `sliding_window`.
    SlidingWindow(sliding_window::State),
    /// See `fixed_window`.
    FixedWindow(fixed_window::State),
    /// See `token_bucket`.
    TokenBucket(Level),
    /// See `gcra`.
    Gcra(gcra::State),
    /// See `leaky_bucket`.
    LeakyBucket(Level),
    /// See [`release`] and [`renew`].
    Concurrency(concurrency::State),
}

impl AlgoState {
    /// Runs the step's algorithm on this state, for the step's cost (and, on a concurrency
    /// limit, its lease token). State left by another algorithm (a named limit whose algorithm
    /// changed) is discarded first.
    pub fn decide(&mut self, step: &LimitStep, now: Micros, mode: Mode) -> Outcome {
        let (p, cost) = (&step.params, step.cost);
        macro_rules! run {
            ($variant:ident, $module:ident $(, $extra:expr)?) => {{
                if !matches!(self, AlgoState::$variant(_)) {
                    *self = AlgoState::$variant(Default::default());
                }
                let AlgoState::$variant(state) = self else {
                    unreachable!("the variant was set just above")
                };
                $module::decide(state, now, p, cost, mode $(, $extra)?)
            }};
        }
        match step.algorithm {
            Algorithm::SlidingLog => run!(SlidingLog, sliding_log),
            Algorithm::SlidingWindow => run!(SlidingWindow, sliding_window),
            Algorithm::FixedWindow => run!(FixedWindow, fixed_window),
            Algorithm::TokenBucket => run!(TokenBucket, token_bucket),
            Algorithm::Gcra => run!(Gcra, gcra),
            Algorithm::LeakyBucket => run!(LeakyBucket, leaky_bucket),
            Algorithm::Concurrency => run!(Concurrency, concurrency, step.lease),
        }
    }
}
