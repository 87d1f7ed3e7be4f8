//! `sluice completions <shell>`, `sluice man` and `sluice --version`: generated from the command
//! line's definition and the build, checked by what a shell, `man` and a user would read.

use crate::common;

use std::process::Command;

use common::{TempDir, sluice};

fn stdout(args: &[&str]) -> String {
    let out = sluice().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_load_in_bash_and_name_the_commands_and_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        for word in [
            "serve",
            "validate",
            "completions",
            "import",
            "envoy-ratelimit",
            "limitador",
            "listen",
            "shutdown-timeout",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    // bash itself loads the script and registers the completion.
    let dir = TempDir::new();
    let script = dir.write("sluice.bash", &stdout(&["completions", "bash"]));
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p sluice", script.display()))
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("sluice"));
    let refused = sluice().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn the_manual_page_is_roff_and_names_the_variables() {
    let page = stdout(&["man"]);
    assert!(page.starts_with(".ie"), "{}", &page[..page.len().min(200)]);
    assert!(page.contains(".TH sluice 1"), "no title line");
    assert!(page.contains("serve"));
    let dir = TempDir::new();
    let pages = dir.path().join("man1");
    let out = sluice()
        .args(["man", "--dir"])
        .arg(&pages)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let serve = std::fs::read_to_string(pages.join("sluice-serve.1")).unwrap();
    for var in common::SERVE_VARIABLES {
        assert!(serve.contains(var), "{var} not in sluice-serve.1");
    }
    assert!(pages.join("sluice.1").exists());
    assert!(pages.join("sluice-completions.1").exists());
    assert!(pages.join("sluice-import.1").exists());
    assert!(page.contains("import"), "the command is listed in sluice.1");
}

#[test]
fn the_version_names_the_commit() {
    let line = stdout(&["--version"]);
    let rest = line
        .trim_end()
        .strip_prefix(&format!("sluice {} (commit ", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{line}"));
    let commit = rest.strip_suffix(')').unwrap_or_else(|| panic!("{line}"));
    assert_eq!(commit.len(), 12, "{line}");
    assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{line}");
    // Built from a git checkout (as the tests are): the commit checked out.
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git runs");
    assert!(head.status.success(), "the tests run in a git checkout");
    assert!(
        String::from_utf8_lossy(&head.stdout).starts_with(commit),
        "{line}"
    );
}
