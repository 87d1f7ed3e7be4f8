//! Conformance: hot keys — limits that take their units from the store in batches and spend
//! them in memory: never more than the limit through held units, whatever the number of nodes;
//! unspent units given back when the node stops, when a batch's hold time ends and when the rule
//! changes; denials, blocks and shadow rules as on the exact path.

use std::time::Duration;

use super::{S, Subject};
use crate::model::{Algorithm, Batches, Limit, Micros};
use crate::{Check, Limiter, Rule};

const HOT: [(&str, &str); 1] = [("tenant", "t1")];

/// 100 per 1000 s on `algorithm` (a unit back every 10 s), with batches of up to `max`.
fn hot(algorithm: Algorithm, max: u64) -> Rule {
    let limit = Limit::new(&["tenant"], "100/1000s".parse().unwrap(), algorithm);
    Rule::new(vec![
        limit.with_batches(Batches::new(max, Duration::from_secs(1))),
    ])
}

/// The same limit without batches: the same counter, read exactly.
fn exact(algorithm: Algorithm) -> Rule {
    Rule::new(vec![Limit::new(
        &["tenant"],
        "100/1000s".parse().unwrap(),
        algorithm,
    )])
}

async fn left(reader: &Limiter) -> u64 {
    reader
        .check_with("hot", &HOT, Check::ONE.peek())
        .await
        .unwrap()
        .remaining
}

const ALGORITHMS: [Algorithm; 3] = [
    Algorithm::TokenBucket,
    Algorithm::Gcra,
    Algorithm::FixedWindow,
];

/// Behaviour: three nodes taking batches from one counter admit exactly the limit between them,
/// and each denial comes when nothing is held anywhere nor left in the store.
pub async fn batches_admit_the_limit_across_nodes(h: Subject) {
    for algorithm in ALGORITHMS {
        h.advance_us(10_000 * S);
        let nodes: Vec<Limiter> = (0..3)
            .map(|_| h.limiter(vec![("hot", hot(algorithm, 16))]))
            .collect();
        let mut admitted = 0;
        for i in 0..400 {
            if nodes[i % 3].check("hot", &HOT).await.unwrap().allowed {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 100, "{algorithm}: the limit, no more, no less");
        let taken: u64 = nodes
            .iter()
            .flat_map(|n| n.held_units())
            .map(|u| u.taken)
            .sum();
        assert!(taken > 0, "{algorithm}: batches were taken");
        let held: u64 = nodes
            .iter()
            .flat_map(|n| n.held_units())
            .map(|u| u.held)
            .sum();
        assert_eq!(held, 0, "{algorithm}: everything taken was spent");
        let reader = h.limiter(vec![("hot", exact(algorithm))]);
        assert_eq!(left(&reader).await, 0, "{algorithm}");
    }
}

/// Behaviour: units taken and not spent go back when the node gives its batches back (it
/// stops), when a batch's hold time has passed, and when its rule changes.
pub async fn batches_give_back_what_they_did_not_spend(h: Subject) {
    for algorithm in ALGORITHMS {
        h.advance_us(10_000 * S);
        let node = h.limiter(vec![("hot", hot(algorithm, 50))]);
        let reader = h.limiter(vec![("hot", exact(algorithm))]);
        // Batches doubling from 2: what was taken is counted, what is held is not spent.
        for _ in 0..15 {
            assert!(node.check("hot", &HOT).await.unwrap().allowed);
        }
        let units = node.held_units()[0].clone();
        assert_eq!(units.taken - units.held, 15, "{algorithm}");
        assert!(units.held > 0, "{algorithm}");
        assert_eq!(
            left(&reader).await,
            100 - units.taken,
            "{algorithm}: held units are counted"
        );
        assert_eq!(node.give_back_batches().await, units.held, "{algorithm}");
        assert_eq!(left(&reader).await, 85, "{algorithm}: the node stopped");

        // A batch whose hold time has passed goes back before the next one is taken.
        assert!(node.check("hot", &HOT).await.unwrap().allowed);
        let before = node.held_units()[0].clone();
        assert!(before.held > 0, "{algorithm}: a new batch");
        h.advance_us(Micros::from_millis(1500));
        assert!(node.check("hot", &HOT).await.unwrap().allowed);
        let after = node.held_units()[0].clone();
        assert_eq!(
            after.given_back,
            before.given_back + before.held,
            "{algorithm}: the ended batch went back"
        );

        // A reload that changes the rule gives its batches back (in the background).
        let held = after.held;
        let before = left(&reader).await;
        node.set_rules([("hot".to_string(), hot(algorithm, 40))])
            .unwrap();
        let mut now = left(&reader).await;
        for _ in 0..500 {
            if now > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            now = left(&reader).await;
        }
        assert_eq!(
            now,
            before + held,
            "{algorithm}: the changed rule's batch went back"
        );
    }
}

/// Behaviour: a request the batches cannot cover is decided exactly, so a block imposed on the
/// denial holds, and a shadow rule with batches reports its denials but lets requests pass.
pub async fn batches_keep_blocks_and_shadow(h: Subject) {
    h.advance_us(10_000 * S);
    let limit = Limit::new(&["tenant"], "10/1000s".parse().unwrap(), Algorithm::Gcra)
        .with_block(Duration::from_secs(60))
        .with_batches(Batches::new(8, Duration::from_secs(1)));
    let node = h.limiter(vec![("hot", Rule::new(vec![limit]))]);
    for _ in 0..10 {
        assert!(node.check("hot", &HOT).await.unwrap().allowed);
    }
    let denied = node.check("hot", &HOT).await.unwrap();
    assert!(!denied.allowed);
    let until = denied.blocked_until_ms.expect("the denial blocks");
    assert_eq!(until, (h.now_us() + 60 * S).as_millis());
    h.advance_us(200 * S);
    let d = node.check("hot", &HOT).await.unwrap();
    assert!(d.allowed, "the block ended and units came back");

    let mut rule = hot(Algorithm::TokenBucket, 16);
    rule.shadow = true;
    let node = h.limiter(vec![("shadow", rule)]);
    let mut over = 0;
    for _ in 0..150 {
        let d = node.check("shadow", &HOT).await.unwrap();
        assert!(d.allowed, "a shadow rule never denies");
        if d.limits.iter().any(|l| !l.allowed) {
            over += 1;
        }
    }
    assert_eq!(over, 50, "the 50 over the limit are reported");
}
