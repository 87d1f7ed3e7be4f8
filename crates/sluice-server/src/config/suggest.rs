//! "Did you mean": the name closest to a misspelt one, and the plain wording of what serde and
//! the parsers report.
//!
//! Suggestions come from the names the types themselves declare: serde's "unknown field `x`,
//! expected one of `a`, `b`" and "unknown variant `x`, expected …" messages list them, so every
//! key and every enum value the format knows gets a suggestion without a list kept by hand.
//! Rule names are suggested from the rules of the file.

/// How far apart (Damerau–Levenshtein edits) a suggestion may be: a third of the longer name,
/// at least one edit, at most three, so `sliding_lg` finds `sliding_log` but `x` finds nothing.
fn max_edits(a: &str, b: &str) -> usize {
    (a.chars().count().max(b.chars().count()) / 3).clamp(1, 3)
}

/// The candidate closest to `wrong`, if one is close enough to be what was meant (a few edits
/// apart, case aside): for "did you mean" after a misspelt name.
pub fn closest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = wrong.to_ascii_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != wrong)
        .map(|c| {
            (
                strsim::damerau_levenshtein(&lower, &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(edits, c)| *edits <= max_edits(wrong, c))
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, c)| c)
}

/// The suggestion for serde's "unknown field" and "unknown variant" messages, from the names
/// the message says it expected.
pub(crate) fn from_message(message: &str) -> Option<String> {
    let (_, rest) = message
        .split_once("unknown field `")
        .or_else(|| message.split_once("unknown variant `"))?;
    let (wrong, rest) = rest.split_once('`')?;
    let (_, expected) = rest.split_once("expected ")?;
    let expected = expected.strip_prefix("one of ").unwrap_or(expected);
    let names = expected
        .split(", ")
        .flat_map(|part| part.split(" or "))
        .map(|name| name.trim().trim_matches('`'));
    closest(wrong, names).map(str::to_string)
}

/// A parser's message in the file's words: integers out of range name the value and the range
/// instead of a Rust type ("invalid u64"), and a repeated key says so without the parser's
/// option names.
pub(crate) fn reworded(message: &str, value: Option<&str>) -> String {
    if let Some(key) = message.strip_prefix("duplicate mapping key: ") {
        let key = key.split(", set ").next().unwrap_or(key);
        return format!("`{key}` is written twice in the same mapping");
    }
    let integer = message
        .strip_prefix("invalid ")
        .and_then(|t| t.strip_prefix('u').or_else(|| t.strip_prefix('i')))
        .is_some_and(|bits| matches!(bits, "8" | "16" | "32" | "64" | "128" | "size"));
    if integer {
        let found = value.map(|v| format!(", found `{v}`")).unwrap_or_default();
        let range = if message.starts_with("invalid u") {
            "a whole number, 0 or more"
        } else {
            "a whole number"
        };
        return format!("expected {range}{found}");
    }
    message.to_string()
}

/// The scalar written at a 1-based line and column: up to the end of the line, a comment, or a
/// flow collection's `,`, `]` or `}`.
pub(crate) fn scalar_at(text: &str, line: u64, column: u64) -> Option<&str> {
    let content = super::locate::line_text(text, line)?;
    let start = content
        .char_indices()
        .nth(usize::try_from(column).ok()?.checked_sub(1)?)?
        .0;
    let rest = &content[start..];
    let end = rest.find([',', ']', '}', '#']).unwrap_or(rest.len());
    Some(rest[..end].trim()).filter(|v| !v.is_empty())
}

/// The plain message of a YAML error, without the source snippet some variants render.
pub(crate) fn yaml_message(error: &serde_saphyr::Error) -> String {
    let text = error.without_snippet().to_string();
    let first = text.lines().next().unwrap_or_default().trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // The position is reported separately, as the line and column.
    let first = match first.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map_or(first, |(_, message)| message),
        None => first,
    };
    // Custom errors repeat the position at the end, relative to the text the parser was given.
    let first = match first.rsplit_once(" at line ") {
        Some((message, position))
            if position
                .bytes()
                .all(|b| b.is_ascii_digit() || b" ,column".contains(&b)) =>
        {
            message
        }
        _ => first,
    };
    first.to_string()
}

/// The field a parser's error is about, and its message without the field, from the path serde
/// was at (`limits[0].block`, as serde_path_to_error writes it) and the message: serde says
/// "unknown field `x`" or "missing field `x`" of the mapping at the path, and values checked
/// while parsing say "name: why" of a field at or below the path (`burst: ...`, `rate: ...`).
pub(crate) fn field_and_message(path: &str, message: &str) -> (String, String) {
    let mut field: String = path
        .split('.')
        .filter(|part| !part.is_empty() && *part != "?")
        .collect::<Vec<_>>()
        .join(".");
    let join = |field: &str, name: &str| match field.is_empty() {
        true => name.to_string(),
        false => format!("{field}.{name}"),
    };
    let last = |field: &str| field.rsplit('.').next().unwrap_or("").to_string();
    for marker in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some((_, rest)) = message.split_once(marker)
            && let Some((name, _)) = rest.split_once('`')
        {
            if last(&field) != name {
                field = join(&field, name);
            }
            return (field, message.to_string());
        }
    }
    if let Some((head, rest)) = message.split_once(": ")
        && !head.is_empty()
        && head
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'.')
    {
        let last = last(&field);
        let last = last.split('[').next().unwrap_or("");
        if last != head {
            field = join(&field, head);
        }
        return (field, rest.to_string());
    }
    (field, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(closest("rtae", ["name", "by", "rate"]), Some("rate"));
        assert_eq!(
            closest("sliding_lg", ["sliding_log", "sliding_window"]),
            Some("sliding_log")
        );
        assert_eq!(closest("Rate", ["rate"]), Some("rate"));
        assert_eq!(closest("x", ["rate", "by"]), None);
        assert_eq!(closest("banana", ["rate", "by"]), None);
    }

    #[test]
    fn reads_serde_and_saphyr_messages() {
        let field = "unknown field `rtae`, expected one of `name`, `by`, `rate`, `algorithm`";
        assert_eq!(from_message(field).as_deref(), Some("rate"));
        let variant = "unknown variant `gcar`, expected one of sliding_log, gcra, concurrency";
        assert_eq!(from_message(variant).as_deref(), Some("gcra"));
        let two = "unknown variant `opne`, expected `open` or `closed`";
        assert_eq!(from_message(two).as_deref(), Some("open"));
        assert_eq!(from_message("invalid u64"), None);
    }

    #[test]
    fn rewords_parser_jargon() {
        assert_eq!(
            reworded("invalid u64", Some("-3")),
            "expected a whole number, 0 or more, found `-3`"
        );
        assert_eq!(
            reworded(
                "duplicate mapping key: a, set DuplicateKeyPolicy in Options if acceptable",
                None
            ),
            "`a` is written twice in the same mapping"
        );
        assert_eq!(scalar_at("a:\n  burst: -3 # no\n", 2, 10), Some("-3"));
    }
}
