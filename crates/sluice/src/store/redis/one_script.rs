//! The one-limit scripts as Redis runs them: one per limit, with the limit's constants written
//! into its text; and [`Spec`], what such a script (or a rule script, `many_script`) is made for.
//!
//! A one-limit script (`<algorithm>.lua#one`, see `source`) needs the limit's numbers and options on every call. As
//! arguments they cost Redis on every call — each one is parsed, made a Redis string, then a Lua
//! string, and converted to a number again — about as much as the algorithm's own Lua. So the
//! store writes them into the script instead, as the line `lua/one_head.lua` expects before it
//! ([`one_text`]), and a call sends only what changes: the time and the cost. Every limit spec
//! (algorithm, numbers, options) gets its own script, made and hashed the first time it decides
//! and kept by `spec_scripts`, and loaded into Redis on its first `NOSCRIPT`; the store's
//! shortest expiry is written into all of them.

use super::constants::declare;
use super::keys::guarded;
use super::source::{self, NOW};
use crate::model::{Algorithm, Micros};
use crate::store::LimitCall;

/// A limit's spec: what a one-limit script, or the limit's part of a rule script, has written
/// into it. Requests whose limits have the same specs, in order, are decided by the same script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spec {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Units per window.
    pub count: u64,
    /// Window length in µs.
    pub window_us: u64,
    /// Capacity.
    pub capacity: u64,
    /// Denials are recorded too.
    pub count_denied: bool,
    /// The limit has a block or a penalty.
    pub guarded: bool,
    /// The penalty's warning threshold, if it has one.
    pub warn_after: Option<u64>,
    /// The limit is in shadow mode: its denial does not stop the others from recording.
    pub shadow: bool,
    /// A quota's period that held this node's clock, `[start, end)` in µs, with its slot: the
    /// script is written for that period, and leaves a decision in another to the general
    /// decision.
    pub period: Option<(u64, u64, u64)>,
}

impl Spec {
    /// The spec of a call's limit, a quota's in the period that holds `at` (given whenever a
    /// call is a quota).
    pub fn of(call: &LimitCall, at: Option<Micros>) -> Spec {
        let s = &call.step;
        let period = s.params.period.zip(at).map(|(period, at)| {
            let bounds = period.bounds_at(at);
            (
                bounds.start.get(),
                bounds.end.get(),
                super::keys::period_slot(bounds.start),
            )
        });
        Spec {
            algorithm: s.algorithm,
            count: s.params.count,
            window_us: s.params.window_us.get(),
            capacity: s.params.capacity,
            count_denied: s.params.count_denied,
            guarded: guarded(call),
            warn_after: s.penalty.map(|p| p.warn_after),
            shadow: s.shadow,
            period,
        }
    }

    /// A limit of `count` units a minute of `algorithm`, without options (for tests).
    #[cfg(test)]
    pub(crate) fn plain(algorithm: Algorithm, count: u64) -> Spec {
        Spec {
            algorithm,
            count,
            window_us: 60_000_000,
            capacity: count,
            count_denied: false,
            guarded: false,
            warn_after: None,
            shadow: false,
            period: None,
        }
    }
}

/// How every reply of a one-limit script ends but for a block in force.
const GUARD_VALUES: &str = ", violations, warning }";

/// `lua/marker_answer.lua`: what `return from_marker(<value>)` in a one-limit script stands for.
const MARKER_ANSWER: &str = include_str!("lua/marker_answer.lua");

/// `body` with each `return from_marker(<value>)` written out as `lua/marker_answer.lua` on the
/// value (a variable): Lua makes a function on every call that defines it, which would cost Redis
/// about 1,500 instructions a call.
fn write_marker_answers(body: &str) -> String {
    const CALL: &str = "return from_marker(";
    let answer = MARKER_ANSWER
        .lines()
        .skip_while(|line| line.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::with_capacity(body.len() + 4 * answer.len());
    let mut rest = body;
    while let Some(at) = rest.find(CALL) {
        out.push_str(&rest[..at]);
        let after = &rest[at + CALL.len()..];
        let (value, tail) = after
            .split_once(')')
            .expect("from_marker's value, then `)`");
        debug_assert!(
            value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        );
        out.push_str(&answer.replacen("...", value, 1));
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Whether the script of `spec` counts in marked windows (`fixed_window.lua#one`): a fixed
/// window of whole milliseconds, on a store that gives keys no longer life than their state
/// needs.
pub fn marked(spec: &Spec, min_ttl: Micros) -> bool {
    source::forms(spec.algorithm).many_marked.is_some()
        && spec.window_us.is_multiple_of(1000)
        && min_ttl.is_zero()
}

/// How a one-limit script of `spec` learns the time: `time_deferred`, it reads `TIME` itself,
/// only when it must; and the slots' modulus of a fixed window's packed answer (`packed_slots`,
/// see `codec::marked`). The match names every algorithm, so that a new one says how its script
/// reads the time.
fn timing(spec: &Spec, min_ttl: Micros) -> (bool, Option<u64>) {
    match spec.algorithm {
        // Counted in marked windows, when its numbers leave a modulus for the packed answer.
        Algorithm::FixedWindow => {
            let slots = marked(spec, min_ttl)
                .then(|| super::codec::packed_slots(spec.count, spec.window_us))
                .flatten();
            (slots.is_some(), slots)
        }
        // With a block or a penalty: TIME after its key, only when it holds no block marker that
        // tells the time (`gcra.lua#one`).
        Algorithm::Gcra => (spec.guarded && min_ttl.is_zero(), None),
        Algorithm::SlidingLog
        | Algorithm::SlidingWindow
        | Algorithm::TokenBucket
        | Algorithm::LeakyBucket
        | Algorithm::Concurrency => (false, None),
    }
}

/// The text of the one-limit script of `spec` on a store whose shortest expiry to write is
/// `min_ttl` (see `RedisOptions::min_ttl`): the limit's numbers, the shared constants it names,
/// `lua/now.lua`, then the algorithm's script; or none for an algorithm without one.
pub fn one_text(spec: &Spec, min_ttl: Micros) -> Option<String> {
    // A quota alone has a script of its own (`quota`); one it does not take (a block, a
    // penalty) is the general decision's.
    if spec.period.is_some() {
        return None;
    }
    let body = source::forms(spec.algorithm).one.as_deref()?;
    let warn_after = spec.warn_after.map_or("nil".to_string(), |w| w.to_string());
    // Without a block or penalty, violations and warning are always 0: the reply leaves them out
    // (the outcome layout, `codec`).
    let body = write_marker_answers(body);
    let body = if spec.guarded {
        body
    } else {
        body.replace(GUARD_VALUES, " }")
    };
    let (time_deferred, packed_slots) = timing(spec, min_ttl);
    let packed_slots = packed_slots.map_or("false".to_string(), |s| s.to_string());
    let body = format!("{NOW}{body}");
    Some(format!(
        "local min_ttl, limit, window, capacity, count_denied, guarded, warn_after, \
         time_deferred, packed_slots, now_at = {}, {}, {}, {}, {}, {}, {warn_after}, \
         {time_deferred}, {packed_slots}, 2\n{}{body}",
        min_ttl.get(),
        spec.count,
        spec.window_us,
        spec.capacity,
        spec.count_denied,
        spec.guarded,
        declare(&body),
    ))
}

#[cfg(test)]
mod tests;
