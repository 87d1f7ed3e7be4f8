//! The Lua sources, and the forms the scripts are generated from.
//!
//! Each algorithm has one Lua source, `lua/<name>.lua` (the registry's `lua_file`), in sections
//! that each open with a line `--@@<form>` (comments call a section `<name>.lua#<form>`):
//! - `general` (every algorithm): its `<name>_look` and `<name>_record` functions, which the
//!   general decision (`lua/decide.lua`) calls through its `LOOKS` and `RECORDS` tables;
//! - `one` (optional): the body of its one-limit script, after `lua/one_head.lua` (and
//!   `lua/idiv.lua` when the body divides): see `one_script`;
//! - `many` (optional, with `one`): its part of a rule script, the look, the line `--@record`,
//!   then the record, every name suffixed `_@` (see `many_script`);
//! - `many_marked` (optional, with `many`): its count in a marked window when a rule's limits are
//!   all counted so (the fixed window);
//! - `give_back` (every algorithm but one that holds leases): `<name>_give_back`, which returns a
//!   cross-slot request's units (`lua/give_back.lua`);
//! - `settle` (the algorithms that settle reservations): `<name>_settle` (`lua/settle.lua`).
//!
//! The give-back and settle scripts take, after the prelude, the `general` section of each
//! algorithm that has such a section, and the sections themselves where their driver says
//! `--@@give_back` or `--@@settle`; the driver finds them by code (`${GIVE_BACKS}`,
//! `${SETTLES}`).
//!
//! Constants that Rust and Lua share are defined once, in Rust, and written into the Lua where it
//! says `${NAME}` ([`render`]): the fixed window's slot modulus and count base, the count cap, the
//! level epsilon, the sliding window's buckets, the sliding log's rebase point, the general
//! decision's and the give-back's arguments per limit, each algorithm's code (`${CODE_GCRA}`)
//! and the general decision's `LOOKS`/`RECORDS` lists, in code order.
//!
//! Generated at load time, not in a build script: the constants are the library's own
//! ([`crate::algorithm::COUNT_CAP`], the registry's codes, the wire layout), which a build script
//! could only see if they moved out of the crate; and the one-limit and rule scripts are made per
//! limit and rule at run time anyway, their numbers written in. Each source is split and rendered
//! once per process ([`forms`]). Rendering only replaces text, so a script's Lua is what it would
//! be with the numbers typed in, and costs Redis the same. A `${` left in a script would fail
//! when Redis loads it: a test renders every script and finds none.

use std::sync::LazyLock;

use crate::algorithm::{COUNT_CAP, LEVEL_EPSILON, sliding_window};
use crate::model::{Algorithm, REGISTRY};

/// A fixed window's count in its key is `-(slot * FIXED_WINDOW_M + count)` (`fixed_window.lua`).
pub(super) const FIXED_WINDOW_M: u64 = 1 << 25;

/// A fixed window's slot is its index modulo this, plus 1 (2^28 − 1: the packed answer needs its
/// factors).
pub(super) const FIXED_WINDOW_SLOTS: u64 = (1 << 28) - 1;

/// A sliding log's starts are rebased to 0 past this (2^51, `sliding_log.lua`).
const SLIDING_LOG_REBASE: u64 = 1 << 51;

/// The Lua source of each algorithm. The match is exhaustive: a new algorithm's source is named
/// here, and nowhere else in the Redis store but where the compiler points.
fn source(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::SlidingLog => include_str!("lua/sliding_log.lua"),
        Algorithm::SlidingWindow => include_str!("lua/sliding_window.lua"),
        Algorithm::FixedWindow => include_str!("lua/fixed_window.lua"),
        Algorithm::TokenBucket => include_str!("lua/token_bucket.lua"),
        Algorithm::Gcra => include_str!("lua/gcra.lua"),
        Algorithm::LeakyBucket => include_str!("lua/leaky_bucket.lua"),
        Algorithm::Concurrency => include_str!("lua/concurrency.lua"),
    }
}

/// The functions of a form that drivers find by code, one per algorithm in code order:
/// `<name>_<form>`, or `false` for an algorithm without that section.
fn by_code(form: &str) -> String {
    Algorithm::ALL
        .map(|a| {
            if sections(source(a)).iter().any(|(n, _)| *n == form) {
                format!("{}_{form}", a.name())
            } else {
                "false".to_string()
            }
        })
        .join(", ")
}

/// The sections the give-back and settle drivers take (see the module doc).
pub(super) const GIVE_BACK: &str = "give_back";
/// See [`GIVE_BACK`].
pub(super) const SETTLE: &str = "settle";

/// The text of a shared constant (see the module doc), by its name in `${NAME}`.
fn constant(name: &str) -> Option<String> {
    let list = |suffix: &str| REGISTRY.map(|e| format!("{}_{suffix}", e.name)).join(", ");
    Some(match name {
        "FIXED_WINDOW_M" => FIXED_WINDOW_M.to_string(),
        "FIXED_WINDOW_SLOTS" => FIXED_WINDOW_SLOTS.to_string(),
        "COUNT_CAP" => COUNT_CAP.to_string(),
        "LEVEL_EPSILON" => format!("{LEVEL_EPSILON:e}"),
        "SLIDING_WINDOW_BUCKETS" => sliding_window::BUCKETS.to_string(),
        "SLIDING_LOG_REBASE" => SLIDING_LOG_REBASE.to_string(),
        "ARGS_PER_LIMIT" => super::codec::ARGS_PER_LIMIT.to_string(),
        "GIVE_BACK_ARGS" => super::cross_slot::GIVE_BACK_ARGS.to_string(),
        "LOOKS" => list("look"),
        "RECORDS" => list("record"),
        "GIVE_BACKS" => by_code(GIVE_BACK),
        "SETTLES" => by_code(SETTLE),
        _ => {
            let code = name.strip_prefix("CODE_")?;
            let entry = REGISTRY
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(code))?;
            entry.wire_code.to_string()
        }
    })
}

/// `text` with each `${NAME}` replaced by the constant's text; an unknown name is left as it is
/// (a test finds none in any script).
pub(super) fn render(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after
            .find('}')
            .and_then(|end| Some((constant(&after[..end])?, end)))
        {
            Some((value, end)) => {
                out.push_str(&value);
                rest = &after[end + 1..];
            }
            None => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// An algorithm's forms, split from its source and rendered.
#[derive(Debug)]
pub(super) struct Forms {
    /// The `general` section.
    pub general: String,
    /// The one-limit script but for the limit's constants and `lua/now.lua`: `lua/one_head.lua`,
    /// `lua/idiv.lua` if the `one` section divides, then that section.
    pub one: Option<String>,
    /// The `many` section: the look and the record.
    pub many: Option<(String, String)>,
    /// The `many_marked` section.
    pub many_marked: Option<String>,
    /// The `give_back` section.
    pub give_back: Option<String>,
    /// The `settle` section.
    pub settle: Option<String>,
}

/// The line that ends a rule script part's look and opens its record.
pub(super) const RECORD: &str = "--@record\n";

/// The sections of `text`, by form: each runs from its `--@@<form>` line to the next one.
fn sections(text: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut name: Option<&str> = None;
    loop {
        let next = rest.find("\n--@@");
        let (body, after) = match next {
            Some(at) => (&rest[..=at], Some(&rest[at + 5..])),
            None => (rest, None),
        };
        if let Some(name) = name {
            out.push((name, body));
        }
        let Some(after) = after else {
            return out;
        };
        let (line, tail) = after.split_once('\n').unwrap_or((after, ""));
        name = Some(line.trim());
        rest = tail;
    }
}

fn split(algorithm: Algorithm) -> Forms {
    let sections = sections(source(algorithm));
    let form = |name: &str| {
        sections
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, body)| render(body))
    };
    let one = form("one").map(|body| {
        let idiv = if body.contains("idiv(") {
            include_str!("lua/idiv.lua")
        } else {
            ""
        };
        format!("{}{idiv}{body}", include_str!("lua/one_head.lua"))
    });
    let many = form("many").and_then(|text| {
        let (look, record) = text.split_once(RECORD)?;
        Some((look.to_string(), record.to_string()))
    });
    Forms {
        general: form("general").unwrap_or_default(),
        one,
        many,
        many_marked: form("many_marked"),
        give_back: form(GIVE_BACK),
        settle: form(SETTLE),
    }
}

static FORMS: LazyLock<Vec<Forms>> =
    LazyLock::new(|| Algorithm::ALL.into_iter().map(split).collect());

/// The forms of `algorithm`, made the first time any is asked for.
pub(super) fn forms(algorithm: Algorithm) -> &'static Forms {
    // ALL is in declaration order, which `entry` indexes by too.
    &FORMS[algorithm as usize]
}

/// Every algorithm's general section, in code order: what the general decision defines.
pub(super) fn general() -> String {
    Algorithm::ALL
        .into_iter()
        .map(|a| forms(a).general.as_str())
        .collect()
}

/// `driver` (a script's own part, after the prelude) with the algorithms' sections of `form`
/// (`GIVE_BACK` or `SETTLE`) written in where it says `--@@<form>`, after the `general` section
/// of each algorithm that has one; rendered.
pub(super) fn with_sections(driver: &str, form: &str) -> String {
    let section = |a: Algorithm| match form {
        GIVE_BACK => forms(a).give_back.as_deref(),
        _ => forms(a).settle.as_deref(),
    };
    let having = || Algorithm::ALL.into_iter().filter(|&a| section(a).is_some());
    let generals: String = having().map(|a| forms(a).general.as_str()).collect();
    let sections: String = having().filter_map(section).collect();
    let driver = render(driver).replacen(&format!("\n--@@{form}\n"), &format!("\n{sections}"), 1);
    format!("{generals}{driver}")
}

#[cfg(test)]
mod tests;
