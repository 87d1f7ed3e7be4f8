//! One simulated request, and the table of the identities requests come from.
//!
//! A request names its identity by index, so a day of traffic from a few identities does not
//! carry a copy of their attributes per request. Identities are interned: the same attributes
//! always get the same index.

use std::collections::HashMap;

use sluice::Micros;

/// One request: when, from whom, how many units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Time from the start of the simulation.
    pub at_us: Micros,
    /// Index into [`Identities`].
    pub identity: u32,
    /// Units the request consumes.
    pub cost: u64,
}

/// The identities seen so far, each a list of `(attribute, value)`.
#[derive(Debug, Default)]
pub struct Identities {
    all: Vec<Vec<(String, String)>>,
    index: HashMap<Vec<(String, String)>, u32>,
}

impl Identities {
    /// The index of these attributes (sorted by name first), adding them when new.
    pub fn intern(&mut self, mut attributes: Vec<(String, String)>) -> u32 {
        attributes.sort();
        if let Some(&i) = self.index.get(&attributes) {
            return i;
        }
        let i = self.all.len() as u32;
        self.all.push(attributes.clone());
        self.index.insert(attributes, i);
        i
    }

    /// The attributes of identity `i`.
    pub fn get(&self, i: u32) -> &[(String, String)] {
        &self.all[i as usize]
    }

    /// How many identities there are.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}
