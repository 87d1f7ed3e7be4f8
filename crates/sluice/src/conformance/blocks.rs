//! Conformance: block locks, escalating penalties and the admin operations on them.

use std::time::Duration;

use super::{S, Subject, call, step};
use crate::algorithm::PenaltyParams;
use crate::limiter::BlockInfo;
use crate::model::{Algorithm, Limit, Micros, Penalty};
use crate::store::BlocksCursor;
use crate::{Limiter, Rule};

/// Behaviour: Block lock answers until its end.
pub async fn block_lock_answers_until_its_end(h: Subject) {
    let limiter = h.limiter(vec![(
        "forgot",
        Rule::new(vec![
            Limit::new(
                &["login_id"],
                "3/30m".parse().unwrap(),
                Algorithm::SlidingLog,
            )
            .with_block(Duration::from_secs(1800)),
        ]),
    )]);
    let attrs = [("login_id", "alice")];
    for _ in 0..3 {
        assert!(limiter.check("forgot", &attrs).await.unwrap().allowed);
    }
    h.advance_us(60 * S);
    let denied = limiter.check("forgot", &attrs).await.unwrap();
    assert!(!denied.allowed);
    let until_ms = h.now_us().as_millis() + 1_800_000;
    assert_eq!(denied.blocked_until_ms, Some(until_ms));
    assert_eq!(denied.retry_after_ms, Some(1_800_000));
    // Long after the window the block still answers, and does not extend itself.
    h.advance_us(1799 * S);
    let blocked = limiter.check("forgot", &attrs).await.unwrap();
    assert!(!blocked.allowed);
    assert_eq!(blocked.blocked_until_ms, Some(until_ms));
    assert_eq!(blocked.retry_after_ms, Some(1000));
    h.advance_us(S);
    let free = limiter.check("forgot", &attrs).await.unwrap();
    assert!(free.allowed);
    assert_eq!(free.blocked_until_ms, None);
    // Another identity was never blocked.
    assert!(
        limiter
            .check("forgot", &[("login_id", "bob")])
            .await
            .unwrap()
            .allowed
    );
}

/// Behaviour: Penalty warns then bans.
pub async fn penalty_warns_then_bans(h: Subject) {
    let limiter = h.limiter(vec![(
        "game",
        Rule::new(vec![
            Limit::new(&["member"], "1/10s".parse().unwrap(), Algorithm::SlidingLog).with_penalty(
                Penalty {
                    warn_after: 2,
                    ban_after: 3,
                    ban: Duration::from_secs(60),
                    memory: Duration::from_secs(3600),
                },
            ),
        ]),
    )]);
    let attrs = [("member", "m1")];
    assert!(limiter.check("game", &attrs).await.unwrap().allowed);
    let mut seen = Vec::new();
    for _ in 0..3 {
        h.advance_us(Micros::new(1000));
        let d = limiter.check("game", &attrs).await.unwrap();
        assert!(!d.allowed);
        seen.push((d.violations, d.warning, d.blocked_until_ms.is_some()));
    }
    assert_eq!(seen, [(1, false, false), (2, true, false), (3, true, true)]);
    let banned_until = h.now_us().as_millis() + 60_000;
    // After the window the ban still holds; the count and warning are reported.
    h.advance_us(30 * S);
    let d = limiter.check("game", &attrs).await.unwrap();
    assert!(!d.allowed);
    assert_eq!((d.violations, d.warning), (3, true));
    assert_eq!(d.blocked_until_ms, Some(banned_until));
    h.clock.set_us(Micros::from_millis(banned_until));
    let d = limiter.check("game", &attrs).await.unwrap();
    assert!(d.allowed);
    assert_eq!(
        (d.violations, d.warning),
        (3, true),
        "violations outlive the ban"
    );
    // The next violation bans again at once (still remembered).
    let d = limiter.check("game", &attrs).await.unwrap();
    assert_eq!(d.violations, 4);
    assert_eq!(d.blocked_until_ms, Some(banned_until + 60_000));
    // Forgotten after `memory` without a violation.
    h.clock
        .set_us(Micros::from_millis(banned_until) + 3600 * S + Micros::new(1));
    let d = limiter.check("game", &attrs).await.unwrap();
    assert!(d.allowed);
    assert_eq!((d.violations, d.warning), (0, false));
    // Direct store call: penalty parameters with a zero-length memory.
    let mut s = step(Algorithm::Gcra, 1, S);
    s.penalty = Some(PenaltyParams {
        warn_after: 1,
        ban_after: 9,
        ban_us: S,
        memory_us: Micros::new(1),
    });
    let c = call("pen-direct", s);
    assert!(h.one(&c).await.allowed);
    let o = h.one(&c).await;
    assert_eq!((o.violations, o.warning), (1, true));
    h.advance_us(Micros::new(1));
    assert_eq!(h.one(&c).await.violations, 1, "the first one was forgotten");
}

/// Behaviour: Admin block unblock blocks and reset.
pub async fn admin_block_unblock_blocks_and_reset(h: Subject) {
    let limiter = h.limiter(vec![(
        "login",
        Rule::new(vec![
            Limit::new(&["ip"], "2/1m".parse().unwrap(), Algorithm::Gcra)
                .with_block(Duration::from_secs(60)),
        ]),
    )]);
    let a = [("ip", "1.2.3.4")];
    let b = [("ip", "5.6.7.8")];
    assert!(all_blocks(&limiter, "login").await.is_empty());
    let until = limiter
        .block("login", &a, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(until, h.now_us().as_millis() + 600_000);
    // A shorter block never shortens a longer one.
    assert_eq!(
        limiter
            .block("login", &a, Duration::from_secs(60))
            .await
            .unwrap(),
        until
    );
    let d = limiter.check("login", &a).await.unwrap();
    assert!(!d.allowed);
    assert_eq!(d.blocked_until_ms, Some(until));
    for _ in 0..3 {
        limiter.check("login", &b).await.unwrap();
    }
    let blocks = all_blocks(&limiter, "login").await;
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].identity, "ip=1.2.3.4");
    assert_eq!(blocks[0].limit_id, "ip-gcra-1m");
    assert_eq!(blocks[0].blocked_until_ms, until);
    assert_eq!(blocks[1].identity, "ip=5.6.7.8");
    assert!(limiter.unblock("login", &a).await.unwrap());
    assert!(!limiter.unblock("login", &a).await.unwrap());
    assert!(limiter.check("login", &a).await.unwrap().allowed);
    // Reset forgets counters and blocks.
    limiter.reset("login", &b).await.unwrap();
    let d = limiter.check("login", &b).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 1);
    assert_eq!(all_blocks(&limiter, "login").await.len(), 0);
    // Blocks end by themselves.
    limiter
        .block("login", &a, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(all_blocks(&limiter, "login").await.len(), 1);
    h.advance_us(S);
    assert!(all_blocks(&limiter, "login").await.is_empty());
}

/// Behaviour: A block shorter than the window keeps the count.
pub async fn a_block_shorter_than_the_window_keeps_the_count(h: Subject) {
    let mut s = step(Algorithm::SlidingWindow, 2, 3600 * S);
    s.block_us = Some(S);
    let c = call("short-block", s);
    assert!(h.one(&c).await.allowed);
    assert!(h.one(&c).await.allowed);
    assert!(h.one(&c).await.blocked_until_us.is_some());
    h.advance_us(S / 2);
    assert!(!h.one(&c).await.allowed, "blocked");
    h.advance_us(S);
    let o = h.one(&c).await;
    assert!(!o.allowed, "the block is over but the window is still full");
    assert_eq!(o.remaining, 0);
}

/// Every block of `rule`, following the listing's cursor to its end.
async fn all_blocks(limiter: &Limiter, rule: &str) -> Vec<BlockInfo> {
    let listing = list_blocks(limiter, rule, 100).await;
    assert_eq!(listing.skipped, 0);
    listing.blocks
}

/// What following a listing of blocks to its end found.
#[derive(Debug)]
pub struct Listing {
    /// Every block listed, each identity once.
    pub blocks: Vec<BlockInfo>,
    /// How many pages it took.
    pub pages: usize,
    /// Block values the store could not read, summed over the pages.
    pub skipped: u64,
}

/// Lists the blocks of `rule` page by page (pages of about `count` entries) to the end.
///
/// # Panics
/// If an identity is listed twice, or the listing has not ended after 1,000 pages.
pub async fn list_blocks(limiter: &Limiter, rule: &str, count: usize) -> Listing {
    let mut listing = Listing {
        blocks: Vec::new(),
        pages: 0,
        skipped: 0,
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = BlocksCursor { after: None, count };
    loop {
        let page = limiter.blocks(rule, &cursor).await.unwrap();
        listing.pages += 1;
        assert!(listing.pages < 1_000, "the listing ends");
        listing.skipped += page.skipped;
        for block in page.blocks {
            assert!(
                seen.insert(block.identity.clone()),
                "{} listed twice",
                block.identity
            );
            listing.blocks.push(block);
        }
        match page.next {
            Some(next) => cursor.after = Some(next),
            None => return listing,
        }
    }
}

/// Behaviour: Block listings are paged and list every block exactly once.
pub async fn block_listings_are_paged_and_complete(h: Subject) {
    let limiter = h.limiter(vec![(
        "login",
        Rule::new(vec![Limit::new(
            &["ip"],
            "2/1m".parse().unwrap(),
            Algorithm::Gcra,
        )]),
    )]);
    for i in 0..250 {
        let ip = format!("10.0.{}.{}", i / 256, i % 256);
        limiter
            .block("login", &[("ip", ip.as_str())], Duration::from_secs(600))
            .await
            .unwrap();
    }
    let listing = list_blocks(&limiter, "login", 40).await;
    assert!(listing.pages < 100, "the listing ends");
    assert_eq!(listing.blocks.len(), 250);
    assert_eq!(all_blocks(&limiter, "login").await.len(), 250);
}
