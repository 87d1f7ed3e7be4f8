//! Choices against a store that counts its calls: `deny` and `unlimited` never reach it, a
//! chosen tier reaches it once with the tier's numbers, and the allocation-free path and the
//! general path answer alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::algorithm::{LimitOutcome, LimitStep, Mode, RuntimeNumbers};
use crate::clock::ManualClock;
use crate::limiter::RuleCheck;
use crate::model::{Algorithm, Condition, Limit, Micros, Override, Rule};
use crate::store::{BlocksCursor, BlocksPage, KeyRef, LimitCall, LimitKey, StoreError, StoreReply};
use crate::{Check, Limiter, MemoryStore, Store};

/// The memory store, counting every decision it is asked for; in this process or, as Redis
/// is, outside it.
#[derive(Debug)]
struct Counting {
    store: MemoryStore,
    calls: Arc<AtomicUsize>,
    in_process: bool,
}

impl Store for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn in_process(&self) -> bool {
        self.in_process
    }
    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.store.decide(calls, mode).await
    }
    fn decide_one_now(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Option<Result<(Micros, LimitOutcome), StoreError>> {
        if !self.in_process {
            return None;
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.store.decide_one_now(key, step, mode)
    }
    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        self.store.reset(keys).await
    }
    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        self.store.block(key, duration).await
    }
    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.store.unblock(key).await
    }
    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.store.blocks(rule, cursor).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn set_runtime(
        &self,
        key: &LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static crate::model::Period>,
    ) -> Result<bool, StoreError> {
        self.store
            .set_runtime(key, numbers, max_entries, period)
            .await
    }
    async fn runtime(&self, key: &LimitKey) -> Result<Option<RuntimeNumbers>, StoreError> {
        self.store.runtime(key).await
    }
}

fn when(json: &str) -> Condition {
    serde_json::from_str(json).expect("a valid condition")
}

fn tiers() -> Rule {
    let rate = |text: &str| text.parse().expect("a valid rate");
    Rule::new(vec![
        Limit::new(&["tenant"], rate("2/1m"), Algorithm::SlidingLog)
            .settable()
            .with_override(Override::numbers(
                when(r#"{"plan": "pro"}"#),
                Some(rate("4/1m")),
                None,
            ))
            .with_override(Override::unlimited(when(
                r#"{"tenant": ["mon", "partner"]}"#,
            )))
            .with_override(Override::deny(
                when(r#"{"ip": {"cidr": ["203.0.113.0/24"]}}"#),
                "this range is refused",
            )),
    ])
    .when(when(r#"{"method": "POST"}"#))
}

fn limiter(in_process: bool) -> (Limiter, Arc<AtomicUsize>) {
    let clock = ManualClock::at_2026();
    let calls = Arc::new(AtomicUsize::new(0));
    let store = Counting {
        store: MemoryStore::with_clock(Arc::new(clock.clone())),
        calls: calls.clone(),
        in_process,
    };
    let two_limits = Rule::new(vec![
        Limit::new(&["tenant"], "3/1m".parse().unwrap(), Algorithm::FixedWindow)
            .with_override(Override::unlimited(when(r#"{"plan": "internal"}"#))),
        Limit::new(&[], "100/1m".parse().unwrap(), Algorithm::FixedWindow)
            .when(when(r#"{"path": {"prefix": "/api/"}}"#)),
    ]);
    let limiter = Limiter::builder(store)
        .clock(Arc::new(clock))
        .rule("tiers", tiers())
        .rule("two", two_limits)
        .build()
        .expect("valid rules");
    (limiter, calls)
}

fn attrs<'a>(tenant: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut attrs = vec![
        ("method", "POST"),
        ("tenant", tenant),
        ("ip", "198.51.100.1"),
    ];
    attrs.extend_from_slice(extra);
    attrs
}

#[test]
fn deny_and_unlimited_make_no_store_call_on_either_path() {
    for in_process in [true, false] {
        let (limiter, calls) = limiter(in_process);
        let run = |a: Vec<(&str, &str)>| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            runtime
                .unwrap()
                .block_on(limiter.check("tiers", &a))
                .unwrap()
        };
        let denied = run(vec![
            ("method", "POST"),
            ("tenant", "t1"),
            ("ip", "203.0.113.7"),
        ]);
        assert!(!denied.allowed, "{in_process}");
        assert_eq!(denied.reason.as_deref(), Some("this range is refused"));
        assert_eq!(denied.limits[0].quota, 0);
        assert_eq!(
            limiter.denial_message(&denied).as_deref(),
            Some("this range is refused")
        );
        for _ in 0..5 {
            let d = run(attrs("mon", &[]));
            assert!(d.allowed && d.limits.is_empty(), "{d:?}");
            assert_eq!(d.reason.as_deref(), Some(NO_LIMIT));
        }
        let get = run(vec![("method", "GET"), ("tenant", "t1")]);
        assert!(get.allowed);
        assert_eq!(get.reason.as_deref(), Some(RULE_WHEN));
        assert_eq!(calls.load(Ordering::SeqCst), 0, "in process: {in_process}");
        let pro = run(attrs("t2", &[("plan", "pro")]));
        assert_eq!((pro.quota, pro.remaining), (4, 3));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one store call for a tier");

        // A run-time limit of the identity beats the override's numbers in the store; the deny
        // is still decided before it.
        let own = crate::model::RuntimeLimit::rate("6/1m".parse().unwrap());
        let tenant = [("tenant", "t2")];
        let set = limiter.set_runtime_limit("tiers", None, &tenant, &own);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(set)
            .unwrap();
        let denied = run(vec![
            ("method", "POST"),
            ("tenant", "t2"),
            ("ip", "203.0.113.7"),
        ]);
        assert_eq!(denied.reason.as_deref(), Some("this range is refused"));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "a deny makes no store call"
        );
        let pro = run(attrs("t2", &[("plan", "pro")]));
        assert_eq!((pro.allowed, pro.quota, pro.remaining), (true, 6, 4));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}

#[tokio::test]
async fn a_tier_change_keeps_the_counter() {
    for in_process in [true, false] {
        let (limiter, _) = limiter(in_process);
        let free = attrs("t1", &[]);
        assert!(limiter.check("tiers", &free).await.unwrap().allowed);
        assert!(limiter.check("tiers", &free).await.unwrap().allowed);
        assert!(!limiter.check("tiers", &free).await.unwrap().allowed);
        let pro = attrs("t1", &[("plan", "pro")]);
        let d = limiter.check("tiers", &pro).await.unwrap();
        assert_eq!(
            (d.allowed, d.quota, d.remaining),
            (true, 4, 1),
            "2 of 4 were used"
        );
        assert!(limiter.check("tiers", &pro).await.unwrap().allowed);
        assert!(!limiter.check("tiers", &pro).await.unwrap().allowed);
        assert_eq!(
            d.limits[0].id,
            limiter.check("tiers", &free).await.unwrap().limits[0].id
        );
    }
}

#[tokio::test]
async fn the_general_path_picks_limits_and_batches_honour_a_deny() {
    for in_process in [true, false] {
        let (limiter, calls) = limiter(in_process);
        let internal = [("tenant", "t1"), ("plan", "internal"), ("path", "/api/x")];
        let d = limiter.check("two", &internal).await.unwrap();
        assert_eq!(
            d.limits.len(),
            1,
            "the tenant limit is unlimited: only the global one"
        );
        assert_eq!(d.limits[0].quota, 100);
        let plain = [("tenant", "t1"), ("path", "/web")];
        let d = limiter.check("two", &plain).await.unwrap();
        assert_eq!(d.limits.len(), 1, "the global limit's `when` does not hold");
        assert_eq!((d.limits[0].quota, d.remaining), (3, 2));
        assert_eq!(
            limiter.keys("two", &plain).unwrap().len(),
            1,
            "what a check would touch follows the choice"
        );
        let before = calls.load(Ordering::SeqCst);
        let denied_ip = [("method", "POST"), ("tenant", "t9"), ("ip", "203.0.113.1")];
        let parts = [
            RuleCheck {
                rule: "two",
                attrs: &plain[..],
                cost: 1,
            },
            RuleCheck {
                rule: "tiers",
                attrs: &denied_ip[..],
                cost: 1,
            },
        ];
        let both = limiter.check_all(&parts).await.unwrap();
        assert!(!both[1].allowed && both[1].reason.as_deref() == Some("this range is refused"));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            before + 1,
            "the other part only looked"
        );
        let left = limiter
            .check_with("two", &plain, Check::ONE.peek())
            .await
            .unwrap();
        assert_eq!(
            left.remaining, 2,
            "a request a part refused consumed nothing"
        );
    }
}
