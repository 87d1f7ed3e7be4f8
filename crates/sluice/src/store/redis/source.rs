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
//! `--@@give_back` or `--@@settle`, followed by the table the driver finds them in by code
//! (`GIVE_BACKS`, `SETTLES`: [`with_sections`]). The general decision finds each algorithm's look
//! and record in the tables `LOOKS` and `RECORDS` ([`tables`]).
//!
//! The constants Rust and Lua share are in `constants`: a script is put together from these parts
//! and opens with the constants it names ([`whole`], `constants::declare`); no part is edited.
//! The parts every script is made of are here too, below every module that makes scripts: the
//! prelude ([`PRELUDE`]) and the decision time ([`NOW`]). Put
//! together at load time, not in a build script: the constants are the library's own
//! ([`crate::algorithm::COUNT_CAP`], the registry's codes, the wire layout), which a build script
//! could only see if they moved out of the crate; and the one-limit and rule scripts are made per
//! limit and rule at run time anyway, their numbers written in. Each source is split once per
//! process ([`forms`]).

use std::sync::LazyLock;

use super::constants::declare;
use crate::model::Algorithm;

/// The shared part of every script but the one-limit ones: `lua/idiv.lua` and
/// `lua/prelude.lua`.
pub const PRELUDE: &str = concat!(
    include_str!("lua/idiv.lua"),
    include_str!("lua/prelude.lua")
);

/// The decision time, the first lines of every script made for a limit or a rule: `lua/now.lua`.
pub const NOW: &str = include_str!("lua/now.lua");

/// A whole script of `code`: the constants it names, then the code.
pub fn whole(code: &str) -> String {
    format!("{}{code}", declare(code))
}

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

/// `local <name> = { <form> of each algorithm, by code }`: a driver's table of the functions of
/// a form ([`by_code`]).
fn table(name: &str, form: &str) -> String {
    format!("local {name} = {{ {} }}\n", by_code(form))
}

/// The general decision's tables of each algorithm's look and record (every algorithm's
/// `general` section defines both), after their definitions.
pub(super) fn tables() -> String {
    let every = |name: &str, suffix: &str| {
        let functions = Algorithm::ALL.map(|a| format!("{}_{suffix}", a.name()));
        format!("local {name} = {{ {} }}\n", functions.join(", "))
    };
    format!("{}{}", every("LOOKS", "look"), every("RECORDS", "record"))
}

/// An algorithm's forms, split from its source.
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
            .map(|(_, body)| body.to_string())
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
/// (`GIVE_BACK` or `SETTLE`) where it says `--@@<form>`, then their table (`GIVE_BACKS` or
/// `SETTLES`), after the `general` section of each algorithm that has one.
pub(super) fn with_sections(driver: &str, form: &str) -> String {
    let section = |a: Algorithm| match form {
        GIVE_BACK => forms(a).give_back.as_deref(),
        _ => forms(a).settle.as_deref(),
    };
    let having = || Algorithm::ALL.into_iter().filter(|&a| section(a).is_some());
    let generals: String = having().map(|a| forms(a).general.as_str()).collect();
    let sections: String = having().filter_map(section).collect();
    let (head, tail) = driver
        .split_once(&format!("\n--@@{form}\n"))
        .expect("the driver says where the sections go");
    let table = table(&format!("{}S", form.to_uppercase()), form);
    format!("{generals}{head}\n{sections}{table}{tail}")
}

#[cfg(test)]
mod tests;
