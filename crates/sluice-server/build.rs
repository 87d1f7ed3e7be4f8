//! Compiles `proto/sluice/v1/sluice.proto` (Sluice's own gRPC API) into Rust, and its descriptor
//! set for server reflection (the `.proto` is parsed by protox, in Rust: building needs no
//! `protoc`); and gives the service the commit it was built from, for `sluice_build_info{commit}`:
//! the `SLUICE_COMMIT` environment variable when the build sets it (a packager without the
//! repository), else `git rev-parse HEAD` when the sources are a git checkout, else nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn commit() {
    println!("cargo:rerun-if-env-changed=SLUICE_COMMIT");
    let commit = std::env::var("SLUICE_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            // Rebuilt when HEAD moves: HEAD itself, the branch it names, and packed refs.
            for path in ["HEAD", "packed-refs"]
                .into_iter()
                .map(String::from)
                .chain(git(&["symbolic-ref", "-q", "HEAD"]))
            {
                if let Some(file) = git(&["rev-parse", "--git-path", &path])
                    && Path::new(&file).exists()
                {
                    println!("cargo:rerun-if-changed={file}");
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        });
    if let Some(commit) = commit {
        println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
    }
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
