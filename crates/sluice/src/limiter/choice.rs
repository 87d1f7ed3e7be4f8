//! Choosing, per request, which limits of a rule apply and with which numbers: the rule's and
//! the limits' `when`, and the limits' `overrides`.
//!
//! A [`Choice`] is compiled once with the rule (`compiled_choice`: each override's numbers become
//! a [`CompiledLimit`] of their own, with the base limit's id, so the counter is the same
//! whatever the tier) and exists only for rules that use a condition or an override: a plain
//! rule pays one `None` test per check. The choice is made before any key is built or store
//! called, so a `deny` or `unlimited` outcome costs no store call, and the store call of a chosen
//! tier is the one the base numbers would make, with other numbers.
//!
//! Invariants: the first override whose `when` holds decides, else the limit's own numbers; a
//! limit whose `when` does not hold, or whose override is `unlimited`, counts nothing; a `deny`
//! of any limit refuses the request with its message; a rule whose `when` does not hold, or none
//! of whose limits apply, allows with the reason said.

use smallvec::SmallVec;

use super::answer::refused;
use super::compile::CompiledRule;
use super::compiled_choice::{Choice, Tier};
use super::compiled_limit::CompiledLimit;
use super::{Attributes, MAX_COST};
use crate::model::Decision;

/// A limit chosen for a request: its index in the rule, and the override whose numbers apply
/// (`None`: its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    limit: usize,
    tier: Option<usize>,
}

/// The limits a request is decided on, in the rule's order.
pub(crate) type Picks = SmallVec<[Pick; 4]>;

/// What the choice made of a request.
#[derive(Debug)]
pub(crate) enum Selection {
    /// Decide on these limits.
    Limits(Picks),
    /// The answer, made without the store (boxed: a decision is a few hundred bytes).
    Answer(Box<Decision>),
}

/// The reason of a decision whose rule's `when` does not hold.
pub(crate) const RULE_WHEN: &str = "the rule's `when` does not hold: nothing counted";
/// The reason of a decision none of whose limits applies.
pub(crate) const NO_LIMIT: &str = "no limit applies (each one's `when` does not hold, or an override makes it unlimited): \
     nothing counted";

impl Choice {
    /// The limits a request is decided on, or the answer when none is asked.
    pub(crate) fn select(
        &self,
        rule: &CompiledRule,
        attrs: &(impl Attributes + ?Sized),
    ) -> Selection {
        if self.when.as_ref().is_some_and(|w| !w.holds(attrs)) {
            return Selection::Answer(Box::new(Decision::pass_through(
                rule.name.clone(),
                RULE_WHEN,
            )));
        }
        let mut picks = Picks::new();
        for (i, choice) in self.limits.iter().enumerate() {
            if choice.when.as_ref().is_some_and(|w| !w.holds(attrs)) {
                continue;
            }
            let tier = choice.overrides.iter().position(|(w, _)| w.holds(attrs));
            match tier.map(|t| &choice.overrides[t].1) {
                Some(Tier::Unlimited) => continue,
                Some(Tier::Deny(message)) => {
                    return Selection::Answer(Box::new(refused(rule, &rule.limits[i], message)));
                }
                Some(Tier::Numbers(_)) | None => picks.push(Pick { limit: i, tier }),
            }
        }
        if picks.is_empty() {
            return Selection::Answer(Box::new(Decision::pass_through(
                rule.name.clone(),
                NO_LIMIT,
            )));
        }
        Selection::Limits(picks)
    }

    /// For the allocation-free path (`at_once`): the one limit a check of `units` on a one-limit
    /// rule is decided on, or why it is answered without the store; `None` where
    /// [`CompiledRule::sole_limit`] would say `None` (the general path decides). What is
    /// returned is a few words: the decision of an answer without the store is built by its
    /// caller, on that rarer path, so that the common one does not carry it.
    #[inline]
    pub(crate) fn sole<'a>(
        &'a self,
        rule: &'a CompiledRule,
        attrs: &(impl Attributes + ?Sized),
        units: u64,
    ) -> Option<Result<&'a CompiledLimit, Unasked<'a>>> {
        if rule.limits.len() != 1 || !rule.direct || !rule.definition.enabled || units > MAX_COST {
            return None;
        }
        // What `select` decides for the one limit, without collecting picks.
        if self.when.as_ref().is_some_and(|w| !w.holds(attrs)) {
            return Some(Err(Unasked::Pass(RULE_WHEN)));
        }
        let choice = self.limits.first()?;
        if choice.when.as_ref().is_some_and(|w| !w.holds(attrs)) {
            return Some(Err(Unasked::Pass(NO_LIMIT)));
        }
        let limit = match choice.overrides.iter().find(|(w, _)| w.holds(attrs)) {
            None => rule.limits.first()?,
            Some((_, Tier::Numbers(limit))) => limit,
            Some((_, Tier::Unlimited)) => return Some(Err(Unasked::Pass(NO_LIMIT))),
            Some((_, Tier::Deny(message))) => {
                return Some(Err(Unasked::Refused(rule.limits.first()?, message)));
            }
        };
        limit.fits(units).then_some(Ok(limit))
    }

    /// The limit a pick names, with the numbers it was chosen with.
    pub(crate) fn limit<'a>(&'a self, rule: &'a CompiledRule, pick: Pick) -> &'a CompiledLimit {
        match pick.tier.map(|t| &self.limits[pick.limit].overrides[t].1) {
            Some(Tier::Numbers(limit)) => limit,
            _ => &rule.limits[pick.limit],
        }
    }
}

/// Why a check of a one-limit rule is answered without the store ([`Choice::sole`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unasked<'a> {
    /// Allowed, nothing counted, for this reason.
    Pass(&'static str),
    /// Refused by a `deny` override of this limit, with its message.
    Refused(&'a CompiledLimit, &'a str),
}

impl Unasked<'_> {
    /// The decision of the check.
    pub(crate) fn decision(self, rule: &CompiledRule) -> Decision {
        match self {
            Unasked::Pass(reason) => Decision::pass_through(rule.name.clone(), reason),
            Unasked::Refused(limit, message) => refused(rule, limit, message),
        }
    }
}

/// The limits of `rule` a check is decided on: all of them, or those `picks` chose.
pub(crate) fn applied<'a>(
    rule: &'a CompiledRule,
    picks: Option<&'a Picks>,
) -> impl Iterator<Item = &'a CompiledLimit> + Clone {
    let (all, picked) = match (picks, rule.choice.as_deref()) {
        (Some(picks), Some(choice)) => (None, Some((choice, picks.iter()))),
        _ => (Some(rule.limits.iter()), None),
    };
    all.into_iter().flatten().chain(
        picked
            .into_iter()
            .flat_map(move |(choice, picks)| picks.map(move |&pick| choice.limit(rule, pick))),
    )
}

/// The message a denied decision gives: a `deny` override's own, else the rule's.
pub(crate) fn denial_message(d: &Decision) -> Option<&str> {
    d.limits
        .iter()
        .any(|l| !l.allowed && l.quota == 0)
        .then_some(d.reason.as_deref())
        .flatten()
}

#[cfg(test)]
mod tests;
