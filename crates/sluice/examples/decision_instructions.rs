//! Runs `N` checks of one rule on the memory store, for counting instructions per decision
//! under callgrind (`scripts/tier-instructions` runs it with N and with 0 and divides the
//! difference): a figure the shared, noisy machine does not move.
//!
//! usage: decision_instructions RULE_JSON ATTRIBUTES_JSON N [check|verdict]
//!
//! The checks are made with `Limiter::check` (the full decision, the default) or
//! `Limiter::verdict` (the compact answer).
//! The rule is JSON in the rule file's shape, so the same source measures a plain rule on a
//! tree that predates tiers. Identities vary over 1,000 values of the attribute `user` (the
//! others are taken as given), and the limit admits every check.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use sluice::model::Rule;
use sluice::{Limiter, MemoryStore};

fn ready<F: Future>(future: F) -> F::Output {
    match pin!(future)
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("an in-process check does not wait"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (rule, attributes, n, verdict) = match args.as_slice() {
        [_, rule, attributes, n] => (rule, attributes, n, false),
        [_, rule, attributes, n, answer] if answer == "check" || answer == "verdict" => {
            (rule, attributes, n, answer == "verdict")
        }
        _ => {
            return Err(
                "usage: decision_instructions RULE_JSON ATTRIBUTES_JSON N [check|verdict]".into(),
            );
        }
    };
    let rule: Rule = serde_json::from_str(rule)?;
    let given: Vec<(String, String)> =
        serde_json::from_str::<std::collections::BTreeMap<String, String>>(attributes)?
            .into_iter()
            .collect();
    let n: usize = n.parse()?;
    let limiter = Limiter::builder(MemoryStore::new())
        .rule("bench", rule)
        .build()?;
    let users: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let mut attrs: Vec<(&str, &str)> = given
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    attrs.push(("user", ""));
    let last = attrs.len() - 1;
    // Every identity decided once, so that the N counted checks find their keys.
    for user in &users {
        attrs[last].1 = user;
        ready(limiter.check("bench", &attrs))?;
    }
    let mut allowed = 0usize;
    for i in 0..n {
        attrs[last].1 = &users[i % users.len()];
        let passed = if verdict {
            black_box(ready(limiter.verdict("bench", &attrs))?).allowed
        } else {
            black_box(ready(limiter.check("bench", &attrs))?).allowed
        };
        allowed += usize::from(passed);
    }
    println!("{allowed} of {n} allowed");
    Ok(())
}
