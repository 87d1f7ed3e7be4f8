//! The limiter end to end on the memory store: identities, costs, multi-limit rules, blocks,
//! penalties, shadow mode, switches, rule changes, admin operations and fail policies.
//! Time is a `ManualClock`; nothing sleeps.

use sluice::Check;
use sluice::Options;
use std::sync::Arc;
use std::time::Duration;

use sluice::model::{Algorithm, Limit, Penalty, Rule};
use sluice::store::BlocksCursor;
use sluice::{Error, FailPolicy, Limiter, ManualClock, MemoryStore};

use crate::common;
use common::DownStore;

const SEC: Duration = Duration::from_secs(1);

fn limit(by: &[&str], rate: &str, algorithm: Algorithm) -> Limit {
    Limit::new(by, rate.parse().unwrap(), algorithm)
}

fn limiter_with(clock: &ManualClock, rules: Vec<(&str, Rule)>) -> Limiter {
    Limiter::builder(MemoryStore::with_clock(Arc::new(clock.clone())))
        .clock(Arc::new(clock.clone()))
        .rules(rules.into_iter().map(|(n, r)| (n.to_string(), r)))
        .build()
        .unwrap()
}

#[tokio::test]
async fn seed_000_five_per_ten_seconds_then_the_sixth_waits() {
    let clock = ManualClock::at_2026();
    let limiter = limiter_with(
        &clock,
        vec![(
            "employee",
            Rule::new(vec![limit(&["id"], "5/10s", Algorithm::SlidingLog)]),
        )],
    );
    for i in 0..5 {
        let d = limiter.check("employee", &[("id", "7")]).await.unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 4 - i);
        clock.advance(SEC);
    }
    let sixth = limiter.check("employee", &[("id", "7")]).await.unwrap();
    assert!(!sixth.allowed);
    assert_eq!(sixth.retry_after_ms, Some(5_000));
    // Another identity is not affected by this one.
    assert!(
        limiter
            .check("employee", &[("id", "8")])
            .await
            .unwrap()
            .allowed
    );
    clock.advance(5 * SEC);
    assert!(
        limiter
            .check("employee", &[("id", "7")])
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn identity_fallback_says_which_attribute_counted() {
    let clock = ManualClock::at_2026();
    let limiter = limiter_with(
        &clock,
        vec![(
            "browse",
            Rule::new(vec![limit(&["member|session|ip"], "2/1m", Algorithm::Gcra)]),
        )],
    );
    let guest = limiter
        .check("browse", &[("session", "s1"), ("ip", "1.2.3.4")])
        .await
        .unwrap();
    assert_eq!(guest.limits[0].attributes, ["session"]);
    let anonymous = limiter.check("browse", &[("ip", "1.2.3.4")]).await.unwrap();
    assert_eq!(anonymous.limits[0].attributes, ["ip"]);
    assert_eq!(anonymous.remaining, 1, "the IP has its own counter");
    let err = limiter
        .check("browse", &[("user_agent", "x")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::MissingAttribute { attribute, .. } if attribute == "member|session|ip"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_input_is_an_error_and_changes_nothing() {
    let clock = ManualClock::at_2026();
    let limiter = limiter_with(
        &clock,
        vec![(
            "login",
            Rule::new(vec![limit(&["ip"], "1/1m", Algorithm::SlidingLog)]),
        )],
    );
    assert!(matches!(
        limiter.check("nope", &[("ip", "a")]).await,
        Err(Error::UnknownRule { .. })
    ));
    let long = "1".repeat(2000);
    assert!(matches!(
        limiter.check("login", &[("ip", long.as_str())]).await,
        Err(Error::AttributeTooLong { len: 2000, .. })
    ));
    assert!(matches!(
        limiter
            .check_with("login", &[("ip", "a")], Check::cost(u64::MAX))
            .await,
        Err(Error::InvalidCost { .. })
    ));
    assert!(
        limiter
            .check("login", &[("ip", "a")])
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn cost_zero_peeks_and_cost_above_capacity_is_denied_without_counting() {
    let clock = ManualClock::at_2026();
    let limiter = limiter_with(
        &clock,
        vec![(
            "export",
            Rule::new(vec![limit(&["user"], "10/1m", Algorithm::TokenBucket)]),
        )],
    );
    let attrs = [("user", "u")];
    let d = limiter
        .check_with("export", &attrs, Check::cost(11))
        .await
        .unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, None, "it can never pass");
    assert!(d.reason.unwrap().contains("exceeds the capacity 10"));
    assert!(
        limiter
            .check_with("export", &attrs, Check::cost(7))
            .await
            .unwrap()
            .allowed
    );
    let peek = limiter
        .check_with("export", &attrs, Check::cost(0))
        .await
        .unwrap();
    assert!(peek.allowed);
    assert_eq!(peek.remaining, 3);
    assert!(
        !limiter
            .check_with("export", &attrs, Check::cost(4).peek())
            .await
            .unwrap()
            .allowed
    );
    assert_eq!(
        limiter
            .check_with("export", &attrs, Check::cost(3))
            .await
            .unwrap()
            .remaining,
        0
    );
}

#[tokio::test]
async fn seed_001_member_and_ip_must_both_be_under_all_or_nothing() {
    let clock = ManualClock::at_2026();
    let limiter = limiter_with(
        &clock,
        vec![(
            "bank_account_update",
            Rule::new(vec![
                limit(&["member"], "2/120s", Algorithm::SlidingLog),
                limit(&["ip"], "2/120s", Algorithm::SlidingLog),
            ]),
        )],
    );
    let check = |member: &'static str, ip: &'static str| {
        let limiter = limiter.clone();
        async move {
            limiter
                .check("bank_account_update", &[("member", member), ("ip", ip)])
                .await
                .unwrap()
        }
    };
    assert!(check("alice", "1.1.1.1").await.allowed);
    assert!(check("alice", "1.1.1.1").await.allowed);
    // Alice from another IP: her member limit denies, and the new IP consumes nothing.
    let d = check("alice", "2.2.2.2").await;
    assert!(!d.allowed);
    assert!(!d.limits[0].allowed && d.limits[1].allowed);
    assert!(check("bob", "2.2.2.2").await.allowed);
    assert!(check("carol", "2.2.2.2").await.allowed);
    assert!(
        !check("dave", "2.2.2.2").await.allowed,
        "the IP is now at its limit"
    );
}

#[tokio::test]
async fn seed_001_block_lock_gives_an_unlock_time_for_countdowns() {
    let clock = ManualClock::at_2026();
    let mut l = limit(&["login_id"], "3/30m", Algorithm::SlidingLog);
    l.block = Some(Duration::from_secs(1800));
    let limiter = limiter_with(&clock, vec![("secure_forgot_account", Rule::new(vec![l]))]);
    let attrs = [("login_id", "u1")];
    for _ in 0..3 {
        assert!(
            limiter
                .check("secure_forgot_account", &attrs)
                .await
                .unwrap()
                .allowed
        );
    }
    clock.advance(60 * SEC);
    let denied = limiter
        .check("secure_forgot_account", &attrs)
        .await
        .unwrap();
    let now_ms = 1_767_225_600_000 + 60_000;
    assert_eq!(denied.blocked_until_ms, Some(now_ms + 1_800_000));
    assert_eq!(denied.retry_after_ms, Some(1_800_000));
    // The window frees up after 30 minutes, but the block holds until its own end.
    clock.advance(Duration::from_secs(1799));
    assert!(
        !limiter
            .check("secure_forgot_account", &attrs)
            .await
            .unwrap()
            .allowed
    );
    clock.advance(SEC);
    assert!(
        limiter
            .check("secure_forgot_account", &attrs)
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn seed_002_warning_then_ban() {
    let clock = ManualClock::at_2026();
    let l = limit(&["member"], "5/1m", Algorithm::SlidingLog).with_penalty(Penalty {
        warn_after: 3,
        ban_after: 5,
        ban: Duration::from_secs(1800),
        memory: Duration::from_secs(3600),
    });
    let limiter = limiter_with(&clock, vec![("mini_game", Rule::new(vec![l]))]);
    let attrs = [("member", "m1")];
    for _ in 0..5 {
        assert!(limiter.check("mini_game", &attrs).await.unwrap().allowed);
    }
    let mut seen = Vec::new();
    for _ in 0..5 {
        let d = limiter.check("mini_game", &attrs).await.unwrap();
        seen.push((d.violations, d.warning, d.blocked_until_ms.is_some()));
    }
    assert_eq!(
        seen,
        [
            (1, false, false),
            (2, false, false),
            (3, true, false),
            (4, true, false),
            (5, true, true)
        ]
    );
    // Banned for 30 minutes: a fresh window does not help.
    clock.advance(Duration::from_secs(120));
    let d = limiter.check("mini_game", &attrs).await.unwrap();
    assert!(!d.allowed && d.warning);
    clock.advance(Duration::from_secs(1800));
    let d = limiter.check("mini_game", &attrs).await.unwrap();
    assert!(d.allowed);
    assert!(d.warning, "violations are remembered for an hour");
}

#[tokio::test]
async fn shadow_rules_allow_but_report() {
    let clock = ManualClock::at_2026();
    let mut rule = Rule::new(vec![limit(&[], "1/1s", Algorithm::Gcra)]);
    rule.shadow = true;
    let limiter = limiter_with(&clock, vec![("global_payments", rule)]);
    let no_attrs: [(&str, &str); 0] = [];
    assert!(
        limiter
            .check("global_payments", &no_attrs)
            .await
            .unwrap()
            .allowed
    );
    let d = limiter.check("global_payments", &no_attrs).await.unwrap();
    assert!(d.allowed && d.shadow);
    assert!(!d.limits[0].allowed, "the limit itself denied");
}

#[tokio::test]
async fn switches_turn_rules_and_the_limiter_off() {
    let clock = ManualClock::at_2026();
    let mut off = Rule::new(vec![limit(&["ip"], "1/1m", Algorithm::Gcra)]);
    off.enabled = false;
    let limiter = limiter_with(
        &clock,
        vec![
            ("off", off),
            (
                "on",
                Rule::new(vec![limit(&["ip"], "1/1m", Algorithm::Gcra)]),
            ),
        ],
    );
    for _ in 0..3 {
        assert!(limiter.check("off", &[("ip", "a")]).await.unwrap().allowed);
    }
    assert!(limiter.check("on", &[("ip", "a")]).await.unwrap().allowed);
    assert!(!limiter.check("on", &[("ip", "a")]).await.unwrap().allowed);
    limiter.set_enabled(false);
    assert!(limiter.check("on", &[("ip", "a")]).await.unwrap().allowed);
    limiter.set_enabled(true);
    assert!(!limiter.check("on", &[("ip", "a")]).await.unwrap().allowed);
}

#[tokio::test]
async fn changing_the_count_keeps_live_counters_and_bad_rules_keep_the_old_ones() {
    let clock = ManualClock::at_2026();
    let rule = |rate: &str| Rule::new(vec![limit(&["ip"], rate, Algorithm::SlidingLog)]);
    let limiter = limiter_with(&clock, vec![("api", rule("3/1m"))]);
    for _ in 0..3 {
        limiter.check("api", &[("ip", "a")]).await.unwrap();
    }
    limiter
        .set_rules([("api".to_string(), rule("5/1m"))])
        .unwrap();
    let d = limiter.check("api", &[("ip", "a")]).await.unwrap();
    assert_eq!(
        (d.allowed, d.remaining),
        (true, 1),
        "the three earlier requests still count"
    );
    let bad = Rule::new(vec![limit(&["ip"], "5/1m", Algorithm::Gcra).with_burst(0)]);
    assert!(matches!(
        limiter.set_rules([("api".to_string(), bad)]),
        Err(Error::InvalidRule { .. })
    ));
    assert_eq!(limiter.rules()["api"].definition, rule("5/1m"));
    limiter
        .set_rules([("api".to_string(), rule("5/2m"))])
        .unwrap();
    let d = limiter.check("api", &[("ip", "a")]).await.unwrap();
    assert_eq!(d.remaining, 4, "a new window starts fresh counters");
}

#[tokio::test]
async fn admin_block_unblock_reset_and_list() {
    let clock = ManualClock::at_2026();
    let limiter = limiter_with(
        &clock,
        vec![(
            "login",
            Rule::new(vec![limit(&["ip"], "2/1m", Algorithm::Gcra)]),
        )],
    );
    let attrs = [("ip", "9.9.9.9")];
    let until = limiter
        .block("login", &attrs, Duration::from_secs(900))
        .await
        .unwrap();
    assert_eq!(until, 1_767_225_600_000 + 900_000);
    let d = limiter.check("login", &attrs).await.unwrap();
    assert_eq!((d.allowed, d.blocked_until_ms), (false, Some(until)));
    let first = BlocksCursor {
        after: None,
        count: 10,
    };
    let list = limiter.blocks("login", &first).await.unwrap();
    assert_eq!((list.next, list.skipped), (None, 0));
    let blocks = list.blocks;
    assert_eq!(blocks.len(), 1);
    assert_eq!(
        (blocks[0].identity.as_str(), blocks[0].blocked_until_ms),
        ("ip=9.9.9.9", until)
    );
    assert!(limiter.unblock("login", &attrs).await.unwrap());
    assert!(!limiter.unblock("login", &attrs).await.unwrap());
    assert!(limiter.check("login", &attrs).await.unwrap().allowed);
    assert!(limiter.check("login", &attrs).await.unwrap().allowed);
    assert!(!limiter.check("login", &attrs).await.unwrap().allowed);
    limiter.reset("login", &attrs).await.unwrap();
    assert!(limiter.check("login", &attrs).await.unwrap().allowed);
    assert!(
        limiter
            .blocks("login", &first)
            .await
            .unwrap()
            .blocks
            .is_empty()
    );
}

fn down_limiter(clock: &ManualClock, store: Arc<DownStore>) -> Limiter {
    let rule = |fail| {
        let mut r = Rule::new(vec![limit(&["ip"], "2/1m", Algorithm::Gcra)]);
        r.fail = Some(fail);
        r
    };
    Limiter::builder(store)
        .clock(Arc::new(clock.clone()))
        .options(Options {
            timeout: Duration::from_millis(50),
            ..Options::default()
        })
        .rule("open", rule(FailPolicy::Open))
        .rule("closed", rule(FailPolicy::Closed))
        .rule("local", rule(FailPolicy::Local))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn fail_policies_decide_when_the_store_is_down() {
    let clock = ManualClock::at_2026();
    let limiter = down_limiter(&clock, Arc::new(DownStore::default()));
    let attrs = [("ip", "1.2.3.4")];
    let open = limiter.check("open", &attrs).await.unwrap();
    assert!(open.allowed && open.degraded);
    let closed = limiter.check("closed", &attrs).await.unwrap();
    assert!(!closed.allowed && closed.degraded);
    // Local: this node's own limiter decides, with the same limit.
    let mut allowed = Vec::new();
    for _ in 0..3 {
        let d = limiter.check("local", &attrs).await.unwrap();
        assert!(d.degraded);
        allowed.push(d.allowed);
    }
    assert_eq!(allowed, [true, true, false]);
    // Admin operations have no fail policy: the error is reported.
    assert!(matches!(
        limiter.block("open", &attrs, SEC).await,
        Err(Error::Store(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_hanging_store_is_cut_off_at_the_deadline_then_skipped() {
    let clock = ManualClock::at_2026();
    let store = Arc::new(DownStore::hanging());
    let limiter = down_limiter(&clock, store.clone());
    let attrs = [("ip", "1.2.3.4")];
    for _ in 0..3 {
        let started = tokio::time::Instant::now();
        let d = limiter.check("open", &attrs).await.unwrap();
        assert!(d.degraded && d.allowed);
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(50),
            "answered at the deadline"
        );
    }
    assert!(limiter.store_skipped());
    // While skipped, requests do not wait on the store at all.
    let started = tokio::time::Instant::now();
    for _ in 0..100 {
        assert!(limiter.check("open", &attrs).await.unwrap().degraded);
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(store.calls(), 3);
    // After the back-off one request probes the store again.
    clock.advance(Duration::from_millis(250));
    limiter.check("open", &attrs).await.unwrap();
    assert_eq!(store.calls(), 4);
}
