//! The check that allocates nothing: a one-limit rule on a store that answers in this process
//! (the memory store).
//!
//! The identity is written into a per-thread buffer, the store decides from the borrowed key
//! parts ([`Store::decide_one_now`](crate::Store::decide_one_now)) on the clock reading that
//! starts its timer (lent by [`clock::lending`]), and the decision holds interned names and its
//! one limit inline, built from it directly (`Decision::of_one`). It is the decision the
//! general path in `decide` gives: the same limit decision, the same metrics. Whatever this path
//! does not cover — several limits, leases, reservations, a cost above the capacity, a disabled
//! rule or limiter, an unknown rule, a store that cannot answer at once or fails — goes to the
//! general path, which has the one answer for each. A rule with conditions or overrides is
//! answered here too: its one limit's numbers are chosen first, and a request they refuse or
//! leave uncounted is answered without the store.

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use super::answer::{Answer, Names};
use super::identity::write_identity;
use super::options::Check;
use super::{Attributes, Limiter, crossings, keys};
use crate::algorithm::Mode;
use crate::clock;
use crate::error::Error;
use crate::store::KeyRef;

thread_local! {
    /// The identity being built on this thread: kept, so that its capacity is reused.
    static IDENTITY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f` on this thread's identity buffer, or answers `None` when a check further up this
/// thread's stack (an `Attributes` or a store that checks again while answering) holds it: that
/// one keeps the buffer, this one takes the general path.
pub(super) fn with_identity<T>(f: impl FnOnce(&mut String) -> Option<T>) -> Option<T> {
    IDENTITY.with(|buffer| f(&mut *buffer.try_borrow_mut().ok()?))
}

impl Limiter {
    /// The decision of this check, if it can be made at once; `None` sends it to the general path.
    #[cfg(test)]
    fn decide_at_once(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> Option<Result<crate::model::Decision, Error>> {
        self.at_once(name, attrs, check)
    }

    /// The check made at once, answered as `A` (the full decision, or the verdict); `None`
    /// sends it to the general path.
    #[inline]
    pub(super) fn at_once<A: Answer>(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> Option<Result<A, Error>> {
        let inner = &self.inner;
        if !inner.store.in_process() || check.reserves() || !inner.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let rules = inner.rules.load();
        let rule = rules.get(name)?;
        let limit = match &rule.choice {
            None => rule.sole_limit(check.units())?,
            Some(choice) => match choice.sole(rule, attrs, check.units())? {
                Ok(limit) => limit,
                Err(unasked) => {
                    let answer = unasked.decision(rule);
                    rule.meters.decided(&answer);
                    return Some(Ok(A::of_decision(answer)));
                }
            },
        };
        let max_len = inner.options.max_attribute_len;
        let step = limit.step(check.units(), None);
        // Only the limit's outcome (and, for a decision, its names) leaves the buffer's scope:
        // the answer is built where it is returned.
        let answered = with_identity(|identity| {
            if let Err(error) = write_identity(&limit.by, &limit.groups, attrs, max_len, identity) {
                return Some(Err(keys::identity_error(rule, limit, error, max_len)));
            }
            let key = KeyRef {
                rule: &rule.name,
                limit_id: &limit.id,
                identity,
            };
            let started = inner.latency.start();
            let answer = clock::lending(started, || {
                inner.store.decide_one_now(key, &step, check.mode())
            });
            let (now, outcome) = answer?.ok()?;
            inner.latency.record(started);
            if limit.notify.is_some() && check.mode() == Mode::Apply {
                let queue = |c| inner.crossings.queue(c);
                crossings::of_limit(&rule.name, limit, &step, identity, &outcome, now, queue);
            }
            Some(Ok((outcome, A::Names::of(limit, identity))))
        });
        let (outcome, names) = match answered? {
            Ok(answered) => answered,
            Err(error) => return Some(Err(error)),
        };
        Some(Ok(A::of_outcome(rule, limit, names, &step, &outcome)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::model::{Algorithm, Limit, Override, Penalty, Verdict};
    use crate::{MemoryStore, Rule};

    fn rules() -> Vec<(&'static str, Rule)> {
        let rate = |text: &str| text.parse().expect("a valid rate");
        let mut shadow = Rule::new(vec![Limit::new(
            &["user"],
            rate("2/1s"),
            Algorithm::SlidingWindow,
        )]);
        shadow.shadow = true;
        let penalty = Penalty {
            warn_after: 1,
            ban_after: 3,
            ban: Duration::from_secs(5),
            memory: Duration::from_secs(60),
        };
        vec![
            (
                "by_user",
                Rule::new(vec![Limit::new(&["user"], rate("3/1s"), Algorithm::Gcra)]),
            ),
            (
                "fallback",
                Rule::new(vec![Limit::new(
                    &["member|session", "ip"],
                    rate("5/2s"),
                    Algorithm::TokenBucket,
                )]),
            ),
            (
                "global",
                Rule::new(vec![Limit::new(&[], rate("4/1s"), Algorithm::FixedWindow)]),
            ),
            ("shadow", shadow),
            (
                "blocks",
                Rule::new(vec![
                    Limit::new(&["user"], rate("2/1s"), Algorithm::LeakyBucket)
                        .with_block(Duration::from_secs(3)),
                ]),
            ),
            (
                "bans",
                Rule::new(vec![
                    Limit::new(&["user"], rate("2/1s"), Algorithm::Gcra).with_penalty(penalty),
                ]),
            ),
            ("tiers", tiers()),
        ]
    }

    /// A rule whose one limit has a condition and an override of each kind.
    fn tiers() -> Rule {
        let when = |json: &str| serde_json::from_str(json).expect("a valid condition");
        Rule::new(vec![
            Limit::new(
                &["user|ip"],
                "2/1s".parse().unwrap(),
                Algorithm::TokenBucket,
            )
            .when(when(r#"{"user": {"not": "u1"}}"#))
            .with_override(Override::numbers(
                when(r#"{"session": "s1"}"#),
                Some("4/1s".parse().unwrap()),
                Some(6),
            ))
            .with_override(Override::unlimited(when(r#"{"ip": "::1"}"#)))
            .with_override(Override::deny(when(r#"{"ip": {"prefix": "10."}}"#), "no")),
        ])
    }

    fn limiter(clock: &ManualClock) -> Limiter {
        let clock: Arc<dyn crate::Clock> = Arc::new(clock.clone());
        let mut builder = Limiter::builder(MemoryStore::with_clock(clock.clone())).clock(clock);
        for (name, rule) in rules() {
            builder = builder.rule(name, rule);
        }
        builder.build().expect("valid rules")
    }

    /// Every check the path answers gets the decision (or error) the general path gives, on a
    /// store in the same state at the same time; the rest it leaves to the general path. The
    /// verdict of each check, made by a third limiter in step, is the general decision's.
    #[test]
    fn decides_as_the_general_path_does() {
        let clock = ManualClock::at_2026();
        let (at_once, general) = (limiter(&clock), limiter(&clock));
        let verdicts = limiter(&clock);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let long = "x".repeat(2000);
        let attrs: [&[(&str, &str)]; 7] = [
            &[("user", "u1")],
            &[("user", "a b:c,d=e")],
            &[("session", "s1"), ("ip", "10.0.0.1")],
            &[("member", "m1"), ("session", "s1"), ("ip", "::1")],
            &[("member", ""), ("ip", "10.0.0.2")],
            &[("user", long.as_str())],
            &[],
        ];
        let checks = [
            Check::ONE,
            Check::cost(2),
            Check::ONE.peek(),
            Check::cost(0),
            Check::cost(9),
        ];
        let names = [
            "by_user", "fallback", "global", "shadow", "blocks", "bans", "tiers", "none",
        ];
        let mut answered = 0;
        for i in 0..2000usize {
            let (name, attrs, check) = (
                names[i % names.len()],
                attrs[i / 3 % attrs.len()],
                checks[i / 5 % checks.len()],
            );
            let general_answer = runtime.block_on(general.decide_in_store(name, attrs, check));
            let verdict = runtime.block_on(verdicts.verdict_with(name, attrs, check));
            assert_eq!(
                verdict.map_err(|e| e.to_string()),
                general_answer
                    .as_ref()
                    .map(Verdict::of)
                    .map_err(|e| e.to_string()),
                "check {i}: {name} {attrs:?} {check:?}"
            );
            match at_once.decide_at_once(name, attrs, check) {
                Some(answer) => {
                    assert_eq!(
                        answer, general_answer,
                        "check {i}: {name} {attrs:?} {check:?}"
                    );
                    answered += 1;
                }
                // Not answered here: the general path decides, and the stores stay in step.
                None => assert_eq!(
                    runtime.block_on(at_once.decide_in_store(name, attrs, check)),
                    general_answer
                ),
            }
            clock.advance(Duration::from_millis(37));
        }
        assert!(answered > 1000, "answered {answered} of 2000");
    }

    /// An `Attributes` that checks the same limiter while it is asked for a value.
    struct Reentrant<'a> {
        limiter: &'a Limiter,
        nested_went_general: std::cell::Cell<bool>,
    }

    impl Attributes for Reentrant<'_> {
        fn get(&self, _: &str) -> Option<&str> {
            let nested = self
                .limiter
                .decide_at_once("by_user", &[("user", "inner")], Check::ONE);
            self.nested_went_general.set(nested.is_none());
            Some("outer")
        }
    }

    #[test]
    fn a_check_made_while_another_builds_its_identity_takes_the_general_path() {
        let limiter = limiter(&ManualClock::at_2026());
        let attrs = Reentrant {
            limiter: &limiter,
            nested_went_general: std::cell::Cell::new(false),
        };
        let d = limiter
            .decide_at_once("by_user", &attrs, Check::ONE)
            .expect("answered at once")
            .expect("a valid check");
        assert!(d.allowed);
        assert!(attrs.nested_went_general.get());
    }
}
