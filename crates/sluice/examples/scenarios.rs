//! Replays classic rate-limiting scenarios through the library and prints each decision.
//!
//! Run with `cargo run -p sluice-ratelimit --example scenarios`. Time is simulated with a manual clock, so the
//! output is the same on every run.

use std::sync::Arc;
use std::time::Duration;

use sluice::model::{Algorithm, Limit, Penalty, Rule};
use sluice::{Decision, Limiter, ManualClock, MemoryStore};

fn show(step: &str, d: &Decision) {
    println!(
        "  {step:<28} allowed={:<5} remaining={:<3} retry_after_ms={:<8} blocked_until_ms={:<14} violations={} warning={}",
        d.allowed,
        d.remaining,
        d.retry_after_ms.map_or("-".into(), |v| v.to_string()),
        d.blocked_until_ms.map_or("-".into(), |v| v.to_string()),
        d.violations,
        d.warning,
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::at_2026();
    let mut forgot = Limit::new(&["login_id"], "3/30m".parse()?, Algorithm::SlidingLog);
    forgot.block = Some(Duration::from_secs(30 * 60));
    let game =
        Limit::new(&["member"], "5/1m".parse()?, Algorithm::SlidingLog).with_penalty(Penalty {
            warn_after: 3,
            ban_after: 5,
            ban: Duration::from_secs(30 * 60),
            memory: Duration::from_secs(3600),
        });
    let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(clock.clone())))
        .clock(Arc::new(clock.clone()))
        .rule(
            "employee",
            Rule::new(vec![Limit::new(
                &["id"],
                "5/10s".parse()?,
                Algorithm::SlidingLog,
            )]),
        )
        .rule(
            "bank_account_update",
            Rule::new(vec![
                Limit::new(&["member"], "2/120s".parse()?, Algorithm::SlidingLog),
                Limit::new(&["ip"], "2/120s".parse()?, Algorithm::SlidingLog),
            ]),
        )
        .rule("secure_forgot_account", Rule::new(vec![forgot]))
        .rule("mini_game", Rule::new(vec![game]))
        .rule(
            "promo_query",
            Rule::new(vec![Limit::new(
                &["member", "promo_code"],
                "10/60s".parse()?,
                Algorithm::SlidingWindow,
            )]),
        )
        .build()?;

    println!("employee lookup, 5 per 10 s per id (sliding log)");
    for i in 1..=6 {
        show(
            &format!("request {i}"),
            &limiter.check("employee", &[("id", "42")]).await?,
        );
    }
    clock.advance(Duration::from_secs(10));
    show(
        "10 s later",
        &limiter.check("employee", &[("id", "42")]).await?,
    );

    println!("bank account update, member AND ip both 2 per 120 s");
    for (member, ip) in [
        ("alice", "198.51.100.1"),
        ("alice", "198.51.100.1"),
        ("alice", "198.51.100.2"),
        ("bob", "198.51.100.1"),
    ] {
        let d = limiter
            .check("bank_account_update", &[("member", member), ("ip", ip)])
            .await?;
        show(&format!("{member} from {ip}"), &d);
    }

    println!("forgot account, 3 per 30 min then a 30 min block lock");
    for i in 1..=4 {
        show(
            &format!("attempt {i}"),
            &limiter
                .check("secure_forgot_account", &[("login_id", "u1")])
                .await?,
        );
    }

    println!("mini game, 5 per minute, warning from 3 violations, ban at 5");
    for i in 1..=10 {
        show(
            &format!("play {i}"),
            &limiter.check("mini_game", &[("member", "m9")]).await?,
        );
    }

    println!("promo query per member and promo code, 10 per 60 s (sliding window counter)");
    for i in 1..=11 {
        let d = limiter
            .check("promo_query", &[("member", "m1"), ("promo_code", "SPRING")])
            .await?;
        if i >= 10 {
            show(&format!("query {i}"), &d);
        }
    }
    Ok(())
}
