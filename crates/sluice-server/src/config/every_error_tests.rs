//! A file with several mistakes reports each of them once, at its line and column, with the
//! field's path and a suggestion for misspelt names; in YAML and in TOML.

use super::*;

fn errors(text: &str, format: Format) -> Vec<ConfigError> {
    Config::check(text, format).expect_err("the text is invalid")
}

/// (line, column, rule, field) of each error.
fn places(errors: &[ConfigError]) -> Vec<(u64, u64, &str, &str)> {
    errors
        .iter()
        .map(|e| {
            (
                u64::from(e.line.unwrap_or(0)),
                u64::from(e.column.unwrap_or(0)),
                e.rule.as_deref().unwrap_or(""),
                e.field.as_str(),
            )
        })
        .collect()
}

const FOUR_IN_ONE_RULE: &str = "\
stor:
  url: memory://
rules:
  login:
    limits:
      - by: [ip]
        rate: 5/1m
        algorithm: sliding_lg
        block: 10
      - { by: [ip], rate: 5/s, algorithm: token_bucket, burst: -3, rtae: 1 }
  api:
    limits:
      - { by: [ip], rate: 100/second, algorithm: gcra, burst: 0 }
  login:
    limits: []
";

#[test]
fn every_mistake_once_with_line_column_field_and_suggestion() {
    let found = errors(FOUR_IN_ONE_RULE, Format::Yaml);
    assert_eq!(
        places(&found),
        [
            (1, 1, "", "stor"),
            (8, 20, "login", "limits[0].algorithm"),
            (9, 16, "login", "limits[0].block"),
            (10, 64, "login", "limits[1].burst"),
            (10, 68, "login", "limits[1].rtae"),
            // Found after parsing (a zero burst): the limit's line.
            (13, 0, "api", "limits[0].burst"),
            (14, 3, "login", ""),
        ],
        "{found:#?}"
    );
    let suggestions: Vec<Option<&str>> = found.iter().map(|e| e.suggestion.as_deref()).collect();
    assert_eq!(
        suggestions,
        [
            Some("store"),
            Some("sliding_log"),
            None,
            None,
            Some("rate"),
            None,
            None
        ]
    );
    // The field is the one written, whatever the value's type is called.
    assert!(!found[2].message.contains("duration"), "{}", found[2]);
    assert!(
        found[2].message.contains("`10` needs a unit"),
        "{}",
        found[2]
    );
    // A negative count names the value, not a Rust type.
    assert_eq!(
        found[3].message,
        "expected a whole number, 0 or more, found `-3`"
    );
    // A repeated rule says so, in the file's words.
    assert!(
        found[6].message.contains("defined twice (first on line 4)"),
        "{}",
        found[6]
    );
    assert!(
        !found
            .iter()
            .any(|e| e.message.contains("DuplicateKeyPolicy"))
    );
    assert_eq!(
        found[1].to_string(),
        "line 8:20: rule `login`: field `limits[0].algorithm`: unknown variant `sliding_lg`, \
         expected one of sliding_log, sliding_window, fixed_window, token_bucket, gcra, \
         leaky_bucket, concurrency (did you mean `sliding_log`?)"
    );
    // The first of them is what `parse` (serve, reload) reports.
    assert_eq!(
        Config::parse(FOUR_IN_ONE_RULE, Format::Yaml).unwrap_err(),
        found[0]
    );
}

#[test]
fn a_repeated_section_and_a_misspelt_value_outside_rules() {
    let text = "fail: opne\nstore:\n  url: memory://\nstore:\n  url: memory://\nrules: {}\n";
    let found = errors(text, Format::Yaml);
    assert_eq!(
        places(&found),
        [(1, 7, "", "fail"), (4, 1, "", "store")],
        "{found:#?}"
    );
    assert_eq!(found[0].suggestion.as_deref(), Some("open"));
    assert!(found[1].message.contains("set twice (first on line 2)"));
}

#[test]
fn rules_that_parsed_are_still_validated() {
    let text = "\
rules:
  login:
    limits:
      - { by: [ip], rate: 5/1m, algorithm: sliding_window, burst: 3 }
  api:
    limits:
      - { by: [ip], rate: 5/1m, algorithm: gcar }
";
    let found = errors(text, Format::Yaml);
    assert_eq!(
        places(&found),
        [
            (4, 0, "login", "limits[0].burst"),
            (7, 44, "api", "limits[0].algorithm")
        ],
        "{found:#?}"
    );
}

#[test]
fn an_empty_file_is_an_error_and_no_rules_must_be_said() {
    for empty in ["", "\n\n", "# nothing yet\n"] {
        let found = errors(empty, Format::Yaml);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].message.contains("the file is empty"),
            "{}",
            found[0]
        );
        assert!(Config::check(empty, Format::Toml).is_err());
    }
    assert!(
        Config::check("rules: {}\n", Format::Yaml)
            .unwrap()
            .rules
            .is_empty()
    );
}

#[test]
fn a_mistake_in_an_aliased_piece_is_still_reported() {
    // Pieces cannot be read apart when one refers to an anchor in another: the whole file's
    // first mistake is reported instead.
    let text = "\
rules:
  login:
    limits:
      - &ip { by: [ip], rate: 5/1m, algorithm: gcra }
  api:
    limits:
      - *ip
      - { by: [ip], rate: 5/1m, algorithm: gcar }
";
    let found = errors(text, Format::Yaml);
    assert_eq!(
        places(&found),
        [(8, 44, "api", "limits[1].algorithm")],
        "{found:#?}"
    );
    let fine = text.replace("algorithm: gcar", "algorithm: gcra, name: second");
    assert_eq!(Config::check(&fine, Format::Yaml).unwrap().rules.len(), 2);
}

#[test]
fn toml_reports_each_rule_and_section() {
    let text = "\
fail = \"opne\"
[stor]
url = \"memory://\"
[rules.login]
limits = [{ by = [\"ip\"], rate = \"5/s\", algorithm = \"gcar\" }]
[rules.api]
limits = [{ by = [\"ip\"], rate = \"5/1m\", block = 10 }]
[rules.fine]
limits = [{ by = [\"ip\"], rate = \"5/minute\" }]
";
    let found = errors(text, Format::Toml);
    assert_eq!(
        places(&found),
        [
            (1, 8, "", "fail"),
            (2, 2, "", "stor"),
            (5, 52, "login", "limits[0].algorithm"),
            (7, 49, "api", "limits[0].block"),
        ],
        "{found:#?}"
    );
    let suggestions: Vec<Option<&str>> = found.iter().map(|e| e.suggestion.as_deref()).collect();
    assert_eq!(
        suggestions,
        [Some("open"), Some("store"), Some("gcra"), None]
    );
}

#[test]
fn a_mapping_to_a_misspelt_rule_suggests_the_rule() {
    let text = "\
rules:
  login:
    limits: [{ by: [ip], rate: 5/s }]
envoy:
  web:
    - descriptor: [remote_address]
      rule: logn
      attributes: { remote_address: ip }
";
    let found = errors(text, Format::Yaml);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].suggestion.as_deref(), Some("login"));
}

#[test]
fn the_mistakes_reported_are_bounded() {
    let mut text = String::from("rules:\n");
    for i in 0..300 {
        text.push_str(&format!(
            "  r{i}:\n    limits:\n      - {{ by: [ip], rate: 5/1m, algorithm: gcar }}\n"
        ));
    }
    let found = errors(&text, Format::Yaml);
    assert_eq!(found.len(), MAX_REPORTED_ERRORS + 1);
    assert_eq!(
        found[MAX_REPORTED_ERRORS].message,
        "and 100 more mistakes not shown"
    );
}
