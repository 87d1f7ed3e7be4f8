//! Reading a TOML rule file so that every mistake in it is reported, each once, where it is: the
//! TOML counterpart of `yaml_read`.
//!
//! TOML's syntax errors stop the parser, so one is reported alone. A file that is valid TOML is
//! a tree with spans; when it does not deserialize as a whole, each top-level section and each
//! rule is deserialized on its own from its subtree, and every failure is reported at its span
//! with the field path serde was at. The sections and rules that did deserialize are put together
//! again for the checks that follow parsing. Files over `yaml_read::MAX_SPLIT_BYTES` report the
//! first error only.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use sluice::model::Rule;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::file::ConfigFile;
use super::yaml_read::Read;
use super::{ConfigError, suggest};

type Spanned<'a> = toml::Spanned<DeValue<'a>>;

pub(super) fn read(text: &str) -> Read {
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => {
            return Read {
                file: None,
                rules_missing: true,
                errors: vec![located(e.message(), e.span(), "", text, None)],
            };
        }
    };
    let span = root.span();
    let table = root.into_inner();
    let whole = toml::Spanned::new(span.clone(), DeValue::Table(table.clone()));
    let first = match deserialize::<ConfigFile>(whole) {
        Ok(file) => {
            return Read {
                file: Some(file),
                rules_missing: false,
                errors: Vec::new(),
            };
        }
        Err((e, path)) if text.len() > super::yaml_read::MAX_SPLIT_BYTES => {
            return Read {
                file: None,
                rules_missing: true,
                errors: vec![located(e.message(), e.span(), &path, text, None)],
            };
        }
        Err(failure) => failure,
    };
    let mut errors = Vec::new();
    let mut kept = DeTable::new();
    let mut rules = BTreeMap::new();
    let mut rules_missing = false;
    for (key, value) in &table {
        match (key.get_ref().as_ref(), value.get_ref()) {
            ("rules", DeValue::Table(entries)) => {
                for (name, rule) in entries {
                    match deserialize::<Rule>(rule.clone()) {
                        Ok(rule) => {
                            rules.insert(name.get_ref().to_string(), rule);
                        }
                        Err((e, path)) => {
                            rules_missing = true;
                            let span = e.span().or_else(|| Some(rule.span()));
                            errors.push(located(e.message(), span, &path, text, Some(name)));
                        }
                    }
                }
            }
            _ => {
                let mut one = DeTable::new();
                one.insert(key.clone(), value.clone());
                let section = toml::Spanned::new(value.span(), DeValue::Table(one.clone()));
                match deserialize::<ConfigFile>(section) {
                    Ok(file) if key.get_ref() == "rules" => rules = file.rules,
                    Ok(_) => {
                        kept.insert(key.clone(), value.clone());
                    }
                    Err((e, path)) => {
                        rules_missing |= key.get_ref() == "rules";
                        let span = e.span().or_else(|| Some(key.span()));
                        errors.push(located(e.message(), span, &path, text, None));
                    }
                }
            }
        }
    }
    let file = deserialize::<ConfigFile>(toml::Spanned::new(span, DeValue::Table(kept)));
    match file {
        Ok(mut file) if !errors.is_empty() => {
            file.rules = rules;
            Read {
                file: Some(file),
                rules_missing,
                errors,
            }
        }
        _ => {
            let (e, path) = first;
            Read {
                file: None,
                rules_missing: true,
                errors: vec![located(e.message(), e.span(), &path, text, None)],
            }
        }
    }
}

fn deserialize<T: DeserializeOwned>(value: Spanned<'_>) -> Result<T, (toml::de::Error, String)> {
    serde_path_to_error::deserialize(ValueDeserializer::from(value))
        .map_err(|e| (e.path().to_string(), e.into_inner()))
        .map_err(|(path, e)| (e, path))
}

fn located(
    message: &str,
    span: Option<std::ops::Range<usize>>,
    path: &str,
    text: &str,
    rule: Option<&toml::Spanned<toml::de::DeString<'_>>>,
) -> ConfigError {
    let (line, column) = match span {
        Some(span) => {
            let before = &text[..floor_boundary(text, span.start)];
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let line = before.matches('\n').count() as u64 + 1;
            let column = before[line_start..].chars().count() as u64 + 1;
            (Some(line), Some(column))
        }
        None => (None, None),
    };
    let mut path = path.to_string();
    if let Some(rule) = rule {
        path = path
            .strip_prefix(&format!("rules.{}", rule.get_ref()))
            .map_or(path.clone(), |rest| {
                rest.trim_start_matches('.').to_string()
            });
    }
    let message = message.trim();
    let value = line
        .zip(column)
        .and_then(|(line, column)| suggest::scalar_at(text, line, column));
    let (field, message) = suggest::field_and_message(&path, message);
    ConfigError::new(field, suggest::reworded(&message, value))
        .at_line(line)
        .at_column(column)
        .in_rule(rule.map(|r| r.get_ref().to_string()))
        .suggesting(suggest::from_message(&message))
}

/// The largest char boundary of `text` at or before `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}
