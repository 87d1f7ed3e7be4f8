//! The book's reference parts are the code's: the metric table (`operations/metrics.md`) is
//! rendered from the catalogs (`sluice_server::metrics::reference`) and lists every family the
//! binary serves, every environment variable
//! the binary reads is in the environment table (`operations/environment.md`), no example or
//! crate doc uses a former spelling, and the docs say where sentinels' credentials come from.
//!
//! `SLUICE_BLESS_DOCS=1 cargo test -p sluice-ratelimit-cli --test it reference::` rewrites the
//! metric table after a deliberate change.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sluice_test_support::docs::{book_src, chapter, repo};

/// The chapter holding the metric table.
const METRICS_CHAPTER: &str = "operations/metrics.md";

const METRICS_START: &str = "<!-- metrics: generated from the catalogs; SLUICE_BLESS_DOCS=1 cargo test -p sluice-ratelimit-cli --test it reference:: -->\n";
const METRICS_END: &str = "<!-- end metrics -->";

/// The `.rs` files under `dir`, each with its text up to its `#[cfg(test)]` module.
fn sources(dir: &Path, into: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            into.push((path, text.to_string()));
        }
    }
}

fn crate_sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for krate in ["sluice", "sluice-server", "sluice-cli"] {
        sources(&repo().join("crates").join(krate).join("src"), &mut files);
    }
    files
}

#[tokio::test]
async fn the_book_lists_every_metric_the_binary_serves() {
    let table = sluice_server::metrics::reference();
    let text = chapter(METRICS_CHAPTER);
    let (before, rest) = text
        .split_once(METRICS_START)
        .expect("the metric table's marker");
    let (current, after) = rest
        .split_once(METRICS_END)
        .expect("the metric table's end");
    if std::env::var_os("SLUICE_BLESS_DOCS").is_some() && current != table {
        std::fs::write(
            book_src().join(METRICS_CHAPTER),
            format!("{before}{METRICS_START}{table}{METRICS_END}{after}"),
        )
        .unwrap();
        return;
    }
    assert!(
        current == table,
        "{METRICS_CHAPTER}'s metric table is not the catalogs' (SLUICE_BLESS_DOCS=1 to rewrite it):\n{table}"
    );
    // Every family the binary serves after a few decisions is in the table: a metric recorded
    // under a name no catalog declares fails here.
    let server = crate::common::Server::start(crate::common::CONFIG);
    for _ in 0..3 {
        let answer = server
            .check("login", serde_json::json!({ "ip": "192.0.2.1" }))
            .await;
        assert!(matches!(answer.status, 200 | 429), "{}", answer.text);
    }
    let served = server.get("/metrics").await.text;
    let families: BTreeSet<&str> = served
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    for family in &families {
        assert!(
            table.contains(&format!("| `{family}` |")),
            "/metrics serves `{family}`, which the book's metric table does not document"
        );
    }
    assert!(
        families.len() >= 8,
        "the decisions recorded their metrics: {families:?}"
    );
}

/// The rows of the book's environment table (`operations/environment.md`): its first column's
/// names.
fn environment_table() -> BTreeSet<String> {
    chapter("operations/environment.md")
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let first = l.split(" | ").next().unwrap_or_default();
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|n| n.trim_end_matches('*').to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_book_lists_every_environment_variable_the_binary_reads() {
    let table = environment_table();
    assert!(table.contains("SLUICE_LISTEN"), "{table:?}");
    let listed = |name: &str| {
        table.contains(name)
            || table
                .iter()
                .any(|t| t.ends_with('_') && name.starts_with(t))
    };
    let mut read = BTreeSet::new();
    for (path, text) in crate_sources() {
        for (at, _) in text.match_indices('"') {
            let rest = &text[at + 1..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let prefixed = ["SLUICE_", "OTEL_", "RUST_", "TOKIO_"]
                .iter()
                .any(|p| name.starts_with(p));
            if prefixed && name.len() > 6 {
                assert!(
                    listed(&name),
                    "{} reads {name}, which the book's environment table does not list",
                    path.display()
                );
                read.insert(name);
            }
        }
    }
    assert!(read.len() >= 10, "the scan found the variables: {read:?}");
    // No row for a variable nothing reads (TOKIO_WORKER_THREADS is tokio's, the OTEL_ rows the
    // OpenTelemetry SDK's; the admin token's name is the rule file's `admin_token_env`).
    for name in table.iter().filter(|n| n.starts_with("SLUICE_")) {
        assert!(
            read.contains(name),
            "the book's environment table lists {name}, which nothing reads"
        );
    }
}

#[test]
fn examples_and_crate_docs_use_no_former_spelling() {
    let mut files = Vec::new();
    let mut walk = vec![repo().join("examples"), repo().join("deploy")];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                files.push((path, text));
            }
        }
    }
    for krate in std::fs::read_dir(repo().join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        for dir in ["src", "examples"] {
            if krate.join(dir).is_dir() {
                let mut sources_here = Vec::new();
                sources(&krate.join(dir), &mut sources_here);
                files.extend(sources_here);
            }
        }
        if let Ok(text) = std::fs::read_to_string(krate.join("README.md")) {
            files.push((krate.join("README.md"), text));
        }
    }
    assert!(files.len() > 50, "the scan found the files");
    for (path, text) in &files {
        for (n, line) in text.lines().enumerate() {
            // The one place each former spelling is named as such.
            if line.contains("Former spellings") || line.contains("former spelling") {
                continue;
            }
            let at = format!("{}:{}: {line}", path.display(), n + 1);
            assert!(
                !line.contains("#[sluice::limit]") && !line.contains("#[sluice::limit("),
                "{at}"
            );
            // `limit` as a key of a concurrency limit, inline YAML or TOML.
            let concurrency = line.contains("algorithm: concurrency")
                || line.contains("algorithm = \"concurrency\"");
            let concurrency_limit = concurrency
                && [", limit: ", "{ limit: ", ", limit = ", "{ limit = "]
                    .iter()
                    .any(|k| line.contains(k));
            assert!(!concurrency_limit, "`limit:` for `max_leases:`: {at}");
        }
    }
}

/// Sentinels get credentials of their own from the URL's query (`sentinel_password`): the docs
/// may not say they are always asked without any.
#[test]
fn the_docs_say_where_sentinel_credentials_come_from() {
    for doc in ["docs/src/operations/stores.md", "SECURITY.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            !flat.contains("sentinels are asked without credentials,")
                && !flat.contains("the sentinels are asked without any"),
            "{doc} says sentinels are always asked without credentials"
        );
        assert!(
            flat.contains("sentinel_password"),
            "{doc} names sentinel_password"
        );
    }
}

/// README's taste of a rule file is a file `sluice validate` accepts.
#[test]
fn the_readme_rule_file_validates() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let yaml = readme
        .split("## A taste of a rule file")
        .nth(1)
        .and_then(|s| s.split("```yaml\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("README's rule file");
    let dir = crate::common::TempDir::new();
    let file = dir.write("sluice.yaml", yaml);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
