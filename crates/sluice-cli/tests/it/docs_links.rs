//! Every internal link of the docs resolves: README.md, CHANGELOG.md and the book's chapters
//! (`docs/src`), each link to a file that exists and each `#anchor` to a heading of its page, as
//! mdBook names headings. Links with a scheme (`https:`) are not followed: the check runs offline.
//!
//! A heading's id is mdBook's (and GitHub's, for the headings written here): its text without
//! formatting, lowercased, spaces turned into `-`, every character but letters, digits, `_` and
//! `-` dropped; a repeated id gets `-1`, `-2`, … in order. A chapter that is
//! `{{#include FILE}}` is read as the included file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use sluice_test_support::docs;

/// The Markdown extensions mdBook turns on.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// The page's text with `{{#include FILE}}` replaced by the file, as mdBook renders it.
fn rendered(path: &Path, text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("{{#include ") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("}}").expect("an include ends with }}") + at;
        let file = path.parent().unwrap().join(rest[at + 11..end].trim());
        out.push_str(
            &std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{} includes {}: {e}", path.display(), file.display())),
        );
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A heading's id from its text.
fn normalize(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The ids of a page's headings.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut heading: Option<(String, Option<String>)> = None;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((String::new(), id.map(|i| i.to_string())));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((text, _)) = &mut heading {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let (text, explicit) = heading.take().unwrap();
                let base = explicit.unwrap_or_else(|| normalize(&text));
                let mut id = base.clone();
                let mut n = 1;
                while ids.contains(&id) {
                    id = format!("{base}-{n}");
                    n += 1;
                }
                ids.insert(id);
            }
            _ => {}
        }
    }
    ids
}

/// The destinations of a page's links and images.
fn links(markdown: &str) -> Vec<String> {
    Parser::new_ext(markdown, options())
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// What is wrong with each internal link of these pages, one line each.
fn broken_links(pages: &[(PathBuf, String)]) -> Vec<String> {
    let mut broken = Vec::new();
    for (page, text) in pages {
        for dest in links(text) {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match dest.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (dest.as_str(), None),
            };
            let target = match file {
                "" => page.clone(),
                file => page.parent().unwrap().join(file),
            };
            let at = format!("{}: ({dest})", page.display());
            if !target.exists() {
                broken.push(format!("{at}: no file {}", target.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if target.extension().is_none_or(|e| e != "md") {
                broken.push(format!("{at}: an anchor into a file that is not Markdown"));
                continue;
            }
            let target_text = std::fs::read_to_string(&target).unwrap();
            if !anchors(&rendered(&target, &target_text)).contains(anchor) {
                broken.push(format!(
                    "{at}: no heading #{anchor} in {}",
                    target.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_internal_link_and_anchor_of_the_docs_resolves() {
    let pages = docs::pages();
    assert!(pages.len() > 20, "the docs' pages: {}", pages.len());
    let broken = broken_links(&pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_chapter_of_the_book_is_in_its_summary() {
    let src = docs::book_src();
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).into_iter().map(|l| src.join(l)).collect();
    for (page, _) in docs::pages() {
        if page.starts_with(&src) && page != src.join("SUMMARY.md") {
            assert!(
                listed.contains(&page),
                "{} is not in SUMMARY.md, so the book does not show it",
                page.display()
            );
        }
    }
}

/// The check itself: a link to a missing file, a missing heading and a missing anchor on the
/// same page are each reported; headings get mdBook's ids.
#[test]
fn the_link_check_finds_what_is_broken() {
    let dir = crate::common::TempDir::new();
    let page = dir.write(
        "page.md",
        "# The `sluice` command: one, two\n\n## Words\n\n## Words\n\n\
         [ok](#the-sluice-command-one-two) [ok](#words-1) [self](page.md#words)\n\
         [gone](missing.md) [no heading](page.md#nowhere) [none](#absent)\n",
    );
    let text = std::fs::read_to_string(&page).unwrap();
    let broken = broken_links(&[(page, text)]);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("(missing.md): no file"), "{broken:#?}");
    assert!(broken[1].contains("no heading #nowhere"), "{broken:#?}");
    assert!(broken[2].contains("no heading #absent"), "{broken:#?}");
}

/// README stays a front page: the book holds the rest.
#[test]
fn readme_is_at_most_200_lines() {
    let readme = std::fs::read_to_string(docs::repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines");
}
