//! One decision on one server or slot: the one-limit or rule script when the request's spec
//! allows it, and the general decision for everything else or for what that script left
//! (declined); and the same call spelled out as a command ([`RedisStore::command_for`]), for
//! measuring Redis' own ceiling and for debugging.

use std::sync::atomic::Ordering;

use redis::{Arg, Cmd, ErrorKind, Script, ServerErrorKind, Value};

use super::anchors;
use super::codec::{self, Reading};
use super::keys::{self, Part};
use super::{RedisStore, store_error};
use crate::Error;
use crate::algorithm::{Mode, RuntimeNumbers};
use crate::clock::{Clock, SystemClock};
use crate::limiter::{Attributes, Check, Limiter};
use crate::model::Micros;
use crate::store::{LimitCall, StoreError, StoreReply};

impl RedisStore {
    /// The Redis command, name first, that decides one unit of `rule` for `attributes` under
    /// `limiter`'s rules as this store sends it for a request alone (`EVALSHA` of a one-limit or
    /// rule script, or `FCALL` of the general decision), its keys named as this store names
    /// them. For running the decision on its own — `redis-benchmark` fed this command measures
    /// what Redis itself can do for Sluice — and for debugging. Load the scripts first
    /// ([`RedisStore::load_scripts`]).
    pub fn command_for(
        &self,
        limiter: &Limiter,
        rule: &str,
        attributes: &(impl Attributes + ?Sized),
    ) -> Result<Vec<String>, Error> {
        let calls = limiter.calls(rule, attributes, Check::ONE)?;
        Ok(self.decide_command(&calls, Mode::Apply)?)
    }

    /// The command, name first, that decides `calls` as
    /// [`Store::decide`](crate::store::Store::decide) sends it.
    fn decide_command(&self, calls: &[LimitCall], mode: Mode) -> Result<Vec<String>, StoreError> {
        let scripts = &self.inner.scripts;
        // The command has no cursor argument, the only other kind.
        let text = |arg: Arg<&[u8]>| match arg {
            Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => String::new(),
        };
        if let Some(cmd) = self.quota_command_for(calls, mode) {
            return Ok(cmd.args_iter().map(text).collect());
        }
        if let Some(scripted) = scripts.script_for(calls, mode, || self.period_clock()) {
            let cmd = self.spec_command(&scripted.script, calls)?;
            return Ok(cmd.args_iter().map(text).collect());
        }
        let assumed = self.inner.anchors.assumed(&self.inner.prefix, calls);
        let (keys, args) = self.general_parts(calls, mode, None, &assumed)?;
        let mut command = if self.inner.no_functions.load(Ordering::Relaxed) {
            vec!["EVALSHA".to_string(), scripts.decide.get_hash().to_string()]
        } else {
            vec!["FCALL".to_string(), scripts.library.function.clone()]
        };
        command.push(keys.len().to_string());
        command.extend(keys);
        command.extend(args);
        Ok(command)
    }

    /// The `EVALSHA` of the one-limit or rule script `scripted` for `calls`.
    fn spec_command(&self, scripted: &Script, calls: &[LimitCall]) -> Result<Cmd, StoreError> {
        for call in calls {
            codec::check_exact(call)?;
        }
        let names = self.spec_keys(calls);
        let costs = calls.iter().map(|c| c.step.cost);
        let now = self.client_now();
        Ok(codec::spec_command(
            scripted.get_hash(),
            names.iter(),
            costs,
            calls.len() > 1,
            now,
        ))
    }

    /// The KEYS of a one-limit or rule script for `calls`: each state key, and in a rule script
    /// the violations key of a penalty after it (a one-limit script names its own,
    /// `lua/one_head.lua`).
    pub(super) fn spec_keys(&self, calls: &[LimitCall]) -> Vec<String> {
        let prefix = &self.inner.prefix;
        let mut names = Vec::with_capacity(calls.len() * 2);
        for call in calls {
            names.push(keys::state_key(prefix, &call.key));
            if call.step.penalty.is_some() && calls.len() > 1 {
                names.push(keys::key(prefix, &call.key, Part::Violations));
            }
        }
        names
    }

    /// The KEYS and ARGV of the general decision script; a quota's period is the one that holds
    /// `period_at` (by default the client's clock, or the local one: see `decide_calls`), a
    /// settable monthly quota's from the billing day `assumed` for its identity.
    fn general_parts(
        &self,
        calls: &[LimitCall],
        mode: Mode,
        period_at: Option<Micros>,
        assumed: &[Option<u8>],
    ) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let prefix = &self.inner.prefix;
        let mut names = Vec::with_capacity(calls.len() * 3);
        for call in calls {
            names.push(keys::state_key(prefix, &call.key));
            if keys::guarded(call) {
                names.push(keys::key(prefix, &call.key, Part::Block));
                names.push(keys::key(prefix, &call.key, Part::Violations));
            }
        }
        let now = self.client_now();
        let period_at = period_at.unwrap_or_else(|| self.period_clock());
        let args = codec::decide_args(calls, mode, now, period_at, self.inner.min_ttl_us, assumed)?;
        Ok((names, args))
    }

    /// Decides `calls`, all on one server or slot: the one-limit or rule script when one applies,
    /// then the general decision unless that script answered.
    pub(super) async fn decide_calls(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        let latest_us = Micros::new(self.inner.latest_us.load(Ordering::Relaxed));
        let reading = Reading {
            calls,
            local_now_us: &|| SystemClock.now_us(),
            latest_us,
        };
        if let Some(decided) = self.decide_quota(calls, mode, &reading).await? {
            self.saw_time(decided.now_us);
            return Ok(StoreReply {
                now_us: decided.now_us,
                outcomes: decided.outcomes,
            });
        }
        if let Some(scripted) = self
            .inner
            .scripts
            .script_for(calls, mode, || self.period_clock())
        {
            let reply = if self.inner.conn.is_cluster() {
                let cmd = self.spec_command(&scripted.script, calls)?;
                self.eval_script(&scripted.script, &cmd).await?
            } else {
                self.decide_shared(&scripted, calls).await?
            };
            if let Some(decided) = codec::decode(&reply, &reading)? {
                // A marked reply's time is known to the millisecond only: it is not kept.
                if decided.exact {
                    self.saw_time(decided.now_us);
                }
                return Ok(StoreReply {
                    now_us: decided.now_us,
                    outcomes: decided.outcomes,
                });
            }
        }
        let prefix = &self.inner.prefix;
        let mut assumed = self.inner.anchors.assumed(prefix, calls);
        let first_assumed = assumed.clone();
        let (keys, args) = self.general_parts(calls, mode, None, &assumed)?;
        let mut reply = self.call_general(&keys, &args).await?;
        // A quota's period was sent as the one that holds this node's time, and Redis' time is
        // in another: decide again in the period that holds Redis' (a node within a clock's
        // error of a period's end; a third try would need the time to cross another end). Or a
        // settable monthly quota's identity keeps another billing day than the one assumed:
        // decide again with its day (once per such limit, unless it changes meanwhile). A day
        // kept on another settable limit (a rule file that made a monthly quota something else
        // under the same name) is sent back too, and gives no period of its own.
        let settable = calls.iter().filter(|c| c.step.settable);
        for _ in 0..2 + settable.count() {
            let redis_now = if let Some(redis_now) = codec::period_moved(&reply) {
                redis_now
            } else if let Some((redis_now, limit, day)) = codec::anchor_moved(&reply) {
                if assumed.is_empty() {
                    assumed = vec![None; calls.len()];
                }
                let Some(assumed) = assumed.get_mut(limit) else {
                    break;
                };
                *assumed = day;
                redis_now
            } else {
                break;
            };
            let (keys, args) = self.general_parts(calls, mode, Some(redis_now), &assumed)?;
            reply = self.call_general(&keys, &args).await?;
        }
        let mut decided = codec::decode(&reply, &reading)?.ok_or_else(|| {
            StoreError::permanent("redis", "the general decision declined a request")
        })?;
        // Decided: each settable monthly quota's identity keeps the day it was assumed to keep.
        for (i, (call, outcome)) in calls.iter().zip(&mut decided.outcomes).enumerate() {
            if let Some(&day) = assumed.get(i) {
                // The cache learns what the decision told (it gave the first guess).
                if anchors::month_of(call).is_some() && first_assumed.get(i) != Some(&day) {
                    let state = keys::state_key(prefix, &call.key);
                    self.inner.anchors.note(state, day);
                }
                if let Some(day) = day {
                    let numbers = outcome.runtime.unwrap_or_default();
                    outcome.runtime = Some(RuntimeNumbers {
                        anchor: Some(day),
                        ..numbers
                    });
                }
            }
        }
        self.saw_time(decided.now_us);
        Ok(StoreReply {
            now_us: decided.now_us,
            outcomes: decided.outcomes,
        })
    }

    /// Sends `cmd`, the `EVALSHA` of `script`. As the redis crate's script invocation does: a
    /// server that lost the script (a restart, `SCRIPT FLUSH`, a failover) gets it again, and the
    /// call is repeated.
    pub(super) async fn eval_script(
        &self,
        script: &Script,
        cmd: &Cmd,
    ) -> Result<Value, StoreError> {
        let mut conn = self.inner.conn.clone();
        match cmd.query_async(&mut conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                script.load_async(&mut conn).await.map_err(store_error)?;
                cmd.query_async(&mut conn).await
            }
            result => result,
        }
        .map_err(store_error)
    }

    /// Keeps the latest time Redis reported to the µs, which a marked reply's, known only to the
    /// millisecond, must not fall behind (see `codec::marked`). Only on Redis
    /// `TIME`: on a client's clock no reply is marked.
    fn saw_time(&self, now_us: Micros) {
        if self.inner.clock.is_none() {
            self.inner
                .latest_us
                .fetch_max(now_us.get(), Ordering::Relaxed);
        }
    }
}
