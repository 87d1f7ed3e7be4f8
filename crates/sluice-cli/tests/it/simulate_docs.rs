//! `docs/src/simulate` is what the book's command writes: the command is read from the chapter
//! `operations/see-it.md`, run
//! in this process, and every file it writes (report, JSON, plots as SVG and PNG) must equal the
//! committed one byte for byte, with no committed file left over. The run is deterministic (a
//! simulated clock and seeded traffic), so any difference is a change of behaviour to look at and
//! then either fix or commit, with the reason, by running the command.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::TempDir;
use indicatif::ProgressBar;
use sluice_cli::cli::{Cli, Command as Sub};

fn docs() -> PathBuf {
    sluice_test_support::docs::book_src().join("simulate")
}

/// The book's `simulate` command line, its `\` continuations joined: the words after `--`.
fn book_command() -> Vec<String> {
    let chapter = sluice_test_support::docs::chapter("operations/see-it.md");
    let start = chapter
        .find("cargo run --release -p sluice-ratelimit-cli -- simulate")
        .expect("the book shows the command that writes docs/src/simulate");
    let block = &chapter[start..];
    let end = block.find("\n```").expect("the command's block ends");
    let words: Vec<String> = block[..end]
        .split_whitespace()
        .filter(|w| *w != "\\")
        .map(str::to_string)
        .collect();
    let from = words.iter().position(|w| w == "--").unwrap() + 1;
    words[from..].to_vec()
}

fn names(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn docs_simulate_is_what_the_book_command_writes() {
    let words = book_command();
    let out = words.iter().position(|w| w == "--out").expect("--out DIR");
    assert_eq!(words[out + 1], "docs/src/simulate");
    let line = std::iter::once("sluice".to_string()).chain(words.iter().cloned());
    let cli = <Cli as clap::Parser>::try_parse_from(line).expect("the book's command parses");
    let Sub::Simulate(args) = cli.command else {
        panic!("a simulate command");
    };
    let mut sim = sluice_simulate::simulate(&args, &ProgressBar::hidden())
        .await
        .unwrap();
    // The report quotes the command that made it, as it was typed.
    sim.report.setup.command = format!("sluice {}", words.join(" "));
    let dir = TempDir::new();
    sluice_simulate::output::write(&sim, dir.path()).unwrap();
    assert_eq!(
        names(dir.path()),
        names(&docs()),
        "the files of docs/src/simulate"
    );
    for name in names(dir.path()) {
        let written = std::fs::read(dir.path().join(&name)).unwrap();
        let committed = std::fs::read(docs().join(&name)).unwrap();
        if written != committed {
            let shown = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            let detail = match name.ends_with(".md") {
                true => format!(
                    "now:\n{}\ncommitted:\n{}",
                    shown(&written),
                    shown(&committed)
                ),
                false => format!("{} bytes now, {} committed", written.len(), committed.len()),
            };
            panic!(
                "docs/src/simulate/{name} is not what the book's command writes; rerun it \
                 (`{}`) once the difference is understood. {detail}",
                words.join(" ")
            );
        }
    }
}
