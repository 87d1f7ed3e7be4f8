//! The shared script of a one-limit or rule script: the script run once per decision, in order,
//! in one call (`shared_call`, `lua/shared_call.lua`).
//!
//! Invariant: the shared script reads each decision's KEYS and costs where its own script would
//! read them for a call of its own, at that decision's offsets, and answers what that script
//! would, in the decisions' order.

/// `lua/shared_call.lua`: the shared script around a one-limit or rule script.
const SHARED_CALL: &str = include_str!("lua/shared_call.lua");

/// The shared script of the one-limit or rule script whose text is `text` (`one_script::one_text`,
/// `many_script::many_text`), which reads `keys_per` KEYS and `limits` costs for a decision: the
/// same constants, then `lua/shared_call.lua` with the script as its function's body, each
/// `KEYS[k]` and `ARGV[n]` read at the decision's offset.
pub fn shared_text(text: &str, keys_per: usize, limits: usize) -> String {
    let (constants, body) = text.split_once('\n').expect("the constants, then the body");
    let constants = constants
        .strip_suffix(&format!(", {}", limits + 1))
        .expect("now_at, after the costs, is written last");
    let body = at_offset(&at_offset(body, "KEYS[", "keys_at"), "ARGV[", "costs_at");
    format!(
        "{constants}, #KEYS / {keys_per} * {limits} + 1\nlocal keys_per, costs_per = {keys_per}, \
         {limits}\n{}",
        SHARED_CALL.replacen("--[[one]]", &body, 1)
    )
}

/// `text` with every `<table>[<number>]` read as `<table>[<offset> + <number>]`.
fn at_offset(text: &str, table: &str, offset: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut rest = text;
    while let Some(at) = rest.find(table) {
        let (before, after) = rest.split_at(at + table.len());
        out.push_str(before);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(offset);
            out.push_str(" + ");
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::super::many_script::many_text;
    use super::super::one_script::{Spec, one_text};
    use super::*;
    use crate::model::{Algorithm, Micros};

    /// The script's lines but comments.
    fn code(text: &str) -> impl Iterator<Item = &str> {
        text.lines().filter(|l| !l.trim_start().starts_with("--"))
    }

    #[test]
    fn a_shared_script_runs_its_script_once_per_decision_at_its_offsets() {
        let fixed = Spec::plain(Algorithm::FixedWindow, 10);
        let penalized = Spec {
            guarded: true,
            warn_after: Some(2),
            ..Spec::plain(Algorithm::Gcra, 5)
        };
        let one = one_text(&penalized, Micros::ZERO).expect("a one-limit script");
        let rule = many_text(&[penalized, fixed], Micros::ZERO).expect("a rule script");
        for (text, keys_per, limits) in [(one, 1, 1), (rule, 3, 2)] {
            let shared = shared_text(&text, keys_per, limits);
            let (constants, body) = text.split_once('\n').expect("two parts");
            let now_at = format!(", {}", limits + 1);
            let constants = constants.strip_suffix(&now_at).expect("now_at last");
            assert!(shared.starts_with(&format!(
                "{constants}, #KEYS / {keys_per} * {limits} + 1\n\
                 local keys_per, costs_per = {keys_per}, {limits}\n"
            )));
            // Every read of KEYS and of a cost is at the decision's offset.
            let reads =
                |t: &str, table: &str| code(t).map(|l| l.matches(table).count()).sum::<usize>();
            assert!(reads(body, "KEYS[") > 0 && reads(body, "ARGV[") > 0);
            assert_eq!(reads(&shared, "KEYS[keys_at + "), reads(body, "KEYS["));
            assert_eq!(
                reads(&shared, "ARGV[costs_at + "),
                reads(body, "ARGV[") - reads(body, "ARGV[now_at]")
            );
            assert!(code(&shared).all(|l| !l.contains("KEYS[1]") && !l.contains("ARGV[1]")));
            assert!(shared.contains("local function one(i)\n"));
            assert_eq!(code(&shared).filter(|l| l.contains("= one(i)")).count(), 1);
        }
        assert_eq!(
            at_offset("KEYS[12] .. KEYS[i]", "KEYS[", "o"),
            "KEYS[o + 12] .. KEYS[i]"
        );
    }
}
