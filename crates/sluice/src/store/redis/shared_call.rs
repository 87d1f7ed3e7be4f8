//! Shared calls: concurrent decisions of one spec (one limit, or the limits of a rule) share
//! one script call.
//!
//! Each script call costs Redis a fixed price before its first line of Lua runs — the command is
//! read, looked up, its KEYS and ARGV made Lua tables, its reply written — about a third of what
//! a one-limit decision costs it; and it costs the store a command, a trip through the
//! connection and a write to the socket. Under load many decisions of the same spec are waiting
//! at once, so they go together: a decision of a spec with fewer than [`MAX_FLYING`] calls of
//! that spec in flight sends its call at once, alone, with its one-limit or rule script (a quiet
//! store decides as before, without waiting); decisions that arrive while that many are in flight
//! queue, and when one of those answers, the first of them sends one call for all of them (up to
//! [`MAX_SHARED`]) with the spec's shared script (`shared_script`): the one-limit or rule script
//! run once per decision, in order, under one call. Two calls in flight keep Redis busy: while it
//! runs one, the other's answer travels back and the next call is made.
//!
//! Invariants:
//! - every decision is still atomic, and exact: a script runs alone in Redis, and decisions in
//!   one call run one after the other, each seeing the ones before it, as separate calls would;
//! - a decision is in at most one call, and the call's answer reaches it; one that the script
//!   leaves to the general decision (`{}`) goes there alone, as before;
//! - at most [`MAX_FLYING`] calls per spec are in flight, and the queue never outlives them: a
//!   call's end hands the queue to the next call, even when the decision that sent it was abandoned at its
//!   deadline (the call is then finished on its own task, so the others still get their
//!   answers); a decision abandoned while it waits in the queue is left out of the next call;
//! - the queue holds only decisions whose callers wait for them: the requests in progress bound
//!   it;
//! - only on one server or a Sentinel-managed primary: on a Cluster, keys of different
//!   identities live on different nodes, and each decision is its own call.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use redis::{Script, Value};
use tokio::sync::oneshot;

use super::shared_script::shared_text;
use super::{RedisStore, codec};
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// Most decisions in one shared call.
pub const MAX_SHARED: usize = 64;

/// Most calls of one spec in flight at once.
pub const MAX_FLYING: usize = 2;

/// A spec's one-limit or rule script, and the call its concurrent decisions share.
#[derive(Debug)]
pub struct SpecScript {
    /// The one-limit or rule script.
    pub script: Script,
    /// Its shared script and queue.
    pub shared: SharedCall,
}

/// The shared script of a spec, and the decisions waiting for its next call.
#[derive(Debug)]
pub struct SharedCall {
    script: Script,
    /// A rule script reads every cost; a one-limit script on Redis `TIME` takes none when all
    /// are 1 (`lua/one_head.lua`).
    every_cost: bool,
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    /// Calls of this spec in flight: at [`MAX_FLYING`], new decisions wait for one to end.
    flying: usize,
    waiting: VecDeque<Waiter>,
}

/// A decision in the queue or in a call: its KEYS, its limits' costs, and where its turn comes.
#[derive(Debug)]
struct Waiter {
    keys: Vec<String>,
    costs: Vec<u64>,
    turn: oneshot::Sender<Turn>,
}

/// What a waiting decision is told: its answer (one value of the call's reply), or that it sends
/// the next call (whose first decision is its own, answered on the receiver).
#[derive(Debug)]
enum Turn {
    Answer(Result<Value, StoreError>),
    Lead(Lead, oneshot::Receiver<Turn>),
}

/// The decisions of the next call, on their way to the decision that sends it. Dropped unsent
/// (that decision was dropped before it took them), they are sent on a task of their own, so
/// that the others get their answers and the queue its next call.
#[derive(Debug)]
struct Lead {
    store: RedisStore,
    scripted: Arc<SpecScript>,
    sharers: Vec<Waiter>,
}

impl Drop for Lead {
    fn drop(&mut self) {
        let sharers = std::mem::take(&mut self.sharers);
        if !sharers.is_empty() {
            let work = self
                .store
                .clone()
                .run_shared(self.scripted.clone(), sharers);
            finish_elsewhere(Box::pin(work), &self.store, &self.scripted);
        }
    }
}

impl SharedCall {
    /// The shared call of the one-limit or rule script whose text is `text`, which reads
    /// `keys_per` KEYS and `limits` costs for a decision.
    pub fn new(text: &str, keys_per: usize, limits: usize) -> SharedCall {
        SharedCall {
            script: Script::new(&shared_text(text, keys_per, limits)),
            every_cost: limits > 1,
            queue: Mutex::default(),
        }
    }
}

/// Hands the queue of `scripted` to its next call: the first decision still waiting sends it, for
/// up to [`MAX_SHARED`] of them; with none, one call fewer is in flight.
fn hand_off(store: &RedisStore, scripted: &Arc<SpecScript>) {
    let mut queue = scripted.shared.queue.lock();
    while let Some(mut first) = queue.waiting.pop_front() {
        if first.turn.is_closed() {
            continue;
        }
        let (own, answer) = oneshot::channel();
        let lead = std::mem::replace(&mut first.turn, own);
        let mut sharers = Vec::with_capacity(queue.waiting.len().min(MAX_SHARED - 1) + 1);
        sharers.push(first);
        while sharers.len() < MAX_SHARED {
            match queue.waiting.pop_front() {
                Some(w) if w.turn.is_closed() => {}
                Some(w) => sharers.push(w),
                None => break,
            }
        }
        let next = Lead {
            store: store.clone(),
            scripted: scripted.clone(),
            sharers,
        };
        // Abandoned between the look and the send: the others wait for the next one.
        let Err(Turn::Lead(mut next, _)) = lead.send(Turn::Lead(next, answer)) else {
            return;
        };
        for w in std::mem::take(&mut next.sharers).into_iter().skip(1).rev() {
            queue.waiting.push_front(w);
        }
    }
    queue.flying = queue.flying.saturating_sub(1);
}

/// Finishes `work`, a call of `scripted` whose decision is gone, on a task of its own; with no
/// runtime left to run it, its decisions fail and the queue goes on.
fn finish_elsewhere(
    work: Pin<Box<dyn Future<Output = ()> + Send>>,
    store: &RedisStore,
    scripted: &Arc<SpecScript>,
) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(work)),
        Err(_) => {
            drop(work);
            hand_off(store, scripted);
        }
    }
}

/// A call in flight, owned by the decision that sent it: if that decision is dropped (its
/// deadline), the call is finished on a task of its own, so that the others in it get their
/// answers and the queue its next call.
struct InFlight {
    store: RedisStore,
    scripted: Arc<SpecScript>,
    work: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            finish_elsewhere(work, &self.store, &self.scripted);
        }
    }
}

impl RedisStore {
    /// Decides `calls`, the limits of the spec `scripted`, in the next call of its spec: the
    /// script's reply for them, as a call of their own would have it.
    pub(super) async fn decide_shared(
        &self,
        scripted: &Arc<SpecScript>,
        calls: &[LimitCall],
    ) -> Result<Value, StoreError> {
        let shared = &scripted.shared;
        for call in calls {
            codec::check_exact(call)?;
        }
        let (turn, mut answer) = oneshot::channel();
        let me = Waiter {
            keys: self.spec_keys(calls),
            costs: calls.iter().map(|c| c.step.cost).collect(),
            turn,
        };
        let alone = {
            let mut queue = shared.queue.lock();
            if queue.flying == MAX_FLYING {
                queue.waiting.push_back(me);
                None
            } else {
                queue.flying += 1;
                Some(vec![me])
            }
        };
        let sharers = match alone {
            Some(sharers) => sharers,
            None => match (&mut answer).await {
                Ok(Turn::Answer(reply)) => return reply,
                Ok(Turn::Lead(mut lead, own)) => {
                    answer = own;
                    std::mem::take(&mut lead.sharers)
                }
                Err(_) => return Err(abandoned()),
            },
        };
        let mut in_flight = InFlight {
            store: self.clone(),
            scripted: scripted.clone(),
            work: Some(Box::pin(self.clone().run_shared(scripted.clone(), sharers))),
        };
        if let Some(work) = in_flight.work.as_mut() {
            work.await;
        }
        in_flight.work = None;
        match answer.try_recv() {
            Ok(Turn::Answer(reply)) => reply,
            _ => Err(abandoned()),
        }
    }

    /// Sends one call for `sharers` (but for decisions dropped meanwhile), hands the queue on,
    /// then answers each decision in it.
    async fn run_shared(self, scripted: Arc<SpecScript>, mut sharers: Vec<Waiter>) {
        sharers.retain(|w| !w.turn.is_closed());
        if sharers.is_empty() {
            return hand_off(&self, &scripted);
        }
        let replies = self.call_shared(&scripted, &sharers).await;
        hand_off(&self, &scripted);
        match replies {
            Ok(replies) => {
                for (w, reply) in sharers.into_iter().zip(replies) {
                    let _ = w.turn.send(Turn::Answer(Ok(reply)));
                }
            }
            Err(e) => {
                for w in sharers {
                    let _ = w.turn.send(Turn::Answer(Err(e.clone())));
                }
            }
        }
    }

    /// One call for `sharers`: the one-limit or rule script for a decision alone, else the shared
    /// script, whose reply holds one value per decision.
    async fn call_shared(
        &self,
        scripted: &SpecScript,
        sharers: &[Waiter],
    ) -> Result<Vec<Value>, StoreError> {
        let (now, every_cost) = (self.client_now(), scripted.shared.every_cost);
        if sharers.len() == 1 {
            let cmd = command(scripted.script.get_hash(), sharers, now, every_cost);
            return Ok(vec![self.eval_script(&scripted.script, &cmd).await?]);
        }
        let script = &scripted.shared.script;
        let cmd = command(script.get_hash(), sharers, now, every_cost);
        match self.eval_script(script, &cmd).await? {
            Value::Array(replies) if replies.len() == sharers.len() => Ok(replies),
            reply => Err(StoreError::permanent(
                "redis",
                format!(
                    "a shared call's reply for {} decisions: {reply:?}",
                    sharers.len()
                ),
            )),
        }
    }
}

/// The `EVALSHA` of the script `hash` for `sharers` ([`codec::spec_command`]): each decision's
/// KEYS, then its costs, in turn.
fn command(hash: &str, sharers: &[Waiter], now: Option<Micros>, every_cost: bool) -> redis::Cmd {
    let keys = sharers.iter().flat_map(|w| &w.keys);
    let costs = sharers.iter().flat_map(|w| w.costs.iter().copied());
    codec::spec_command(hash, keys, costs, every_cost, now)
}

/// A decision whose call was dropped before it answered (no runtime was left to finish it).
fn abandoned() -> StoreError {
    StoreError::transient("redis", "the shared call was abandoned before it answered")
}

#[cfg(test)]
mod tests {
    use super::super::one_script::{Spec, one_text};
    use super::*;
    use crate::model::Algorithm;
    use crate::store::redis::RedisStore;

    /// The decision told to send the next call is dropped before it reads that: the call is
    /// sent anyway, for the others, who get its answer (here an error: nothing listens), and the
    /// queue is handed on, so the spec's next decision does not wait for ever.
    #[tokio::test]
    async fn a_lead_dropped_unread_still_sends_its_call_and_hands_the_queue_on() {
        let store = RedisStore::connect("redis://127.0.0.1:1", Default::default())
            .await
            .expect("a valid URL");
        let text = one_text(&Spec::plain(Algorithm::FixedWindow, 10), Micros::ZERO)
            .expect("a one-limit script");
        let scripted = Arc::new(SpecScript {
            script: Script::new(&text),
            shared: SharedCall::new(&text, 1, 1),
        });
        let mut waiting = Vec::new();
        {
            let mut queue = scripted.shared.queue.lock();
            queue.flying = 1;
            for i in 0..3 {
                let (turn, answer) = oneshot::channel();
                let keys = vec![format!("k{i}")];
                queue.waiting.push_back(Waiter {
                    keys,
                    costs: vec![1],
                    turn,
                });
                waiting.push(answer);
            }
        }
        hand_off(&store, &scripted);
        drop(waiting.remove(0));
        for answer in waiting {
            match answer.await {
                Ok(Turn::Answer(Err(e))) => assert!(e.transient, "{e}"),
                other => panic!("an answer from the call, not {other:?}"),
            }
        }
        let queue = scripted.shared.queue.lock();
        assert!(queue.flying == 0 && queue.waiting.is_empty());
    }
}
