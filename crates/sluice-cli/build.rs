//! Records the commit the binary is built from, for `sluice --version`, as `SLUICE_COMMIT`.
//!
//! In order: `SLUICE_BUILD_COMMIT` from the environment (an image or package build that has no
//! `.git`), the `sha1` cargo writes into `.cargo_vcs_info.json` when it packages the crate (a
//! source package from the registry: its directory may sit inside some unrelated git repository,
//! which must not be asked), then `git rev-parse HEAD`; else "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_BUILD_COMMIT");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let vcs_info = manifest.join(".cargo_vcs_info.json");
    let commit = std::env::var("SLUICE_BUILD_COMMIT")
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
        .map(|c| c.trim().chars().take(12).collect::<String>())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
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
