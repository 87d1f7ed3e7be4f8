//! The docs' Rust snippets (README.md and every chapter of the book under `docs/src`): each is
//! the body of a function of `examples/readme.rs`, word for word, and runs without an error (the
//! file is included here, so it is compiled and run by the tests, not only built).

#[allow(dead_code)]
#[path = "../../examples/readme.rs"]
mod snippets;

const EXAMPLE: &str = include_str!("../../examples/readme.rs");

/// The ```rust blocks of a Markdown text.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(block), "```") => {
                blocks.push(block.join("\n"));
                current = None;
            }
            (Some(block), _) => block.push(line),
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_doc_snippet_is_in_the_example_word_for_word() {
    // The example's function bodies, one indentation level out.
    let bodies: String = EXAMPLE
        .lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n");
    let mut count = 0;
    for (page, text) in sluice_test_support::docs::pages() {
        for block in rust_blocks(&text) {
            assert!(
                bodies.contains(&block),
                "this snippet of {} is not in crates/sluice/examples/readme.rs:\n{block}",
                page.display()
            );
            count += 1;
        }
    }
    assert!(count >= 3, "the docs have {count} Rust snippets");
}

#[tokio::test]
async fn the_doc_snippets_run() {
    snippets::using_the_library().await.unwrap();
    snippets::a_lease().await.unwrap();
}
