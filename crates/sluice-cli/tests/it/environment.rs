//! `sluice serve` configured from its environment, as a container is: each setting comes from
//! its flag, else its variable (`SLUICE_LISTEN`, ...), else the file, else the default (the
//! defaults are the server crate's unit tests). The addresses differ in their loopback IP
//! (127.0.0.2, .3, .4 on port 0), so the "listening on" line tells which one won.

use crate::common;

use std::process::Stdio;

use common::{CONFIG, Options, SERVE_VARIABLES, Server, WITHIN, eventually, sluice};
use serde_json::json;

fn start(file: &str, listen: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Server {
    Server::start_with(
        file,
        "sluice.yaml",
        Options {
            listen,
            args,
            env: env.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            ..Options::default()
        },
    )
}

fn host(server: &Server) -> &str {
    let address = server.base.trim_start_matches("http://");
    address.rsplit_once(':').map_or(address, |(host, _)| host)
}

fn said(server: &Server, text: &str) -> bool {
    server.log().iter().any(|line| line.contains(text))
}

#[tokio::test]
async fn listen_comes_from_the_flag_then_the_variable_then_the_file() {
    let file = format!("listen: 127.0.0.4:0\n{CONFIG}");
    let env = [("SLUICE_LISTEN", "127.0.0.3:0")];
    let flag = start(&file, Some("127.0.0.2:0"), &[], &env);
    assert_eq!(host(&flag), "127.0.0.2");
    let variable = start(&file, None, &[], &env);
    assert_eq!(host(&variable), "127.0.0.3");
    let from_file = start(&file, None, &[], &[]);
    assert_eq!(host(&from_file), "127.0.0.4");
    for server in [&flag, &variable, &from_file] {
        let answer = server.check("employee", json!({ "id": "1" })).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
}

/// The file names a Redis nobody listens on; the memory store the variable or flag names is
/// the one opened (the log names the store in use).
#[tokio::test]
async fn the_store_comes_from_the_flag_then_the_variable_then_the_file() {
    let nowhere = "redis://127.0.0.1:1/0";
    let file = format!("store:\n  url: {nowhere}\n{CONFIG}");
    let variable = start(
        &file,
        Some("127.0.0.1:0"),
        &[],
        &[("SLUICE_STORE", "memory://")],
    );
    assert!(said(&variable, "store=memory://"), "{:?}", variable.log());
    let flag = start(
        &file,
        Some("127.0.0.1:0"),
        &["--store", "memory://"],
        &[("SLUICE_STORE", nowhere)],
    );
    assert!(said(&flag, "store=memory://"), "{:?}", flag.log());
    for server in [&variable, &flag] {
        let answer = server.check("employee", json!({ "id": "1" })).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
}

#[tokio::test]
async fn the_grpc_address_and_the_shutdown_timeout_come_from_the_environment() {
    let server = start(
        CONFIG,
        Some("127.0.0.1:0"),
        &[],
        &[
            ("SLUICE_GRPC_LISTEN", "127.0.0.5:0"),
            ("SLUICE_SHUTDOWN_TIMEOUT", "2s"),
        ],
    );
    eventually(WITHIN, "the gRPC service", || async {
        said(&server, "Envoy rate-limit service (gRPC) on 127.0.0.5:").then_some(())
    })
    .await;
    let bad = sluice()
        .args(["serve", "--config", "x.yaml"])
        .env("SLUICE_SHUTDOWN_TIMEOUT", "soon")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("--shutdown-timeout"), "{stderr}");
}

#[test]
fn help_names_every_variable() {
    let out = sluice().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for var in SERVE_VARIABLES {
        assert!(
            help.contains(&format!("[env: {var}")),
            "{var} not in:\n{help}"
        );
    }
}
