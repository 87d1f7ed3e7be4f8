//! `sluice import limitador`: a Limitador limits file → Sluice rules (one per namespace), and
//! the Envoy mapping when Limitador is reached through Envoy's rate-limit service.
//!
//! # Layout
//! - [`config`]: the file as read;
//! - [`expression`]: the subset of Limitador's conditions and variables that has a Sluice form;
//! - [`translate`]: the rules and the mapping.

pub mod config;
pub mod expression;
pub mod translate;

use std::path::Path;

use super::document::{Reader, read_yaml};
use super::error::ImportError;
use super::report::Report;
use super::rule_file::Imported;

/// Reads and translates the file; `envoy` adds the `envoy` section.
pub fn import(path: &Path, envoy: bool, report: &mut Report) -> Result<Imported, ImportError> {
    let tree = read_yaml(path)?;
    let name = path.display().to_string();
    let mut reader = Reader {
        file: &name,
        report,
    };
    let Some(limits) = config::read(&tree, &mut reader) else {
        return Err(ImportError::Parse {
            path: path.to_path_buf(),
            message: "not a Limitador limits file: expected a list of limits".into(),
        });
    };
    let mut imported = translate::translate(&name, &limits, envoy, report);
    imported.header = vec![
        format!("Imported by `sluice import limitador` from {name}."),
        "A check of Limitador's namespace N with values V is a check of rule N with attributes V;"
            .into(),
        "fixed windows, a denied request counts nothing, as in Limitador.".into(),
    ];
    Ok(imported)
}

#[cfg(test)]
mod tests;
