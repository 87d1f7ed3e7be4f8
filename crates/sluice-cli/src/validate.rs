//! `sluice validate FILE`: parse and validate a rule file, print a short summary or the error.

use std::process::ExitCode;

use sluice::store::url::redact;
use sluice_server::config::Config;

use crate::cli::ValidateArgs;

/// Validates the file; 0 and a summary on standard output, or 1 and the error on standard error.
pub fn run(args: &ValidateArgs) -> ExitCode {
    match Config::load(&args.file) {
        Ok(config) => {
            println!("{}", summary(&args.file.display().to_string(), &config));
            if let Some(var) = &config.admin_token_env
                && std::env::var_os(var).is_none_or(|v| v.is_empty())
            {
                eprintln!("note: {var} is not set here; admin endpoints are off without it");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// One line: the file is valid, with its rules, store and version.
pub fn summary(file: &str, config: &Config) -> String {
    let names: Vec<&str> = config.rules.iter().map(|(n, _)| n.as_str()).collect();
    let limits: usize = config.rules.iter().map(|(_, r)| r.limits.len()).sum();
    format!(
        "{file}: ok: {} rules ({}), {limits} limits, store {}, version {}",
        names.len(),
        names.join(", "),
        redact(&config.store.url),
        &config.version[..12]
    )
}
