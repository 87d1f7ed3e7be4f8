//! Every mistake of one piece of a YAML rule file: after one is found, the entry it is in is
//! blanked out (positions kept) and the piece read again, as long as each new mistake lies
//! further on than the last.

use serde::de::DeserializeOwned;
use serde_saphyr::Options;

use super::ConfigError;
use super::yaml_read::{Piece, deserialize, located};

/// The most mistakes reported from one piece (a rule or a section).
const MAX_ERRORS_PER_PIECE: usize = 50;

/// Deserializes a piece, reporting each of its mistakes: after one is found, the entry it is in
/// (`key: value` and the lines below it, or one entry of a flow mapping) is blanked out and the
/// piece read again. Blanking keeps every position, and only a mistake found further on is taken:
/// one found at or before the last (a struct missing the entry just blanked, say) is a
/// consequence of the blanking, not a mistake of the file, so reading stops there. `None` when
/// the piece refers to an anchor outside itself.
pub(super) fn every_error<T: DeserializeOwned>(
    piece: Piece<'_>,
    text: &str,
    rule: Option<&str>,
) -> Option<Result<T, Vec<ConfigError>>> {
    let mut errors: Vec<ConfigError> = Vec::new();
    let mut current = piece.text.to_string();
    loop {
        let attempt = Piece {
            text: &current,
            ..piece
        };
        let failure = match deserialize::<T>(attempt, Options::default()) {
            Ok(value) if errors.is_empty() => return Some(Ok(value)),
            Ok(_) => return Some(Err(errors)),
            Err(failure) => failure,
        };
        if failure.is_about_anchors() {
            return None;
        }
        let location = failure.error.location();
        let error = located(&failure, piece, text, rule);
        let later = |last: &ConfigError| (error.line, error.column) > (last.line, last.column);
        if errors.last().is_some_and(|last| !later(last)) {
            return Some(Err(errors));
        }
        errors.push(error);
        let offset = location.and_then(|l| offset_of(&current, piece.pad(), l.line(), l.column()));
        if errors.len() >= MAX_ERRORS_PER_PIECE
            || !offset.is_some_and(|at| blank_entry(&mut current, at))
        {
            return Some(Err(errors));
        }
    }
}

/// The byte offset in `text` of a 1-based line and column of the padded text.
fn offset_of(text: &str, pad: usize, line: u64, column: u64) -> Option<usize> {
    let line = usize::try_from(line).ok()?.checked_sub(1)?;
    let mut column = usize::try_from(column).ok()?.checked_sub(1)?;
    if line == 0 {
        column = column.checked_sub(pad)?;
    }
    let start = if line == 0 {
        0
    } else {
        text.match_indices('\n').nth(line - 1)?.0 + 1
    };
    let rest = &text[start..];
    let in_line = rest.char_indices().nth(column).map(|(i, _)| i)?;
    Some(start + in_line)
}

/// Replaces the entry holding byte `at` with spaces (newlines kept); false when there is
/// nothing left to blank there.
fn blank_entry(text: &mut String, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let before = &text[line_start..at];
    let depth: i32 = before
        .bytes()
        .map(|b| match b {
            b'{' | b'[' => 1,
            b'}' | b']' => -1,
            _ => 0,
        })
        .sum();
    let range = if depth > 0 {
        // Inside a flow collection: from the separator before to the one after, one comma with it.
        let open = before
            .rfind([',', '{', '['])
            .map_or(line_start, |i| line_start + i);
        let close = text[at..line_end]
            .find([',', '}', ']'])
            .map_or(line_end, |i| at + i);
        match (text.as_bytes()[open], text.as_bytes().get(close)) {
            (b',', _) => open..close,
            (_, Some(b',')) => open + 1..close + 1,
            _ => open + 1..close,
        }
    } else {
        // Block style: the key's line from the key on, and the lines indented below it.
        let mut key = line_start;
        while text[key..line_end].starts_with(' ') || text[key..line_end].starts_with("- ") {
            key += 1;
        }
        let column = key - line_start;
        let mut end = line_end;
        while end < text.len() {
            let next_end = text[end + 1..]
                .find('\n')
                .map_or(text.len(), |i| end + 1 + i);
            let next = &text[end + 1..next_end];
            let indent = next.len() - next.trim_start_matches(' ').len();
            if !next.trim().is_empty() && indent <= column {
                break;
            }
            end = next_end;
        }
        key..end
    };
    if range.is_empty() || text[range.clone()].trim().is_empty() {
        return false;
    }
    let blanked: String = text[range.clone()]
        .chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect();
    text.replace_range(range, &blanked);
    true
}
