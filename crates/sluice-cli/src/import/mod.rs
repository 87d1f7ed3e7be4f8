//! `sluice import`: a peer's rate-limit configuration → a Sluice rule file (and the Envoy
//! mapping that sends the same descriptors to it), with a report of everything not carried over
//! exactly.
//!
//! Exit status: 0 when the rule file was written (even when the report lists losses: a lossy
//! import still writes what it could, and says what it lost), 2 when an input cannot be read or
//! is not the format named, or the output cannot be written.
//!
//! # Layout
//! - [`envoy_ratelimit`], [`limitador`]: each format's reading and translation (pure);
//! - [`document`]: input files as bounded YAML trees, read field by field with paths;
//! - [`names`]: Sluice names made from the source's; [`rule_file`]: the output and its YAML;
//! - [`report`]: what was not carried over; [`error`]: what stops an import.

pub mod document;
pub mod envoy_ratelimit;
pub mod error;
pub mod limitador;
pub mod names;
pub mod report;
pub mod rule_file;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use sluice_server::config::{Config, Format};

use error::ImportError;
use report::Report;
use rule_file::Imported;

/// `sluice import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The format to import.
    #[command(subcommand)]
    pub source: ImportSource,
}

/// The formats `sluice import` reads.
#[derive(Debug, Clone, Subcommand)]
pub enum ImportSource {
    /// envoyproxy/ratelimit configuration files (one domain each; files of one domain are
    /// merged): rules plus the `envoy` mapping for the same descriptors.
    EnvoyRatelimit {
        /// The configuration files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Decide every rule in shadow mode, as envoyproxy/ratelimit's `SHADOW_MODE=true`.
        #[arg(long)]
        shadow_mode: bool,
        /// Where to write and how to report.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A Limitador limits file: one rule per namespace, checked with the descriptor entries as
    /// attributes.
    Limitador {
        /// The limits file.
        file: PathBuf,
        /// Add the `envoy` mapping, for Limitador reached through Envoy's rate-limit service.
        #[arg(long)]
        envoy: bool,
        /// Where to write and how to report.
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// Where the rule file goes, and the report's form.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Write the rule file here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The report on standard error: text, or one JSON object
    /// (`{"rules", "exact", "lost": [{"file", "path", "message"}]}`).
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
}

/// How the report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// One line per thing not carried over, then a count.
    Text,
    /// One JSON object.
    Json,
}

/// Imports, writes the rule file and the report.
pub fn run(args: &ImportArgs) -> ExitCode {
    let mut report = Report::default();
    let (imported, output) = match &args.source {
        ImportSource::EnvoyRatelimit {
            files,
            shadow_mode,
            output,
        } => (
            envoy_ratelimit::import(files, *shadow_mode, &mut report),
            output,
        ),
        ImportSource::Limitador {
            file,
            envoy,
            output,
        } => (limitador::import(file, *envoy, &mut report), output),
    };
    match imported.and_then(|imported| write(&imported, output).map(|()| imported)) {
        Ok(imported) => {
            let rules = imported.rules.len();
            match output.format {
                ReportFormat::Text => eprint!("{}", report.text(rules)),
                ReportFormat::Json => eprintln!("{}", report.json(rules)),
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(crate::EXIT_ERROR)
        }
    }
}

/// Checks the rule file as `sluice validate` would, then writes it.
fn write(imported: &Imported, output: &OutputArgs) -> Result<(), ImportError> {
    let text = imported.to_yaml();
    let path = output.output.clone().unwrap_or_else(|| PathBuf::from("-"));
    // Not expected: the translation makes only what Sluice accepts. Said, never written silently.
    if let Err(e) = Config::parse(&text, Format::Yaml) {
        return Err(ImportError::Parse {
            path,
            message: format!(
                "the imported rules do not validate ({e}); please report this with the input"
            ),
        });
    }
    let written = match &output.output {
        Some(file) => std::fs::write(file, &text),
        None => std::io::Write::write_all(&mut crate::stdout::Stdout, text.as_bytes()),
    };
    written.map_err(|source| ImportError::Write { path, source })
}
