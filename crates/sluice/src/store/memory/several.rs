//! A request of several limits in the memory store: every key's shard locked in shard order
//! (so no two requests deadlock), the room for new keys made first (so a request that cannot be
//! stored whole changes nothing), then one all-or-nothing decision over all the states.

use super::ShardGuard;
use super::packed_state::PackedState;
use super::{LimitCall, MemoryStore, StoreError, StoreReply};
use crate::algorithm::{KeyState, LimitOutcome, Mode, step};

impl MemoryStore {
    pub(super) fn decide_several(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        debug_assert!(
            calls
                .iter()
                .enumerate()
                .all(|(i, c)| calls[..i].iter().all(|d| d.key != c.key)),
            "the calls of one request name distinct keys"
        );
        let located: Vec<(u64, usize)> =
            calls.iter().map(|c| self.locate((&c.key).into())).collect();
        let mut order: Vec<usize> = located.iter().map(|&(_, s)| s).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<ShardGuard<'_>> = order.iter().map(|&i| self.shard(i)).collect();
        let now = self.inner.clock.now_us();
        // Read with every key's shard locked, as the numbers are changed (see `runtime`).
        let runtime: Vec<_> = calls
            .iter()
            .map(|c| {
                c.step
                    .settable
                    .then(|| self.inner.runtime.get((&c.key).into()))
                    .flatten()
            })
            .collect();
        let steps: Vec<_> = calls
            .iter()
            .zip(&runtime)
            .map(|(c, n)| n.map_or(c.step, |n| n.apply(&c.step)))
            .collect();
        let guard_of = |i: usize| {
            order
                .binary_search(&i)
                .expect("every shard of the calls was locked above")
        };
        // Room first, so that a request that cannot be stored whole changes nothing (a peek
        // stores nothing new).
        let mut new = vec![0; order.len()];
        for (call, &(h, s)) in calls.iter().zip(&located) {
            let g = guard_of(s);
            if mode == Mode::Apply
                && guards[g]
                    .find(h, (&call.key).into())
                    .is_none_or(|e| e.expires_us <= now)
            {
                new[g] += 1;
            }
        }
        for (guard, &n) in guards.iter_mut().zip(&new) {
            if guard.make_room(n, now).is_err() {
                return Err(self.full());
            }
        }
        let mut packed: Vec<PackedState> = calls
            .iter()
            .zip(&located)
            .map(|(c, &(h, s))| guards[guard_of(s)].take(h, (&c.key).into(), now).0)
            .collect();
        // A boxed state is decided in its box; the others on an unpacked copy.
        let mut unpacked: Vec<KeyState> = packed
            .iter_mut()
            .filter(|p| !p.is_boxed())
            .map(|p| std::mem::take(p).unpack())
            .collect();
        let mut copies = unpacked.iter_mut();
        let mut refs: Vec<&mut KeyState> = packed
            .iter_mut()
            .filter_map(|p| p.boxed().or_else(|| copies.next()))
            .collect();
        let results = step::decide(&mut refs, &steps, now, mode);
        drop(refs);
        let mut copies = unpacked.into_iter();
        for ((call, state), (&(h, s), (_, ttl))) in
            calls.iter().zip(packed).zip(located.iter().zip(&results))
        {
            let state = match state {
                PackedState::Boxed(_) => state,
                _ => PackedState::pack(copies.next().unwrap_or_default()),
            };
            guards[guard_of(s)].insert(h, (&call.key).into(), state, *ttl, now);
        }
        Ok(StoreReply {
            now_us: now,
            outcomes: results
                .into_iter()
                .zip(runtime)
                .map(|((o, _), runtime)| LimitOutcome { runtime, ..o })
                .collect(),
        })
    }
}
