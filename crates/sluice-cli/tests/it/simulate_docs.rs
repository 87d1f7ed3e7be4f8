//! `docs/src/simulate` (every algorithm under an attacker), `docs/src/simulate-quota` (a year
//! of a quota) and `docs/src/simulate-partition` (a region cut off from the store) are what the book's commands write: each `simulate` command of the chapter
//! `operations/see-it.md` is run in this process, and every file it writes (report, JSON, plots
//! as SVG and PNG) must equal the committed one byte for byte, with no committed file left over. The run is deterministic (a
//! simulated clock and seeded traffic), so any difference is a change of behaviour to look at and
//! then either fix or commit, with the reason, by running the command.

use crate::common;

use std::collections::BTreeSet;

use common::TempDir;
use indicatif::ProgressBar;
use sluice_cli::cli::{Cli, Command as Sub};

/// The directories under `docs/src` the book's commands write, in the chapter's order.
const WRITTEN: [&str; 3] = ["simulate", "simulate-quota", "simulate-partition"];

/// The book's `simulate` command lines, their `\` continuations joined: the words after `--`.
fn book_commands() -> Vec<Vec<String>> {
    let chapter = sluice_test_support::docs::chapter("operations/see-it.md");
    chapter
        .match_indices("cargo run --release -p sluice-ratelimit-cli -- simulate")
        .map(|(start, _)| {
            let block = &chapter[start..];
            let end = block.find("\n```").expect("the command's block ends");
            let words: Vec<String> = block[..end]
                .split_whitespace()
                .filter(|w| *w != "\\")
                .map(str::to_string)
                .collect();
            let from = words.iter().position(|w| w == "--").unwrap() + 1;
            words[from..].to_vec()
        })
        .collect()
}

fn names(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn docs_simulate_is_what_the_book_commands_write() {
    let commands = book_commands();
    assert_eq!(commands.len(), WRITTEN.len(), "one command per directory");
    for (words, dir) in commands.iter().zip(WRITTEN) {
        check(words, dir).await;
    }
}

/// Runs one of the book's commands (from the repository's root, where its paths start) and
/// compares what it writes with `docs/src/<dir>`.
async fn check(typed: &[String], dir: &str) {
    let out = typed.iter().position(|w| w == "--out").expect("--out DIR");
    assert_eq!(typed[out + 1], format!("docs/src/{dir}"));
    let docs = sluice_test_support::docs::book_src().join(dir);
    let mut words = typed.to_vec();
    if let Some(config) = words.iter().position(|w| w == "--config") {
        let path = sluice_test_support::docs::repo().join(&words[config + 1]);
        words[config + 1] = path.to_string_lossy().into_owned();
    }
    let line = std::iter::once("sluice".to_string()).chain(words.iter().cloned());
    let cli = <Cli as clap::Parser>::try_parse_from(line).expect("the book's command parses");
    let Sub::Simulate(args) = cli.command else {
        panic!("a simulate command");
    };
    let mut sim = sluice_simulate::simulate(&args, &ProgressBar::hidden())
        .await
        .unwrap();
    // The report quotes the command that made it, as it was typed.
    sim.report.setup.command = format!("sluice {}", typed.join(" "));
    let temp = TempDir::new();
    sluice_simulate::output::write(&sim, temp.path()).unwrap();
    assert_eq!(
        names(temp.path()),
        names(&docs),
        "the files of docs/src/{dir}"
    );
    for name in names(temp.path()) {
        let written = std::fs::read(temp.path().join(&name)).unwrap();
        let committed = std::fs::read(docs.join(&name)).unwrap();
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
                "docs/src/{dir}/{name} is not what the book's command writes; rerun it \
                 (`{}`) once the difference is understood. {detail}",
                typed.join(" ")
            );
        }
    }
}
