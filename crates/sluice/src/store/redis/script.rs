//! The Lua scripts, and which one decides a request.
//!
//! Which script decides a request depends on its shape ([`Scripts::shaped_for`]):
//! - one limit, applied (the common case): `one_<algorithm>.lua`, a script written for that
//!   algorithm alone, at the floor of what Redis must do, and made for the limit itself (its
//!   constants written into it, see `one_script`). It handles the state it expects and
//!   answers `{}` for anything else (a block marker, another algorithm's state, for the sliding
//!   log a denial), having written nothing; the store then sends the general script. For a limit
//!   with a block or a penalty it also answers a block in force and reports the penalty's
//!   violations, and leaves every denial (which blocks and counts a violation) to the general
//!   script. The leaky bucket has none.
//! - several limits, each with a one-limit script and without `count_denied`: a rule script made
//!   for the rule (`many_script`), their one-limit scripts split into looks and records; it
//!   leaves to the general script what a one-limit script leaves, a sliding log's denial and a
//!   block marker.
//! - anything else (a peek, `count_denied` among several limits, what a shaped script left):
//!   `decide`, the
//!   prelude, every algorithm and `lua/decide.lua`, which restates [`crate::algorithm::step`].
//!   Its first part, `lua/blocked.lua`, answers a one-limit request of a blocked identity before
//!   anything else (a blocked identity costs Redis a read), and otherwise keeps its read for the
//!   look.
//!
//! The general decision runs as a Redis function ([`Library`], `FCALL`): the prelude and the
//! algorithms are defined once, when the library is loaded, where a script defines them again on
//! every call (about 4.5 µs of Redis time, more than most decisions). The same code is kept as
//! the script [`DECIDE`] for a server that refuses functions.
//!
//! The layout of KEYS/ARGV/reply is documented in each script and mirrored by
//! `store::redis::wire`, which must stay in step with them.

use std::sync::Arc;

use redis::Script;

use smallvec::SmallVec;

use super::many_script::MAX_LIMITS;
use super::one_script::Shape;
use super::shape_scripts::ShapeScripts;
use super::shared_call::Shaped;
use crate::algorithm::Mode;
use crate::model::{Micros, REGISTRY};
use crate::store::LimitCall;

/// The shared part of every script but the one-limit ones, as one literal: `lua/idiv.lua` and
/// `lua/prelude.lua` (a macro, so that `concat!` can join it to each script's own parts).
macro_rules! prelude {
    () => {
        concat!(
            include_str!("lua/idiv.lua"),
            include_str!("lua/prelude.lua")
        )
    };
}
pub(crate) use prelude;

/// The decision time, the first lines of every script made for a limit or a rule: `lua/now.lua`.
pub const NOW: &str = include_str!("lua/now.lua");

/// A one-limit script: `lua/one_head.lua` (the time and the cost), the parts it names
/// (`idiv.lua` for the sliding window and GCRA), then `lua/one_<algorithm>.lua`. Redis runs it
/// after the limit's constants and [`NOW`] ([`one_script::one_text`](super::one_script::one_text)).
macro_rules! one {
    ($($part:literal),+) => {
        Some(concat!(include_str!("lua/one_head.lua"), $(include_str!(concat!("lua/", $part))),+))
    };
}

/// The one-limit scripts' text, in registry order ([`crate::model::REGISTRY`]: index = wire code - 1).
pub const ONE: [Option<&str>; REGISTRY.len()] = [
    one!("one_sliding_log.lua"),
    one!("idiv.lua", "one_sliding_window.lua"),
    one!("one_fixed_window.lua"),
    one!("one_token_bucket.lua"),
    one!("idiv.lua", "one_gcra.lua"),
    None,
    None,
];

/// The definitions the general decision uses, as one literal: the prelude and every algorithm,
/// in registry order (a macro, so that [`DECIDE`] and [`DEFINITIONS`] share the one list).
macro_rules! definitions {
    () => {
        concat!(
            prelude!(),
            include_str!("lua/sliding_log.lua"),
            include_str!("lua/sliding_window.lua"),
            include_str!("lua/fixed_window.lua"),
            include_str!("lua/token_bucket.lua"),
            include_str!("lua/gcra.lua"),
            include_str!("lua/leaky_bucket.lua"),
            include_str!("lua/concurrency.lua"),
        )
    };
}

/// The general decision script: the definitions, then the driver (the blocked answer first).
pub const DECIDE: &str = concat!(
    definitions!(),
    include_str!("lua/blocked.lua"),
    include_str!("lua/decide.lua"),
);

/// The definitions the general decision uses (see [`definitions!`]).
const DEFINITIONS: &str = definitions!();

/// The general decision as a function library (`FUNCTION LOAD`): [`DEFINITIONS`] run once when
/// it loads; the function runs `lua/blocked.lua` and `lua/decide.lua` with `KEYS` and `ARGV` as
/// its parameters, so the driver's code is the script's, unchanged. The library and function
/// names carry a hash of the code, so Sluice versions that differ never call each other's.
#[derive(Debug, Clone)]
pub struct Library {
    /// The source for `FUNCTION LOAD REPLACE`.
    pub source: String,
    /// The name to `FCALL`.
    pub function: String,
}

impl Library {
    fn new() -> Library {
        let driver = concat!(
            include_str!("lua/blocked.lua"),
            include_str!("lua/decide.lua")
        );
        let hash = Script::new(&format!("{DEFINITIONS}{driver}")).get_hash()[..12].to_string();
        let function = format!("sluice_decide_{hash}");
        let source = format!(
            "#!lua name=sluice_{hash}\n{DEFINITIONS}\nlocal function decide(KEYS, ARGV)\n{driver}\nend\n\
             redis.register_function('{function}', decide)\n"
        );
        Library { source, function }
    }
}

/// The admin block script.
pub const BLOCK: &str = concat!(prelude!(), include_str!("lua/block.lua"));

/// The admin unblock script.
pub const UNBLOCK: &str = concat!(prelude!(), include_str!("lua/unblock.lua"));

/// The release and renew script of concurrency limits' leases.
pub const LEASE: &str = concat!(prelude!(), include_str!("lua/lease.lua"));

/// The settle script of reservations.
pub const SETTLE: &str = concat!(prelude!(), include_str!("lua/settle.lua"));

/// The scripts, hashed once.
#[derive(Debug)]
pub struct Scripts {
    /// See [`ONE`] and `many_script`: made per limit or rule, when it first decides.
    pub shaped: ShapeScripts,
    /// See [`DECIDE`].
    pub decide: Script,
    /// See [`BLOCK`].
    pub block: Script,
    /// See [`UNBLOCK`].
    pub unblock: Script,
    /// See [`LEASE`].
    pub lease: Script,
    /// See [`SETTLE`].
    pub settle: Script,
    /// See [`Library`].
    pub library: Library,
}

impl Scripts {
    /// Hashes the scripts, for a store whose shortest expiry to write is `min_ttl`.
    pub fn new(min_ttl: Micros) -> Scripts {
        Scripts {
            shaped: ShapeScripts::new(min_ttl),
            decide: Script::new(DECIDE),
            block: Script::new(BLOCK),
            unblock: Script::new(UNBLOCK),
            lease: Script::new(LEASE),
            settle: Script::new(SETTLE),
            library: Library::new(),
        }
    }

    /// Every script known before any decision, for loading them all (the one-limit and rule
    /// scripts are made per shape, and loaded on their first `NOSCRIPT`).
    pub fn all(&self) -> impl Iterator<Item = &Script> {
        [
            &self.decide,
            &self.block,
            &self.unblock,
            &self.lease,
            &self.settle,
        ]
        .into_iter()
    }

    /// The one-limit or rule script that decides these calls, if they have such a shape.
    pub fn shaped_for(&self, calls: &[LimitCall], mode: Mode) -> Option<Arc<Shaped>> {
        if mode != Mode::Apply || calls.len() > MAX_LIMITS {
            return None;
        }
        let shapes: SmallVec<[Shape; 4]> = calls.iter().map(Shape::of).collect();
        self.shaped.get(&shapes)
    }
}

/// Whether a limit keeps a block key and a violations key beside its state.
pub fn guarded(call: &LimitCall) -> bool {
    call.step.block_us.is_some() || call.step.penalty.is_some()
}

#[cfg(test)]
mod tests {
    use super::super::wire::ARGS_PER_LIMIT;
    use super::*;
    use crate::model::Algorithm;

    #[test]
    fn every_script_starts_with_the_prelude_and_has_a_header() {
        for s in [DECIDE, BLOCK, UNBLOCK, LEASE, SETTLE] {
            assert!(s.starts_with(prelude!()));
        }
        let library = Library::new();
        assert!(library.source.starts_with("#!lua name=sluice_"));
        assert!(library.source.contains(DEFINITIONS));
        assert!(DECIDE.contains(include_str!("lua/blocked.lua")));
        assert!(DECIDE.contains(&format!("local ARGS_PER_LIMIT = {ARGS_PER_LIMIT}")));
        for a in Algorithm::ALL {
            if let Some(one) = ONE[usize::from(a.wire_code()) - 1] {
                assert!(one.starts_with(include_str!("lua/one_head.lua")));
                assert!(one.contains(&format!("\n-- one_{}: ", a.name())));
            }
        }
    }
}
