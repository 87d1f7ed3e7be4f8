//! Conformance: numbers chosen per request — overrides by value, `unlimited`, `deny`, `when` on
//! rules and limits, and addresses counted by network — answered the same way by every store,
//! with the counter carried across a tier change for every algorithm.

use super::Subject;
use crate::model::{Algorithm, Condition, Limit, Override, Rate};
use crate::{Check, Rule};

fn when(json: &str) -> Condition {
    serde_json::from_str(json).expect("a valid condition")
}

/// Behaviour: An override's numbers apply to the requests it picks out, and an identity whose
/// tier changes keeps its counter (for every algorithm: units used, or for GCRA the time they
/// stand for).
pub async fn overrides_pick_numbers_and_keep_the_counter(h: Subject) {
    let rate = |text: &str| text.parse::<Rate>().expect("a valid rate");
    let rules: Vec<(String, Rule)> = Algorithm::ALL
        .iter()
        .map(|&algorithm| {
            let mut limit = if algorithm.holds_leases() {
                Limit::concurrency(&["tenant"], 2, std::time::Duration::from_secs(3600))
            } else {
                Limit::new(&["tenant"], rate("2/1h"), algorithm)
            };
            let more = if algorithm.holds_leases() {
                Override {
                    when: when(r#"{"plan": "pro"}"#),
                    outcome: crate::model::OverrideOutcome::Numbers {
                        rate: None,
                        burst: None,
                        max_leases: Some(4),
                        quota: None,
                    },
                }
            } else {
                Override::numbers(when(r#"{"plan": "pro"}"#), Some(rate("4/1h")), None)
            };
            limit = limit.with_override(more);
            (format!("tiers_{algorithm}"), Rule::new(vec![limit]))
        })
        .collect();
    let limiter = h.limiter(rules.iter().map(|(n, r)| (n.as_str(), r.clone())).collect());
    let free = [("tenant", "t1")];
    let pro = [("tenant", "t1"), ("plan", "pro")];
    for (name, _) in &rules {
        for _ in 0..2 {
            assert!(limiter.check(name, &free).await.unwrap().allowed, "{name}");
        }
        let d = limiter.check(name, &free).await.unwrap();
        assert!(!d.allowed, "{name}: the free tier holds 2");
        let d = limiter.check(name, &pro).await.unwrap();
        if name.ends_with("gcra") {
            // GCRA keeps a time, not a count: the 2 units used at 30 min each stand for an hour,
            // which at the pro tier's 15 min a unit is its whole burst of 4.
            assert_eq!(
                (d.allowed, d.retry_after_ms),
                (false, Some(900_000)),
                "{name}"
            );
            h.advance_us(super::S * 900);
            assert!(limiter.check(name, &pro).await.unwrap().allowed, "{name}");
            assert!(!limiter.check(name, &pro).await.unwrap().allowed, "{name}");
            continue;
        }
        assert!(d.allowed, "{name}");
        assert_eq!(d.quota, 4, "{name}");
        assert_eq!(
            d.remaining, 1,
            "{name}: the 2 used on the free tier still count"
        );
        assert!(limiter.check(name, &pro).await.unwrap().allowed, "{name}");
        assert!(!limiter.check(name, &pro).await.unwrap().allowed, "{name}");
    }
}

/// Behaviour: `unlimited` counts nothing, `deny` refuses with its message, and `when` on a rule
/// or a limit decides whether it counts at all.
pub async fn unlimited_deny_and_conditions_count_only_what_they_should(h: Subject) {
    let rate = |text: &str| text.parse::<Rate>().expect("a valid rate");
    let api = Rule::new(vec![
        Limit::new(&["tenant"], rate("2/1h"), Algorithm::SlidingWindow)
            .with_override(Override::deny(
                when(r#"{"ip": {"cidr": ["203.0.113.0/24", "2001:db8:dead::/48"]}}"#),
                "refused",
            ))
            .with_override(Override::unlimited(when(r#"{"plan": "internal"}"#))),
        Limit::new(&[], rate("3/1h"), Algorithm::FixedWindow)
            .when(when(r#"{"path": {"prefix": "/api/"}}"#)),
    ]);
    let login = Rule::new(vec![Limit::new(&["ip"], rate("2/1h"), Algorithm::Gcra)])
        .when(when(r#"{"method": "POST", "path": "/login"}"#));
    let limiter = h.limiter(vec![("api", api), ("login", login)]);

    let internal = [
        ("tenant", "t1"),
        ("plan", "internal"),
        ("ip", "198.51.100.1"),
    ];
    for _ in 0..4 {
        let d = limiter.check("api", &internal).await.unwrap();
        assert!(d.allowed && d.limits.is_empty(), "{d:?}");
    }
    let plain = [("tenant", "t1"), ("ip", "198.51.100.1")];
    let d = limiter.check("api", &plain).await.unwrap();
    assert_eq!(
        (d.remaining, d.limits.len()),
        (1, 1),
        "nothing was counted before"
    );

    for ip in ["203.0.113.9", "2001:db8:dead:beef::1"] {
        let refused = [("tenant", "t2"), ("ip", ip)];
        let d = limiter.check("api", &refused).await.unwrap();
        assert!(!d.allowed, "{ip}");
        assert_eq!(d.reason.as_deref(), Some("refused"));
    }

    let under_api = [("tenant", "t3"), ("ip", "198.51.100.2"), ("path", "/api/x")];
    let d = limiter.check("api", &under_api).await.unwrap();
    assert_eq!(d.limits.len(), 2, "both limits apply under /api/");
    assert_eq!(d.limits[1].remaining, 2);

    let get = [("method", "GET"), ("path", "/login"), ("ip", "192.0.2.1")];
    for _ in 0..3 {
        let d = limiter.check("login", &get).await.unwrap();
        assert!(d.allowed && d.limits.is_empty());
    }
    let post = [("method", "POST"), ("path", "/login"), ("ip", "192.0.2.1")];
    let d = limiter.check("login", &post).await.unwrap();
    assert_eq!(d.remaining, 1, "GETs counted nothing");
    let peek = limiter
        .check_with("login", &post, Check::ONE.peek())
        .await
        .unwrap();
    assert_eq!(peek.remaining, 1);
}

/// Behaviour: an `ip` attribute is counted by its /64 for IPv6 (by address for IPv4), and a
/// limit's `group` sets other lengths.
pub async fn addresses_are_counted_by_network(h: Subject) {
    let rate = |text: &str| text.parse::<Rate>().expect("a valid rate");
    let by_64 = Rule::new(vec![Limit::new(
        &["ip"],
        rate("2/1h"),
        Algorithm::SlidingLog,
    )]);
    let by_24 = Rule::new(vec![
        Limit::new(&["ip"], rate("2/1h"), Algorithm::SlidingLog).with_group(
            "ip",
            crate::model::AddressGroup {
                ipv4: 24,
                ipv6: 128,
            },
        ),
    ]);
    let limiter = h.limiter(vec![("by_64", by_64), ("by_24", by_24)]);
    for ip in ["2001:db8:1:2::1", "2001:db8:1:2:ffff::2"] {
        assert!(limiter.check("by_64", &[("ip", ip)]).await.unwrap().allowed);
    }
    let same_64 = [("ip", "2001:db8:1:2::3")];
    assert!(!limiter.check("by_64", &same_64).await.unwrap().allowed);
    let middleware_form = [("ip", "2001:db8:1:2::/64")];
    assert!(
        !limiter
            .check("by_64", &middleware_form)
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check("by_64", &[("ip", "2001:db8:1:3::1")])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check("by_64", &[("ip", "192.0.2.1")])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check("by_64", &[("ip", "192.0.2.1")])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check("by_64", &[("ip", "192.0.2.2")])
            .await
            .unwrap()
            .allowed
    );
    for ip in ["192.0.2.3", "192.0.2.4"] {
        assert!(limiter.check("by_24", &[("ip", ip)]).await.unwrap().allowed);
    }
    assert!(
        !limiter
            .check("by_24", &[("ip", "192.0.2.5")])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check("by_24", &[("ip", "2001:db8::1")])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check("by_24", &[("ip", "2001:db8::2")])
            .await
            .unwrap()
            .allowed
    );
}

/// Behaviour: on a settable limit, an identity's run-time limit replaces the numbers an
/// override picked (as it replaces the limit's own), while a `deny` override is decided before
/// the store and still refuses that identity, counting nothing.
pub async fn runtime_limits_beat_numeric_overrides_and_deny_still_denies(h: Subject) {
    let rate = |text: &str| text.parse::<Rate>().expect("a valid rate");
    let api = Rule::new(vec![
        Limit::new(&["customer"], rate("2/1h"), Algorithm::SlidingWindow)
            .settable()
            .with_override(Override::deny(
                when(r#"{"ip": {"cidr": ["203.0.113.0/24"]}}"#),
                "refused",
            ))
            .with_override(Override::numbers(
                when(r#"{"plan": "pro"}"#),
                Some(rate("4/1h")),
                None,
            )),
    ]);
    let limiter = h.limiter(vec![("api", api)]);
    let identity = [("customer", "42")];
    let own = crate::model::RuntimeLimit::rate(rate("6/1h"));
    limiter
        .set_runtime_limit("api", None, &identity, &own)
        .await
        .unwrap();

    let refused = [("customer", "42"), ("plan", "pro"), ("ip", "203.0.113.9")];
    for _ in 0..3 {
        let d = limiter.check("api", &refused).await.unwrap();
        assert!(!d.allowed);
        assert_eq!(d.reason.as_deref(), Some("refused"));
        // Quota 0 is the deny's own answer: the store, asked, would have said 6.
        assert_eq!((d.limits.len(), d.limits[0].quota), (1, 0), "{d:?}");
    }

    let pro = [("customer", "42"), ("plan", "pro"), ("ip", "198.51.100.1")];
    let d = limiter.check("api", &pro).await.unwrap();
    assert!(d.allowed);
    assert_eq!(
        (d.quota, d.remaining),
        (6, 5),
        "the run-time limit beats the override's 4, and the denials counted nothing"
    );
    let mut passed = 1;
    for _ in 0..4 {
        passed += usize::from(limiter.check("api", &pro).await.unwrap().allowed);
    }
    assert_eq!(passed, 5, "one of the 6 is left");
    let free = [("customer", "42"), ("ip", "198.51.100.1")];
    let d = limiter.check("api", &free).await.unwrap();
    assert_eq!(
        (d.allowed, d.quota),
        (true, 6),
        "without an override as well"
    );
    assert!(!limiter.check("api", &pro).await.unwrap().allowed);

    // Another identity of the pro plan keeps the override's numbers.
    let other = [("customer", "7"), ("plan", "pro"), ("ip", "198.51.100.1")];
    let d = limiter.check("api", &other).await.unwrap();
    assert_eq!((d.allowed, d.quota, d.remaining), (true, 4, 3));
    let refused_other = [("customer", "7"), ("ip", "203.0.113.9")];
    let d = limiter.check("api", &refused_other).await.unwrap();
    assert_eq!((d.allowed, d.reason.as_deref()), (false, Some("refused")));
}
