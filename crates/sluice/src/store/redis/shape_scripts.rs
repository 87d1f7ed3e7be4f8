//! The scripts a store has made for the shapes it has decided: a one-limit script per limit
//! (`one_script`), a rule script per rule (`many_script`), each with its shared call
//! (`shared_call`), made and hashed the first time its shape decides, and loaded into Redis on
//! its first `NOSCRIPT`.
//!
//! Invariants: a shape's script is made once and then shared, and a shape that no such script
//! can decide is remembered as one, so that its requests cost a lookup alone; the cache holds at
//! most [`MAX_SHAPES`] shapes (rules come from configuration, but reloads can keep adding
//! shapes); a shape that finds it full is decided by the general function, which gives the same
//! answer.

use std::sync::Arc;

use parking_lot::RwLock;
use redis::Script;

use super::many_script::many_text;
use super::one_script::{Shape, one_text};
use super::shared_call::{Shaped, SharedCall};
use crate::model::Micros;

/// Most shapes kept (each shape's two scripts are a few kilobytes here and in Redis' script
/// cache).
pub const MAX_SHAPES: usize = 1024;

/// Each shape's script; none: only the general decision decides limits of that shape.
type ByShape = hashbrown::HashMap<Box<[Shape]>, Option<Arc<Shaped>>, foldhash::fast::RandomState>;

/// The scripts of one store made so far, by the shapes of their limits.
#[derive(Debug)]
pub struct ShapeScripts {
    min_ttl: Micros,
    by_shape: RwLock<ByShape>,
}

/// The script for limits of these shapes, if one can decide them, and its shared call: a
/// one-limit script reads one key (its violations key is named after it), a rule script each
/// limit's key and the violations key of each penalty.
fn made(shapes: &[Shape], min_ttl: Micros) -> Option<Shaped> {
    let (text, keys_per) = match shapes {
        [one] => (one_text(one, min_ttl)?, 1),
        _ => (
            many_text(shapes, min_ttl)?,
            shapes.len() + shapes.iter().filter(|s| s.warn_after.is_some()).count(),
        ),
    };
    Some(Shaped {
        script: Script::new(&text),
        shared: SharedCall::new(&text, keys_per, shapes.len()),
    })
}

impl ShapeScripts {
    /// None yet, for a store whose shortest expiry to write is `min_ttl`.
    pub fn new(min_ttl: Micros) -> ShapeScripts {
        ShapeScripts {
            min_ttl,
            by_shape: RwLock::default(),
        }
    }

    /// The script of limits of these shapes, made now if it is new; none when no script but the
    /// general one decides them, or when [`MAX_SHAPES`] are already kept (then at the cost of a
    /// lookup alone).
    pub fn get(&self, shapes: &[Shape]) -> Option<Arc<Shaped>> {
        {
            let by_shape = self.by_shape.read();
            if let Some(script) = by_shape.get(shapes) {
                return script.clone();
            }
            if by_shape.len() >= MAX_SHAPES {
                return None;
            }
        }
        // Made and hashed outside the lock; a check that made the same one first wins.
        let made = made(shapes, self.min_ttl).map(Arc::new);
        let mut by_shape = self.by_shape.write();
        if by_shape.len() >= MAX_SHAPES && !by_shape.contains_key(shapes) {
            return None;
        }
        by_shape.entry(shapes.into()).or_insert(made).clone()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_shape.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Algorithm;

    #[test]
    fn each_shape_is_made_once_and_the_cache_is_bounded() {
        let scripts = ShapeScripts::new(Micros::ZERO);
        let code = Algorithm::FixedWindow;
        let first = scripts.get(&[Shape::plain(code, 1)]).expect("made");
        let again = scripts.get(&[Shape::plain(code, 1)]).expect("kept");
        assert!(Arc::ptr_eq(&first, &again));
        assert_ne!(
            first.script.get_hash(),
            scripts
                .get(&[Shape::plain(code, 2)])
                .expect("made")
                .script
                .get_hash(),
            "another limit, another script"
        );
        let rule = [Shape::plain(code, 1), Shape::plain(code, 2)];
        assert_ne!(
            first.script.get_hash(),
            scripts.get(&rule).expect("a rule script").script.get_hash(),
            "a rule of two limits, another script"
        );
        for count in 4..=MAX_SHAPES as u64 {
            assert!(scripts.get(&[Shape::plain(code, count)]).is_some());
        }
        assert_eq!(scripts.len(), MAX_SHAPES);
        assert!(
            scripts.get(&[Shape::plain(code, 0)]).is_none(),
            "full: the general decision takes it"
        );
        assert!(
            scripts.get(&[Shape::plain(code, 1)]).is_some() && scripts.get(&rule).is_some(),
            "kept ones still answer"
        );
        assert_eq!(scripts.len(), MAX_SHAPES);
    }
}
