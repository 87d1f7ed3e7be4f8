//! Reading a YAML rule file so that every mistake in it is reported, each once, where it is.
//!
//! The whole file is deserialized first: a file without mistakes costs that one pass. When it
//! fails, the file is read again piece by piece — each top-level section on its own, and each rule
//! on its own — every piece from its own slice of the text, with the parser's positions shifted
//! back to the file's. A mistake in one rule then cannot hide one in another, and every message,
//! field path (serde_path_to_error) and suggestion comes from the types themselves, for any field
//! serde knows about.
//!
//! Invariants: files over [`MAX_SPLIT_BYTES`] are not cut; a piece is cut only where the layout is block style (top-level keys at column 1,
//! one rule key per line at the same column); anything else (flow style at the top, aliases to an
//! anchor in another piece) is not cut, and the first pass's single error is reported instead.
//! The sections and rules that parsed are put together again, so the checks that follow parsing
//! still run on them. Repeated keys, which serde-saphyr refuses by default, are reported here with
//! the line of their first appearance.

use std::collections::{BTreeMap, HashMap};

use serde::de::{DeserializeOwned, IgnoredAny};
use serde_saphyr::{DuplicateKeyPolicy, Error as YamlError, Options, Spanned};
use sluice::model::Rule;

use super::file::ConfigFile;
use super::{ConfigError, locate::SourceMap, suggest};

/// What reading found: the file as far as it parsed (its broken sections and rules left out),
/// and the mistakes.
pub(super) struct Read {
    /// `None` when the file could not be cut into pieces (its one error is in `errors`).
    pub file: Option<ConfigFile>,
    /// Whether some rule was left out, so checks that refer to rules by name must not run.
    pub rules_missing: bool,
    pub errors: Vec<ConfigError>,
}

pub(super) fn read(text: &str) -> Read {
    let whole = Piece {
        text,
        start: 0,
        line: 1,
        column: 1,
    };
    let first = match deserialize::<ConfigFile>(whole, Options::default()) {
        Ok(file) => {
            return Read {
                file: Some(file),
                rules_missing: false,
                errors: Vec::new(),
            };
        }
        Err(failure) => failure,
    };
    let split = (text.len() <= MAX_SPLIT_BYTES)
        .then(|| piecewise(text))
        .flatten();
    match split {
        Some(read) if !read.errors.is_empty() => read,
        _ => Read {
            file: None,
            rules_missing: true,
            errors: vec![whole_file_error(&first, text)],
        },
    }
}

/// Files larger than this (a real one is a few KiB) report only the first pass's error: reading
/// in pieces parses the text a few more times, and a hostile file should cost one parse.
pub(super) const MAX_SPLIT_BYTES: usize = 256 * 1024;

/// A slice of the file's text and where it starts in the file.
#[derive(Clone, Copy)]
pub(super) struct Piece<'a> {
    pub(super) text: &'a str,
    /// Byte offset of `text` in the file.
    pub(super) start: usize,
    /// 1-based line and column (in characters) of `text`'s first character in the file.
    pub(super) line: u64,
    pub(super) column: u64,
}

impl Piece<'_> {
    /// The spaces put before the text so its first line keeps its column.
    pub(super) fn pad(&self) -> usize {
        usize::try_from(self.column.saturating_sub(1)).unwrap_or(0)
    }
}

/// A failed deserialization: serde-saphyr's error and the path serde was at when it failed.
pub(super) struct Failure {
    pub(super) error: YamlError,
    path: String,
}

impl Failure {
    pub(super) fn is_about_anchors(&self) -> bool {
        matches!(
            self.error.without_snippet(),
            YamlError::UnknownAnchor { .. }
        )
    }
}

pub(super) fn deserialize<T: DeserializeOwned>(
    piece: Piece<'_>,
    options: Options,
) -> Result<T, Box<Failure>> {
    let padded;
    let text = if piece.pad() > 0 {
        padded = format!("{}{}", " ".repeat(piece.pad()), piece.text);
        padded.as_str()
    } else {
        piece.text
    };
    let mut path = String::new();
    serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|error| Box::new(Failure { error, path }))
}

/// One `key: value` of a mapping, located in the file.
struct Entry {
    key: String,
    key_start: usize,
    key_line: u64,
    key_column: u64,
    value_start: usize,
    value_line: u64,
    value_column: u64,
}

/// A mapping's entries in the order written, repeated keys included.
struct Entries(Vec<(Spanned<String>, Spanned<IgnoredAny>)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key()? {
                    entries.push((key, map.next_value()?));
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// The entries of the mapping `piece` holds, located in the file; `None` when it is not a
/// mapping or a position is unknown.
fn entries(piece: Piece<'_>) -> Option<Vec<Entry>> {
    let options = serde_saphyr::options! { duplicate_keys: DuplicateKeyPolicy::PassThrough };
    let Entries(found) = deserialize(piece, options).ok()?;
    let at = |offset: Option<u64>| -> Option<usize> {
        let offset = usize::try_from(offset?).ok()?.checked_sub(piece.pad())?;
        (offset <= piece.text.len() && piece.text.is_char_boundary(offset))
            .then_some(piece.start + offset)
    };
    found
        .into_iter()
        .map(|(key, value)| {
            Some(Entry {
                key_start: at(key.referenced.span().byte_offset())?,
                key_line: piece.line + key.referenced.line() - 1,
                key_column: key.referenced.column(),
                value_start: at(value.referenced.span().byte_offset())?,
                value_line: piece.line + value.referenced.line() - 1,
                value_column: value.referenced.column(),
                key: key.value,
            })
        })
        .collect()
}

/// Reads the file piece by piece; `None` when its layout cannot be cut.
fn piecewise(text: &str) -> Option<Read> {
    let whole = Piece {
        text,
        start: 0,
        line: 1,
        column: 1,
    };
    let top = entries(whole)?;
    if top.iter().any(|e| e.key_column != 1) {
        return None;
    }
    let mut errors = Vec::new();
    let mut cut = Vec::new();
    let mut rules = BTreeMap::new();
    let mut rules_missing = false;
    let mut seen: HashMap<&str, u64> = HashMap::new();
    for (i, entry) in top.iter().enumerate() {
        let end = top.get(i + 1).map_or(text.len(), |next| next.key_start);
        let range = entry.key_start..end;
        cut.push(range.clone());
        if let Some(first) = seen.get(entry.key.as_str()) {
            errors.push(repeated(entry, *first, None));
            continue;
        }
        seen.insert(&entry.key, entry.key_line);
        let section = Piece {
            text: &text[range.clone()],
            start: range.start,
            line: entry.key_line,
            column: 1,
        };
        let value_end = entry.value_start.max(range.start);
        let rule_pieces = (entry.key == "rules" && value_end < end)
            .then(|| {
                let value = Piece {
                    text: &text[value_end..end],
                    start: value_end,
                    line: entry.value_line,
                    column: entry.value_column,
                };
                entries(value).map(|found| (value, found))
            })
            .flatten()
            .filter(|(_, found)| found.iter().all(|r| r.key_column == found[0].key_column));
        match rule_pieces {
            Some((value, found)) => {
                let read = read_rules(text, value, &found)?;
                rules_missing |= read.missing;
                errors.extend(read.errors);
                rules = read.rules;
            }
            None => match every_error::<ConfigFile>(section, text, None)? {
                Ok(file) if entry.key == "rules" => rules = file.rules,
                Ok(_) => {
                    cut.pop();
                }
                Err(found) => {
                    rules_missing |= entry.key == "rules";
                    errors.extend(found);
                }
            },
        }
    }
    let mut kept = String::with_capacity(text.len());
    let mut from = 0;
    for range in cut {
        kept.push_str(&text[from..range.start]);
        from = range.end;
    }
    kept.push_str(&text[from..]);
    let mut file: ConfigFile = serde_saphyr::from_str(&kept).ok()?;
    file.rules = rules;
    Some(Read {
        file: Some(file),
        rules_missing,
        errors,
    })
}

struct Rules {
    rules: BTreeMap<String, Rule>,
    missing: bool,
    errors: Vec<ConfigError>,
}

/// Each rule of the `rules` mapping on its own.
fn read_rules(text: &str, value: Piece<'_>, found: &[Entry]) -> Option<Rules> {
    let mut read = Rules {
        rules: BTreeMap::new(),
        missing: false,
        errors: Vec::new(),
    };
    let mut seen: HashMap<&str, u64> = HashMap::new();
    let value_end = value.start + value.text.len();
    for (i, entry) in found.iter().enumerate() {
        let name = entry.key.as_str();
        if let Some(first) = seen.get(name) {
            read.errors.push(repeated(entry, *first, Some(name)));
            continue;
        }
        seen.insert(name, entry.key_line);
        let end = found.get(i + 1).map_or(value_end, |next| next.key_start);
        let piece = if entry.value_start >= entry.key_start && entry.value_start <= end {
            Piece {
                text: &text[entry.value_start..end],
                start: entry.value_start,
                line: entry.value_line,
                column: entry.value_column,
            }
        } else {
            // No value of its own (`name:` then the next rule): an empty piece at the key.
            Piece {
                text: "",
                start: entry.key_start,
                line: entry.key_line,
                column: entry.key_column,
            }
        };
        match every_error::<Rule>(piece, text, Some(name))? {
            Ok(rule) => {
                read.rules.insert(name.to_string(), rule);
            }
            Err(errors) => {
                read.missing = true;
                read.errors.extend(errors);
            }
        }
    }
    Some(read)
}

/// A key written a second time in the same mapping.
fn repeated(entry: &Entry, first_line: u64, rule: Option<&str>) -> ConfigError {
    let what = match rule {
        Some(name) => format!(
            "rule `{name}` is defined twice (first on line {first_line}); rename or remove one"
        ),
        None => format!(
            "`{}` is set twice (first on line {first_line}); remove one",
            entry.key
        ),
    };
    ConfigError::new(if rule.is_some() { "" } else { &entry.key }, what)
        .at_line(Some(entry.key_line))
        .at_column(Some(entry.key_column))
        .in_rule(rule.map(str::to_string))
}

/// A failure of the first, whole-file pass: the rule is the one whose block holds the line.
fn whole_file_error(failure: &Failure, text: &str) -> ConfigError {
    let whole = Piece {
        text,
        start: 0,
        line: 1,
        column: 1,
    };
    let mut error = located(failure, whole, text, None);
    if let Some(line) = error.line
        && let Some(rule) = SourceMap::new(text, super::Format::Yaml).rule_at(u64::from(line))
    {
        let prefix = format!("rules.{rule}");
        error.field = match error.field.strip_prefix(&prefix) {
            Some(rest) => rest.trim_start_matches('.').to_string(),
            None => error.field,
        };
        error.rule = Some(rule.to_string());
    }
    error
}

/// A failure as a [`ConfigError`], at its place in the file.
pub(super) fn located(
    failure: &Failure,
    piece: Piece<'_>,
    text: &str,
    rule: Option<&str>,
) -> ConfigError {
    let location = failure.error.location();
    let line = location.map(|l| piece.line + l.line() - 1);
    let column = location.map(|l| l.column());
    let message = suggest::yaml_message(&failure.error);
    let value = line
        .zip(column)
        .and_then(|(line, column)| suggest::scalar_at(text, line, column));
    let (field, message) = suggest::field_and_message(&failure.path, &message);
    ConfigError::new(field, suggest::reworded(&message, value))
        .at_line(line)
        .at_column(column)
        .in_rule(rule.map(str::to_string))
        .suggesting(suggest::from_message(&message))
}

// Every mistake of one piece: after one is found, the entry it is in is blanked out (positions
// kept) and the piece read again, as long as each new mistake lies further on than the last.

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
