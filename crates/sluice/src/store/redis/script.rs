//! The Lua scripts, and which one decides a request.
//!
//! Which script decides a request depends on its spec ([`Scripts::script_for`]):
//! - one limit, applied (the common case): `<algorithm>.lua#one`, a script written for that
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
//! - anything else (a peek, `count_denied` among several limits, what a one-limit or rule script left):
//!   `decide`, the prelude, every algorithm's `general` section and `lua/decide.lua`, which restates [`crate::algorithm::decide`].
//!   Its first part, `lua/blocked.lua`, answers a one-limit request of a blocked identity before
//!   anything else (a blocked identity costs Redis a read), and otherwise keeps its read for the
//!   look.
//!
//! The general decision runs as a Redis function ([`Library`], `FCALL`): the prelude and the
//! algorithms are defined once, when the library is loaded, where a script defines them again on
//! every call (about 4.5 µs of Redis time, more than most decisions). The same code is kept as
//! the script [`Scripts::decide`] for a server that refuses functions.
//!
//! Every script is put together from the Lua sources when a store is made (see `source`), and
//! opens with the shared constants it names (`constants::declare`).
//!
//! The layout of KEYS/ARGV/reply is documented in each script and mirrored by
//! `codec`, which must stay in step with them.

use std::sync::Arc;

use redis::Script;

use smallvec::SmallVec;

use super::constants::declare;
use super::cross_slot;
use super::many_script::MAX_LIMITS;
use super::one_script::Spec;
use super::quota::QuotaScripts;
use super::shared_call::SpecScript;
use super::source::{self, PRELUDE, whole};
use super::spec_scripts::SpecScripts;
use crate::algorithm::Mode;
use crate::model::Micros;
use crate::store::LimitCall;

/// The general decision's driver: the blocked answer first, then `lua/decide.lua`.
const DRIVER: &str = concat!(
    include_str!("lua/blocked.lua"),
    include_str!("lua/decide.lua")
);

/// The definitions the general decision uses: the constants its code names, the prelude, every
/// algorithm's `general` section in code order, and their tables.
fn definitions() -> String {
    let code = format!("{PRELUDE}{}{}", source::general(), source::tables());
    format!("{}{code}", declare(&format!("{code}{DRIVER}")))
}

/// The general decision as a function library (`FUNCTION LOAD`): the definitions run once when
/// it loads; the function runs the driver with `KEYS` and `ARGV` as its parameters, so the
/// driver's code is the script's, unchanged. The library and function names carry a hash of the
/// code, so Sluice versions that differ never call each other's.
#[derive(Debug, Clone)]
pub struct Library {
    /// The source for `FUNCTION LOAD REPLACE`.
    pub source: String,
    /// The name to `FCALL`.
    pub function: String,
}

impl Library {
    fn new(definitions: &str) -> Library {
        let driver = DRIVER;
        let hash = Script::new(&format!("{definitions}{driver}")).get_hash()[..12].to_string();
        let function = format!("sluice_decide_{hash}");
        let source = format!(
            "#!lua name=sluice_{hash}\n{definitions}\nlocal function decide(KEYS, ARGV)\n{driver}\nend\n\
             redis.register_function('{function}', decide)\n"
        );
        Library { source, function }
    }
}

/// The settle script: the prelude, then `lua/settle.lua` with each settling algorithm's
/// `settle` section (see `source::with_sections`).
fn settle_text() -> String {
    let driver = source::with_sections(include_str!("lua/settle.lua"), source::SETTLE);
    whole(&format!("{PRELUDE}{driver}"))
}

/// The run-time change script: the prelude, the fixed window's `general` section (the quota's
/// count it moves), then `lua/runtime_change.lua`.
fn runtime_change_text() -> String {
    let fixed_window = &source::forms(crate::model::Algorithm::FixedWindow).general;
    let driver = include_str!("lua/runtime_change.lua");
    whole(&format!("{PRELUDE}{fixed_window}{driver}"))
}

/// A script of the prelude and `part`.
fn after_prelude(part: &str) -> String {
    whole(&format!("{PRELUDE}{part}"))
}

/// The scripts, hashed once.
#[derive(Debug)]
pub struct Scripts {
    /// See `one_script` and `many_script`: made per limit or rule, when it first decides.
    pub scripted: SpecScripts,
    /// The general decision as a script, for a server that refuses functions: the definitions,
    /// then the driver.
    pub decide: Script,
    /// The admin block script (`lua/block.lua`).
    pub block: Script,
    /// The admin unblock script (`lua/unblock.lua`).
    pub unblock: Script,
    /// The release and renew script of concurrency limits' leases (`lua/lease.lua`).
    pub lease: Script,
    /// The settle script of reservations (`lua/settle.lua`).
    pub settle: Script,
    /// The give-back script of cross-slot requests (see `cross_slot`).
    pub give_back: Script,
    /// The script that sets or removes an identity's run-time numbers (`lua/runtime_change.lua`).
    pub runtime_change: Script,
    /// The scripts of a quota alone (`lua/quota.lua`), made per quota and period.
    pub quota: QuotaScripts,
    /// See [`Library`].
    pub library: Library,
}

impl Scripts {
    /// Hashes the scripts, for a store whose shortest expiry to write is `min_ttl`.
    pub fn new(min_ttl: Micros) -> Scripts {
        let definitions = definitions();
        Scripts {
            scripted: SpecScripts::new(min_ttl),
            decide: Script::new(&format!("{definitions}{DRIVER}")),
            block: Script::new(&after_prelude(include_str!("lua/block.lua"))),
            unblock: Script::new(&after_prelude(include_str!("lua/unblock.lua"))),
            lease: Script::new(&after_prelude(include_str!("lua/lease.lua"))),
            settle: Script::new(&settle_text()),
            give_back: Script::new(&cross_slot::give_back_text()),
            runtime_change: Script::new(&runtime_change_text()),
            quota: QuotaScripts::new(min_ttl),
            library: Library::new(&definitions),
        }
    }

    /// Every script known before any decision, for loading them all (the one-limit and rule
    /// scripts are made per spec, and loaded on their first `NOSCRIPT`).
    pub fn all(&self) -> impl Iterator<Item = &Script> {
        [
            &self.decide,
            &self.block,
            &self.unblock,
            &self.lease,
            &self.settle,
            &self.give_back,
            &self.runtime_change,
        ]
        .into_iter()
    }

    /// The one-limit or rule script that decides these calls, if they have such a spec.
    ///
    /// A quota's script is written for the period that holds `at` (this node's clock, read once
    /// and only for a quota), and leaves a decision in another period to the general decision.
    pub fn script_for(
        &self,
        calls: &[LimitCall],
        mode: Mode,
        at: impl FnOnce() -> Micros,
    ) -> Option<Arc<SpecScript>> {
        // A settable limit's numbers are read by the general decision alone.
        if mode != Mode::Apply || calls.len() > MAX_LIMITS || calls.iter().any(|c| c.step.settable)
        {
            return None;
        }
        let at = calls
            .iter()
            .any(|c| c.step.params.period.is_some())
            .then(at);
        let specs: SmallVec<[Spec; 4]> = calls.iter().map(|c| Spec::of(c, at)).collect();
        self.scripted.get(&specs)
    }
}

/// Every script a store loads before its first decision, as text.
#[cfg(test)]
pub(super) fn texts() -> Vec<String> {
    let definitions = definitions();
    let mut texts = vec![
        format!("{definitions}{DRIVER}"),
        Library::new(&definitions).source,
        cross_slot::give_back_text(),
        runtime_change_text(),
    ];
    for part in [
        include_str!("lua/block.lua"),
        include_str!("lua/unblock.lua"),
        include_str!("lua/lease.lua"),
    ] {
        texts.push(after_prelude(part));
    }
    texts.push(settle_text());
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_opens_with_the_constants_it_names_then_the_prelude() {
        let texts = texts();
        for text in &texts {
            let code = text
                .strip_prefix("#!lua name=sluice_")
                .map_or(text.as_str(), |rest| {
                    rest.split_once('\n').expect("the library's name line").1
                });
            let (declared, rest) = code.split_once('\n').expect("a declaration line");
            assert_eq!(format!("{declared}\n"), declare(rest), "{}", &code[..80]);
            assert!(rest.starts_with(PRELUDE), "{}", &rest[..80]);
        }
        let library = &texts[1];
        assert!(library.contains(&definitions()));
        let (declared, _) = texts[0].split_once(" = ").expect("constants");
        assert!(declared.contains("ARGS_PER_LIMIT"), "{declared}");
    }
}
