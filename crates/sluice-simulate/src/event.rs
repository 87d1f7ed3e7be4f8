//! One simulated request, the table of the identities requests come from, and [`Traffic`], a
//! source of requests.
//!
//! A request names its identity by index, so a day of traffic from a few identities does not
//! carry a copy of their attributes per request. Identities are interned: the same attributes
//! always get the same index.

use std::collections::HashMap;

use sluice::Micros;

use crate::error::SimulateError;

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

/// A source of requests, in time order.
pub trait Traffic {
    /// The next request, `None` at the end; `Err` for unreadable input.
    fn next_event(&mut self) -> Result<Option<Event>, SimulateError>;
    /// The identities requests name.
    fn identities(&self) -> &Identities;
    /// How far along the source is, and out of how much (any unit), for the progress bar.
    fn progress(&self) -> (u64, u64);
}
