//! `sluice validate FILE`: parse and validate a rule file; print a short summary, or every error
//! of the file, each once, with its line and column (`--format json` for CI).
//!
//! A file that sets nothing at all is an error (a wrong path or a truncated file is the likely
//! cause); a file with no rules that says so (`rules: {}`) is valid, with a warning, since every
//! check against it answers "unknown rule".

use std::process::ExitCode;

use sluice::store::url::redact;
use sluice_server::config::{Config, ConfigError};

use crate::cli::{OutputFormat, ValidateArgs};
use crate::stdout::line;

/// Validates the file; 0 and a summary on standard output, or 1 and the errors (on standard
/// error as text; on standard output as JSON).
pub fn run(args: &ValidateArgs) -> std::io::Result<ExitCode> {
    let file = args.file.display().to_string();
    match (Config::check_file(&args.file), args.format) {
        (Ok(config), OutputFormat::Text) => {
            line(summary(&file, &config))?;
            for warning in warnings(&config) {
                eprintln!("warning: {warning}");
            }
            Ok(ExitCode::SUCCESS)
        }
        (Ok(config), OutputFormat::Json) => {
            let names: Vec<&str> = config.rules.iter().map(|(n, _)| n.as_str()).collect();
            let out = serde_json::json!({
                "file": file,
                "valid": true,
                "rules": names,
                "limits": config.rules.iter().map(|(_, r)| r.limits.len()).sum::<usize>(),
                "store": redact(&config.store.url),
                "version": config.version,
                "warnings": warnings(&config),
                "errors": [],
            });
            line(out)?;
            Ok(ExitCode::SUCCESS)
        }
        (Err(errors), OutputFormat::Text) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            eprintln!("{file}: {}", counted(errors.len(), "error", "errors"));
            Ok(ExitCode::FAILURE)
        }
        (Err(errors), OutputFormat::Json) => {
            line(json_errors(&file, &errors))?;
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The JSON report of an invalid file: `{"file", "valid": false, "errors": [...]}`, each error
/// with `line`, `column`, `rule`, `field`, `message` and `suggestion` (null when unknown).
fn json_errors(file: &str, errors: &[ConfigError]) -> serde_json::Value {
    let errors: Vec<serde_json::Value> = errors
        .iter()
        .map(|e| {
            serde_json::json!({
                "line": e.line,
                "column": e.column,
                "rule": e.rule,
                "field": e.field,
                "message": e.message,
                "suggestion": e.suggestion,
                "text": ConfigError { path: None, ..e.clone() }.to_string(),
            })
        })
        .collect();
    serde_json::json!({ "file": file, "valid": false, "errors": errors })
}

/// What is valid but likely not meant.
fn warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if config.rules.is_empty() {
        warnings.push("the file has no rules: every check will answer `unknown rule`".to_string());
    }
    if let Some(var) = &config.admin_token_env
        && std::env::var_os(var).is_none_or(|v| v.is_empty())
    {
        warnings.push(format!(
            "{var} is not set here; admin endpoints are off without it"
        ));
    }
    warnings
}

/// One line: the file is valid, with its rules, store and version.
pub fn summary(file: &str, config: &Config) -> String {
    let names: Vec<&str> = config.rules.iter().map(|(n, _)| n.as_str()).collect();
    let limits: usize = config.rules.iter().map(|(_, r)| r.limits.len()).sum();
    let listed = match names.is_empty() {
        true => String::new(),
        false => format!(" ({})", names.join(", ")),
    };
    format!(
        "{file}: ok: {}{listed}, {}, store {}, version {}",
        counted(names.len(), "rule", "rules"),
        counted(limits, "limit", "limits"),
        redact(&config.store.url),
        &config.version[..12]
    )
}

/// `1 rule`, `2 rules`: a count with the noun it counts.
pub fn counted(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}
