//! Compiles `proto/sluice/v1/sluice.proto` (Sluice's own gRPC API) into Rust, and its descriptor
//! set for server reflection (the `.proto` is parsed by protox, in Rust: building needs no
//! `protoc`); and records the commit the service is built from, for `sluice_build_info{commit}`
//! and `sluice --version`, as `SLUICE_BUILD_COMMIT` (12 hex digits; unset when unknown).
//!
//! The commit has one source, in order: the `SLUICE_BUILD_COMMIT` environment variable (an image
//! or package build that has no `.git`: the Dockerfile's build argument), the `sha1` cargo writes
//! into `.cargo_vcs_info.json` when it packages the crate (a source package from the registry:
//! its directory may sit inside some unrelated git repository, which must not be asked), then
//! `git rev-parse HEAD`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable, both read and written: a build sets it, the code reads what this script wrote.
const COMMIT: &str = "SLUICE_BUILD_COMMIT";

fn commit() {
    println!("cargo:rerun-if-env-changed={COMMIT}");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let vcs_info = manifest.join(".cargo_vcs_info.json");
    let commit = std::env::var(COMMIT)
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            vcs_info
                .exists()
                .then(|| packaged_commit(&vcs_info))
                .flatten()
        })
        .or_else(|| {
            (!vcs_info.exists())
                .then(|| git_commit(&manifest))
                .flatten()
        })
        .map(|c| c.trim().chars().take(12).collect::<String>());
    if let Some(commit) = commit {
        println!("cargo:rustc-env={COMMIT}={commit}");
    }
}

/// The `"sha1": "..."` of cargo's packaging record (a flat JSON object cargo writes itself).
fn packaged_commit(path: &Path) -> Option<String> {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path).ok()?;
    let rest = text.split("\"sha1\"").nth(1)?;
    let value = rest.split('"').nth(1)?;
    value
        .chars()
        .all(|c| c.is_ascii_hexdigit())
        .then(|| value.to_string())
}

fn git_commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    // Build again when HEAD moves: HEAD itself (a checkout), the branch it names, packed refs.
    // Only paths that exist: cargo reruns the script on every build for one that does not.
    let git_dir = PathBuf::from(git(&["rev-parse", "--absolute-git-dir"])?);
    let mut watched = vec![git_dir.join("HEAD")];
    if let (Some(branch), Some(common)) = (
        git(&["symbolic-ref", "-q", "HEAD"]),
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
    ) {
        watched.push(Path::new(&common).join(&branch));
        watched.push(Path::new(&common).join("packed-refs"));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(commit)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    commit();
    let proto = "proto/sluice/v1/sluice.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("sluice_v1_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
