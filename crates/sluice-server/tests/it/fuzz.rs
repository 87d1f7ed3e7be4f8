//! Property-based fuzzing of everything that parses outside input: rule files (YAML and TOML),
//! rates and durations, and the client-IP forwarding headers. For any input: no panic, an
//! answer within a bounded time, and a refusal is a short, clear error.
//!
//! Each property runs `SLUICE_FUZZ_CASES` cases (default 256, which keeps the suite fast); a
//! longer run: `SLUICE_FUZZ_CASES=100000 cargo test -p sluice-ratelimit-server --test it fuzz::`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use sluice::middleware::{ClientIp, ForwardingHeader};
use sluice::model::{Rate, parse_duration};
use sluice_server::config::{Config, Format};

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// A valid file using most keys: mutations of it reach deep into validation.
const SEED_YAML: &str = "\
listen: 127.0.0.1:8080
store: { url: memory://, timeout: 50ms, clock: store, prefix: sluice, max_keys: 1000 }
server: { max_connections: 100, header_read_timeout: 5s }
fail: open
headers: both
rules:
  login:
    message: slow down
    limits:
      - { by: [ip], rate: 5/1m, algorithm: sliding_log, block: 15m }
      - by: [member, ip]
        rate: 10/1h
        algorithm: gcra
        burst: 20
        penalty: { warn_after: 3, ban_after: 5, ban: 30m, memory: 1h }
  api:
    fail: local
    shadow: true
    limits:
      - { by: [user|ip], rate: 100/1s, algorithm: token_bucket, burst: 200, count_denied: false }
";

const SEED_TOML: &str = "\
listen = \"127.0.0.1:8080\"
fail = \"open\"
[store]
url = \"memory://\"
timeout = \"50ms\"
[rules.login]
limits = [ { by = [\"ip\"], rate = \"5/1m\", algorithm = \"sliding_log\", block = \"15m\" } ]
[rules.api]
limits = [ { by = [\"user\"], rate = \"100/1s\", algorithm = \"token_bucket\", burst = 200 } ]
";

/// Text made of the characters rule files are made of, with the odd control or wide character.
fn file_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ -~\\n\\t{}\\[\\]:,#\"'|\\\\é\u{0}\u{feff}]{0,400}").unwrap()
}

/// A seed with a few bytes replaced, inserted or cut.
fn mutated(seed: &'static str) -> impl Strategy<Value = String> {
    let len = seed.len();
    prop::collection::vec((0..len, any::<u8>(), 0u8..3), 1..6).prop_map(move |edits| {
        let mut bytes = seed.as_bytes().to_vec();
        for (at, byte, op) in edits {
            let at = at.min(bytes.len());
            match op {
                0 if at < bytes.len() => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ => {
                    bytes.truncate(at.max(1));
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Parses a file, checking the properties every answer must have.
fn parse_checked(text: &str, format: Format) {
    let start = Instant::now();
    let result = Config::parse(text, format);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "parsing took {:?}",
        start.elapsed()
    );
    if let Err(error) = result {
        let message = error.to_string();
        assert!(!message.is_empty());
        assert!(message.len() < 2000, "an error of {} bytes", message.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn any_yaml_text_parses_or_is_refused_clearly(text in file_text()) {
        parse_checked(&text, Format::Yaml);
    }

    #[test]
    fn any_toml_text_parses_or_is_refused_clearly(text in file_text()) {
        parse_checked(&text, Format::Toml);
    }

    #[test]
    fn mutated_yaml_files_parse_or_are_refused_clearly(text in mutated(SEED_YAML)) {
        parse_checked(&text, Format::Yaml);
    }

    #[test]
    fn mutated_toml_files_parse_or_are_refused_clearly(text in mutated(SEED_TOML)) {
        parse_checked(&text, Format::Toml);
    }

    #[test]
    fn rates_parse_or_are_refused(
        text in prop_oneof![
            "[0-9]{0,25}/[0-9]{0,25}(ms|s|m|h|d|us|ns|w|)",
            ".{0,40}",
        ]
    ) {
        match text.parse::<Rate>() {
            Ok(rate) => {
                prop_assert!(rate.count() > 0);
                prop_assert!(rate.window() > Duration::ZERO);
            }
            Err(error) => prop_assert!(!error.to_string().is_empty()),
        }
    }

    #[test]
    fn durations_parse_or_are_refused(
        text in prop_oneof!["[0-9]{0,25}(ms|s|m|h|d|us|w|)", ".{0,30}"]
    ) {
        if let Err(error) = parse_duration(&text) {
            prop_assert!(!error.to_string().is_empty());
        }
    }

    /// Whatever the forwarding headers say, the client is the peer or an address the headers
    /// named; a direct (untrusted) peer is always itself.
    #[test]
    fn forwarding_headers_never_panic_and_name_an_address_they_contain(
        values in prop::collection::vec(header_value(), 0..4),
        header in prop_oneof![
            Just(ForwardingHeader::XForwardedFor),
            Just(ForwardingHeader::Forwarded),
            Just(ForwardingHeader::XRealIp),
        ],
    ) {
        let name = match header {
            ForwardingHeader::XForwardedFor => "x-forwarded-for",
            ForwardingHeader::Forwarded => "forwarded",
            ForwardingHeader::XRealIp => "x-real-ip",
        };
        let mut headers = HeaderMap::new();
        for value in &values {
            if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
                headers.append(HeaderName::from_static(name), value);
            }
        }
        let extractor = ClientIp::new("ip")
            .trust(["10.0.0.0/8".parse().unwrap(), "2001:db8:ffff::/48".parse().unwrap()])
            .header(header);
        let proxy: IpAddr = "10.0.0.2".parse().unwrap();
        let client = extractor.resolve(proxy, &headers);
        let named = addresses_in(&values.join(","));
        prop_assert!(client == proxy || named.contains(&client), "{client} from {values:?}");
        let direct: IpAddr = "198.51.100.7".parse().unwrap();
        prop_assert_eq!(extractor.resolve(direct, &headers), direct);
    }
}

/// Every address written in `text` (with ports and zones cut off), canonical.
fn addresses_in(text: &str) -> Vec<IpAddr> {
    text.split([',', ';', '=', '[', ']', '"', ' ', '\t'])
        .filter_map(|token| {
            let token = token.split('%').next().unwrap_or(token);
            token.parse::<IpAddr>().ok().or_else(|| {
                let (host, _port) = token.rsplit_once(':')?;
                host.parse::<IpAddr>().ok()
            })
        })
        .map(|ip| ip.to_canonical())
        .collect()
}

/// Header values made of address-like pieces, separators, quotes and junk.
fn header_value() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "(for|by|proto|host)=",
        "\"",
        "\\[",
        "\\]",
        ";",
        ",",
        " ",
        "_[a-z]{1,5}",
        "unknown",
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        "(:[0-9]{1,5})",
        "2001:db8:[0-9a-f]{1,4}::[0-9a-f]{1,4}",
        "::ffff:[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        "%[a-z0-9]{1,4}",
        "[ -~]{0,6}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|parts| parts.concat())
}
