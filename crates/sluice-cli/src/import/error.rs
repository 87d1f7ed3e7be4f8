//! What stops an import: a file that cannot be read or is not YAML. Anything a readable file
//! says that Sluice cannot carry over is not an error but a [`Loss`](super::report::Loss) in the
//! report, and the import still writes its result.

use std::path::PathBuf;

/// Why an input file could not be imported at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The rule file could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// Where it was to go (`-`: standard output).
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is larger than an import reads.
    #[error("{}: larger than the {max} bytes an import reads", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        max: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{}: not UTF-8 text", path.display())]
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// The file is not YAML, or not the shape the format has at its top.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}
