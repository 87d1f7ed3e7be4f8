//! Shared calls: concurrent one-limit decisions of one limit shape share one script call.
//!
//! Each script call costs Redis a fixed price before its first line of Lua runs — the command is
//! read, looked up, its KEYS and ARGV made Lua tables, its reply written — about a third of what
//! a one-limit decision costs it; and it costs the store a command, a trip through the
//! connection and a write to the socket. Under load many decisions of the same limit are waiting
//! at once, so they go together: the first decision of a shape with nothing of that shape in
//! flight sends its call at once, alone, with its one-limit script (a quiet store decides as
//! before, without waiting); decisions that arrive while a call of their shape is in flight
//! queue, and when it answers, the first of them sends one call for all of them (up to
//! [`MAX_SHARED`]) with the shape's shared script (`one_script::shared_text`): the one-limit
//! script run once per decision, in order, under one call.
//!
//! Invariants:
//! - every decision is still atomic, and exact: a script runs alone in Redis, and decisions in
//!   one call run one after the other, each seeing the ones before it, as separate calls would;
//! - a decision is in at most one call, and the call's answer reaches it; one that the script
//!   leaves to the general decision (`{}`) goes there alone, as before;
//! - at most one call per shape is in flight, and its queue never outlives it: the call's end
//!   hands the queue to the next call, even when the decision that sent it was abandoned at its
//!   deadline (the call is then finished on its own task, so the others still get their
//!   answers); a decision abandoned while it waits in the queue is left out of the next call;
//! - only on one server or a Sentinel-managed primary: on a Cluster, keys of different
//!   identities live on different nodes, and each decision is its own call.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use redis::{Script, Value};
use tokio::sync::oneshot;

use super::{RedisStore, keys, wire};
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// Most decisions in one shared call.
pub const MAX_SHARED: usize = 64;

/// A limit shape's script, and for one limit, the call its concurrent decisions share.
#[derive(Debug)]
pub struct Shaped {
    /// The one-limit or rule script.
    pub script: Script,
    /// One-limit shapes only: the shared script and its queue.
    pub shared: Option<SharedCall>,
}

/// The shared script of a one-limit shape, and the decisions waiting for its next call.
#[derive(Debug)]
pub struct SharedCall {
    script: Script,
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    /// A call of this shape is in flight: new decisions wait for it to end.
    flying: bool,
    waiting: VecDeque<Waiter>,
}

/// A decision in the queue or in a call: its state key, its cost, and where its turn comes.
#[derive(Debug)]
struct Waiter {
    key: String,
    cost: u64,
    turn: oneshot::Sender<Turn>,
}

/// What a waiting decision is told: its answer (one value of the call's reply), or that it sends
/// the next call, for `batch`, whose first decision is its own and answers on `answer`.
#[derive(Debug)]
enum Turn {
    Answer(Result<Value, StoreError>),
    Lead {
        batch: Vec<Waiter>,
        answer: oneshot::Receiver<Turn>,
    },
}

impl SharedCall {
    /// The shared call of the one-limit script whose text is `one` (see `one_script::one_text`).
    pub fn new(one: &str) -> SharedCall {
        SharedCall {
            script: Script::new(&super::one_script::shared_text(one)),
            queue: Mutex::default(),
        }
    }

    /// Hands the queue to its next call: the first decision still waiting sends it, for up to
    /// [`MAX_SHARED`] of them; with none, no call of the shape is in flight any more.
    fn hand_off(&self) {
        let mut queue = self.queue.lock();
        while let Some(mut first) = queue.waiting.pop_front() {
            if first.turn.is_closed() {
                continue;
            }
            let (own, answer) = oneshot::channel();
            let lead = std::mem::replace(&mut first.turn, own);
            let mut batch = Vec::with_capacity(queue.waiting.len().min(MAX_SHARED - 1) + 1);
            batch.push(first);
            while batch.len() < MAX_SHARED {
                match queue.waiting.pop_front() {
                    Some(w) if w.turn.is_closed() => {}
                    Some(w) => batch.push(w),
                    None => break,
                }
            }
            // Abandoned between the look and the send: the others wait for the next one.
            let Err(Turn::Lead { batch, .. }) = lead.send(Turn::Lead { batch, answer }) else {
                return;
            };
            for w in batch.into_iter().skip(1).rev() {
                queue.waiting.push_front(w);
            }
        }
        queue.flying = false;
    }
}

/// A call in flight, owned by the decision that sent it: if that decision is dropped (its
/// deadline), the call is finished on a task of its own, so that the others in it get their
/// answers and the queue its next call.
struct InFlight {
    shaped: Arc<Shaped>,
    work: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(work)),
            // No runtime left to finish it: the decisions in it fail, the queue goes on.
            Err(_) => {
                drop(work);
                if let Some(shared) = &self.shaped.shared {
                    shared.hand_off();
                }
            }
        }
    }
}

impl RedisStore {
    /// Decides `call`, one limit of the one-limit shape `shaped`, in the next call of its shape:
    /// the script's reply for it, as a call of its own would have it.
    pub(super) async fn decide_shared(
        &self,
        shaped: &Arc<Shaped>,
        call: &LimitCall,
    ) -> Result<Value, StoreError> {
        let shared = shaped.shared.as_ref().expect("a one-limit shape");
        wire::check_exact(call)?;
        let (turn, mut answer) = oneshot::channel();
        let me = Waiter {
            key: keys::state_key(&self.inner.prefix, &call.key),
            cost: call.step.cost,
            turn,
        };
        let alone = {
            let mut queue = shared.queue.lock();
            if queue.flying {
                queue.waiting.push_back(me);
                None
            } else {
                queue.flying = true;
                Some(vec![me])
            }
        };
        let batch = match alone {
            Some(batch) => batch,
            None => match (&mut answer).await {
                Ok(Turn::Answer(reply)) => return reply,
                Ok(Turn::Lead { batch, answer: own }) => {
                    answer = own;
                    batch
                }
                Err(_) => return Err(abandoned()),
            },
        };
        let mut in_flight = InFlight {
            shaped: shaped.clone(),
            work: Some(Box::pin(self.clone().run_shared(shaped.clone(), batch))),
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

    /// Sends one call for `batch`, hands the queue on, then answers each decision in it.
    async fn run_shared(self, shaped: Arc<Shaped>, batch: Vec<Waiter>) {
        let replies = self.call_shared(&shaped, &batch).await;
        if let Some(shared) = &shaped.shared {
            shared.hand_off();
        }
        match replies {
            Ok(replies) => {
                for (w, reply) in batch.into_iter().zip(replies) {
                    let _ = w.turn.send(Turn::Answer(Ok(reply)));
                }
            }
            Err(e) => {
                for w in batch {
                    let _ = w.turn.send(Turn::Answer(Err(e.clone())));
                }
            }
        }
    }

    /// One call for `batch`: the one-limit script for a decision alone, else the shared script,
    /// whose reply holds one value per decision.
    async fn call_shared(
        &self,
        shaped: &Shaped,
        batch: &[Waiter],
    ) -> Result<Vec<Value>, StoreError> {
        let now = self.client_now();
        if batch.len() == 1 {
            let cmd = command(shaped.script.get_hash(), batch, now);
            return Ok(vec![self.eval_shaped(&shaped.script, &cmd).await?]);
        }
        let script = &shaped.shared.as_ref().expect("a one-limit shape").script;
        let cmd = command(script.get_hash(), batch, now);
        match self.eval_shaped(script, &cmd).await? {
            Value::Array(replies) if replies.len() == batch.len() => Ok(replies),
            reply => Err(StoreError::permanent(
                "redis",
                format!(
                    "a shared call's reply for {} decisions: {reply:?}",
                    batch.len()
                ),
            )),
        }
    }
}

/// The `EVALSHA` of the one-limit or shared script `hash` for `batch`, as `lua/one_head.lua` and
/// `one_script::shared_text` take them: each state key, then each cost (none on Redis `TIME`
/// when all are 1), then the time from a client clock (none on Redis `TIME`).
fn command(hash: &str, batch: &[Waiter], now: Option<Micros>) -> redis::Cmd {
    let data =
        "EVALSHA".len() + hash.len() + batch.iter().map(|w| w.key.len() + 20).sum::<usize>() + 40;
    let mut cmd = redis::Cmd::with_capacity(4 + 2 * batch.len(), data);
    cmd.arg("EVALSHA").arg(hash).arg(batch.len());
    for w in batch {
        cmd.arg(&w.key);
    }
    if now.is_some() || batch.iter().any(|w| w.cost != 1) {
        for w in batch {
            cmd.arg(w.cost);
        }
    }
    if let Some(now) = now {
        cmd.arg(now.get());
    }
    cmd
}

/// A decision whose call was dropped before it answered (no runtime was left to finish it).
fn abandoned() -> StoreError {
    StoreError::transient("redis", "the shared call was abandoned before it answered")
}
