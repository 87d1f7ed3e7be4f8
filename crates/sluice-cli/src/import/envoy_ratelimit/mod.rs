//! `sluice import envoy-ratelimit`: envoyproxy/ratelimit configuration files → Sluice rules and
//! the Envoy mapping that sends the same descriptors to them.
//!
//! # Layout
//! - [`config`]: a file as read, with every descriptor's path in the document;
//! - [`outcome`]: what a descriptor's value matches and its `rate_limit` decides;
//! - [`tree`]: the order in which envoyproxy/ratelimit tries siblings, stated as overrides;
//! - [`building`]: a rule being built, and what a descriptor's ancestors add to its limits;
//! - [`translate`]: the rules and the mapping.

pub mod building;
pub mod config;
pub mod outcome;
pub mod translate;
pub mod tree;

use std::path::PathBuf;

use super::document::{Reader, read_yaml};
use super::error::ImportError;
use super::report::Report;
use super::rule_file::Imported;

/// Reads and translates the files; `shadow_all` stands for envoyproxy/ratelimit's global
/// `SHADOW_MODE=true`.
pub fn import(
    files: &[PathBuf],
    shadow_all: bool,
    report: &mut Report,
) -> Result<Imported, ImportError> {
    let mut read = Vec::new();
    for path in files {
        let tree = read_yaml(path)?;
        if !tree.is_object() {
            return Err(ImportError::Parse {
                path: path.clone(),
                message: "not an envoyproxy/ratelimit config: expected a map with `domain` and `descriptors`".into(),
            });
        }
        let name = path.display().to_string();
        let mut reader = Reader {
            file: &name,
            report,
        };
        if let Some(file) = config::read(&tree, &mut reader) {
            read.push(file);
        }
    }
    let mut imported =
        translate::translate(&read, shadow_all, report).map_err(|(file, message)| {
            ImportError::Parse {
                path: PathBuf::from(file),
                message,
            }
        })?;
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    imported.header = vec![
        format!(
            "Imported by `sluice import envoy-ratelimit` from {}.",
            names.join(", ")
        ),
        "Fixed windows that count denied requests too, as envoyproxy/ratelimit counts;".into(),
        "the `envoy` section sends each descriptor shape to its rule.".into(),
    ];
    Ok(imported)
}

#[cfg(test)]
pub(crate) mod tests;
