//! Credentials in store URLs, against servers that demand them: data servers whose default user
//! is off and that take one ACL user, and sentinels with a password of their own
//! (`requirepass`). The ACL user in the URL decides on one server and behind the sentinels,
//! through a failover (the promoted replica is reached as that user too); a wrong password, or
//! none, is a store failure that the fail policy answers, with a reason that shows no password.
#![cfg(feature = "redis")]

use crate::common;

use std::time::Duration;

use common::{unique_prefix, url_store};
use sluice::model::{Algorithm, Limit};
use sluice::{Decision, FailPolicy, Limiter, Rule};
use sluice_test_support::{Members, RedisSentinel, SentinelAuth, wait_until};

const TIMEOUT: Duration = Duration::from_millis(300);

fn auth() -> SentinelAuth {
    SentinelAuth {
        user: "limiter".into(),
        password: "datapw42".into(),
        sentinel_password: "watchpw42".into(),
    }
}

async fn limiter(url: &str) -> Limiter {
    Limiter::builder(url_store(url, None, &unique_prefix()).await)
        .rule(
            "exact",
            Rule::new(vec![Limit::new(
                &["ip"],
                "3/1d".parse().unwrap(),
                Algorithm::SlidingLog,
            )]),
        )
        .fail(FailPolicy::Closed)
        .timeout(TIMEOUT)
        .build()
        .unwrap()
}

async fn decide(limiter: &Limiter, ip: &str) -> Decision {
    limiter.check("exact", &[("ip", ip)]).await.unwrap()
}

/// Three admitted, the fourth refused, none degraded: Redis decided every one.
async fn admits_exactly_three(limiter: &Limiter, ip: &str) {
    for n in 0..3 {
        let d = decide(limiter, ip).await;
        assert!(d.allowed && !d.degraded, "{ip} #{n}: {d:?}");
    }
    let d = decide(limiter, ip).await;
    assert!(!d.allowed && !d.degraded, "{ip} #4: {d:?}");
}

/// Refused by the fail policy, with a reason that names no password.
async fn degraded_without_leaking(limiter: &Limiter, what: &str) {
    let d = decide(limiter, "9.9.9.9").await;
    assert!(!d.allowed && d.degraded, "{what}: {d:?}");
    let reason = d.reason.unwrap_or_default();
    for secret in ["datapw42", "watchpw42", "wrongpw"] {
        assert!(!reason.contains(secret), "{what}: {reason}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_decides_on_one_server_and_behind_password_sentinels_through_a_failover() {
    let mut set = RedisSentinel::start_with_auth(auth());
    let primary = set
        .primary()
        .expect("the sentinels answer with their password");

    // One server, as the ACL user; then without it, and with a wrong password.
    let single = format!("redis://limiter:datapw42@127.0.0.1:{primary}/");
    admits_exactly_three(&limiter(&single).await, "1.1.1.1").await;
    let anonymous = limiter(&format!("redis://127.0.0.1:{primary}/")).await;
    degraded_without_leaking(&anonymous, "no credentials").await;
    let wrong = limiter(&format!("redis://limiter:wrongpw@127.0.0.1:{primary}/")).await;
    degraded_without_leaking(&wrong, "a wrong password").await;

    // Behind the sentinels, asked with their own password.
    let behind = limiter(&set.url()).await;
    admits_exactly_three(&behind, "2.2.2.2").await;
    let unasked = set.url().replace("?sentinel_password=watchpw42", "");
    degraded_without_leaking(&limiter(&unasked).await, "sentinels without their password").await;

    // A failover: the replica is promoted and reached as the same user.
    let set = tokio::task::spawn_blocking(move || {
        set.kill(primary);
        assert!(
            wait_until(Duration::from_secs(20), || {
                set.primary().is_some_and(|p| {
                    p != primary && set.server_cli(p, &["SET", "failover-probe", "1"]) == "OK"
                })
            }),
            "the sentinels promote the replica"
        );
        set
    })
    .await
    .unwrap();
    let resumed = wait_until_decided(&behind).await;
    assert!(resumed, "decisions come from the promoted replica again");
    admits_exactly_three(&behind, "3.3.3.3").await;
    drop(set);
}

/// Polls until a decision is the store's again (the sentinels are asked again after failures).
async fn wait_until_decided(limiter: &Limiter) -> bool {
    for n in 0..400 {
        if !decide(limiter, &format!("4.4.{}.{}", n / 250, n % 250))
            .await
            .degraded
        {
            return true;
        }
        // Poll interval while the store finds the new primary, not a wait for a decision's time.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
