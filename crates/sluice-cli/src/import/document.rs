//! An input file read as a YAML tree (bounded in size), and a reader over it that takes the
//! fields a format knows, each with its path in the document, and reports the rest.
//!
//! Invariants: a file over [`MAX_INPUT_BYTES`] or not UTF-8 is refused before parsing; every
//! unknown key, and every value of the wrong type, becomes one loss naming its path; nothing
//! here panics on any input.

use std::path::Path;

use serde_json::{Map, Value};

use super::error::ImportError;
use super::report::Report;

/// The largest input file read (the bound on a Sluice rule file).
pub const MAX_INPUT_BYTES: u64 = sluice_server::config::MAX_FILE_BYTES;

/// The file's text, bounded, parsed as YAML.
pub fn read_yaml(path: &Path) -> Result<Value, ImportError> {
    let read = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_INPUT_BYTES + 1),
        &mut bytes,
    )
    .map_err(read)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(ImportError::TooLarge {
            path: path.to_path_buf(),
            max: MAX_INPUT_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| ImportError::NotText {
        path: path.to_path_buf(),
    })?;
    parse_yaml(&text).map_err(|message| ImportError::Parse {
        path: path.to_path_buf(),
        message,
    })
}

/// YAML text as a tree; an empty document is `null`.
pub fn parse_yaml(text: &str) -> Result<Value, String> {
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim() == "---" || l.trim_start().starts_with('#'))
    {
        return Ok(Value::Null);
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| format!("not YAML: {e}"))
}

/// Takes fields out of one file's tree, reporting what it does not know.
pub struct Reader<'r> {
    /// The file, as reports name it.
    pub file: &'r str,
    /// Where losses go.
    pub report: &'r mut Report,
}

impl Reader<'_> {
    /// Records a loss at `path`.
    pub fn lose(&mut self, path: &str, message: impl Into<String>) {
        self.report.lose(self.file, path, message);
    }

    /// The value as a map; any key outside `known` is reported (with `unknown` saying what
    /// becomes of it) and left out.
    pub fn map<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        known: &[&str],
        unknown: &str,
    ) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = value else {
            self.lose(
                path,
                format!("expected a map, found {}; left out", kind(value)),
            );
            return None;
        };
        for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
            self.lose(&join(path, key), format!("unknown key `{key}`: {unknown}"));
        }
        Some(map)
    }

    /// A text field (numbers and booleans are read as their text); `None` when absent or null.
    pub fn text(&mut self, map: &Map<String, Value>, key: &str, path: &str) -> Option<String> {
        match map.get(key)? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            other => {
                self.lose(
                    &join(path, key),
                    format!("expected text, found {}; left out", kind(other)),
                );
                None
            }
        }
    }

    /// A whole number field (a number or its text); `None` when absent, null or not one.
    pub fn count(&mut self, map: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
        let value = map.get(key)?;
        let number = match value {
            Value::Null => return None,
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        if number.is_none() {
            self.lose(
                &join(path, key),
                format!("expected a whole number of 0 or more, found {value}; left out"),
            );
        }
        number
    }

    /// A boolean field; false when absent or null.
    pub fn flag(&mut self, map: &Map<String, Value>, key: &str, path: &str) -> bool {
        match map.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(other) => {
                self.lose(
                    &join(path, key),
                    format!("expected true or false, found {other}; read as false"),
                );
                false
            }
        }
    }

    /// A list field; empty when absent or null.
    pub fn list<'v>(&mut self, map: &'v Map<String, Value>, key: &str, path: &str) -> &'v [Value] {
        match map.get(key) {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.lose(
                    &join(path, key),
                    format!("expected a list, found {}; left out", kind(other)),
                );
                &[]
            }
        }
    }
}

/// `path.key` (or `key` at the top).
pub fn join(path: &str, key: &str) -> String {
    match path.is_empty() {
        true => key.to_string(),
        false => format!("{path}.{key}"),
    }
}

/// `path[i]`.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// What kind of YAML value this is, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}
