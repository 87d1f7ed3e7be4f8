//! Parsing and validation of rule files: a file using every key, TOML parity, and that every kind
//! of mistake names its rule, field and line.

use std::time::Duration;

use super::*;
use sluice::model::Algorithm;

/// A rule file that uses every key of the format.
const EVERY_KEY: &str = "\
listen: 127.0.0.1:8080
admin_token_env: SLUICE_ADMIN_TOKEN
store:
  url: memory://
  timeout: 50ms
  clock: store
  prefix: sluice
fail: open
rules:
  bank_account_update:
    limits:
      - { by: [member], rate: 2/120s, algorithm: sliding_log }
      - { by: [ip],     rate: 2/120s, algorithm: sliding_log }
  secure_forgot_account:
    limits:
      - { by: [login_id], rate: 3/30m, algorithm: sliding_log, block: 30m }
  mini_game:
    limits:
      - by: [member]
        rate: 5/1m
        algorithm: sliding_log
        penalty: { warn_after: 3, ban_after: 5, ban: 30m, memory: 1h }
  promo_query:
    limits:
      - { by: [member, promo_code], rate: 10/60s, algorithm: sliding_window }
  api:
    fail: local
    limits:
      - { by: [ip], rate: 100/1s, algorithm: token_bucket, burst: 200 }
  global_payments:
    shadow: true
    limits:
      - { by: [], rate: 300/1s, algorithm: gcra }
";

fn yaml_error(text: &str) -> ConfigError {
    Config::parse(text, Format::Yaml).expect_err("the text is invalid")
}

#[test]
fn the_design_example_parses() {
    let c = Config::parse(EVERY_KEY, Format::Yaml).unwrap();
    assert_eq!(c.listen, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!(c.admin_token_env.as_deref(), Some("SLUICE_ADMIN_TOKEN"));
    assert_eq!(c.store.timeout, Duration::from_millis(50));
    assert_eq!(c.store.clock, ClockSource::Store);
    assert_eq!(c.fail, FailPolicy::Open);
    assert_eq!(c.headers, HeaderStyle::Both);
    assert!(c.enabled);
    let names: Vec<&str> = c.rules.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "api",
            "bank_account_update",
            "global_payments",
            "mini_game",
            "promo_query",
            "secure_forgot_account"
        ]
    );
    let api = &c.rules[0].1;
    assert_eq!(api.fail, Some(FailPolicy::Local));
    assert_eq!(api.limits[0].burst, Some(200));
    assert_eq!(api.limits[0].algorithm, Algorithm::TokenBucket);
    assert!(c.rules[2].1.shadow);
    assert_eq!(c.limiter_options().timeout, Duration::from_millis(50));
    assert_eq!(c.version.len(), 40);
}

#[test]
fn a_reload_waits_for_a_quiet_file_and_reads_the_former_settle_key() {
    let quiet = Config::parse("reload:\n  quiet: 2s\nrules: {}\n", Format::Yaml).unwrap();
    assert_eq!(quiet.reload.quiet, Duration::from_secs(2));
    // `settle`, the key's former spelling, still reads, with the same bound.
    let settle = Config::parse("reload:\n  settle: 2s\nrules: {}\n", Format::Yaml).unwrap();
    assert_eq!(settle.reload, quiet.reload);
    let too_long = yaml_error("reload:\n  settle: 11s\nrules: {}\n");
    assert!(too_long.to_string().contains("reload.quiet"), "{too_long}");
}

#[test]
fn defaults_when_only_rules_are_given() {
    let c = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    assert_eq!(c.store, StoreConfig::default());
    assert_eq!(c.store.url, "memory://");
    assert_eq!(c.listen, None);
    assert!(c.rules.is_empty());
}

#[test]
fn toml_gives_the_same_rules() {
    let toml = r#"
listen = "127.0.0.1:8080"
headers = "ietf"
[store]
url = "redis://127.0.0.1:7000/0"
timeout = "20ms"
clock = "local"
[rules.bank_account_update]
limits = [
  { by = ["member"], rate = "2/120s", algorithm = "sliding_log" },
  { by = ["ip"], rate = "2/120s", algorithm = "sliding_log" },
]
"#;
    let c = Config::parse(toml, Format::Toml).unwrap();
    let y = Config::parse(EVERY_KEY, Format::Yaml).unwrap();
    assert_eq!(c.rules[0], y.rules[1]);
    assert_eq!(c.headers, HeaderStyle::Ietf);
    assert_eq!(c.store.clock, ClockSource::Local);
    assert_eq!(c.store.timeout, Duration::from_millis(20));
}

#[test]
fn semantic_errors_name_rule_field_and_the_limit_line() {
    let e = yaml_error(
        "rules:\n  ok:\n    limits:\n      - { by: [ip], rate: 1/1s }\n  login:\n    limits:\n      - { by: [ip], rate: 5/1m }\n      - { by: [member], rate: 5/1m, algorithm: sliding_log, burst: 9 }\n",
    );
    assert_eq!(e.rule.as_deref(), Some("login"));
    assert_eq!(e.field, "limits[1].burst");
    assert_eq!(e.line, Some(8));
    let shown = e.to_string();
    assert!(
        shown.starts_with("line 8: rule `login`: field `limits[1].burst`: "),
        "{shown}"
    );
}

#[test]
fn a_rule_without_limits_points_at_its_key() {
    let e = yaml_error("fail: open\nrules:\n  empty:\n    limits: []\n");
    assert_eq!(
        (e.rule.as_deref(), e.field.as_str(), e.line),
        (Some("empty"), "limits", Some(3))
    );
}

#[test]
fn duplicate_limit_ids_are_refused() {
    let e = yaml_error(
        "rules:\n  twice:\n    limits:\n      - { by: [ip], rate: 5/1m }\n      - { by: [ip], rate: 9/1m }\n",
    );
    assert_eq!((e.field.as_str(), e.line), ("limits[1]", Some(5)));
}

#[test]
fn bad_rule_names_are_refused() {
    let e = yaml_error("rules:\n  \"a:b\":\n    limits:\n      - { by: [ip], rate: 5/1m }\n");
    assert_eq!((e.rule.as_deref(), e.line), (Some("a:b"), Some(2)));
    assert!(e.message.contains("rule names"), "{e}");
}

#[test]
fn unknown_fields_are_parse_errors_with_rule_and_line() {
    let e = yaml_error(
        "rules:\n  login:\n    limits:\n      - by: [ip]\n        rate: 5/1m\n        burts: 3\n",
    );
    assert_eq!(e.rule.as_deref(), Some("login"));
    assert_eq!(e.field, "limits[0].burts");
    assert_eq!((e.line, e.column), (Some(6), Some(9)));
}

#[test]
fn bad_values_are_parse_errors_with_rule_and_line() {
    let e = yaml_error("rules:\n  login:\n    limits:\n      - by: [ip]\n        rate: five/1m\n");
    assert_eq!(
        (e.rule.as_deref(), e.field.as_str()),
        (Some("login"), "limits[0].rate")
    );
    assert_eq!(e.line, Some(5));
    let e = yaml_error("rules:\n  login:\n    limits:\n      - { by: [Ip], rate: 5/1m }\n");
    assert_eq!(
        (e.rule.as_deref(), e.field.as_str(), e.line),
        (Some("login"), "limits[0].by[0]", Some(4))
    );
    let e = yaml_error("rules:\n  login:\n    limits:\n      - { rate: 5/1m, algorithm: magic }\n");
    assert_eq!((e.rule.as_deref(), e.line), (Some("login"), Some(4)));
    assert!(e.message.contains("magic"), "{e}");
}

#[test]
fn errors_outside_rules_have_lines_too() {
    let e = yaml_error("listen: 127.0.0.1:8080\nstore:\n  url: mongodb://x\nrules: {}\n");
    assert_eq!(
        (e.rule, e.field.as_str(), e.line),
        (None, "store.url", Some(3))
    );
    let e = yaml_error("store:\n  prefix: \"a{b}\"\n");
    assert_eq!((e.field.as_str(), e.line), ("store.prefix", Some(2)));
    let e = yaml_error("listen: nowhere\n");
    assert_eq!((e.field.as_str(), e.line), ("listen", Some(1)));
    assert_eq!(
        e.to_string(),
        "line 1:9: field `listen`: invalid socket address syntax"
    );
    let e = yaml_error("lisen: 127.0.0.1:1\n");
    assert_eq!((e.field.as_str(), e.line), ("lisen", Some(1)));
    let e = yaml_error("store:\n  timeout: 0ms\n");
    assert_eq!(e.line, Some(2));
    let e = yaml_error("rules:\n  login:\n    limits: [\n");
    assert!(e.line.is_some(), "{e}");
}

#[test]
fn toml_errors_have_rule_field_and_line() {
    let e = Config::parse(
        "[rules.login]\nshadow = true\n[[rules.login.limits]]\nby = [\"ip\"]\nrate = \"5/1m\"\nalgorithm = \"gcra\"\ncount_denied = true\n",
        Format::Toml,
    )
    .unwrap_err();
    assert_eq!(
        (e.rule.as_deref(), e.field.as_str(), e.line),
        (Some("login"), "limits[0].count_denied", Some(3))
    );
    let e = Config::parse("[rules.login]\nlimitz = []\n", Format::Toml).unwrap_err();
    assert_eq!((e.rule.as_deref(), e.line), (Some("login"), Some(2)));
}

#[test]
fn the_version_follows_the_text() {
    let a = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    let b = Config::parse("rules: {}\nfail: closed\n", Format::Yaml).unwrap();
    assert_ne!(a.version, b.version);
    assert_eq!(
        a.version,
        Config::parse("rules: {}\n", Format::Yaml).unwrap().version
    );
}

#[test]
fn loading_names_the_file() {
    let dir = std::env::temp_dir().join(format!("sluice-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.yaml");
    std::fs::write(&path, "rules:\n  x:\n    limits: []\n").unwrap();
    let e = Config::load(&path).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2: rule `x`", path.display())),
        "{e}"
    );
    let e = Config::load(&dir.join("missing.yaml")).unwrap_err();
    assert!(e.message.contains("cannot read"), "{e}");
    let e = Config::load(&dir.join("rules.json")).unwrap_err();
    assert!(e.message.contains(".yaml"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn server_limits_have_defaults_and_are_checked() {
    let config = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    assert_eq!(config.server, ServerConfig::default());
    assert_eq!(config.server.max_connections, 4096);
    assert_eq!(config.server.header_read_timeout, Duration::from_secs(5));
    let config = Config::parse(
        "server:\n  header_read_timeout: 2s\n  max_connections: 10\nrules: {}\n",
        Format::Yaml,
    )
    .unwrap();
    assert_eq!(config.server.header_read_timeout, Duration::from_secs(2));
    assert_eq!(config.server.max_connections, 10);
    let error =
        Config::parse("server:\n  max_connections: 0\nrules: {}\n", Format::Yaml).unwrap_err();
    assert_eq!(
        (error.field.as_str(), error.line),
        ("server.max_connections", Some(2))
    );
    let error =
        Config::parse("server:\n  request_timeout: 0s\nrules: {}\n", Format::Yaml).unwrap_err();
    assert_eq!(error.line, Some(2));
}

#[test]
fn the_store_in_flight_bound_is_a_number_or_a_word() {
    use sluice::limiter::InFlightLimit;
    let in_flight = |text: &str| {
        Config::parse(
            &format!("store:\n  in_flight: {text}\nrules: {{}}\n"),
            Format::Yaml,
        )
        .map(|c| c.limiter_options().in_flight)
    };
    let c = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    assert_eq!(c.limiter_options().in_flight, InFlightLimit::DEFAULT);
    assert_eq!(in_flight("64").unwrap(), InFlightLimit::Fixed(64));
    // The adaptive bound was removed: a file that asks for it still loads, with the default
    // (and a warning in the log).
    assert_eq!(in_flight("adaptive").unwrap(), InFlightLimit::DEFAULT);
    assert_eq!(in_flight("unbounded").unwrap(), InFlightLimit::Unbounded);
    for bad in ["0", "-1", "lots", "99999999999"] {
        let e = in_flight(bad).unwrap_err();
        assert!(
            e.field.ends_with("in_flight") && e.line == Some(2),
            "{bad}: {e:?}"
        );
    }
    let toml = Config::parse("[store]\nin_flight = 32\n[rules]\n", Format::Toml).unwrap();
    assert_eq!(toml.limiter_options().in_flight, InFlightLimit::Fixed(32));
}

#[test]
fn the_memory_store_key_cap_has_a_default_and_a_floor() {
    let c = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    assert_eq!(c.store.max_keys, sluice::store::memory::DEFAULT_MAX_KEYS);
    let c = Config::parse("store:\n  max_keys: 5000\n", Format::Yaml).unwrap();
    assert_eq!(c.store.max_keys, 5000);
    let e = yaml_error("store:\n  url: memory://\n  max_keys: 10\n");
    assert_eq!((e.field.as_str(), e.line), ("store.max_keys", Some(3)));
}

#[test]
fn the_denial_cache_section_has_defaults_and_bounds() {
    let config = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    assert_eq!(config.denial_cache, DenialCacheConfig::default());
    let options = config.limiter_options().denial_cache;
    assert!(options.enabled);
    assert_eq!(options.max_entries, 200_000);
    assert_eq!(options.max_stale, Duration::from_secs(1));

    let text =
        "denial_cache:\n  enabled: false\n  max_entries: 10\n  max_stale: 250ms\nrules: {}\n";
    let options = Config::parse(text, Format::Yaml)
        .unwrap()
        .limiter_options()
        .denial_cache;
    assert_eq!(
        (options.enabled, options.max_entries, options.max_stale),
        (false, 10, Duration::from_millis(250))
    );

    for (text, field) in [
        (
            "denial_cache:\n  max_stale: 61s\nrules: {}\n",
            "denial_cache.max_stale",
        ),
        (
            "denial_cache:\n  max_entries: 10000001\nrules: {}\n",
            "denial_cache.max_entries",
        ),
    ] {
        let error = Config::parse(text, Format::Yaml).unwrap_err();
        assert_eq!(
            (error.field.as_str(), error.line),
            (field, Some(1)),
            "{error}"
        );
    }
    let error =
        Config::parse("denial_cache:\n  max_size: 1\nrules: {}\n", Format::Yaml).unwrap_err();
    assert!(error.to_string().contains("max_size"), "{error}");
}

#[test]
fn notifications_are_bounded_and_set_the_crossing_queue() {
    let config = Config::parse("rules: {}\n", Format::Yaml).unwrap();
    assert_eq!(config.notifications, NotificationsConfig::default());
    assert_eq!(
        config.limiter_options().crossing_queue,
        sluice::limiter::DEFAULT_CROSSING_QUEUE
    );
    let text = "notifications: { queue: 5, timeout: 300ms, backoff: 20ms }\nrules: {}\n";
    let config = Config::parse(text, Format::Yaml).unwrap();
    assert_eq!(config.limiter_options().crossing_queue, 5);
    assert_eq!(
        (config.notifications.timeout, config.notifications.attempts),
        (Duration::from_millis(300), 10)
    );
    for (section, field) in [
        ("{ queue: 0 }", "notifications.queue"),
        ("{ in_flight: 0 }", "notifications.in_flight"),
        ("{ attempts: 101 }", "notifications.attempts"),
        ("{ timeout: 61s }", "notifications.timeout"),
        ("{ backoff: 0s }", "notifications.backoff"),
    ] {
        let text = format!("notifications: {section}\nrules: {{}}\n");
        let error = Config::parse(&text, Format::Yaml).unwrap_err();
        assert_eq!(
            (error.field.as_str(), error.line),
            (field, Some(1)),
            "{error}"
        );
    }
}

#[test]
fn quotas_take_a_quota_and_a_calendar_period_instead_of_a_rate() {
    use sluice::model::{Period, PeriodUnit};
    let yaml = "rules:\n  plan:\n    limits:\n      - { by: [tenant], quota: 10000, period: month, anchor: 15, timezone: Europe/Berlin }\n";
    let c = Config::parse(yaml, Format::Yaml).unwrap();
    let period = Period::new(PeriodUnit::Month)
        .in_zone("Europe/Berlin")
        .unwrap()
        .anchored(15)
        .unwrap();
    let expected = sluice::model::Limit::quota(&["tenant"], 10000, period);
    assert_eq!(c.rules[0].1.limits[0], expected);
    assert_eq!(expected.algorithm, Algorithm::FixedWindow);
    assert_eq!(expected.id(), "tenant-quota-month");
    // Written back the way it was read, the defaults (UTC, the 1st) left out.
    let json = serde_json::to_value(&expected).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"by": ["tenant"], "quota": 10000, "period": "month", "timezone": "Europe/Berlin", "anchor": 15})
    );
    let daily = sluice::model::Limit::quota(&["ip"], 5, Period::new(PeriodUnit::Day));
    assert_eq!(
        serde_json::to_value(&daily).unwrap(),
        serde_json::json!({"by": ["ip"], "quota": 5, "period": "day"})
    );
    let line = |limit: &str| format!("rules:\n  plan:\n    limits:\n      - {limit}\n");
    for (limit, field) in [
        ("{ by: [t], quota: 5, period: month, rate: 5/1d }", "rate"),
        ("{ by: [t], period: day }", "quota"),
        ("{ by: [t], quota: 0, period: day }", "quota"),
        ("{ by: [t], quota: 5 }", "quota"),
        ("{ by: [t], rate: 5/1d, timezone: UTC }", "timezone"),
        (
            "{ by: [t], quota: 5, period: day, timezone: Mars/Olympus }",
            "timezone",
        ),
        ("{ by: [t], quota: 5, period: week, anchor: 3 }", "anchor"),
        ("{ by: [t], quota: 5, period: month, anchor: 32 }", "anchor"),
        ("{ by: [t], rate: 5/1d, over: allow }", "limits[0].over"),
        ("{ by: [t], quota: 5, period: day, over: maybe }", "over"),
        (
            "{ by: [t], quota: 5, period: day, algorithm: gcra }",
            "limits[0].period",
        ),
        (
            "{ by: [t], quota: 5, period: day, batch: { max: 10, hold: 1s } }",
            "limits[0].batch",
        ),
        (
            "{ by: [t], rate: 5/1d, notify: { at: [1.0], webhook: 'http://h/' } }",
            "limits[0].notify",
        ),
        (
            "{ by: [t], quota: 5, period: day, notify: { at: [1.5], webhook: 'http://h/' } }",
            "notify.at[0]",
        ),
        (
            "{ by: [t], quota: 5, period: day, notify: { at: [0.9, 0.8], webhook: 'http://h/' } }",
            "limits[0].notify.at",
        ),
        (
            "{ by: [t], quota: 5, period: day, notify: { at: [1.0], webhook: 'ftp://h/' } }",
            "limits[0].notify.webhook",
        ),
    ] {
        let e = yaml_error(&line(limit));
        let field = format!("limits[0].{}", field.trim_start_matches("limits[0]."));
        assert_eq!(
            (e.rule.as_deref(), e.field.as_str(), e.line),
            (Some("plan"), field.as_str(), Some(4)),
            "{limit}: {e}"
        );
    }
    // A plan's tier overrides the quota (and keeps the identity's count: same period).
    for (limit, field) in [
        (
            "{ by: [t], quota: 5, period: day, overrides: [{ when: { plan: pro }, rate: 5/1d }] }",
            "limits[0].overrides[0].rate",
        ),
        (
            "{ by: [t], rate: 5/1d, overrides: [{ when: { plan: pro }, quota: 50 }] }",
            "limits[0].overrides[0].quota",
        ),
    ] {
        let e = yaml_error(&line(limit));
        assert_eq!(e.field, field, "{limit}: {e}");
    }
    let tiered =
        line("{ by: [t], quota: 5, period: day, overrides: [{ when: { plan: pro }, quota: 50 }] }");
    let c = Config::parse(&tiered, Format::Yaml).unwrap();
    let limit = &c.rules[0].1.limits[0];
    let pro = limit.overridden(&limit.overrides[0]).unwrap();
    assert_eq!(
        (pro.rate.count(), pro.period.clone()),
        (50, limit.period.clone())
    );
    let e = yaml_error(&line("{ by: [t], period: fortnight, quota: 5 }"));
    assert!(
        e.to_string()
            .contains("expected one of day, week, month, year"),
        "{e}"
    );
}

#[test]
fn concurrency_limits_take_max_leases_and_a_lease_instead_of_a_rate() {
    let yaml = "rules:\n  export:\n    limits:\n      - { by: [tenant], algorithm: concurrency, max_leases: 3, lease: 30s }\n";
    let c = Config::parse(yaml, Format::Yaml).unwrap();
    let expected = sluice::model::Limit::concurrency(&["tenant"], 3, Duration::from_secs(30));
    assert_eq!(c.rules[0].1.limits[0], expected);
    // `limit`, the key's former spelling, still reads.
    let toml = "[rules.export]\nlimits = [{ by = [\"tenant\"], algorithm = \"concurrency\", limit = 3, lease = \"30s\" }]\n";
    assert_eq!(Config::parse(toml, Format::Toml).unwrap().rules, c.rules);
    // Written back the way it was read (the `/v1/rules` listing shows this).
    let json = serde_json::to_value(&expected).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"by": ["tenant"], "algorithm": "concurrency", "max_leases": 3, "lease": "30s"})
    );
    let line = |limit: &str| format!("rules:\n  export:\n    limits:\n      - {limit}\n");
    for (limit, field) in [
        ("{ by: [t], algorithm: concurrency, rate: 3/30s }", "rate"),
        ("{ by: [t], algorithm: concurrency, limit: 3 }", "lease"),
        (
            "{ by: [t], algorithm: concurrency, lease: 30s }",
            "max_leases",
        ),
        (
            "{ by: [t], algorithm: concurrency, max_leases: 0, lease: 30s }",
            "max_leases",
        ),
        ("{ by: [t], rate: 3/30s, max_leases: 3 }", "max_leases"),
        (
            "{ by: [t], algorithm: gcra, lease: 30s, rate: 1/1s }",
            "lease",
        ),
        (
            "{ by: [t], algorithm: concurrency, limit: 3, lease: 30s, burst: 5 }",
            "limits[0].burst",
        ),
        (
            "{ by: [t], algorithm: concurrency, max_leases: 100001, lease: 30s }",
            "limits[0].max_leases",
        ),
    ] {
        let e = yaml_error(&line(limit));
        // Every field is named by its path in the rule.
        let field = format!("limits[0].{}", field.trim_start_matches("limits[0]."));
        assert_eq!(
            (e.rule.as_deref(), e.field.as_str(), e.line),
            (Some("export"), field.as_str(), Some(4)),
            "{limit}: {e}"
        );
    }
}
