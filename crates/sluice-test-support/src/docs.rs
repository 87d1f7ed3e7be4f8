//! The repository's documentation as tests read it: README.md and the book's chapters under
//! `docs/src/`, so that tests holding the docs to the code (snippets run, tables generated,
//! commands rerun, links resolved) find every page in one place.
//!
//! Paths are the repository's, found from this crate's manifest, so a test reads the working
//! tree it was built from, whichever crate it belongs to.

use std::path::{Path, PathBuf};

/// The repository's root directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository's root")
}

/// The book's source directory, `docs/src`.
pub fn book_src() -> PathBuf {
    repo().join("docs/src")
}

/// One chapter of the book by its path under `docs/src` (`operations/metrics.md`).
///
/// # Panics
/// If the chapter cannot be read: the test that names it cannot check anything without it.
pub fn chapter(path: &str) -> String {
    let file = book_src().join(path);
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("the book's chapter {}: {e}", file.display()))
}

/// Every Markdown page users read: README.md, CHANGELOG.md and every `.md` under `docs/src`,
/// each with its text, in a stable order.
pub fn pages() -> Vec<(PathBuf, String)> {
    let mut files = vec![repo().join("README.md"), repo().join("CHANGELOG.md")];
    let mut dirs = vec![book_src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files[2..].sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}
