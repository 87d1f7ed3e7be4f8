//! The import's report: everything the source said that the Sluice file does not carry over
//! exactly, each with the file and the path in the document it came from.
//!
//! A report with no losses means the written rules decide as the source did (within the
//! differences every import has, which README lists); each loss says what was done instead.

use serde::Serialize;

/// One thing not carried over exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// The input file.
    pub file: String,
    /// Where in the document (`descriptors[0].rate_limit.replaces`, `[3].conditions[1]`); empty
    /// for the whole file.
    pub path: String,
    /// What was not carried over, and what the output does instead.
    pub message: String,
}

/// Losses, in the order they were found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// What was not carried over exactly.
    pub losses: Vec<Loss>,
}

impl Report {
    /// Records a loss.
    pub fn lose(&mut self, file: &str, path: &str, message: impl Into<String>) {
        self.losses.push(Loss {
            file: file.to_string(),
            path: path.to_string(),
            message: message.into(),
        });
    }

    /// One line per loss (`FILE: PATH: message`), then a summary line.
    pub fn text(&self, rules: usize) -> String {
        let mut out = String::new();
        for loss in &self.losses {
            let at = match loss.path.is_empty() {
                true => String::new(),
                false => format!(" {}:", loss.path),
            };
            out.push_str(&format!(
                "not carried over: {}:{at} {}\n",
                loss.file, loss.message
            ));
        }
        out.push_str(&match self.losses.len() {
            0 => format!("imported {rules} rule(s); everything was carried over\n"),
            n => format!("imported {rules} rule(s); {n} thing(s) not carried over exactly\n"),
        });
        out
    }

    /// `{"rules", "exact", "lost": [{"file", "path", "message"}]}`.
    pub fn json(&self, rules: usize) -> serde_json::Value {
        serde_json::json!({
            "rules": rules,
            "exact": self.losses.is_empty(),
            "lost": self.losses,
        })
    }
}
