//! A rule file's text, read with a bound on its size and checked to be UTF-8, and whether a text
//! holds nothing but comments.

use std::path::Path;

use super::{ConfigError, Format, MAX_FILE_BYTES};

/// A file's text, read with a bound on its size.
pub(super) fn read_text(path: &Path) -> Result<String, ConfigError> {
    let with_path = |e: ConfigError| e.in_file(path);
    Format::from_path(path)?;
    let unreadable =
        |e: std::io::Error| with_path(ConfigError::new("", format!("cannot read: {e}")));
    // Read at most one byte past the cap, so a file that grows while it is read (or a device
    // posing as a file) cannot make us read without bound.
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_FILE_BYTES + 1),
        &mut bytes,
    )
    .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(with_path(ConfigError::new(
            "",
            format!("the file is larger than the {MAX_FILE_BYTES} bytes a rule file may have"),
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        with_path(ConfigError::new(
            "",
            format!(
                "cannot read: not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ),
        ))
    })
}

/// Whether every line is blank or a comment (`#` in both formats).
pub(super) fn is_only_comments(text: &str) -> bool {
    text.lines()
        .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
}
