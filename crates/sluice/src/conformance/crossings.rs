//! Behaviours of quota notices (`notify`): each threshold of each identity is crossed by one
//! decision per period, read from the store's own answer, whatever the concurrency.

use std::sync::Arc;

use super::Subject;
use super::quotas::at;
use crate::limiter::QuotaCrossing;
use crate::model::{Limit, Notify, Over, Period, PeriodUnit, Threshold};
use crate::{Check, Rule};

fn notifying(quota: u64, at: &[f64]) -> Limit {
    let mut limit = Limit::quota(&["tenant"], quota, Period::new(PeriodUnit::Month));
    limit.notify = Some(Notify {
        at: at.iter().map(|&s| Threshold::new(s).unwrap()).collect(),
        webhook: "http://127.0.0.1:9/quota".to_string(),
    });
    limit
}

fn drain(rx: &mut tokio::sync::mpsc::Receiver<QuotaCrossing>) -> Vec<QuotaCrossing> {
    let mut out = Vec::new();
    while let Ok(c) = rx.try_recv() {
        out.push(c);
    }
    out
}

/// Behaviour: Concurrent checks of one quota cross each of its thresholds once, at the count
/// that reaches it; a denial, a peek and a cost that jumps past a threshold are told apart, and a
/// new period crosses them again under new ids.
pub async fn quota_thresholds_are_crossed_once_per_period(h: Subject) {
    let limiter = Arc::new(h.limiter(vec![(
        "plan",
        Rule::new(vec![notifying(100, &[0.5, 0.8, 1.0])]),
    )]));
    let mut rx = limiter.crossings().expect("the first take");
    assert!(limiter.crossings().is_none(), "taken once");
    h.clock.set_us(at("2026-05-20T12:00", "UTC"));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..20 {
                    let d = limiter.check("plan", &[("tenant", "t1")]).await.unwrap();
                    admitted += u64::from(d.allowed);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    assert_eq!(admitted, 100);
    let crossed = drain(&mut rx);
    let seen: Vec<(f64, u64)> = crossed
        .iter()
        .map(|c| (c.threshold.share(), c.used))
        .collect();
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(sorted, [(0.5, 50), (0.8, 80), (1.0, 100)], "{seen:?}");
    let may = Period::new(PeriodUnit::Month).bounds_at(h.now_us());
    for c in &crossed {
        assert_eq!(
            (&*c.rule, &*c.limit_id, c.identity.as_str()),
            ("plan", "tenant-quota-month", "tenant=t1")
        );
        assert_eq!((c.quota, c.period, c.at), (100, may, h.now_us()));
        assert_eq!(&*c.webhook, "http://127.0.0.1:9/quota");
    }
    let mut ids: Vec<String> = crossed.iter().map(QuotaCrossing::id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "one id per threshold");

    // Costs that jump past a threshold cross it at the count they reach; a denial crosses none.
    let t2 = [("tenant", "t2")];
    for (cost, allowed, crossing) in [
        (30, true, None),
        (30, true, Some((0.5, 60))),
        (30, true, Some((0.8, 90))),
        (30, false, None),
    ] {
        let d = limiter
            .check_with("plan", &t2, Check::cost(cost))
            .await
            .unwrap();
        assert_eq!(d.allowed, allowed);
        let got: Vec<(f64, u64)> = drain(&mut rx)
            .iter()
            .map(|c| (c.threshold.share(), c.used))
            .collect();
        assert_eq!(got, crossing.into_iter().collect::<Vec<_>>());
    }
    // A peek counts nothing, so crosses nothing.
    let t3 = [("tenant", "t3")];
    let peek = limiter
        .check_with("plan", &t3, Check::cost(60).peek())
        .await
        .unwrap();
    assert!(peek.allowed);
    assert!(drain(&mut rx).is_empty());

    // June: the count starts again, and so do the crossings, under other ids.
    h.clock.set_us(at("2026-06-01T00:00", "UTC"));
    for _ in 0..50 {
        assert!(
            limiter
                .check("plan", &[("tenant", "t1")])
                .await
                .unwrap()
                .allowed
        );
    }
    let june = drain(&mut rx);
    assert_eq!(june.len(), 1);
    assert_eq!((june[0].threshold.share(), june[0].used), (0.5, 50));
    assert_ne!(june[0].period, may);
    assert!(!ids.contains(&june[0].id()));
}

/// Behaviour: A quota that admits past itself crosses its last threshold when used up, and
/// nothing past it; a quota beside a rate crosses only with the requests the whole rule admits.
pub async fn quota_crossings_follow_what_the_rule_counts(h: Subject) {
    let mut over = notifying(4, &[0.5, 1.0]);
    over.over = Over::Allow;
    let rate = Limit::new(
        &["tenant"],
        "3/1h".parse().unwrap(),
        crate::Algorithm::FixedWindow,
    );
    let limiter = h.limiter(vec![
        ("over", Rule::new(vec![over])),
        ("paired", Rule::new(vec![rate, notifying(4, &[0.5, 1.0])])),
    ]);
    let mut rx = limiter.crossings().unwrap();
    h.clock.set_us(at("2026-05-20T12:00", "UTC"));
    let mut used = Vec::new();
    for _ in 0..7 {
        let d = limiter.check("over", &[("tenant", "a")]).await.unwrap();
        assert!(d.allowed);
        used.extend(drain(&mut rx).iter().map(|c| c.used));
    }
    assert_eq!(used, [2, 4], "at half and when used up, not past it");
    // The rate admits 3 an hour: the quota counts 3, crossing half only; the fourth request is
    // refused by the rate and counts nothing.
    let mut used = Vec::new();
    for _ in 0..4 {
        limiter.check("paired", &[("tenant", "b")]).await.unwrap();
        used.extend(drain(&mut rx).iter().map(|c| c.used));
    }
    assert_eq!(used, [2]);
    h.advance_us(crate::Micros::from_secs(3600));
    limiter.check("paired", &[("tenant", "b")]).await.unwrap();
    let last: Vec<u64> = drain(&mut rx).iter().map(|c| c.used).collect();
    assert_eq!(last, [4]);
}

/// Behaviour: An identity's own quota and billing day (set at run time) are the ones its
/// crossings are counted against and labelled with.
pub async fn quota_crossings_follow_an_identitys_own_numbers(h: Subject) {
    let limiter = h.limiter(vec![(
        "plan",
        Rule::new(vec![notifying(100, &[0.5]).settable()]),
    )]);
    let mut rx = limiter.crossings().unwrap();
    h.clock.set_us(at("2026-05-20T12:00", "UTC"));
    let c = [("tenant", "c")];
    let own = crate::model::RuntimeLimit {
        quota: Some(10),
        anchor: Some(15),
        ..crate::model::RuntimeLimit::default()
    };
    limiter
        .set_runtime_limit("plan", None, &c, &own)
        .await
        .unwrap();
    for _ in 0..5 {
        assert!(limiter.check("plan", &c).await.unwrap().allowed);
    }
    let crossed = drain(&mut rx);
    assert_eq!(crossed.len(), 1, "{crossed:?}");
    let own_month = Period::new(PeriodUnit::Month)
        .anchored(15)
        .unwrap()
        .bounds_at(h.now_us());
    assert_eq!(
        (crossed[0].quota, crossed[0].used, crossed[0].period),
        (10, 5, own_month)
    );
}
