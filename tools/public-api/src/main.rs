//! `sluice-public-api`: the public API of the `sluice` library (all features), as a sorted list
//! of items checked against `crates/sluice/public-api.txt`.
//!
//! A change to the public surface is always deliberate: when the list differs from the
//! snapshot, this prints the difference and exits with status 1; `--bless` writes the new list
//! instead. `scripts/public-api` runs it (CI through `scripts/test`).
//!
//! The list comes from rustdoc's JSON output, which is unstable: rustdoc is run with
//! `RUSTC_BOOTSTRAP=1`. Only rustdoc gets it. This program, named as cargo's `RUSTDOC`, execs
//! the real rustdoc with the variable set, so the build scripts of dependencies, which watch
//! `RUSTC_BOOTSTRAP`, see no change and the workspace's compiled dependencies are reused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The package whose surface is listed, its library's Rust name (rustdoc names its JSON file
/// after it), and where its snapshot lives (relative to the workspace).
const PACKAGE: &str = "sluice-ratelimit";
const LIBRARY: &str = "sluice";
const SNAPSHOT: &str = "crates/sluice/public-api.txt";
/// rustdoc JSON formats this reader understands (see `Cargo.toml`).
const FORMATS: [u64; 2] = [56, 57];
/// Auto traits left out of the list (see `surface`); `Send`, `Sync`, `Unpin` and the unwind
/// safety traits stay: losing one breaks users.
const INTERNAL_MARKERS: [&str; 3] = [
    "core::marker::Freeze",
    "core::marker::UnsafeUnpin",
    "core::marker::StructuralPartialEq",
];
/// Set in rustdoc's environment when this program runs as cargo's `RUSTDOC`.
const AS_RUSTDOC: &str = "SLUICE_PUBLIC_API_AS_RUSTDOC";

fn main() -> ExitCode {
    if std::env::var_os(AS_RUSTDOC).is_some() {
        return run_rustdoc();
    }
    let bless = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--bless") => true,
        Some(other) => {
            eprintln!("usage: sluice-public-api [--bless]   (unknown argument `{other}`)");
            return ExitCode::from(2);
        }
    };
    match check(bless) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("sluice-public-api: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs the real rustdoc, with unstable options allowed.
fn run_rustdoc() -> ExitCode {
    let rustdoc = std::env::var_os("SLUICE_PUBLIC_API_RUSTDOC").unwrap_or("rustdoc".into());
    let status = Command::new(rustdoc)
        .args(std::env::args_os().skip(1))
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove(AS_RUSTDOC)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => ExitCode::from(s.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("sluice-public-api: cannot run rustdoc: {e}");
            ExitCode::from(2)
        }
    }
}

fn check(bless: bool) -> Result<ExitCode, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or("cargo".into());
    let workspace = workspace_root(&cargo)?;
    let json = rustdoc_json(&cargo, &workspace)?;
    let listed = surface(&json)?;
    let snapshot = workspace.join(SNAPSHOT);
    if bless {
        std::fs::write(&snapshot, &listed)
            .map_err(|e| format!("cannot write {}: {e}", snapshot.display()))?;
        println!("wrote {} ({} items)", SNAPSHOT, listed.lines().count());
        return Ok(ExitCode::SUCCESS);
    }
    let committed = std::fs::read_to_string(&snapshot).unwrap_or_default();
    if committed == listed {
        println!("public API of `{PACKAGE}` matches {SNAPSHOT} ({} items)", listed.lines().count());
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("The public API of `{PACKAGE}` differs from {SNAPSHOT}:");
    eprint!("{}", difference(&committed, &listed));
    eprintln!(
        "If the change is deliberate, refresh the snapshot with `scripts/public-api --bless` and \
         commit it."
    );
    Ok(ExitCode::FAILURE)
}

/// The workspace's root and target directory, as cargo sees them.
fn workspace_root(cargo: &std::ffi::OsStr) -> Result<PathBuf, String> {
    let out = Command::new(cargo)
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo locate-project failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let manifest = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    manifest
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("no workspace directory above {}", manifest.display()))
}

/// Documents the package with every feature as rustdoc JSON; returns the file.
fn rustdoc_json(cargo: &std::ffi::OsStr, workspace: &Path) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["rustdoc", "--quiet", "-p", PACKAGE, "--lib", "--all-features"])
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        // Documentation lints are clippy's and the tests' business, not this list's.
        .args(["--cap-lints", "allow"])
        .env("RUSTDOC", &me)
        .env(AS_RUSTDOC, "1");
    // The tool itself may run under a `RUSTDOC` of the caller's; keep it as the real one.
    if let Some(rustdoc) = std::env::var_os("RUSTDOC") {
        command.env("SLUICE_PUBLIC_API_RUSTDOC", rustdoc);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo rustdoc: {e}"))?;
    if !status.success() {
        return Err(format!("cargo rustdoc -p {PACKAGE} failed ({status})"));
    }
    let target = target_dir(cargo, workspace)?;
    Ok(target.join("doc").join(format!("{LIBRARY}.json")))
}

fn target_dir(cargo: &std::ffi::OsStr, workspace: &Path) -> Result<PathBuf, String> {
    let out = Command::new(cargo)
        .current_dir(workspace)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| "cargo metadata names no target directory".to_string())
}

/// The sorted list of public items, one a line.
fn surface(json: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(json)
        .map_err(|e| format!("cannot read {}: {e}", json.display()))?;
    let format = serde_json::from_str::<serde_json::Value>(&text)
        .map_err(|e| format!("{} is not JSON: {e}", json.display()))?["format_version"]
        .as_u64()
        .unwrap_or(0);
    if !FORMATS.contains(&format) {
        return Err(format!(
            "rustdoc wrote JSON format {format}; this checker reads formats {FORMATS:?}. Pick \
             the public-api release whose rustdoc-types reads format {format} \
             (tools/public-api/Cargo.toml)"
        ));
    }
    let api = public_api::Builder::from_rustdoc_json(json)
        // Impls every type gets from std's blanket impls (`From<T> for T`, `Borrow`, ...) say
        // nothing about this crate.
        .omit_blanket_impls(true)
        .build()
        .map_err(|e| format!("cannot read the public API from {}: {e}", json.display()))?;
    let mut listed = String::new();
    for item in api.items() {
        let item = item.to_string();
        // Marker traits the compiler implements for its own purposes (const evaluation, pattern
        // matching): they change with the toolchain, not with this crate.
        if INTERNAL_MARKERS.iter().any(|m| item.contains(m)) {
            continue;
        }
        listed.push_str(&item);
        listed.push('\n');
    }
    Ok(listed)
}

/// The lines only in `old` (`-`) and only in `new` (`+`), in order.
fn difference(old: &str, new: &str) -> String {
    let old: BTreeSet<&str> = old.lines().collect();
    let new: BTreeSet<&str> = new.lines().collect();
    let mut out = String::new();
    for line in old.difference(&new) {
        out.push_str(&format!("- {line}\n"));
    }
    for line in new.difference(&old) {
        out.push_str(&format!("+ {line}\n"));
    }
    out
}
