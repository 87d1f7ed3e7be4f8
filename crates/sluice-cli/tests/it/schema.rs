//! The rule file's JSON Schema and reference, generated from the configuration types:
//! `docs/sluice.schema.json` is what `sluice schema` prints, `docs/src/reference/rule-file.md`
//! is rendered here from that schema (every field with its type, default, an example and whether
//! a reload applies it), and every example and deploy rule file validates against the schema —
//! while files with a misspelt key, a wrong type or an unknown value do not.
//!
//! `SLUICE_BLESS=1 cargo test -p sluice-ratelimit-cli --test it schema::` rewrites both files
//! after a deliberate change of the types or their doc comments.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::common::sluice;

const SCHEMA_FILE: &str = "docs/sluice.schema.json";
const REFERENCE_FILE: &str = "docs/src/reference/rule-file.md";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compares a generated file with the committed one; `SLUICE_BLESS` rewrites it instead.
fn assert_committed(path: &str, generated: &str) {
    let full = repo().join(path);
    let committed = std::fs::read_to_string(&full).unwrap_or_default();
    if committed == generated {
        return;
    }
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, generated).unwrap();
        return;
    }
    let line = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    panic!(
        "{path} is not what the configuration types generate (first difference at line {}); \
         SLUICE_BLESS=1 cargo test -p sluice-ratelimit-cli --test it schema:: rewrites it",
        line + 1
    );
}

fn generated_schema() -> Value {
    let out = sluice().arg("schema").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, sluice_server::config::schema_json());
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_committed_schema_is_what_sluice_schema_prints() {
    let schema = generated_schema();
    assert_committed(SCHEMA_FILE, &sluice_server::config::schema_json());
    assert_eq!(schema["title"], "Sluice rule file");
}

/// The rule files meant to be valid: the examples, the deploy files (the ConfigMap's embedded
/// file too), and the importer's expected output.
fn rule_files() -> Vec<(String, Value)> {
    let mut files = Vec::new();
    let mut paths = vec![repo().join("deploy/sluice.yaml")];
    for dir in [
        "examples",
        "examples/clients",
        "examples/envoy",
        "examples/nginx",
    ] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            // Beside the rule files are other programs' configurations (envoy.yaml).
            if name.starts_with("sluice.") && (name.ends_with(".yaml") || name.ends_with(".toml")) {
                paths.push(path);
            }
        }
    }
    for entry in std::fs::read_dir(repo().join("crates/sluice-cli/tests/data/import")).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".expected.yaml") {
            paths.push(path);
        }
    }
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let value = if path.extension().is_some_and(|e| e == "toml") {
            toml::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
        } else {
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
        };
        files.push((
            path.strip_prefix(repo()).unwrap().display().to_string(),
            value,
        ));
    }
    let configmap: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("deploy/kubernetes/configmap.yaml")).unwrap(),
    )
    .unwrap();
    let embedded = configmap["data"]["sluice.yaml"]
        .as_str()
        .expect("the ConfigMap's rules");
    files.push((
        "deploy/kubernetes/configmap.yaml (sluice.yaml)".into(),
        serde_saphyr::from_str(embedded).unwrap(),
    ));
    files
}

fn validator() -> jsonschema::Validator {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(SCHEMA_FILE)).unwrap()).unwrap();
    jsonschema::draft202012::new(&schema).expect("the committed schema is a valid JSON Schema")
}

#[test]
fn every_example_and_deploy_rule_file_validates_against_the_schema() {
    let validator = validator();
    let files = rule_files();
    assert!(files.len() >= 8, "found the rule files: {}", files.len());
    let mut wrong = Vec::new();
    for (name, value) in &files {
        for error in validator.iter_errors(value) {
            wrong.push(format!("{name}: {}: {error}", error.instance_path()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_file_with_a_mistake_is_rejected_by_the_schema() {
    let validator = validator();
    let good = "rules:\n  login:\n    limits:\n      - { by: [ip], rate: 5/1m, algorithm: sliding_log, block: 15m }\n";
    let good: Value = serde_saphyr::from_str(good).unwrap();
    assert!(validator.is_valid(&good));
    // The file `text` (whose mistake is `mistake`) is refused with an error at `path`.
    let refused_at = |text: &str, mistake: &str, path: &str| {
        let bad: Value = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(&bad)
            .map(|e| e.instance_path().to_string())
            .collect();
        assert!(
            errors.iter().any(|p| p == path),
            "`{mistake}` is not rejected at {path}: {errors:?}"
        );
    };
    for (mistake, path) in [
        ("mesage: hi", "/rules/login"),
        (
            "limits: [{ by: [ip], rate: 5/1m, algoritm: gcra }]",
            "/rules/login/limits/0",
        ),
        (
            "limits: [{ by: [ip], rate: 5/1m, algorithm: fastest }]",
            "/rules/login/limits/0/algorithm",
        ),
        (
            "limits: [{ by: [ip], rate: 5/1m, block: 15 }]",
            "/rules/login/limits/0/block",
        ),
        (
            "limits: [{ by: [ip], rate: five a minute }]",
            "/rules/login/limits/0/rate",
        ),
        (
            "limits: [{ by: [IP], rate: 5/1m }]",
            "/rules/login/limits/0/by/0",
        ),
        (
            "limits: [{ by: [ip], rate: 5/1m, burst: many }]",
            "/rules/login/limits/0/burst",
        ),
        (
            "limits: [{ by: [ip], rate: 5/1m, when: { method: { prefx: P } } }]",
            "/rules/login/limits/0/when",
        ),
        (
            "fail: sometimes\n    limits: [{ by: [ip], rate: 5/1m }]",
            "/rules/login/fail",
        ),
        (
            "limits: [{ by: [ip], rate: 5/1m, penalty: { warn_after: 1 } }]",
            "/rules/login/limits/0/penalty",
        ),
    ] {
        refused_at(&format!("rules:\n  login:\n    {mistake}\n"), mistake, path);
    }
    for (mistake, path) in [
        ("store: { url: memory://, timeot: 1s }", "/store"),
        ("store: { timeout: 50 }", "/store/timeout"),
        ("headers: all", "/headers"),
        ("store: { in_flight: lots }", "/store/in_flight"),
    ] {
        refused_at(&format!("{mistake}\nrules: {{}}\n"), mistake, path);
    }
}

#[test]
fn yaml_examples_name_the_schema_for_editors() {
    let mut paths = vec![repo().join("deploy/sluice.yaml")];
    for dir in [
        "examples",
        "examples/clients",
        "examples/envoy",
        "examples/nginx",
    ] {
        paths.push(repo().join(dir).join("sluice.yaml"));
    }
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("# yaml-language-server: $schema="))
            .unwrap_or_else(|| panic!("{path:?} has no yaml-language-server modeline"));
        let target = path.parent().unwrap().join(line.trim());
        assert_eq!(
            target.canonicalize().unwrap(),
            repo().join(SCHEMA_FILE).canonicalize().unwrap(),
            "{path:?}'s modeline points elsewhere"
        );
    }
}

// The reference: one section per object of the schema, one entry per field.

struct Reference<'a> {
    defs: &'a Map<String, Value>,
    out: String,
    /// Fields rendered without an example: the test fails naming them.
    missing_examples: Vec<String>,
}

impl<'a> Reference<'a> {
    /// A `$ref`'s target, or the schema itself.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap();
                &self.defs[name]
            }
            None => schema,
        }
    }

    /// The schema inside an `Option` (`anyOf: [T, null]`), or the schema itself.
    fn unwrap_null(&self, schema: &'a Value) -> &'a Value {
        if let Some(any) = schema["anyOf"].as_array()
            && any.len() == 2
            && let Some(inner) = any.iter().find(|s| s["type"] != "null")
            && any.iter().any(|s| s["type"] == "null")
        {
            return inner;
        }
        schema
    }

    fn enum_values(&self, schema: &Value) -> Option<Vec<(String, String)>> {
        if let Some(values) = schema["enum"].as_array() {
            return Some(
                values
                    .iter()
                    .map(|v| (v.to_string(), String::new()))
                    .collect(),
            );
        }
        let one_of = schema["oneOf"].as_array()?;
        one_of
            .iter()
            .map(|v| {
                let value = v.get("const")?;
                Some((
                    value.to_string(),
                    v["description"].as_str().unwrap_or_default().to_string(),
                ))
            })
            .collect()
    }

    /// The field's type in words.
    fn type_name(&self, schema: &'a Value) -> String {
        let schema = self.unwrap_null(schema);
        let target = self.resolve(schema);
        if let Some(values) = self.enum_values(target) {
            let names: Vec<String> = values
                .iter()
                .map(|(v, _)| format!("`{}`", v.trim_matches('"')))
                .collect();
            return format!("one of {}", names.join(", "));
        }
        if let Some(name) = schema["$ref"]
            .as_str()
            .map(|r| r.rsplit('/').next().unwrap())
        {
            return match name {
                "Duration" => "duration".into(),
                "Rate" => "rate".into(),
                "By" => "attribute names".into(),
                "Matcher" => "matcher".into(),
                "Condition" => "condition: map of attribute → matcher".into(),
                "InFlight" => "number or `unbounded`".into(),
                "DescriptorEntry" => "descriptor entry".into(),
                _ if target["properties"].is_object() => "section".into(),
                other => other.to_string(),
            };
        }
        match &target["type"] {
            Value::String(t) if t == "array" => {
                format!("list of {}", self.type_name(&target["items"]))
            }
            Value::String(t) if t == "object" => match &target["additionalProperties"] {
                Value::Object(_) => {
                    format!(
                        "map of name → {}",
                        self.type_name(&target["additionalProperties"])
                    )
                }
                _ => "section".into(),
            },
            Value::String(t) => t.clone(),
            Value::Array(ts) => ts
                .iter()
                .filter(|t| *t != "null")
                .map(|t| t.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "value".into(),
        }
    }

    /// An example value: the field's, its type's, its default, or an enum's first value; for a
    /// switch, the value that is not the default.
    fn example(&self, field: &Value) -> Option<Value> {
        let inner = self.unwrap_null(field);
        let target = self.resolve(inner);
        if target["type"] == "boolean" {
            return Some(Value::Bool(
                field.get("default") != Some(&Value::Bool(true)),
            ));
        }
        for candidate in [field, inner, target] {
            if let Some(first) = candidate["examples"].as_array().and_then(|e| e.first()) {
                return Some(first.clone());
            }
        }
        if let Some(default) = field.get("default")
            && !default.is_null()
            && default != &Value::Object(Map::new())
            && default != &Value::Array(Vec::new())
            && default != ""
        {
            return Some(default.clone());
        }
        if let Some(values) = self.enum_values(target) {
            return serde_json::from_str(&values[0].0).ok();
        }
        None
    }

    fn yaml(value: &Value) -> String {
        match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    /// The schema whose fields a field's value has: itself, a list's items or a map's values,
    /// when they are sections; with the path segment that reaches them.
    fn section_of(&self, field: &'a Value) -> Option<(&'static str, &'a Value)> {
        let target = self.resolve(self.unwrap_null(field));
        if target["properties"].is_object() {
            return Some(("", target));
        }
        if target["type"] == "array" {
            let items = self.resolve(&target["items"]);
            return items["properties"].is_object().then_some(("[]", items));
        }
        if let Value::Object(_) = &target["additionalProperties"] {
            let values = self.resolve(&target["additionalProperties"]);
            if values["properties"].is_object() {
                return Some((".<name>", values));
            }
            if values["type"] == "array" {
                let items = self.resolve(&values["items"]);
                return items["properties"]
                    .is_object()
                    .then_some((".<name>[]", items));
            }
        }
        None
    }

    fn object(&mut self, path: &str, schema: &'a Value, applies: Option<&str>) {
        let properties = schema["properties"].as_object().unwrap();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut sections = Vec::new();
        for (name, field) in properties {
            let full = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let applies = field["x-sluice-applies"].as_str().or(applies);
            let description = field["description"]
                .as_str()
                .or(self.resolve(self.unwrap_null(field))["description"].as_str())
                .unwrap_or_default();
            let _ = writeln!(self.out, "### `{full}`\n");
            let _ = writeln!(self.out, "- type: {}", self.type_name(field));
            let section = self.section_of(field);
            if required.contains(&name.as_str()) {
                let _ = writeln!(self.out, "- required");
            } else if section.is_none()
                && let Some(default) = field.get("default")
            {
                let default = if default.is_null() {
                    "none".into()
                } else {
                    format!("`{}`", Self::yaml(default))
                };
                let _ = writeln!(self.out, "- default: {default}");
            }
            if section.is_none() {
                match self.example(field) {
                    Some(example) => {
                        let _ = writeln!(self.out, "- example: `{name}: {}`", Self::yaml(&example));
                    }
                    None => self.missing_examples.push(full.clone()),
                }
            }
            let _ = writeln!(
                self.out,
                "- applies: {}",
                match applies {
                    Some("reload") => "on reload",
                    Some("restart") => "after a restart",
                    _ => unreachable!("every top-level field says when it applies"),
                }
            );
            let _ = writeln!(self.out, "\n{description}\n");
            let target = self.resolve(self.unwrap_null(field));
            if let Some(values) = self.enum_values(target)
                && values.iter().any(|(_, d)| !d.is_empty())
            {
                for (value, doc) in values {
                    let _ = writeln!(self.out, "- `{}`: {doc}", value.trim_matches('"'));
                }
                self.out.push('\n');
            }
            if let Some((suffix, inner)) = section {
                sections.push((format!("{full}{suffix}"), inner, applies));
            }
        }
        for (path, inner, applies) in sections {
            self.object(&path, inner, applies);
        }
    }
}

fn render_reference(schema: &Value) -> String {
    let defs = schema["$defs"].as_object().expect("$defs");
    let mut reference = Reference {
        defs,
        out: String::new(),
        missing_examples: Vec::new(),
    };
    let _ = write!(
        reference.out,
        "# Rule file reference\n\n\
         <!-- Generated from the configuration types by crates/sluice-cli/tests/it/schema.rs: \
         SLUICE_BLESS=1 cargo test -p sluice-ratelimit-cli --test it schema:: rewrites it. -->\n\n\
         {}\n\n\
         Rule files are YAML (`.yaml`, `.yml`) or TOML (`.toml`); every key below is written the \
         same in both. `sluice validate FILE` checks a file with line numbers. The same fields, \
         as a JSON Schema, are in [`docs/sluice.schema.json`](../../sluice.schema.json) (`sluice \
         schema` prints it); YAML editors complete and check fields with it when a file starts \
         with\n\n\
         ```yaml\n# yaml-language-server: $schema=<path to>/docs/sluice.schema.json\n```\n\n\
         *Applies* says whether a changed value takes effect when the running service reloads the \
         file (on a change of the file or SIGHUP), or only after a restart. Paths write `<name>` \
         for a name you choose and `[]` for each entry of a list.\n\n\
         Types: a *duration* is a whole number and a unit (`50ms`, `30s`, `15m`, `1h`, `1d`); a \
         *rate* is `count/window` (`100/1m`, `5/s`); *attribute names* are 1 to 64 characters of \
         a-z, 0-9 and _, or alternatives `member|session|ip` (the first the request carries); a \
         *matcher* is a value (equal to it), a list (one of them), `{{ prefix: \"/api/\" }}`, \
         `{{ present: true }}`, `{{ cidr: [\"10.0.0.0/8\"] }}` or `{{ not: <matcher> }}`.\n\n",
        schema["description"].as_str().unwrap_or_default()
    );
    reference.object("", schema, None);
    assert!(
        reference.missing_examples.is_empty(),
        "fields without an example (give them `#[schemars(example = ...)]`): {:?}",
        reference.missing_examples
    );
    let mut out = reference.out;
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[test]
fn the_rule_file_reference_is_rendered_from_the_schema() {
    let schema = generated_schema();
    let reference = render_reference(&schema);
    // The fields a user could not find explained before, each with its description.
    for field in [
        "rules.<name>.limits[].penalty",
        "rules.<name>.limits[].block",
        "rules.<name>.shadow",
        "rules.<name>.enabled",
        "rules.<name>.message",
        "rules.<name>.fail",
        "headers",
        "store.clock",
        "store.prefix",
        "store.max_keys",
        "rules.<name>.limits[].algorithm",
    ] {
        let heading = format!("### `{field}`\n");
        let (_, entry) = reference
            .split_once(&heading)
            .unwrap_or_else(|| panic!("the reference has no entry for {field}"));
        let entry = entry.split("\n### ").next().unwrap();
        let description = entry
            .lines()
            .find(|l| !(l.starts_with("- ") || l.is_empty()))
            .unwrap_or_default();
        assert!(description.len() > 20, "{field} is not described: {entry}");
    }
    assert!(
        reference.contains("delay_ms"),
        "leaky bucket's delay_ms is explained"
    );
    assert!(
        reference.contains("- default: `gcra`"),
        "the default algorithm is given"
    );
    assert_committed(REFERENCE_FILE, &reference);
}
