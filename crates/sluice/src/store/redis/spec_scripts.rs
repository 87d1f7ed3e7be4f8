//! The scripts a store has made for the specs it has decided: a one-limit script per limit
//! (`one_script`), a rule script per rule (`many_script`), each with its shared call
//! (`shared_call`), made and hashed the first time its spec decides, and loaded into Redis on
//! its first `NOSCRIPT`.
//!
//! Invariants: a spec's script is made once and then shared, and a spec that no such script
//! can decide is remembered as one, so that its requests cost a lookup alone; the cache holds at
//! most [`MAX_SPECS`] specs (rules come from configuration, but reloads can keep adding
//! specs); a spec that finds it full is decided by the general function, which gives the same
//! answer.

use std::sync::Arc;

use parking_lot::RwLock;
use redis::Script;

use super::many_script::many_text;
use super::one_script::{Spec, one_text};
use super::shared_call::{SharedCall, SpecScript};
use crate::model::Micros;

/// Most specs kept (each spec's two scripts are a few kilobytes here and in Redis' script
/// cache).
pub const MAX_SPECS: usize = 1024;

/// Each spec's script; none: only the general decision decides limits of that spec.
type BySpec = hashbrown::HashMap<Box<[Spec]>, Option<Arc<SpecScript>>, foldhash::fast::RandomState>;

/// The scripts of one store made so far, by the specs of their limits.
#[derive(Debug)]
pub struct SpecScripts {
    min_ttl: Micros,
    by_spec: RwLock<BySpec>,
}

/// The script for limits of these specs, if one can decide them, and its shared call: a
/// one-limit script reads one key (its violations key is named after it), a rule script each
/// limit's key and the violations key of each penalty.
fn made(specs: &[Spec], min_ttl: Micros) -> Option<SpecScript> {
    let (text, keys_per) = match specs {
        [one] => (one_text(one, min_ttl)?, 1),
        _ => (
            many_text(specs, min_ttl)?,
            specs.len() + specs.iter().filter(|s| s.warn_after.is_some()).count(),
        ),
    };
    Some(SpecScript {
        script: Script::new(&text),
        shared: SharedCall::new(&text, keys_per, specs.len()),
    })
}

impl SpecScripts {
    /// None yet, for a store whose shortest expiry to write is `min_ttl`.
    pub fn new(min_ttl: Micros) -> SpecScripts {
        SpecScripts {
            min_ttl,
            by_spec: RwLock::default(),
        }
    }

    /// The script of limits of these specs, made now if it is new; none when no script but the
    /// general one decides them, or when [`MAX_SPECS`] are already kept (then at the cost of a
    /// lookup alone).
    pub fn get(&self, specs: &[Spec]) -> Option<Arc<SpecScript>> {
        {
            let by_spec = self.by_spec.read();
            if let Some(script) = by_spec.get(specs) {
                return script.clone();
            }
            if by_spec.len() >= MAX_SPECS {
                return None;
            }
        }
        // Made and hashed outside the lock; a check that made the same one first wins.
        let made = made(specs, self.min_ttl).map(Arc::new);
        let mut by_spec = self.by_spec.write();
        if by_spec.len() >= MAX_SPECS && !by_spec.contains_key(specs) {
            return None;
        }
        by_spec.entry(specs.into()).or_insert(made).clone()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_spec.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Algorithm;

    #[test]
    fn each_spec_is_made_once_and_the_cache_is_bounded() {
        let scripts = SpecScripts::new(Micros::ZERO);
        let code = Algorithm::FixedWindow;
        let first = scripts.get(&[Spec::plain(code, 1)]).expect("made");
        let again = scripts.get(&[Spec::plain(code, 1)]).expect("kept");
        assert!(Arc::ptr_eq(&first, &again));
        assert_ne!(
            first.script.get_hash(),
            scripts
                .get(&[Spec::plain(code, 2)])
                .expect("made")
                .script
                .get_hash(),
            "another limit, another script"
        );
        let rule = [Spec::plain(code, 1), Spec::plain(code, 2)];
        assert_ne!(
            first.script.get_hash(),
            scripts.get(&rule).expect("a rule script").script.get_hash(),
            "a rule of two limits, another script"
        );
        for count in 4..=MAX_SPECS as u64 {
            assert!(scripts.get(&[Spec::plain(code, count)]).is_some());
        }
        assert_eq!(scripts.len(), MAX_SPECS);
        assert!(
            scripts.get(&[Spec::plain(code, 0)]).is_none(),
            "full: the general decision takes it"
        );
        assert!(
            scripts.get(&[Spec::plain(code, 1)]).is_some() && scripts.get(&rule).is_some(),
            "kept ones still answer"
        );
        assert_eq!(scripts.len(), MAX_SPECS);
    }
}
