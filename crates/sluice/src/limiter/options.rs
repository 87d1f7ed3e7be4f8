//! What a limiter and a single check are told: [`Options`] for the limiter, [`Check`] for one
//! request (its cost, and whether it only peeks).

use std::num::NonZeroU32;
use std::time::Duration;

use super::denial_cache::DenialCacheOptions;
use super::in_flight::InFlightLimit;
use super::standing_queue::QueueLimit;
use crate::algorithm::Mode;
use crate::model::{FailPolicy, MAX_COUNT};

/// The largest cost a check accepts; anything above is a caller bug (HTTP 400).
pub const MAX_COST: u64 = MAX_COUNT;

/// Settings of a [`Limiter`](super::Limiter), given once to its builder.
#[derive(Debug, Clone)]
pub struct Options {
    /// Deadline for one store call.
    pub timeout: Duration,
    /// Fail policy of rules that set none.
    pub fail: FailPolicy,
    /// Longest attribute value accepted (bytes).
    pub max_attribute_len: usize,
    /// The cache of denials (remote stores only).
    pub denial_cache: DenialCacheOptions,
    /// Most identities with run-time limits per settable limit (default
    /// [`DEFAULT_MAX_RUNTIME_LIMITS`]): each is kept in the store until removed.
    pub max_runtime_limits: usize,
    /// How many decisions may wait for a remote store at once; past it, the fail policy answers
    /// at once (see [`InFlightLimit`]).
    pub in_flight: InFlightLimit,
    /// How long a decision may wait in a queue that stands before the fail policy answers it
    /// instead of a remote store (`None`: as long as it takes); counted from the arrival given
    /// to [`standing_queue::arrived`](super::standing_queue::arrived), so only checks made
    /// inside it are ever shed.
    pub queue: Option<QueueLimit>,
    /// How many quota crossings (`notify`) may wait for delivery (default
    /// [`DEFAULT_CROSSING_QUEUE`]); past it, new ones are dropped and counted, never waited for
    /// (see [`Limiter::crossings`](super::Limiter::crossings)).
    pub crossing_queue: usize,
    /// How many nodes decide the same limits through the store (default 1). While the store
    /// cannot be asked, `fail: local` gives this node its share of each limit (the count and
    /// burst divided by `nodes`, at least one unit), so that a fleet cut off from its store
    /// admits about the limit in all, not `nodes` times it.
    pub nodes: NonZeroU32,
}

/// Default [`Options::crossing_queue`].
pub const DEFAULT_CROSSING_QUEUE: usize = 10_000;

/// Default [`Options::max_runtime_limits`].
pub const DEFAULT_MAX_RUNTIME_LIMITS: usize = 10_000;

impl Default for Options {
    fn default() -> Options {
        Options {
            timeout: Duration::from_millis(50),
            fail: FailPolicy::Open,
            max_attribute_len: 1024,
            denial_cache: DenialCacheOptions::default(),
            max_runtime_limits: DEFAULT_MAX_RUNTIME_LIMITS,
            in_flight: InFlightLimit::DEFAULT,
            queue: Some(QueueLimit::DEFAULT),
            crossing_queue: DEFAULT_CROSSING_QUEUE,
            nodes: NonZeroU32::MIN,
        }
    }
}

/// How one check counts: the units it asks for and whether it records them.
///
/// [`Limiter::check`](super::Limiter::check) is `Check::ONE`; pass another to
/// [`Limiter::check_with`](super::Limiter::check_with):
/// ```
/// use sluice::{Check, algorithm::Mode};
/// assert_eq!(Check::cost(3).units(), 3);
/// assert_eq!(Check::cost(3).peek().mode(), Mode::Peek);
/// // Zero units ask without consuming: a peek of one unit.
/// assert_eq!(Check::cost(0), Check::ONE.peek());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    units: u64,
    mode: Mode,
    reserve: bool,
}

impl Check {
    /// One unit, recorded.
    pub const ONE: Check = Check {
        units: 1,
        mode: Mode::Apply,
        reserve: false,
    };

    /// `units` units, recorded. Zero is a peek of one unit: "would one more pass?".
    pub fn cost(units: u64) -> Check {
        if units == 0 {
            Check::ONE.peek()
        } else {
            Check {
                units,
                ..Check::ONE
            }
        }
    }

    /// The same question, answered without recording anything.
    pub fn peek(self) -> Check {
        Check {
            mode: Mode::Peek,
            ..self
        }
    }

    /// The units are an estimate: an admitted check returns a reservation, which
    /// [`Limiter::settle`](super::Limiter::settle) charges at the actual cost once known (see
    /// [`crate::algorithm::settle`]). Only rules whose every limit is a `token_bucket` or `gcra`
    /// take reservations. A peek reserves nothing.
    pub fn reserve(self) -> Check {
        Check {
            reserve: true,
            ..self
        }
    }

    /// Whether an admitted check returns a reservation.
    pub fn reserves(&self) -> bool {
        self.reserve && self.mode == Mode::Apply
    }

    /// The units asked for.
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Whether the check records ([`Mode::Apply`]) or only looks ([`Mode::Peek`]).
    pub fn mode(&self) -> Mode {
        self.mode
    }
}

impl Default for Check {
    fn default() -> Check {
        Check::ONE
    }
}
