//! The one-limit scripts as Redis runs them: one per limit, with the limit's constants written
//! into its text; and [`Shape`], what such a script (or a rule script, `many_script`) is made for.
//!
//! A one-limit script (`script::ONE`) needs the limit's numbers and options on every call. As
//! arguments they cost Redis on every call — each one is parsed, made a Redis string, then a Lua
//! string, and converted to a number again — about as much as the algorithm's own Lua. So the
//! store writes them into the script instead, as the line `lua/one_head.lua` expects before it
//! ([`one_text`]), and a call sends only what changes: the time and the cost. Every limit shape
//! (algorithm, numbers, options) gets its own script, made and hashed the first time it decides
//! and kept by `shape_scripts`, and loaded into Redis on its first `NOSCRIPT`; the store's
//! shortest expiry is written into all of them.

use super::script::{NOW, ONE, guarded};
use crate::model::{Algorithm, Micros};
use crate::store::LimitCall;

/// What a one-limit script, or a limit's part of a rule script, has written into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The algorithm's wire code.
    pub code: u8,
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
}

impl Shape {
    /// The shape of a call's limit.
    pub fn of(call: &LimitCall) -> Shape {
        let s = &call.step;
        Shape {
            code: s.algorithm.wire_code(),
            count: s.params.count,
            window_us: s.params.window_us.get(),
            capacity: s.params.capacity,
            count_denied: s.params.count_denied,
            guarded: guarded(call),
            warn_after: s.penalty.map(|p| p.warn_after),
            shadow: s.shadow,
        }
    }

    /// A limit of `count` units a minute of the algorithm `code`, without options (for tests).
    #[cfg(test)]
    pub(crate) fn plain(code: u8, count: u64) -> Shape {
        Shape {
            code,
            count,
            window_us: 60_000_000,
            capacity: count,
            count_denied: false,
            guarded: false,
            warn_after: None,
            shadow: false,
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

/// Whether the script of `shape` counts in marked windows (`lua/one_fixed_window.lua`): a fixed
/// window of whole milliseconds, on a store that gives keys no longer life than their state needs.
pub fn marked(shape: &Shape, min_ttl: Micros) -> bool {
    shape.code == Algorithm::FixedWindow.wire_code()
        && shape.window_us.is_multiple_of(1000)
        && min_ttl.is_zero()
}

/// What a one-limit script's `marked` is written as: the slots' modulus of a fixed window that
/// counts in marked windows (`lua/one_fixed_window.lua`); `true` for a GCRA limit with a block or
/// a penalty, which reads `TIME` after its key, only when it holds no block marker that tells the
/// time (`lua/one_gcra.lua`); else `false`.
fn marked_text(shape: &Shape, min_ttl: Micros) -> String {
    if let Some(modulus) = marked_slots(shape, min_ttl) {
        return modulus.to_string();
    }
    let late = shape.code == Algorithm::Gcra.wire_code() && shape.guarded && min_ttl.is_zero();
    late.to_string()
}

/// The slots' modulus of a one-limit script that counts in marked windows, which packs its
/// answer into one number (`packed_reply`): a [`marked`] window whose numbers leave one.
fn marked_slots(shape: &Shape, min_ttl: Micros) -> Option<u64> {
    marked(shape, min_ttl)
        .then(|| super::packed_reply::slots(shape.count, shape.window_us))
        .flatten()
}

/// The text of the one-limit script of `shape` on a store whose shortest expiry to write is
/// `min_ttl` (see `RedisOptions::min_ttl`): its constants, `lua/now.lua`, then the algorithm's
/// script; or none for an algorithm without one.
pub fn one_text(shape: &Shape, min_ttl: Micros) -> Option<String> {
    let body = ONE
        .get(usize::from(shape.code).checked_sub(1)?)
        .copied()
        .flatten()?;
    let warn_after = shape
        .warn_after
        .map_or("nil".to_string(), |w| w.to_string());
    // Without a block or penalty, violations and warning are always 0: the reply leaves them out
    // (wire::SHAPED_REPLY_PER_LIMIT).
    let body = write_marker_answers(body);
    let body = if shape.guarded {
        body
    } else {
        body.replace(GUARD_VALUES, " }")
    };
    Some(format!(
        "local min_ttl, limit, window, capacity, count_denied, guarded, warn_after, marked, \
         now_at = {}, {}, {}, {}, {}, {}, {warn_after}, {}, 2\n{NOW}{body}",
        min_ttl.get(),
        shape.count,
        shape.window_us,
        shape.capacity,
        shape.count_denied,
        shape.guarded,
        marked_text(shape, min_ttl),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(code: u8, count: u64) -> Shape {
        Shape {
            guarded: true,
            warn_after: Some(3),
            ..Shape::plain(code, count)
        }
    }

    #[test]
    fn a_script_opens_with_its_constants_then_the_algorithms_script() {
        let gcra = shape(Algorithm::Gcra.wire_code(), 100);
        let text = one_text(&gcra, Micros::ZERO).expect("gcra has a one-limit script");
        let (constants, body) = text.split_once('\n').expect("two parts");
        let body = body.strip_prefix(NOW).expect("the time first");
        assert_eq!(
            constants,
            "local min_ttl, limit, window, capacity, count_denied, guarded, warn_after, marked, \
             now_at = 0, 100, 60000000, 100, false, true, 3, true, 2"
        );
        let gcra_body = ONE[usize::from(gcra.code) - 1].expect("a one-limit GCRA");
        assert_eq!(body, write_marker_answers(gcra_body));
        // Every reply ends with the violations and the warning, which an unguarded limit's
        // script leaves out.
        for (code, body) in (1u8..).zip(ONE) {
            let Some(body) = body else {
                continue;
            };
            let returns = body.matches("return { now,").count();
            assert_eq!(body.matches(GUARD_VALUES).count(), returns, "{code}");
            let plain = one_text(&Shape::plain(code, 10), Micros::ZERO).expect("a script");
            assert!(!plain.contains("violations, warning }"), "{code}");
            // A marker's answer is written where each script asks for it: no function is made.
            let guarded = one_text(&shape(code, 10), Micros::ZERO).expect("a script");
            let mut lines = guarded
                .lines()
                .filter(|l| !l.trim_start().starts_with("--"));
            assert!(!lines.any(|l| l.contains("from_marker")), "{code}");
            assert_eq!(
                guarded.matches("string.byte(held, 1) == 66").count(),
                body.matches("return from_marker(").count(),
                "{code}"
            );
            assert!(body.contains("return from_marker("), "{code}");
        }
        let unpenalized = Shape {
            warn_after: None,
            ..gcra
        };
        assert!(
            one_text(&unpenalized, Micros::ZERO)
                .expect("a script")
                .contains(", nil, true, 2\n")
        );
        let leaky = shape(Algorithm::LeakyBucket.wire_code(), 100);
        assert_eq!(
            one_text(&leaky, Micros::ZERO),
            None,
            "no one-limit leaky bucket"
        );
        assert_eq!(one_text(&shape(0, 1), Micros::ZERO), None);
        // Only a fixed window of whole ms counts in marked windows, and only where keys live no
        // longer than their state matters.
        let fixed = Shape::plain(Algorithm::FixedWindow.wire_code(), 10);
        // Such a script packs its admissions into one number, with the slots' modulus written in
        // where `marked` stands (`packed_reply`); a limit whose numbers leave none reads TIME.
        let modulus = |shape: &Shape, min_ttl: u64| {
            let text = one_text(shape, Micros::new(min_ttl)).expect("a script");
            let constants = text.lines().next().expect("constants");
            constants.rsplit(", ").nth(1).expect("marked").to_string()
        };
        let marks = |shape: &Shape, min_ttl: u64| modulus(shape, min_ttl) != "false";
        assert_eq!(modulus(&fixed, 0), "268435455");
        assert!(!marks(
            &Shape {
                count: 1 << 40,
                ..fixed
            },
            0
        ));
        assert!(marks(&fixed, 0));
        assert!(!marks(&fixed, 1));
        assert!(!marks(
            &Shape {
                window_us: 1500,
                ..fixed
            },
            0
        ));
        assert!(marks(
            &Shape {
                guarded: true,
                ..fixed
            },
            0
        ));
        assert!(!marks(&Shape::plain(Algorithm::Gcra.wire_code(), 10), 0));
        // A GCRA limit with a block or a penalty reads TIME after its key.
        let blocked_gcra = Shape {
            warn_after: None,
            ..shape(Algorithm::Gcra.wire_code(), 10)
        };
        assert_eq!(modulus(&blocked_gcra, 0), "true");
        assert_eq!(modulus(&blocked_gcra, 1), "false");
        assert_eq!(modulus(&shape(Algorithm::Gcra.wire_code(), 10), 0), "true");
        assert_eq!(one_text(&shape(200, 1), Micros::ZERO), None);
    }
}
