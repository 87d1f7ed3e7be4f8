//! The streams of one server: how many are open (at most [`MAX_STREAMS`]), their ids, the
//! demands they report, and the signal that the rules changed. Plain state, held by the server's
//! `AppState`; the streams themselves (`stream`) read it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::watch;

use super::demand::Demands;

/// Most streams one server keeps open at once.
pub const MAX_STREAMS: usize = 10_000;

/// What every stream of one server shares.
#[derive(Debug)]
pub struct Rlqs {
    /// Demands reported to this server, by bucket and stream.
    pub demands: Demands,
    open: Arc<AtomicUsize>,
    next_id: AtomicU64,
    reloaded: watch::Sender<u64>,
}

impl Default for Rlqs {
    fn default() -> Rlqs {
        Rlqs {
            demands: Demands::default(),
            open: Arc::new(AtomicUsize::new(0)),
            next_id: AtomicU64::new(1),
            reloaded: watch::Sender::new(0),
        }
    }
}

impl Rlqs {
    /// Tells every open stream that the rules changed, so that each answers at once.
    pub fn rules_changed(&self) {
        self.reloaded.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// How many streams are open.
    pub fn streams(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub(super) fn reloads(&self) -> watch::Receiver<u64> {
        self.reloaded.subscribe()
    }

    /// A slot for a new stream, or `None` when [`MAX_STREAMS`] are open.
    pub(super) fn slot(&self) -> Option<StreamSlot> {
        let open = self.open.clone();
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_STREAMS).then_some(n + 1)
        })
        .ok()?;
        metrics::gauge!(crate::metrics::RLQS_STREAMS).increment(1.0);
        Some(StreamSlot {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            open,
        })
    }
}

/// One open stream's place in the count; given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    id: u64,
    open: Arc<AtomicUsize>,
}

impl StreamSlot {
    /// The stream's id in this server.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(crate::metrics::RLQS_STREAMS).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_past_the_bound_get_no_slot_until_one_ends() {
        let rlqs = Rlqs::default();
        let mut slots: Vec<StreamSlot> = (0..MAX_STREAMS).map(|_| rlqs.slot().unwrap()).collect();
        assert_eq!(rlqs.streams(), MAX_STREAMS);
        assert!(rlqs.slot().is_none());
        slots.pop();
        let again = rlqs.slot().expect("a slot freed by a stream that ended");
        assert_eq!(rlqs.streams(), MAX_STREAMS);
        // Ids are never reused, so a new stream never inherits an old one's demands.
        assert!(slots.iter().all(|s| s.id() != again.id()));
    }
}
