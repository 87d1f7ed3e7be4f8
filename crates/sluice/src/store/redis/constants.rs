//! The constants the store's Rust and its scripts share, each defined once, here: key suffixes,
//! the block marker, the state formats' numbers, the arguments' widths and the algorithms'
//! codes. A script opens with those it names ([`declare`]: `local NAME, … = value, …`), so its
//! Lua never spells a number or a name that Rust also reads, and its text is put together from
//! parts without editing any of them.
//!
//! Invariants: a script names a constant as a whole word in its code (comments do not count), and
//! every script is put together by the store's own functions, which declare what it names; a
//! constant a script does not name costs it nothing (each declared one costs Redis a Lua
//! instruction a call). The Lua local names are the Rust ones.

use std::collections::HashSet;
use std::sync::LazyLock;

use crate::algorithm::{COUNT_CAP, LEVEL_EPSILON, sliding_window};
use crate::model::REGISTRY;

/// Where a blocked identity's state is parked: `{state key}:h` (see `lua/prelude.lua`).
pub const PARKED: &str = ":h";
/// An identity's remembered violations: `{state key}:v`.
pub const VIOLATIONS: &str = ":v";
/// An identity's run-time numbers of a settable limit: `{state key}:r`.
pub const RUNTIME: &str = ":r";
/// A block's end, under a readable name that listings scan: `{readable state key}:b`.
pub const BLOCK: &str = ":b";
/// A block marker in a state key: `B<end µs>` (see `lua/prelude.lua`).
pub const MARKER: &str = "B";
/// A block marker that expires with its block: `B0<end µs>`; its PTTL tells Redis' time.
pub const MARKER_AT_END: &str = "B0";

/// A fixed window's count in its key is `-(slot * FIXED_WINDOW_M + count)` (`codec::marked`).
pub const FIXED_WINDOW_M: u64 = 1 << 25;
/// A fixed window's slot is its index modulo this, plus 1 (2^28 − 1: the packed answer needs its
/// factors, `codec::marked`).
pub const FIXED_WINDOW_SLOTS: u64 = (1 << 28) - 1;
/// A quota's key is marked with the slot of its period's first hour, counted in these µs: no two
/// periods share one, the shortest lasting 23 hours (`fixed_window.lua`, `quota.rs`).
pub const PERIOD_SLOT_US: u64 = 3_600_000_000;
/// A sliding log's starts are rebased to 0 past this (2^51, `sliding_log.lua`).
pub const SLIDING_LOG_REBASE: u64 = 1 << 51;
/// Values `decide.lua` reads per limit.
pub const ARGS_PER_LIMIT: usize = 13;
/// A settable limit's algorithm code in `decide.lua`'s ARGV is negated, with the billing day a
/// settable monthly quota's identity is assumed to keep above it: `-(code + CODES_M * day)`
/// (codes are below it; no ARGV more for the day).
pub const CODES_M: u64 = 16;
/// Values the give-back script reads per limit (`give_back.lua`).
pub const GIVE_BACK_ARGS: usize = 6;

/// A Lua string literal of `text` (which holds no quote or backslash).
fn quoted(text: &str) -> String {
    format!("'{text}'")
}

/// Every shared constant by its Lua name, with its Lua value.
static LUA: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let byte = |text: &str, at: usize| text.as_bytes()[at].to_string();
    let mut all: Vec<(String, String)> = [
        ("PARKED", quoted(PARKED)),
        ("VIOLATIONS", quoted(VIOLATIONS)),
        ("RUNTIME", quoted(RUNTIME)),
        ("MARKER", quoted(MARKER)),
        ("MARKER_AT_END", quoted(MARKER_AT_END)),
        // The bytes a script tests a value's first two against (string.byte), and the pattern
        // that reads a marker's end.
        ("MARKER_BYTE", byte(MARKER, 0)),
        ("AT_END_BYTE", byte(MARKER_AT_END, 1)),
        ("MARKER_END", quoted(&format!("^{MARKER}(%d+)"))),
        ("FIXED_WINDOW_M", FIXED_WINDOW_M.to_string()),
        ("FIXED_WINDOW_SLOTS", FIXED_WINDOW_SLOTS.to_string()),
        ("PERIOD_SLOT_US", PERIOD_SLOT_US.to_string()),
        ("SLIDING_LOG_REBASE", SLIDING_LOG_REBASE.to_string()),
        (
            "SLIDING_WINDOW_BUCKETS",
            sliding_window::BUCKETS.to_string(),
        ),
        ("COUNT_CAP", COUNT_CAP.to_string()),
        ("LEVEL_EPSILON", format!("{LEVEL_EPSILON:e}")),
        ("ARGS_PER_LIMIT", ARGS_PER_LIMIT.to_string()),
        ("CODES_M", CODES_M.to_string()),
        ("GIVE_BACK_ARGS", GIVE_BACK_ARGS.to_string()),
    ]
    .map(|(name, value)| (name.to_string(), value))
    .into();
    for entry in REGISTRY {
        let name = format!("CODE_{}", entry.name.to_uppercase());
        all.push((name, entry.wire_code.to_string()));
    }
    all
});

/// The line that declares the constants `code` names as whole words outside its comments, in
/// one `local` statement (Lua allows a function 200 locals, and a script's main chunk is one);
/// empty when it names none.
pub fn declare(code: &str) -> String {
    let words: HashSet<&str> = code
        .lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .flat_map(|line| line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .collect();
    let (names, values): (Vec<&str>, Vec<&str>) = LUA
        .iter()
        .filter(|(name, _)| words.contains(name.as_str()))
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .unzip();
    if names.is_empty() {
        return String::new();
    }
    format!("local {} = {}\n", names.join(", "), values.join(", "))
}

/// The Lua value of the constant `name`, if there is one (for tests).
#[cfg(test)]
pub fn value(name: &str) -> Option<&'static str> {
    LUA.iter()
        .find(|(n, _)| n == name)
        .map(|(_, value)| value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_declares_the_constants_its_code_names_and_no_others() {
        let code = "local x = COUNT_CAP + 1 -- FIXED_WINDOW_M\nlocal y = key .. PARKED\n\
                    local MARKER_BYTES = MARKER_BYTE\n";
        assert_eq!(
            declare(code),
            "local PARKED, MARKER_BYTE, COUNT_CAP = ':h', 66, 16777216\n"
        );
        assert_eq!(declare("-- COUNT_CAP\nlocal a = 1\n"), "");
        assert_eq!(value("AT_END_BYTE"), Some("48"));
        assert_eq!(value("MARKER_END"), Some("'^B(%d+)'"));
        assert_eq!(value("LEVEL_EPSILON"), Some("1e-6"));
        for entry in REGISTRY {
            let name = format!("CODE_{}", entry.name.to_uppercase());
            assert_eq!(value(&name), Some(entry.wire_code.to_string().as_str()));
        }
    }
}
