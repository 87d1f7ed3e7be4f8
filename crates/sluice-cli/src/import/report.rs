//! The import's report: everything the source said that the Sluice file does not carry over
//! exactly (losses), and what it carried over exactly but a reader may take for something else
//! (notes: a `month` of 30 days is not a calendar month), each with the file and the path in the
//! document it came from.
//!
//! A report with no losses means the written rules decide as the source did (within the
//! differences every import has, which README lists); each loss says what was done instead.
//! Notes do not make a report inexact.

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

/// Losses and notes, each in the order they were found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// What was not carried over exactly.
    pub losses: Vec<Loss>,
    /// What was carried over exactly and means what the source meant, which is not what its
    /// words say (same fields as a loss).
    pub notes: Vec<Loss>,
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

    /// Records a note.
    pub fn note(&mut self, file: &str, path: &str, message: impl Into<String>) {
        self.notes.push(Loss {
            file: file.to_string(),
            path: path.to_string(),
            message: message.into(),
        });
    }

    /// One line per note and per loss (`note: FILE: PATH: message`, `not carried over: …`),
    /// then a summary line.
    pub fn text(&self, rules: usize) -> String {
        let mut out = String::new();
        let lines = self.notes.iter().map(|n| ("note", n));
        for (kind, loss) in lines.chain(self.losses.iter().map(|l| ("not carried over", l))) {
            let at = match loss.path.is_empty() {
                true => String::new(),
                false => format!(" {}:", loss.path),
            };
            out.push_str(&format!("{kind}: {}:{at} {}\n", loss.file, loss.message));
        }
        out.push_str(&match self.losses.len() {
            0 => format!("imported {rules} rule(s); everything was carried over\n"),
            n => format!("imported {rules} rule(s); {n} thing(s) not carried over exactly\n"),
        });
        out
    }

    /// `{"rules", "exact", "lost": [{"file", "path", "message"}], "notes": [same]}`.
    pub fn json(&self, rules: usize) -> serde_json::Value {
        serde_json::json!({
            "rules": rules,
            "exact": self.losses.is_empty(),
            "lost": self.losses,
            "notes": self.notes,
        })
    }
}
