//! `ConfigError`: why a rule file was refused, located as precisely as the source allows.
//!
//! Every error names the file (when read from one), the line, the rule and the field where they
//! are known, so `sluice validate` and reload log lines point straight at the mistake.

use std::fmt;
use std::path::PathBuf;

/// A rule file that cannot be used, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, when the text came from one.
    pub path: Option<PathBuf>,
    /// 1-based line of the mistake (for a rule's semantic error: the line of the rule's key).
    pub line: Option<u64>,
    /// The rule the mistake is in, if it is in one.
    pub rule: Option<String>,
    /// The field, as a path when nested (`limits[1].rate`); empty when the file as a whole is
    /// wrong (unreadable, not YAML).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: None,
            line: None,
            rule: None,
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn at_line(mut self, line: Option<u64>) -> ConfigError {
        self.line = line.filter(|l| *l > 0);
        self
    }

    pub(crate) fn in_rule(mut self, rule: Option<String>) -> ConfigError {
        self.rule = rule;
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, self.line) {
            (Some(path), Some(line)) => write!(f, "{}:{line}: ", path.display())?,
            (Some(path), None) => write!(f, "{}: ", path.display())?,
            (None, Some(line)) => write!(f, "line {line}: ",)?,
            (None, None) => {}
        }
        if let Some(rule) = &self.rule {
            write!(f, "rule `{}`: ", shortened(rule, MAX_SHOWN))?;
        }
        if !self.field.is_empty() {
            write!(f, "field `{}`: ", shortened(&self.field, MAX_SHOWN))?;
        }
        f.write_str(&shortened(&self.message, MAX_MESSAGE))
    }
}

impl std::error::Error for ConfigError {}

/// Longest rule name or field written whole in a message; a longer one (refused anyway) is cut,
/// so one bad file cannot flood the log.
const MAX_SHOWN: usize = 80;
const MAX_MESSAGE: usize = 400;

fn shortened(name: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if name.len() <= max {
        return name.into();
    }
    let mut cut = max;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &name[..cut], name.len()).into()
}
