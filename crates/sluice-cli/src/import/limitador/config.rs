//! A Limitador limits file as read: a list of limits, each with its path in the document.
//!
//! Invariants: a limit without `namespace`, `max_value` or `seconds` is reported and left out
//! (Limitador refuses the file); unknown keys are reported; conditions and variables are kept as
//! written, for [`super::translate`] to parse.

use serde_json::Value;

use crate::import::document::{Reader, index, join};

/// One limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitadorLimit {
    /// Its path in the document (`[3]`).
    pub path: String,
    /// `namespace`.
    pub namespace: String,
    /// `max_value`.
    pub max_value: u64,
    /// `seconds`.
    pub seconds: u64,
    /// `conditions`, each with its path.
    pub conditions: Vec<(String, String)>,
    /// `variables`, each with its path.
    pub variables: Vec<(String, String)>,
    /// `name`.
    pub name: Option<String>,
}

const FIELDS: &[&str] = &[
    "namespace",
    "max_value",
    "seconds",
    "conditions",
    "variables",
    "name",
    "id",
];

/// The limits of a file's tree; `None` when the tree is not a list (not a limits file).
pub fn read(tree: &Value, reader: &mut Reader<'_>) -> Option<Vec<LimitadorLimit>> {
    let Value::Array(items) = tree else {
        return None;
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = index("", i);
        let Some(map) = reader.map(item, &path, FIELDS, "Limitador has no such field; left out")
        else {
            continue;
        };
        let namespace = reader.text(map, "namespace", &path).unwrap_or_default();
        let max_value = reader.count(map, "max_value", &path);
        let seconds = reader.count(map, "seconds", &path);
        let (Some(max_value), Some(seconds), false) = (max_value, seconds, namespace.is_empty())
        else {
            reader.lose(&path, "a limit needs `namespace`, `max_value` and `seconds`: Limitador refuses the file; left out");
            continue;
        };
        let mut texts = |key: &str| -> Vec<(String, String)> {
            let at = join(&path, key);
            let list = reader.list(map, key, &path).to_vec();
            list.iter()
                .enumerate()
                .filter_map(|(j, v)| match v {
                    Value::String(s) => Some((s.clone(), index(&at, j))),
                    other => {
                        reader.lose(
                            &index(&at, j),
                            format!("expected an expression, found {other}; the limit is left out"),
                        );
                        None
                    }
                })
                .collect()
        };
        let conditions = texts("conditions");
        let variables = texts("variables");
        let listed = |key: &str| map.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        if conditions.len() != listed("conditions") || variables.len() != listed("variables") {
            continue;
        }
        out.push(LimitadorLimit {
            name: reader.text(map, "name", &path).filter(|n| !n.is_empty()),
            path,
            namespace,
            max_value,
            seconds,
            conditions,
            variables,
        });
    }
    Some(out)
}
