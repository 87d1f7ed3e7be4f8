//! Behaviours of quotas: fixed windows whose windows are calendar periods (a day, week, month or
//! year in a zone, a month from its anchor day), decided in the period that holds the store's
//! time.

use super::{Subject, call, step};
use crate::model::{Algorithm, Micros, Period, PeriodUnit};

/// Microseconds since the epoch of a civil time in a zone, e.g. `at("2027-02-27T12:00", "UTC")`.
pub fn at(civil: &str, zone: &str) -> Micros {
    let time: jiff::civil::DateTime = civil.parse().expect("a civil time");
    let zoned = time.in_tz(zone).expect("a zone the bundled database knows");
    Micros::new(zoned.timestamp().as_microsecond() as u64)
}

/// A quota of `count` per `period` on `key(limit_id, "ip=1")`.
fn quota(limit_id: &str, count: u64, period: Period) -> crate::store::LimitCall {
    let mut s = step(Algorithm::FixedWindow, count, period.longest().into());
    s.params.period = Some(period.interned());
    call(limit_id, s)
}

const HOUR: Micros = Micros::from_secs(3600);
const DAY: Micros = Micros::from_secs(86_400);

/// Behaviour: A month anchored on the 31st resets on February's last day, then on 31 March.
pub async fn a_monthly_quota_resets_on_its_anchor_day(h: Subject) {
    let period = Period::new(PeriodUnit::Month).anchored(31).unwrap();
    let c = quota("monthly", 3, period);
    // The period [31 January, 28 February): half a day before it ends.
    h.clock.set_us(at("2027-02-27T12:00", "UTC"));
    for remaining in [2, 1, 0] {
        let o = h.one(&c).await;
        assert!(o.allowed);
        assert_eq!((o.remaining, o.reset_after_us), (remaining, 12 * HOUR));
    }
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(12 * HOUR));
    // Up to its last microsecond, the quota is used up.
    h.clock
        .set_us(at("2027-02-28T00:00", "UTC") - Micros::new(1));
    assert!(!h.one(&c).await.allowed);
    // 28 February opens the period up to 31 March: 31 days.
    h.clock.set_us(at("2027-02-28T00:00", "UTC"));
    let o = h.one(&c).await;
    assert!(o.allowed);
    assert_eq!((o.remaining, o.reset_after_us), (2, 31 * DAY));
    h.clock.set_us(at("2027-03-30T23:59:59", "UTC"));
    assert!(h.one(&c).await.allowed);
    assert!(h.one(&c).await.allowed);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(Micros::from_secs(1)));
    h.clock.set_us(at("2027-03-31T00:00", "UTC"));
    let o = h.one(&c).await;
    assert!(o.allowed);
    assert_eq!((o.remaining, o.reset_after_us), (2, 30 * DAY));
}

/// Behaviour: A day follows its zone across both daylight-saving changes, in two zones: it lasts
/// 23 hours in spring and 25 in autumn, from local midnight to the next.
pub async fn a_daily_quota_follows_its_zone_across_daylight_saving(h: Subject) {
    for (zone, spring, autumn) in [
        ("Europe/Berlin", "2026-03-29", "2026-10-25"),
        ("America/New_York", "2026-03-08", "2026-11-01"),
    ] {
        let period = Period::new(PeriodUnit::Day).in_zone(zone).unwrap();
        let c = quota(&format!("daily-{}", zone.replace('/', "-")), 2, period);
        for (day, hours) in [(spring, 23), (autumn, 25)] {
            // Half an hour into the day, in the zone's time.
            h.clock.set_us(at(&format!("{day}T00:30"), zone));
            let o = h.one(&c).await;
            assert!(o.allowed, "{zone} {day}");
            assert_eq!(o.reset_after_us, hours * HOUR - HOUR / 2, "{zone} {day}");
            assert!(h.one(&c).await.allowed);
            let o = h.one(&c).await;
            assert!(!o.allowed, "{zone} {day}");
            // The next local midnight opens the next day's quota.
            let next = at(&format!("{day}T00:00"), zone) + hours * HOUR;
            h.clock.set_us(next - Micros::new(1));
            assert!(!h.one(&c).await.allowed, "{zone} {day}");
            h.clock.set_us(next);
            let o = h.one(&c).await;
            assert!(o.allowed, "{zone} {day}");
            assert_eq!(
                (o.remaining, o.reset_after_us),
                (1, 24 * HOUR),
                "{zone} {day}"
            );
        }
    }
}

/// Behaviour: Weeks begin on Monday and years on 1 January, at local midnight; a peek at a quota
/// consumes nothing.
pub async fn weekly_and_yearly_quotas_begin_on_monday_and_new_year(h: Subject) {
    let week = quota("weekly", 1, Period::new(PeriodUnit::Week));
    let year = quota(
        "yearly",
        1,
        Period::new(PeriodUnit::Year).in_zone("Asia/Tokyo").unwrap(),
    );
    // Sunday 29 November 2026, 23:00 UTC; New Year's Eve in Tokyo, a second before midnight.
    h.clock.set_us(at("2026-11-29T23:00", "UTC"));
    let peek = h
        .decide(std::slice::from_ref(&week), crate::algorithm::Mode::Peek)
        .await;
    assert!(peek.outcomes[0].allowed);
    assert!(h.one(&week).await.allowed);
    assert!(!h.one(&week).await.allowed);
    h.clock.set_us(at("2026-11-30T00:00", "UTC"));
    let o = h.one(&week).await;
    assert!(o.allowed);
    assert_eq!(o.reset_after_us, 7 * DAY);
    h.clock.set_us(at("2026-12-31T23:59:59", "Asia/Tokyo"));
    assert!(h.one(&year).await.allowed);
    let o = h.one(&year).await;
    assert_eq!(
        (o.allowed, o.retry_after_us),
        (false, Some(Micros::from_secs(1)))
    );
    h.clock.set_us(at("2027-01-01T00:00", "Asia/Tokyo"));
    let o = h.one(&year).await;
    assert!(o.allowed);
    assert_eq!(o.reset_after_us, 365 * DAY);
}

/// Behaviour: A quota that admits past itself (`over: allow`) admits and counts every request
/// that passes, marks those past the quota `over_quota`, counts nothing for a request another
/// limit refuses, and starts again with its period.
pub async fn a_quota_that_admits_past_itself_marks_the_overage(h: Subject) {
    use crate::model::{Limit, Over};
    let mut plan = Limit::quota(&["tenant"], 2, Period::new(PeriodUnit::Day));
    plan.over = Over::Allow;
    let per_ip = Limit::new(&["ip"], "1/1h".parse().unwrap(), Algorithm::FixedWindow);
    let limiter = h.limiter(vec![
        ("plan", crate::Rule::new(vec![plan.clone()])),
        ("both", crate::Rule::new(vec![plan, per_ip])),
    ]);
    h.clock.set_us(at("2027-03-01T10:00", "UTC"));
    for i in 0..4 {
        let d = limiter.check("plan", &[("tenant", "t")]).await.unwrap();
        assert!(d.allowed && !d.degraded, "{i}: {d:?}");
        assert_eq!(d.over_quota, i >= 2, "{i}: {d:?}");
        assert_eq!(d.limits[0].over_quota, i >= 2);
        assert!(!d.limits[0].shadow);
    }
    let usage = limiter.usage("plan", &[("tenant", "t")]).await.unwrap();
    let u = &usage.limits[0];
    assert_eq!((u.limit, u.used, u.remaining, u.over), (2, 4, 0, true));
    // Another limit's refusal counts nothing on the quota, past it or not.
    let check = async |ip: &str| {
        let d = limiter
            .check("both", &[("tenant", "u"), ("ip", ip)])
            .await
            .unwrap();
        assert!(!d.degraded);
        d
    };
    let used = async || {
        limiter
            .usage("both", &[("tenant", "u"), ("ip", "-")])
            .await
            .unwrap()
            .limits[0]
            .used
    };
    assert!(check("a").await.allowed);
    assert!(!check("a").await.allowed);
    assert_eq!(
        used().await,
        1,
        "refused by the address's limit: not counted"
    );
    assert!(check("b").await.allowed);
    let over = check("c").await;
    assert!(over.allowed && over.over_quota);
    assert_eq!(used().await, 3);
    let refused = check("c").await;
    assert!(!refused.allowed);
    assert_eq!(
        used().await,
        3,
        "past the quota, refused by the other limit: not counted"
    );
    // The next day starts from nothing.
    h.clock.set_us(at("2027-03-02T00:00", "UTC"));
    let d = limiter.check("plan", &[("tenant", "t")]).await.unwrap();
    assert!(d.allowed && !d.over_quota);
    assert_eq!(d.remaining, 1);
}
