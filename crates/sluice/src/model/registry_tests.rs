//! The algorithm registry ([`REGISTRY`]) against every place that restates it: the
//! Rust modules (dispatch is an exhaustive match, so the compiler checks those), the Lua files,
//! the decision script's `LOOKS`/`RECORDS` tables and the one-limit scripts the Redis store sends.

use std::path::{Path, PathBuf};

use super::{Algorithm, REGISTRY};

fn lua_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/redis/lua")
}

fn read_lua(file: &str) -> String {
    let path = lua_dir().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names listed in `local <table> = { a, b, ... }` (the table may span lines).
fn lua_table(script: &str, table: &str) -> Vec<String> {
    let start = script
        .find(&format!("local {table} = {{"))
        .unwrap_or_else(|| panic!("decide.lua has no `local {table} = {{ ... }}`"));
    let body = &script[start..];
    let inside = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
    inside
        .split(',')
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .collect()
}

#[test]
fn every_algorithm_has_its_lua_file_with_its_functions() {
    for entry in REGISTRY {
        let text = read_lua(entry.lua_file);
        for suffix in ["look", "record"] {
            assert!(
                text.contains(&format!("function {}_{suffix}(", entry.name)),
                "{} defines no function `{}_{suffix}`",
                entry.lua_file,
                entry.name
            );
        }
    }
}

#[test]
fn the_decision_script_lists_the_algorithms_in_wire_code_order() {
    let decide = read_lua("decide.lua");
    for (table, suffix) in [("LOOKS", "look"), ("RECORDS", "record")] {
        let listed = lua_table(&decide, table);
        let expected: Vec<String> = REGISTRY
            .iter()
            .map(|e| format!("{}_{suffix}", e.name))
            .collect();
        assert_eq!(listed, expected, "decide.lua's {table}");
        for entry in REGISTRY {
            assert_eq!(
                listed[usize::from(entry.wire_code) - 1],
                format!("{}_{suffix}", entry.name)
            );
        }
    }
}

#[cfg(feature = "redis")]
#[test]
fn the_redis_scripts_are_built_from_the_registry_files() {
    use crate::store::redis::script::{DECIDE, ONE};
    let mut at = 0;
    for entry in REGISTRY {
        let text = read_lua(entry.lua_file);
        let found = DECIDE[at..]
            .find(&text)
            .unwrap_or_else(|| panic!("DECIDE lacks {} (or has it out of order)", entry.lua_file));
        at += found + text.len();
        // A one-limit script is the shared head, then its own file last.
        let one = ONE[usize::from(entry.wire_code) - 1];
        assert_eq!(
            one.map(|s| s.starts_with(&read_lua("one_head.lua"))),
            entry.one_lua_file.map(|_| true),
            "ONE[{}] is not {:?} after one_head.lua",
            entry.wire_code - 1,
            entry.one_lua_file
        );
        if let (Some(one), Some(file)) = (one, entry.one_lua_file) {
            assert!(
                one.ends_with(&read_lua(file)),
                "ONE[{}] ends with {file}",
                entry.wire_code - 1
            );
        }
    }
    assert_eq!(ONE.len(), REGISTRY.len());
}

#[test]
fn names_and_codes_are_unique_and_parse_back() {
    let mut names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
    let mut codes: Vec<u8> = Algorithm::ALL.iter().map(|a| a.wire_code()).collect();
    names.sort_unstable();
    names.dedup();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!((names.len(), codes.len()), (REGISTRY.len(), REGISTRY.len()));
    for a in Algorithm::ALL {
        assert_eq!(a.name().parse::<Algorithm>(), Ok(a));
    }
    let unknown = "nope".parse::<Algorithm>().unwrap_err().to_string();
    for entry in REGISTRY {
        assert!(unknown.contains(entry.name), "{unknown}");
    }
}
