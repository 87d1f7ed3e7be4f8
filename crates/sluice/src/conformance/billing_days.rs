//! Conformance: a billing day per identity, set at run time on a settable monthly quota. Each
//! identity's month runs from its own day, in every decision and usage reading; a new day keeps
//! what the identity used in its current period, and so does going back to the rule's day.

use super::Subject;
use super::quotas::at;
use crate::model::{Limit, Period, PeriodUnit, RuntimeLimit};
use crate::{Limiter, Rule};

/// A rule `plan` of `quota` calls a month from the 1st, settable per tenant.
fn plan(h: &Subject, quota: u64) -> Limiter {
    let month = Period::new(PeriodUnit::Month);
    let limit = Limit::quota(&["tenant"], quota, month).settable();
    h.limiter(vec![("plan", Rule::new(vec![limit]))])
}

fn day(anchor: u8) -> RuntimeLimit {
    RuntimeLimit {
        anchor: Some(anchor),
        ..RuntimeLimit::default()
    }
}

/// Sets tenant `t`'s billing day.
async fn set_day(limiter: &Limiter, t: &str, anchor: u8) {
    let set = limiter
        .set_runtime_limit("plan", None, &[("tenant", t)], &day(anchor))
        .await
        .unwrap();
    assert_eq!(set.set, day(anchor), "the listing shows the day alone");
}

/// Tenant `t`'s usage: (used, period start, period end), times in ms.
async fn usage(limiter: &Limiter, t: &str) -> (u64, u64, u64) {
    let usage = limiter.usage("plan", &[("tenant", t)]).await.unwrap();
    let u = &usage.limits[0];
    (u.used, u.period_start_ms.unwrap(), u.period_end_ms.unwrap())
}

fn ms(civil: &str) -> u64 {
    at(civil, "UTC").as_millis()
}

/// Behaviour: An identity with its own billing day counts its month from that day, in its
/// decisions' reset and retry times and in its usage, while the others keep the rule's; an entry
/// that sets only the day keeps following the rule's quota, and is listed as the day alone.
pub async fn a_billing_day_per_identity_decides_its_own_month(h: Subject) {
    let limiter = plan(&h, 2);
    h.clock.set_us(at("2027-03-20T00:00", "UTC"));
    set_day(&limiter, "a", 15).await;
    for t in ["a", "b"] {
        for _ in 0..2 {
            assert!(
                limiter
                    .check("plan", &[("tenant", t)])
                    .await
                    .unwrap()
                    .allowed
            );
        }
    }
    let a = limiter.check("plan", &[("tenant", "a")]).await.unwrap();
    let b = limiter.check("plan", &[("tenant", "b")]).await.unwrap();
    assert!(!a.allowed && !b.allowed && !a.degraded && !b.degraded);
    assert_eq!(a.quota, 2, "the rule's quota");
    let now = ms("2027-03-20T00:00");
    assert_eq!(a.retry_after_ms, Some(ms("2027-04-15T00:00") - now));
    assert_eq!(b.retry_after_ms, Some(ms("2027-04-01T00:00") - now));
    assert_eq!(a.reset_after_ms, ms("2027-04-15T00:00") - now);
    assert_eq!(
        usage(&limiter, "a").await,
        (2, ms("2027-03-15T00:00"), ms("2027-04-15T00:00"))
    );
    assert_eq!(
        usage(&limiter, "b").await,
        (2, ms("2027-03-01T00:00"), ms("2027-04-01T00:00"))
    );
    let listed = limiter.runtime_limits("plan", None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].identity.as_str(), &listed[0].set),
        ("tenant=a", &day(15))
    );
    // The 1st of April starts the rule's month, not tenant a's.
    h.clock.set_us(at("2027-04-01T00:00", "UTC"));
    assert!(
        limiter
            .check("plan", &[("tenant", "b")])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        !limiter
            .check("plan", &[("tenant", "a")])
            .await
            .unwrap()
            .allowed
    );
    h.clock.set_us(at("2027-04-15T00:00", "UTC"));
    let a = limiter.check("plan", &[("tenant", "a")]).await.unwrap();
    assert!(a.allowed);
    assert_eq!(a.remaining, 1);
    // Its quota set too, the day stays.
    let both = RuntimeLimit {
        quota: Some(3),
        ..day(15)
    };
    limiter
        .set_runtime_limit("plan", None, &[("tenant", "a")], &both)
        .await
        .unwrap();
    let a = limiter.check("plan", &[("tenant", "a")]).await.unwrap();
    assert_eq!((a.allowed, a.quota, a.remaining), (true, 3, 1));
    assert_eq!(
        usage(&limiter, "a").await,
        (2, ms("2027-04-15T00:00"), ms("2027-05-15T00:00"))
    );
}

/// Behaviour: Changing an identity's billing day mid-period keeps what it used: the count of its
/// current period becomes that of the period the new day gives, and removing its entry goes
/// back to the rule's day the same way.
pub async fn changing_the_billing_day_keeps_the_count(h: Subject) {
    let limiter = plan(&h, 3);
    let t = [("tenant", "t")];
    h.clock.set_us(at("2027-03-20T00:00", "UTC"));
    for _ in 0..2 {
        assert!(limiter.check("plan", &t).await.unwrap().allowed);
    }
    set_day(&limiter, "t", 15).await;
    assert_eq!(
        usage(&limiter, "t").await,
        (2, ms("2027-03-15T00:00"), ms("2027-04-15T00:00"))
    );
    assert!(limiter.check("plan", &t).await.unwrap().allowed);
    assert!(!limiter.check("plan", &t).await.unwrap().allowed);
    // The 25th: the period from 25 February holds today, and the 3 units come along.
    set_day(&limiter, "t", 25).await;
    let d = limiter.check("plan", &t).await.unwrap();
    assert!(!d.allowed);
    assert_eq!(
        d.retry_after_ms,
        Some(ms("2027-03-25T00:00") - ms("2027-03-20T00:00"))
    );
    h.clock.set_us(at("2027-03-25T00:00", "UTC"));
    assert!(limiter.check("plan", &t).await.unwrap().allowed);
    // Back to the rule's day (the 1st): the unit used since the 25th is kept.
    h.clock.set_us(at("2027-03-26T00:00", "UTC"));
    assert!(
        limiter
            .remove_runtime_limit("plan", None, &t)
            .await
            .unwrap()
    );
    assert_eq!(
        usage(&limiter, "t").await,
        (1, ms("2027-03-01T00:00"), ms("2027-04-01T00:00"))
    );
    assert!(limiter.check("plan", &t).await.unwrap().allowed);
    assert!(limiter.check("plan", &t).await.unwrap().allowed);
    assert!(!limiter.check("plan", &t).await.unwrap().allowed);
}

/// Behaviour: An identity's billing day of 31 falls on February's last day and on 31 March
/// again, as the rule's own anchor does.
pub async fn a_billing_day_of_31_falls_on_februarys_last_day(h: Subject) {
    let limiter = plan(&h, 1);
    let t = [("tenant", "t")];
    h.clock.set_us(at("2027-02-27T12:00", "UTC"));
    set_day(&limiter, "t", 31).await;
    assert!(limiter.check("plan", &t).await.unwrap().allowed);
    let d = limiter.check("plan", &t).await.unwrap();
    assert!(!d.allowed, "{d:?}");
    assert_eq!(d.retry_after_ms, Some(12 * 3_600_000));
    h.clock.set_us(at("2027-02-28T00:00", "UTC"));
    let d = limiter.check("plan", &t).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.reset_after_ms, 31 * 86_400_000, "to 31 March");
    assert_eq!(
        usage(&limiter, "t").await,
        (1, ms("2027-02-28T00:00"), ms("2027-03-31T00:00"))
    );
}

/// Behaviour: In a rule of several limits, an identity's own billing day holds for its quota:
/// a request another limit refuses leaves nothing counted in that identity's period (on a Redis
/// Cluster the limits live in different slots, and what the quota took is given back to the
/// period of the identity's day).
pub async fn a_billing_day_holds_in_a_rule_of_several_limits(h: Subject) {
    let month = Period::new(PeriodUnit::Month);
    let quota = Limit::quota(&["tenant"], 10, month).settable();
    let per_ip = Limit::new(
        &["ip"],
        "1/1h".parse().unwrap(),
        crate::model::Algorithm::FixedWindow,
    );
    let limiter = h.limiter(vec![("plan", Rule::new(vec![quota, per_ip]))]);
    h.clock.set_us(at("2027-03-20T00:00", "UTC"));
    limiter
        .set_runtime_limit("plan", None, &[("tenant", "t"), ("ip", "-")], &day(15))
        .await
        .unwrap();
    let check = async |ip: &str| {
        let d = limiter
            .check("plan", &[("tenant", "t"), ("ip", ip)])
            .await
            .unwrap();
        assert!(!d.degraded, "{d:?}");
        d
    };
    let used = async || {
        let usage = limiter
            .usage("plan", &[("tenant", "t"), ("ip", "-")])
            .await
            .unwrap();
        let u = &usage.limits[0];
        (u.used, u.period_start_ms.unwrap())
    };
    // Several addresses, so that on a Cluster some live in slots after the quota's (consumed
    // there first, then given back) and some before.
    for (n, ip) in (1..).zip(["a", "b", "c", "d", "e", "f"]) {
        assert!(check(ip).await.allowed);
        assert!(!check(ip).await.allowed);
        assert_eq!(
            used().await,
            (n, ms("2027-03-15T00:00")),
            "refused by the address's limit: not counted"
        );
    }
    let d = check("g").await;
    assert!(d.allowed);
    assert_eq!(
        d.limits[0].reset_after_ms,
        ms("2027-04-15T00:00") - ms("2027-03-20T00:00")
    );
    assert_eq!(used().await, (7, ms("2027-03-15T00:00")));
}
