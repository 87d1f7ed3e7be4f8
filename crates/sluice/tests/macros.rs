//! `#[sluice::limited]` on methods and free functions: allowed calls run the body, denied calls
//! return `Limited` with the decision and the rule's message, and bad input is an error value.
#![cfg(feature = "macros")]

// Its own binary: `#[sluice::limit]` decides through the process-wide `set_global_limiter`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sluice::model::{Algorithm, Limit};
use sluice::{Limited, Limiter, ManualClock, MemoryStore, Rule};

const TEA: &str = "查询太快啦,喝杯茶再来";

fn limiter(clock: &ManualClock) -> Limiter {
    let mut employee = Rule::new(vec![Limit::new(
        &["id"],
        "5/10s".parse().unwrap(),
        Algorithm::SlidingLog,
    )]);
    employee.message = Some(TEA.to_string());
    Limiter::builder(MemoryStore::with_clock(Arc::new(clock.clone())))
        .rule("employee", employee)
        .rule(
            "transfer",
            Rule::new(vec![
                Limit::new(&["member"], "2/1m".parse().unwrap(), Algorithm::SlidingLog),
                Limit::new(&["ip"], "3/1m".parse().unwrap(), Algorithm::SlidingLog),
            ]),
        )
        .rule(
            "report",
            Rule::new(vec![Limit::new(
                &["member"],
                "10/1m".parse().unwrap(),
                Algorithm::FixedWindow,
            )]),
        )
        .build()
        .unwrap()
}

/// An application error type that accepts `Limited`.
#[derive(Debug)]
enum AppError {
    Limited(Limited),
}

impl From<Limited> for AppError {
    fn from(e: Limited) -> AppError {
        AppError::Limited(e)
    }
}

struct Directory {
    limiter: Limiter,
    calls: AtomicU32,
}

impl Directory {
    #[sluice::limited(rule = "employee", attribute = id, limiter = self.limiter)]
    async fn employee(&self, id: u64) -> Result<String, AppError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(format!("employee {id}"))
    }

    /// The key names a rule attribute the rule does not count by: a check error, not a panic.
    #[sluice::limited(rule = "report", attribute = id, limiter = &self.limiter)]
    async fn report_by_wrong_key(&self, id: u64) -> Result<(), Limited> {
        let _ = id;
        Ok(())
    }

    /// A composite identity and a cost.
    #[sluice::limited(rule = "report", attributes(member = user.name), cost = pages, limiter = self.limiter)]
    async fn report(&self, user: &User, pages: u64) -> Result<u64, Limited> {
        Ok(pages)
    }
}

struct User {
    name: String,
}

#[sluice::limited(rule = "transfer", attributes(member = member, ip = ip), limiter = limiter)]
async fn transfer(limiter: &Limiter, member: &str, ip: &str) -> Result<&'static str, Limited> {
    Ok("sent")
}

#[tokio::test]
async fn a_method_runs_five_times_then_is_denied_with_the_rules_message() {
    let clock = ManualClock::at_2026();
    let dir = Directory {
        limiter: limiter(&clock),
        calls: AtomicU32::new(0),
    };
    for _ in 0..5 {
        assert_eq!(dir.employee(7).await.unwrap(), "employee 7");
    }
    let Err(AppError::Limited(limited)) = dir.employee(7).await else {
        panic!("the sixth call within 10 s must be denied");
    };
    let Limited::Denied { decision, message } = &limited else {
        panic!("expected a denial, got {limited:?}");
    };
    assert_eq!(message.as_deref(), Some(TEA));
    assert!(!decision.allowed);
    assert!(
        decision
            .retry_after_ms
            .is_some_and(|ms| ms > 0 && ms <= 10_000)
    );
    assert!(limited.to_string().contains(TEA));
    assert_eq!(
        dir.calls.load(Ordering::SeqCst),
        5,
        "a denied call must not run"
    );
    // Another identity has its own window.
    assert!(dir.employee(8).await.is_ok());
    clock.advance(Duration::from_secs(10));
    assert!(dir.employee(7).await.is_ok());
    assert_eq!(dir.calls.load(Ordering::SeqCst), 7);
}

#[tokio::test]
async fn a_free_function_with_a_composite_identity() {
    let clock = ManualClock::at_2026();
    let limiter = limiter(&clock);
    assert_eq!(transfer(&limiter, "m1", "192.0.2.1").await, Ok("sent"));
    assert_eq!(transfer(&limiter, "m1", "192.0.2.2").await, Ok("sent"));
    // member m1 has used its 2; a third call is denied whatever the ip.
    let denied = transfer(&limiter, "m1", "192.0.2.3").await.unwrap_err();
    assert!(denied.decision().is_some_and(|d| !d.allowed));
    // ip 192.0.2.1 has room for 3: two other members pass, and the fourth use of it is denied.
    assert!(transfer(&limiter, "m2", "192.0.2.1").await.is_ok());
    assert!(transfer(&limiter, "m3", "192.0.2.1").await.is_ok());
    assert!(transfer(&limiter, "m4", "192.0.2.1").await.is_err());
}

#[tokio::test]
async fn cost_and_check_errors() {
    let clock = ManualClock::at_2026();
    let dir = Directory {
        limiter: limiter(&clock),
        calls: AtomicU32::new(0),
    };
    let alice = User {
        name: "alice".into(),
    };
    assert_eq!(dir.report(&alice, 6).await, Ok(6));
    assert_eq!(dir.report(&alice, 4).await, Ok(4), "6 + 4 units fit in 10");
    assert!(
        dir.report(&alice, 1).await.is_err(),
        "the 11th unit is denied"
    );
    match dir.report_by_wrong_key(1).await {
        Err(Limited::Check(e)) => assert!(e.to_string().contains("member"), "{e}"),
        other => panic!("expected a check error naming `member`, got {other:?}"),
    }
}

// The former spellings (`limit`, `key`) still expand.
#[sluice::limit(rule = "global_rule", key = name)]
async fn greet(name: &str) -> Result<String, Limited> {
    Ok(format!("hello {name}"))
}

#[tokio::test]
async fn without_a_limiter_argument_the_global_limiter_decides() {
    let global = Limiter::builder(MemoryStore::new())
        .rule(
            "global_rule",
            Rule::new(vec![Limit::new(
                &["name"],
                "1/1h".parse().unwrap(),
                Algorithm::SlidingLog,
            )]),
        )
        .build()
        .unwrap();
    assert!(sluice::set_global_limiter(global).is_ok());
    assert_eq!(greet("ann").await.unwrap(), "hello ann");
    assert!(matches!(greet("ann").await, Err(Limited::Denied { .. })));
    assert!(greet("bob").await.is_ok());
}

/// One export at a time per tenant: the body runs holding the lease.
#[sluice::limited(rule = "export", attribute = tenant, limiter = limiter)]
async fn export(limiter: &Limiter, tenant: &str) -> Result<u64, Limited> {
    // Inside the body the place is taken: a second export of the tenant is refused.
    let inner = Box::pin(export(limiter, tenant)).await;
    assert!(matches!(inner, Err(Limited::Denied { .. })), "{inner:?}");
    Ok(limiter
        .check_with("export", &[("tenant", tenant)], sluice::Check::ONE.peek())
        .await
        .unwrap()
        .remaining)
}

#[tokio::test]
async fn a_concurrency_limit_is_held_while_the_body_runs() {
    let limiter = Limiter::builder(MemoryStore::new())
        .rule(
            "export",
            Rule::new(vec![Limit::concurrency(
                &["tenant"],
                1,
                Duration::from_secs(600),
            )]),
        )
        .build()
        .unwrap();
    assert_eq!(export(&limiter, "t1").await.unwrap(), 0, "held in the body");
    // Returning dropped the guard, which releases the lease in a spawned task.
    for _ in 0..1000 {
        let d = limiter
            .check_with("export", &[("tenant", "t1")], sluice::Check::ONE.peek())
            .await
            .unwrap();
        if d.remaining == 1 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the lease was not released when the function returned");
}
