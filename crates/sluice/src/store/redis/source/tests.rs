//! The registry against every place of the Redis store that an algorithm must be in: each
//! failure names the place a new algorithm is missing from.

use super::*;
use crate::model::REGISTRY;
use crate::store::redis::script::texts;

/// The conformance suite's files: each algorithm has behaviour there.
const CONFORMANCE: [&str; 5] = [
    include_str!("../../../conformance/algorithms.rs"),
    include_str!("../../../conformance/blocks.rs"),
    include_str!("../../../conformance/leases.rs"),
    include_str!("../../../conformance/requests.rs"),
    include_str!("../../../conformance/reservations.rs"),
];

#[test]
fn every_algorithm_is_in_every_place_the_registry_names() {
    let mut missing = Vec::new();
    let keys_doc = include_str!("../keys.rs");
    for entry in REGISTRY {
        let (a, name, file) = (entry.algorithm, entry.name, entry.lua_file);
        let mut lacks = |place: String| missing.push(format!("{name}: {place}"));
        let sections = sections(source(a));
        if !sections.iter().any(|(n, _)| *n == "general") {
            lacks(format!("lua/{file} has no `--@@general` section"));
        }
        let forms = forms(a);
        for suffix in ["look", "record"] {
            if !forms
                .general
                .contains(&format!("function {name}_{suffix}("))
            {
                lacks(format!("lua/{file}#general defines no `{name}_{suffix}`"));
            }
        }
        for (n, _) in &sections {
            if !["general", "one", "many", "many_marked", GIVE_BACK, SETTLE].contains(n) {
                lacks(format!("lua/{file} has an unknown section `{n}`"));
            }
        }
        if forms.one.is_some() != forms.many.is_some() {
            lacks(format!(
                "lua/{file}: a `one` section needs a `many` section (with `{RECORD}`), and \
                 the other way round"
            ));
        }
        if let Some((look, record)) = &forms.many {
            for local in ["allowed_@", "remaining_@", "reset_@", "retry_@"] {
                if !look.contains(&format!("local {local}")) && !look.contains(local) {
                    lacks(format!("lua/{file}#many's look leaves no `{local}`"));
                }
            }
            if !record.contains("remaining_@") {
                lacks(format!("lua/{file}#many's record updates no `remaining_@`"));
            }
        }
        // A lease is not given back: the cross-slot protocol releases it (see cross_slot).
        let gives_back = format!("local function {name}_give_back(");
        if !a.holds_leases()
            && !forms
                .give_back
                .as_ref()
                .is_some_and(|s| s.contains(&gives_back))
        {
            lacks(format!(
                "lua/{file} has no `--@@give_back` section defining `{name}_give_back`"
            ));
        }
        let settles = format!("local function {name}_settle(");
        if a.settles() != forms.settle.as_ref().is_some_and(|s| s.contains(&settles)) {
            lacks(format!(
                "lua/{file}: the registry says settles: {}, but its `--@@settle` section {} \
                 `{name}_settle`",
                a.settles(),
                if a.settles() {
                    "does not define"
                } else {
                    "defines"
                }
            ));
        }
        if !keys_doc.contains(&format!("| `{name}` |")) {
            lacks("store/redis/keys.rs: the State formats table has no row".to_string());
        }
        let variant = format!("Algorithm::{a:?}");
        let covered = CONFORMANCE.iter().any(|f| f.contains(&variant));
        if !covered {
            lacks(format!("conformance/: no behaviour of {variant}"));
        }
    }
    assert!(
        missing.is_empty(),
        "the registry's algorithms are missing from:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_script_is_whole_and_lists_the_algorithms_in_code_order() {
    for text in texts() {
        assert!(
            !text.lines().any(|l| l.starts_with("--@@")),
            "a section marker left: {:?}",
            text.lines().find(|l| l.starts_with("--@@"))
        );
    }
    // The drivers find each algorithm's functions of a form by its code.
    let list =
        |form: &str| -> Vec<String> { by_code(form).split(", ").map(str::to_string).collect() };
    let (give_backs, settles) = (list(GIVE_BACK), list(SETTLE));
    let looks: Vec<String> = tables()
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("local LOOKS = { "))
        .and_then(|l| l.strip_suffix(" }"))
        .expect("the looks first")
        .split(", ")
        .map(str::to_string)
        .collect();
    for entry in REGISTRY {
        let at = usize::from(entry.wire_code) - 1;
        assert_eq!(
            give_backs[at] == "false",
            entry.algorithm.holds_leases(),
            "{}",
            give_backs[at]
        );
        assert_eq!(
            settles[at] != "false",
            entry.algorithm.settles(),
            "{}",
            settles[at]
        );
        assert_eq!(looks[at], format!("{}_look", entry.name));
    }
}

#[test]
fn a_source_splits_into_its_sections() {
    let text = "-- head\n\n--@@general\nlocal g\n--@@one\nlocal o\n--@record\nlocal r\n";
    let parts = sections(text);
    assert_eq!(
        parts,
        [
            ("general", "local g\n"),
            ("one", "local o\n--@record\nlocal r\n")
        ]
    );
    let fixed = forms(Algorithm::FixedWindow);
    assert!(fixed.many_marked.is_some() && fixed.one.is_some());
    assert!(!fixed.general.contains("--@@"));
    assert!(forms(Algorithm::LeakyBucket).one.is_none());
    // A one-limit body that divides brings idiv; one that does not, none.
    let gcra = forms(Algorithm::Gcra).one.as_deref().expect("gcra#one");
    assert!(gcra.contains("local function idiv("));
    let fixed_one = fixed.one.as_deref().expect("fixed_window#one");
    assert!(!fixed_one.contains("idiv("));
}
