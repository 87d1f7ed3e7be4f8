//! `ConfigError`: why a rule file was refused, located as precisely as the source allows.
//!
//! Every error names the file (when read from one), the line (and column, where the parser gave
//! one), the rule and the field where they are known, so `sluice validate` and reload log lines
//! point straight at the mistake. Where the mistake is a misspelling of a name the file's format
//! knows (a key, an algorithm, a rule), `suggestion` holds the name meant. Errors serialize to
//! JSON for `sluice validate --format json`.

use std::fmt;
use std::path::Path;

/// A rule file that cannot be used, and where.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigError {
    /// The file, when the text came from one. (Boxed, as the suggestion: an error is made once
    /// per file read, and a smaller one keeps every `Result` holding it small.)
    pub path: Option<Box<Path>>,
    /// 1-based line of the mistake (for a rule's semantic error: the line of the rule's key).
    pub line: Option<u32>,
    /// 1-based column (in characters) of the mistake, when the parser located it exactly.
    pub column: Option<u32>,
    /// The rule the mistake is in, if it is in one.
    pub rule: Option<String>,
    /// The field, as a path when nested (`limits[1].rate`); empty when the file as a whole is
    /// wrong (unreadable, not YAML).
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The name most likely meant, when the mistake is a misspelt one.
    pub suggestion: Option<Box<str>>,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: None,
            line: None,
            column: None,
            rule: None,
            field: field.into(),
            message: message.into(),
            suggestion: None,
        }
    }

    pub(crate) fn at_line(mut self, line: Option<u64>) -> ConfigError {
        // A rule file is at most a few MiB: its lines fit in 32 bits.
        self.line = line.filter(|l| *l > 0).and_then(|l| u32::try_from(l).ok());
        self
    }

    pub(crate) fn at_column(mut self, column: Option<u64>) -> ConfigError {
        self.column = column
            .filter(|c| *c > 0)
            .and_then(|c| u32::try_from(c).ok());
        self
    }

    pub(crate) fn suggesting(mut self, suggestion: Option<String>) -> ConfigError {
        self.suggestion = suggestion.map(String::into_boxed_str);
        self
    }

    pub(crate) fn in_file(mut self, path: &Path) -> ConfigError {
        self.path = Some(path.into());
        self
    }

    pub(crate) fn in_rule(mut self, rule: Option<String>) -> ConfigError {
        self.rule = rule;
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match (self.line, self.column) {
            (Some(line), Some(column)) => format!("{line}:{column}"),
            (Some(line), None) => line.to_string(),
            (None, _) => String::new(),
        };
        match (&self.path, at.is_empty()) {
            (Some(path), false) => write!(f, "{}:{at}: ", path.display())?,
            (Some(path), true) => write!(f, "{}: ", path.display())?,
            (None, false) => write!(f, "line {at}: ")?,
            (None, true) => {}
        }
        if let Some(rule) = &self.rule {
            write!(f, "rule `{}`: ", shortened(rule, MAX_SHOWN))?;
        }
        if !self.field.is_empty() {
            write!(f, "field `{}`: ", shortened(&self.field, MAX_SHOWN))?;
        }
        f.write_str(&shortened(&self.message, MAX_MESSAGE))?;
        if let Some(suggestion) = &self.suggestion {
            write!(f, " (did you mean `{}`?)", shortened(suggestion, MAX_SHOWN))?;
        }
        Ok(())
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
