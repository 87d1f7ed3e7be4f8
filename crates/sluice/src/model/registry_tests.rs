//! The algorithm registry ([`REGISTRY`]) against every place that restates it: the
//! Rust modules (dispatch is an exhaustive match, so the compiler checks those), the Lua sources
//! and the scripts' use of the codes. The Redis store's own unit tests
//! (`store::redis::source`) check each algorithm against every place of the store it must be in,
//! and name each one a new algorithm is missing from.

use std::path::{Path, PathBuf};

use super::{Algorithm, REGISTRY};

fn lua_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/redis/lua")
}

fn read_lua(file: &str) -> String {
    let path = lua_dir().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
fn the_scripts_take_the_algorithms_and_their_codes_from_the_registry() {
    // The general decision reaches each algorithm through tables by code that the store
    // generates from the registry after the functions (the Redis store's unit tests check each
    // algorithm against every place it must be in): decide.lua indexes them, never lists them.
    let decide = read_lua("decide.lua");
    for table in ["LOOKS", "RECORDS"] {
        assert!(
            decide.contains(&format!("{table}[code]")),
            "decide.lua indexes `{table}` by code"
        );
        assert!(
            !decide.contains(&format!("{table} = {{")),
            "decide.lua lists `{table}` itself"
        );
    }
    for file in ["decide.lua", "give_back.lua", "settle.lua"] {
        let text = read_lua(file);
        let bare = ["algorithm == ", "code == "].iter().any(|compare| {
            text.match_indices(compare)
                .any(|(at, _)| text[at + compare.len()..].starts_with(|c: char| c.is_ascii_digit()))
        });
        assert!(!bare, "{file} compares with a bare algorithm code");
    }
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
