//! `sluice import` on the real binary: the fixtures (every feature envoyproxy/ratelimit and
//! Limitador document) give the committed rule files and reports (golden; `SLUICE_BLESS=1`
//! rewrites them), the rule files pass `sluice validate`, and the imported rules decide as the
//! original service would: over Envoy RLS for envoyproxy/ratelimit, over HTTP for Limitador. A
//! hostile envoyproxy/ratelimit file (nested wildcards whose siblings every limit below repeats)
//! is refused quickly and in little memory, as a hostile rule file is.
//!
//! The expected counts below are worked out by hand from each service's documented semantics
//! (envoyproxy/ratelimit: fixed windows per descriptor's values, the most specific sibling
//! first, depth must match, `unlimited` never limited, `shadow_mode` always OK, over-limit hits
//! counted; Limitador: every applying limit counts, all or nothing), not from the importer.
//! Windows are hours and days of the wall clock: a run that crosses an hour is run again.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{Server, TempDir, sluice};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::UInt64Value;

use crate::envoy::{ask, descriptor, grpc_client, request};

const ERL_FILES: [&str; 3] = ["erl_edge.yaml", "erl_edge_more.yaml", "erl_other.yaml"];

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import")
}

/// `sluice import ARGS` run from the crate, so reports name `tests/data/import/...`.
fn import(args: &[&str]) -> Output {
    sluice()
        .arg("import")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn fixture_args(format: &str, names: &[&str]) -> Vec<String> {
    let mut args = vec![format.to_string()];
    args.extend(names.iter().map(|n| format!("tests/data/import/{n}")));
    args
}

/// Compares `actual` with the committed file, or rewrites it under `SLUICE_BLESS=1`.
fn golden(name: &str, actual: &str) {
    let path = data().join(name);
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name} differs (SLUICE_BLESS=1 rewrites it):\n{actual}"
    );
}

fn imported(format: &str, names: &[&str], extra: &[&str]) -> (String, serde_json::Value) {
    let mut args = fixture_args(format, names);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push("--format=json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = import(&args);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = serde_json::from_slice(&out.stderr).expect("a JSON report");
    (String::from_utf8(out.stdout).unwrap(), report)
}

#[test]
fn the_fixtures_give_the_committed_rule_files_and_reports() {
    let (rules, report) = imported("envoy-ratelimit", &ERL_FILES, &[]);
    golden("erl.expected.yaml", &rules);
    golden("erl.expected.report.json", &format!("{report:#}\n"));
    assert_eq!(report["exact"], false);
    // Long units are carried over as what they are, and the report says what that is.
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n["message"]
            .as_str()
            .unwrap()
            .starts_with("`month` is 30 days counted from the epoch")),
        "{report:#}"
    );
    let (rules, report) = imported("limitador", &["limitador.yaml"], &["--envoy"]);
    let note = &report["notes"][0]["message"];
    assert!(
        note.as_str()
            .unwrap()
            .starts_with("2592000 seconds is a window of 30.0 days, not a calendar month"),
        "{report:#}"
    );
    golden("limitador.expected.yaml", &rules);
    golden("limitador.expected.report.json", &format!("{report:#}\n"));
    // Text report: one line per loss, with file and path, then the count.
    let out = import(&["limitador", "tests/data/import/limitador.yaml"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("not carried over: tests/data/import/limitador.yaml: [6].conditions[0]: "),
        "{text}"
    );
    assert!(
        text.trim_end()
            .ends_with("thing(s) not carried over exactly"),
        "{text}"
    );
}

/// The book's example (`migrating.md`): its input gives its output (less the comments).
#[test]
fn the_book_example_is_what_the_import_writes() {
    let docs = sluice_test_support::docs::chapter("migrating.md");
    let section = docs
        .split("An envoyproxy/ratelimit file such as")
        .nth(1)
        .expect("the example");
    let mut blocks = section
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap());
    let (input, output) = (blocks.next().unwrap(), blocks.next().unwrap());
    let dir = TempDir::new();
    let file = dir.write("edge.yaml", input);
    let out = import(&["envoy-ratelimit", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let written: String = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(written, output);
    assert!(String::from_utf8_lossy(&out.stderr).contains("everything was carried over"));
}

#[test]
fn the_rule_files_pass_validate() {
    let dir = TempDir::new();
    for (format, names, file) in [
        ("envoy-ratelimit", &ERL_FILES[..], "erl.yaml"),
        ("limitador", &["limitador.yaml"][..], "limitador.yaml"),
    ] {
        let target = dir.path().join(file);
        let mut args = fixture_args(format, names);
        args.extend(["-o".into(), target.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = import(&args);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(
            out.stdout.is_empty(),
            "-o writes the file, not standard output"
        );
        let valid = sluice().arg("validate").arg(&target).output().unwrap();
        assert_eq!(valid.status.code(), Some(0), "{valid:?}");
    }
}

/// 30 levels of 100 wildcards sharing their prefix, each level nested in the last: 0.8 MB that
/// would make rules a thousand times larger (each limit repeats what every level above takes).
fn nested_wildcards() -> String {
    let mut text = String::from("domain: d\ndescriptors:\n");
    for depth in 0..30 {
        let pad = " ".repeat(2 + 4 * depth);
        for j in 0..100 {
            text.push_str(&format!(
                "{pad}- key: k{depth}\n{pad}  value: \"v{j}*\"\n{pad}  rate_limit: {{ unit: minute, requests_per_unit: 5 }}\n"
            ));
        }
        text.push_str(&format!(
            "{pad}- key: k{depth}\n{pad}  value: \"v*\"\n{pad}  rate_limit: {{ unit: second, requests_per_unit: 5 }}\n{pad}  descriptors:\n"
        ));
    }
    text.push_str(&format!("{}- key: last\n", " ".repeat(2 + 4 * 30)));
    text
}

/// The bounds are on the CPU time the process used and its peak memory (see `config_limits`).
#[test]
fn a_hostile_envoy_ratelimit_file_is_refused_quickly_and_in_little_memory() {
    use crate::config_limits::run;
    use std::time::Duration;
    let dir = TempDir::new();
    let path = dir.write("nested.yaml", &nested_wildcards());
    let done = run(sluice().args(["import", "envoy-ratelimit"]).arg(&path));
    let head: String = done.stderr.chars().take(300).collect();
    assert_eq!(done.code, Some(2), "{head}");
    assert!(done.stderr.starts_with("error:"), "{head}");
    assert!(
        done.stderr.contains("more than a rule file may hold"),
        "{head}"
    );
    assert!(done.cpu < Duration::from_secs(2), "used {:?}", done.cpu);
    assert!(done.max_rss < 200 * 1024 * 1024, "{} bytes", done.max_rss);
}

#[test]
fn only_unreadable_input_fails() {
    let dir = TempDir::new();
    let not_yaml = dir.write("bad.yaml", "domain: [unclosed\n");
    let list = dir.write("list.yaml", "- 1\n");
    for args in [
        vec![
            "envoy-ratelimit".to_string(),
            dir.path().join("missing.yaml").display().to_string(),
        ],
        vec![
            "envoy-ratelimit".to_string(),
            not_yaml.display().to_string(),
        ],
        vec!["envoy-ratelimit".to_string(), list.display().to_string()],
        vec![
            "limitador".to_string(),
            data().join("erl_edge.yaml").display().to_string(),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = import(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error: "),
            "{out:?}"
        );
        assert!(out.stdout.is_empty());
    }
    let unwritable = dir.path().join("no/such/dir/sluice.yaml");
    let out = import(&[
        "limitador",
        "tests/data/import/limitador.yaml",
        "-o",
        &unwritable.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot write"),
        "{out:?}"
    );
}

fn hour() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
}

/// What envoyproxy/ratelimit admits of `sent` requests, each with one descriptor of `entries`
/// (hits 1), for the fixtures: (entries, sent, admitted).
/// One descriptor's entries, how many requests carry it, how many are admitted.
type Sent = (&'static [(&'static str, &'static str)], usize, usize);

const ERL_EXPECTED: &[Sent] = &[
    // 3 an hour per address; one refused; one allowlisted; each address counted apart.
    (&[("remote_address", "1.2.3.4")], 5, 3),
    (&[("remote_address", "5.6.7.8")], 4, 3),
    (&[("remote_address", "50.0.0.5")], 2, 0),
    (&[("remote_address", "10.0.0.1")], 10, 10),
    // Tiers: the key's own 2, pro's 4, daily's 5 a day, trial in shadow mode.
    (&[("plan", "free")], 4, 2),
    (&[("plan", "pro")], 6, 4),
    (&[("plan", "daily")], 7, 5),
    (&[("plan", "trial")], 3, 3),
    // Nested: marketing's 2 and the number's own 4 are counted apart; another type has none;
    // a descriptor shorter than the configuration's depth has none.
    (&[("message_type", "marketing"), ("to_number", "1")], 4, 2),
    (&[("to_number", "1")], 6, 4),
    (&[("message_type", "other"), ("to_number", "1")], 2, 2),
    (&[("message_type", "marketing")], 3, 3),
    // Wildcards: per value; the exact value first; unmatched values free; a shared count.
    (&[("path", "/api/x")], 5, 3),
    (&[("path", "/api/y")], 4, 3),
    (&[("path", "/api/admin")], 3, 1),
    (&[("path", "/other")], 3, 3),
    (&[("files", "files/a")], 1, 1),
    (&[("files", "files/b")], 3, 1),
    // A value in shadow mode beside its key's limit, under a parent value; another parent.
    (&[("service", "auth"), ("user", "user-a")], 3, 3),
    (&[("service", "auth"), ("user", "u2")], 4, 2),
    (&[("service", "web"), ("user", "u2")], 3, 3),
    // Unlimited; the long units; an unknown key; a limit of 0 in shadow mode.
    (&[("ldap", "x")], 5, 5),
    (&[("tenant", "t")], 3, 3),
    (&[("nothing", "here")], 2, 2),
];

#[tokio::test]
async fn imported_envoy_ratelimit_rules_decide_as_envoy_ratelimit_over_rls() {
    let (rules, _) = imported("envoy-ratelimit", &ERL_FILES, &[]);
    let config = rules.replace("grpc_listen: 127.0.0.1:8081", "grpc_listen: 127.0.0.1:0");
    for attempt in 0.. {
        let started = hour();
        let server = Server::start(&config);
        let mut client = grpc_client(&server).await;
        let mut seen = Vec::new();
        for (entries, sent, _) in ERL_EXPECTED {
            let mut admitted = 0;
            for _ in 0..*sent {
                let answer = ask(&mut client, request("edge", vec![descriptor(entries)])).await;
                admitted += usize::from(answer.overall_code() == Code::Ok);
            }
            seen.push(admitted);
        }
        let canary = || request("internal.api", vec![descriptor(&[("X-User-Id", "canary")])]);
        let mut canary_ok = 0;
        for _ in 0..3 {
            canary_ok += usize::from(ask(&mut client, canary()).await.overall_code() == Code::Ok);
        }
        // Hits over the limit count too: 2 of 3, then 2 more is over and counted, so 1 more is
        // over as well.
        let hits = |n: u64| {
            let mut d = descriptor(&[("remote_address", "9.9.9.9")]);
            d.hits_addend = Some(UInt64Value { value: n });
            request("edge", vec![d])
        };
        let mut counted = Vec::new();
        for n in [2, 2, 1] {
            counted.push(ask(&mut client, hits(n)).await.overall_code());
        }
        // Two descriptors under their limits in one request: each counts.
        let both = request(
            "edge",
            vec![
                descriptor(&[("plan", "gold")]),
                descriptor(&[("to_number", "2")]),
            ],
        );
        let both_ok = ask(&mut client, both).await.overall_code() == Code::Ok;
        let gold = || request("edge", vec![descriptor(&[("plan", "gold")])]);
        let alone = [
            ask(&mut client, gold()).await.overall_code(),
            ask(&mut client, gold()).await.overall_code(),
        ];
        if hour() != started && attempt == 0 {
            continue;
        }
        let expected: Vec<usize> = ERL_EXPECTED.iter().map(|e| e.2).collect();
        for ((entries, sent, want), got) in ERL_EXPECTED.iter().zip(&seen) {
            assert_eq!(
                got, want,
                "{entries:?}: {got} of {sent} admitted, envoyproxy/ratelimit admits {want}"
            );
        }
        assert_eq!(seen, expected);
        assert_eq!(canary_ok, 3, "a limit of 0 in shadow mode is always OK");
        assert_eq!(counted, [Code::Ok, Code::OverLimit, Code::OverLimit]);
        assert!(both_ok);
        assert_eq!(
            alone,
            [Code::Ok, Code::OverLimit],
            "gold's 2 an hour: 1 counted beside to_number"
        );
        break;
    }
}

#[tokio::test]
async fn imported_limitador_rules_decide_as_limitador_over_http() {
    let (rules, _) = imported("limitador", &["limitador.yaml"], &[]);
    let get = serde_json::json!({ "req_method": "GET", "user_id": "u1" });
    let post =
        |path: &str| serde_json::json!({ "req_method": "POST", "user_id": "u1", "req_path": path });
    // (attributes, allowed) in order: `reads` 3 an hour per user; every request also counts
    // toward 5 a day for the namespace; a denied request counts nothing; a limit whose variable
    // is missing does not apply; `!=` leaves its value out; `in` a refused set is limited.
    let steps: Vec<(serde_json::Value, bool)> = vec![
        (get.clone(), true),
        (get.clone(), true),
        (get.clone(), true),
        (get.clone(), false),
        (serde_json::json!({ "req_method": "GET" }), true),
        (post("/health"), true),
        (serde_json::json!({ "plan": "banned" }), false),
        (post("/x"), false),
    ];
    for attempt in 0.. {
        let started = hour();
        let server = Server::start(&rules);
        let mut seen = Vec::new();
        for (attributes, _) in &steps {
            let answer = server.check("example.org", attributes.clone()).await;
            assert!(answer.status == 200 || answer.status == 429, "{answer:?}");
            seen.push(answer.status == 200);
        }
        if hour() != started && attempt == 0 {
            continue;
        }
        let expected: Vec<bool> = steps.iter().map(|s| s.1).collect();
        assert_eq!(seen, expected);
        break;
    }
}
