//! The JSON Schema of the rule file, generated from the serde types that read it (`file`,
//! `gateway` and the model's rule types), descriptions from their doc comments. `sluice schema`
//! prints it; `docs/sluice.schema.json` is its committed copy, which editors use to complete and
//! check rule files and a test holds to this output.
//!
//! Each top-level property carries `x-sluice-applies`: `reload` when a changed file puts it in
//! force while serving, `restart` when only a new process does (the settings `reload` warns
//! about). A schema that accepts a file does not make it valid — bounds across fields (a
//! `burst` on an algorithm without one, duplicate limit ids) are `sluice validate`'s — but every
//! valid file is accepted.

use schemars::generate::SchemaSettings;

use super::file::ConfigFile;

/// The rule file's JSON Schema (draft 2020-12), as pretty JSON with a final newline.
pub fn schema_json() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).expect("a schema serializes");
    text.push('\n');
    text
}

/// The rule file's JSON Schema (draft 2020-12).
pub fn schema() -> serde_json::Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    generator.into_root_schema_for::<ConfigFile>().to_value()
}
