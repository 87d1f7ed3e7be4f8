//! Where things are in a rule file's text: which rule owns a line, and the line of a rule or of
//! one of its limits.
//!
//! The parsers report locations for syntax and type errors; a semantic error found afterwards by
//! [`Rule::validate`](sluice::Rule::validate) only knows the rule's name and a field path. This
//! map bridges the two by reading the layout of the text: block-style YAML (`rules:` at column 0,
//! one key per rule at the first indentation below it, `- ` items under `limits:`) and TOML tables
//! (`[rules.NAME]`, `[[rules.NAME.limits]]`, or `NAME = {...}` under `[rules]`). Layouts it does
//! not recognise (flow-style YAML) yield no line rather than a wrong one.
//!
//! The map is built before anything is validated, from text an operator (or an attacker with
//! write access to the file) chose, so it stays linear in the text's size: each line holds the
//! index of its owner's name, never a copy of it (a 1 MB rule name followed by 3 million lines
//! would otherwise need terabytes).

use super::Format;

/// Line ownership of a rule file (lines are 1-based).
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceMap {
    /// The rule names, in order of appearance (a name may appear more than once).
    names: Vec<String>,
    /// `owners[i]` indexes `names`: the rule that line `i + 1` belongs to.
    owners: Vec<Option<u32>>,
    /// Per line: whether it starts a limit of its owner (a `- ` item under `limits:`, or a
    /// `[[rules.NAME.limits]]` header).
    limit_starts: Vec<bool>,
}

impl SourceMap {
    pub(crate) fn new(text: &str, format: Format) -> SourceMap {
        match format {
            Format::Yaml => yaml(text),
            Format::Toml => toml(text),
        }
    }

    /// The rule whose block holds `line`.
    pub(crate) fn rule_at(&self, line: u64) -> Option<&str> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        self.name(*self.owners.get(index)?)
    }

    fn name(&self, owner: Option<u32>) -> Option<&str> {
        owner
            .and_then(|o| self.names.get(o as usize))
            .map(String::as_str)
    }

    /// The indexes under which `rule` was recorded.
    fn ids(&self, rule: &str) -> Vec<Option<u32>> {
        (0..self.names.len())
            .filter(|&i| self.names[i] == rule)
            .map(|i| u32::try_from(i).ok())
            .collect()
    }

    /// The line of a rule's key.
    pub(crate) fn rule_line(&self, rule: &str) -> Option<u64> {
        let ids = self.ids(rule);
        self.owners
            .iter()
            .position(|o| o.is_some() && ids.contains(o))
            .map(|i| i as u64 + 1)
    }

    /// The line where the `index`-th limit of `rule` starts.
    pub(crate) fn limit_line(&self, rule: &str, index: usize) -> Option<u64> {
        let ids = self.ids(rule);
        self.owners
            .iter()
            .zip(&self.limit_starts)
            .enumerate()
            .filter(|(_, (owner, start))| **start && owner.is_some() && ids.contains(owner))
            .nth(index)
            .map(|(i, _)| i as u64 + 1)
    }

    /// Records a rule name; its index is what lines store.
    fn intern(&mut self, name: Option<String>) -> Option<u32> {
        let name = name?;
        if self.names.last() == Some(&name) {
            return u32::try_from(self.names.len() - 1).ok();
        }
        let index = u32::try_from(self.names.len()).ok()?;
        self.names.push(name);
        Some(index)
    }

    /// The best line for an error in `field` of `rule`: the limit's own line for
    /// `limits[i]...`, else the rule's key.
    pub(crate) fn line_for(&self, rule: &str, field: &str) -> Option<u64> {
        let limit = field
            .strip_prefix("limits[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(n, _)| n.parse::<usize>().ok());
        limit
            .and_then(|i| self.limit_line(rule, i))
            .or_else(|| self.rule_line(rule))
    }
}

/// Strips a trailing `# comment` (outside quotes is not tracked: a `#` inside a quoted key on a
/// rule line is rare enough, and the only cost is a missing line number).
fn code(line: &str) -> &str {
    if !line.contains('#') {
        return line;
    }
    match line.find(" #") {
        Some(i) => &line[..i],
        None if line.trim_start().starts_with('#') => "",
        None => line,
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The key of a `key: ...` line, unquoted.
fn yaml_key(trimmed: &str) -> Option<String> {
    let (key, rest) = match trimmed.chars().next()? {
        q @ ('"' | '\'') => {
            let end = trimmed[1..].find(q)? + 1;
            (&trimmed[1..end], &trimmed[end + 1..])
        }
        _ => {
            let colon = trimmed.find(':')?;
            (trimmed[..colon].trim_end(), &trimmed[colon..])
        }
    };
    let after = rest.trim_start().strip_prefix(':')?;
    (after.is_empty() || after.starts_with(' ')).then(|| key.to_string())
}

/// The text of 1-based line `line`.
pub(crate) fn line_text(text: &str, line: u64) -> Option<&str> {
    let index = usize::try_from(line).ok()?.checked_sub(1)?;
    Lines { text, at: 0 }.nth(index)
}

/// The lines of `text` as [`str::lines`] splits them, and their count. A plain byte loop: this
/// runs over every line of files with millions of them, in debug builds too.
fn lines(text: &str) -> (Lines<'_>, usize) {
    let bytes = text.as_bytes();
    let mut count = 0;
    for &b in bytes {
        count += usize::from(b == b'\n');
    }
    count += usize::from(!bytes.is_empty() && bytes[bytes.len() - 1] != b'\n');
    (Lines { text, at: 0 }, count)
}

struct Lines<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        if self.at >= bytes.len() {
            return None;
        }
        let start = self.at;
        let mut end = start;
        while end < bytes.len() && bytes[end] != b'\n' {
            end += 1;
        }
        self.at = end + 1;
        if end > start && bytes[end - 1] == b'\r' {
            end -= 1;
        }
        // Both ends are at ASCII bytes (or the text's ends), so they are char boundaries.
        Some(&self.text[start..end])
    }
}

fn yaml(text: &str) -> SourceMap {
    let (lines, count) = lines(text);
    let mut map = SourceMap {
        names: Vec::new(),
        owners: vec![None; count],
        limit_starts: vec![false; count],
    };
    let mut in_rules = false;
    let mut rule_indent: Option<usize> = None;
    let mut current: Option<u32> = None;
    // (indent of the `limits:` key, indent of its items once seen)
    let mut limits: Option<(usize, Option<usize>)> = None;
    for (i, raw) in lines.enumerate() {
        let line = if raw.is_empty() { raw } else { code(raw) };
        if line.bytes().all(|b| b == b' ' || b == b'\t') {
            if in_rules {
                map.owners[i] = current;
            }
            continue;
        }
        let depth = indent(line);
        let trimmed = line.trim_start();
        if depth == 0 {
            in_rules = yaml_key(trimmed).as_deref() == Some("rules");
            rule_indent = None;
            current = None;
            limits = None;
            continue;
        }
        if !in_rules {
            continue;
        }
        let level = *rule_indent.get_or_insert(depth);
        if depth < level {
            current = None;
            continue;
        }
        if depth == level {
            current = map.intern(yaml_key(trimmed));
            limits = None;
        } else if let Some((key_depth, items)) = &mut limits {
            if depth <= *key_depth && !trimmed.starts_with('-') {
                limits = None;
            } else if let Some(body) = trimmed.strip_prefix('-')
                && (body.is_empty() || body.starts_with(' '))
            {
                let item_depth = *items.get_or_insert(depth);
                map.limit_starts[i] = depth == item_depth;
            }
        }
        if depth > level && limits.is_none() && yaml_key(trimmed).as_deref() == Some("limits") {
            limits = Some((depth, None));
        }
        map.owners[i] = current;
    }
    map
}

/// The dotted parts of a TOML table header, unquoted.
fn toml_header(trimmed: &str) -> Option<(Vec<String>, bool)> {
    let (inner, array) = if let Some(rest) = trimmed.strip_prefix("[[") {
        (rest.split_once("]]")?.0, true)
    } else {
        (trimmed.strip_prefix('[')?.split_once(']')?.0, false)
    };
    let parts = inner
        .split('.')
        .map(|p| p.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        .collect();
    Some((parts, array))
}

fn toml(text: &str) -> SourceMap {
    let (lines, count) = lines(text);
    let mut map = SourceMap {
        names: Vec::new(),
        owners: vec![None; count],
        limit_starts: vec![false; count],
    };
    // Some(None): inside `[rules]` itself; Some(Some(name)): inside a table of rule `name`.
    let mut table: Option<Option<u32>> = None;
    for (i, raw) in lines.enumerate() {
        let trimmed = code(raw).trim();
        if trimmed.starts_with('[') {
            table = match toml_header(trimmed) {
                Some((parts, array)) if parts.first().map(String::as_str) == Some("rules") => {
                    let name = map.intern(parts.get(1).cloned());
                    map.limit_starts[i] =
                        array && parts.len() == 3 && parts[2] == "limits" && name.is_some();
                    Some(name)
                }
                _ => None,
            };
            map.owners[i] = table.flatten();
            continue;
        }
        map.owners[i] = match table {
            Some(Some(name)) => Some(name),
            Some(None) => {
                let key = trimmed
                    .split_once('=')
                    .map(|(k, _)| k.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
                    .filter(|k| !k.is_empty());
                map.intern(key)
            }
            None => None,
        };
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "\
listen: 127.0.0.1:8080
rules:
  # comment
  login:
    limits:
      - { by: [ip], rate: 5/1m }
      - by: [member]
        rate: 2/1m
  \"quoted\":
    shadow: true
    limits:
      - by: []
        rate: 1/1s
fail: open
";

    #[test]
    fn yaml_rules_and_limits() {
        let map = SourceMap::new(YAML, Format::Yaml);
        assert_eq!(map.rule_line("login"), Some(4));
        assert_eq!(map.rule_line("quoted"), Some(9));
        assert_eq!(map.limit_line("login", 0), Some(6));
        assert_eq!(map.limit_line("login", 1), Some(7));
        assert_eq!(map.limit_line("quoted", 0), Some(12));
        assert_eq!(map.rule_at(8), Some("login"));
        assert_eq!(map.rule_at(14), None);
        assert_eq!(map.rule_at(1), None);
        assert_eq!(map.line_for("login", "limits[1].rate"), Some(7));
        assert_eq!(map.line_for("login", "limits[7].rate"), Some(4));
        assert_eq!(map.line_for("quoted", "shadow"), Some(9));
    }

    const TOML: &str = "\
listen = \"127.0.0.1:8080\"
[store]
url = \"memory://\"
[rules]
inline = { limits = [{ by = [\"ip\"], rate = \"1/1s\" }] }
[rules.login]
shadow = true
[[rules.login.limits]]
by = [\"ip\"]
rate = \"5/1m\"
[[rules.login.limits]]
by = [\"member\"]
rate = \"2/1m\"
";

    #[test]
    fn toml_rules_and_limits() {
        let map = SourceMap::new(TOML, Format::Toml);
        assert_eq!(map.rule_line("inline"), Some(5));
        assert_eq!(map.rule_line("login"), Some(6));
        assert_eq!(map.limit_line("login", 1), Some(11));
        assert_eq!(map.rule_at(13), Some("login"));
        assert_eq!(map.rule_at(3), None);
    }
}
