//! A quota alone on Redis (`lua/quota.lua`): one `DECRBY` in the key format the general decision
//! reads and, for a count in the key of the period sent (a key that ends with its period, so
//! Redis' time is in it), its `PTTL`, answered in one number; the first count of a period reads
//! `TIME` and writes the period's end as the key's expiry. The script is written per quota and
//! period, its numbers in its text (each argument of a call costs Redis about 1,000
//! instructions), for the period that holds this node's clock; when Redis' time is in another,
//! it answers that time and changes nothing, and the quota is asked again in the period that
//! holds it.
//!
//! Invariants: the script decides only what it restates exactly — one quota, applied, without
//! a block, a penalty, or numbers set at run time, counting denials only as `over: allow` does —
//! and leaves anything else to the general decision; at most [`MAX_QUOTA_SCRIPTS`] are kept
//! (a new period's replace them all when full).

use std::sync::Arc;

use parking_lot::RwLock;
use redis::{Cmd, Script, Value};

use super::RedisStore;
use super::codec::{self, Decided, Reading};
use super::constants::declare;
use super::keys;
use crate::algorithm::Mode;
use crate::model::{Micros, Period, PeriodBounds};
use crate::store::{LimitCall, StoreError};

/// Most quota scripts kept (one per quota, `over` and period in use).
pub const MAX_QUOTA_SCRIPTS: usize = 1024;

/// What a quota script is written for: the quota, `over: allow`, and its period's start.
type QuotaSpec = (u64, bool, Micros);

/// The quota scripts of one store made so far.
#[derive(Debug)]
pub struct QuotaScripts {
    min_ttl: Micros,
    made: RwLock<hashbrown::HashMap<QuotaSpec, Arc<Script>, foldhash::fast::RandomState>>,
}

impl QuotaScripts {
    /// None yet, for a store whose shortest expiry to write is `min_ttl`.
    pub fn new(min_ttl: Micros) -> QuotaScripts {
        QuotaScripts {
            min_ttl,
            made: RwLock::default(),
        }
    }

    /// The script of a quota of `limit` (admitting past itself when `over`) in `period`.
    fn get(&self, limit: u64, over: bool, period: PeriodBounds) -> Arc<Script> {
        let spec = (limit, over, period.start);
        if let Some(script) = self.made.read().get(&spec) {
            return script.clone();
        }
        let script = Arc::new(Script::new(&text(limit, over, period, self.min_ttl)));
        let mut made = self.made.write();
        if made.len() >= MAX_QUOTA_SCRIPTS {
            made.clear();
        }
        made.entry(spec).or_insert(script).clone()
    }
}

/// The quota script of a quota of `limit` in `period`, its numbers written in.
fn text(limit: u64, over: bool, period: PeriodBounds, min_ttl: Micros) -> String {
    let body = include_str!("lua/quota.lua");
    let (radix, packable) = codec::quota_radix(period);
    format!(
        "local limit, over, slot, start, finish, radix, packable, min_ttl = {limit}, {over}, {}, \
         {}, {}, {radix}, {packable}, {}\n{}{body}",
        keys::period_slot(period.start),
        period.start.get(),
        period.end.get(),
        min_ttl.get(),
        declare(body),
    )
}

/// The quota's period, when these calls are a quota the quota script decides.
fn quota_alone(calls: &[LimitCall], mode: Mode) -> Option<&'static Period> {
    let [call] = calls else {
        return None;
    };
    let (step, p) = (&call.step, &call.step.params);
    let plain = step.block_us.is_none() && step.penalty.is_none() && !step.settable;
    let counts_as_it_does = !p.count_denied || p.admits_over;
    (mode == Mode::Apply && plain && counts_as_it_does)
        .then_some(p.period)
        .flatten()
}

impl RedisStore {
    /// The quota script's decision of `calls`, if they are a quota it decides and it did not
    /// leave them to the general decision.
    pub(super) async fn decide_quota(
        &self,
        calls: &[LimitCall],
        mode: Mode,
        reading: &Reading<'_>,
    ) -> Result<Option<Decided>, StoreError> {
        let Some(period) = quota_alone(calls, mode) else {
            return Ok(None);
        };
        let call = &calls[0];
        let now = self.client_now();
        let mut at = self.period_clock();
        // A second answer in another period would need Redis' time to cross another end.
        for _ in 0..3 {
            let bounds = period.bounds_at(at);
            let (script, cmd) = self.quota_command(call, bounds, now);
            let reply: Value = self.eval_script(&script, &cmd).await?;
            if let Value::Int(x) = reply {
                let decided = codec::quota_answer(x, bounds, call, reading.latest_us);
                return decided.map(Some).ok_or_else(|| {
                    StoreError::permanent("redis", format!("unexpected quota answer: {x}"))
                });
            }
            match codec::period_moved(&reply) {
                Some(redis_now) => at = redis_now,
                None => return codec::decode(&reply, reading),
            }
        }
        Ok(None)
    }

    /// The command that decides `calls` when they are a quota the quota script decides, in the
    /// period that holds this node's clock (see `command_for`).
    pub(super) fn quota_command_for(&self, calls: &[LimitCall], mode: Mode) -> Option<Cmd> {
        let period = quota_alone(calls, mode)?;
        let at = self.period_clock();
        Some(
            self.quota_command(&calls[0], period.bounds_at(at), self.client_now())
                .1,
        )
    }

    /// The quota script for `call` in `period`, and its `EVALSHA`.
    fn quota_command(
        &self,
        call: &LimitCall,
        period: PeriodBounds,
        now: Option<Micros>,
    ) -> (Arc<Script>, Cmd) {
        let p = &call.step.params;
        let script = self
            .inner
            .scripts
            .quota
            .get(p.capacity, p.admits_over, period);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash())
            .arg(1)
            .arg(keys::state_key(&self.inner.prefix, &call.key));
        if call.step.cost != 1 || now.is_some() {
            cmd.arg(call.step.cost);
        }
        if let Some(now) = now {
            cmd.arg(now);
        }
        (script, cmd)
    }
}

#[cfg(test)]
mod tests {
    use sluice_test_support::RedisServer;

    use super::*;
    use crate::clock::{Clock, SystemClock};
    use crate::model::PeriodUnit;

    /// The quota script of 2 a day run on a real Redis, on Redis' own time.
    fn run(server: &RedisServer, period: PeriodBounds) -> String {
        let text = text(2, false, period, Micros::ZERO);
        server.cli(&["EVAL", &text, "1", "q"])
    }

    #[test]
    fn a_period_that_does_not_hold_redis_time_is_answered_with_the_time_alone() {
        let server = RedisServer::start();
        let day = Period::new(PeriodUnit::Day);
        let now = SystemClock.now_us();
        let yesterday = day.bounds_at(day.bounds_at(now).start - Micros::new(1));
        let before = SystemClock.now_us();
        let answer: u64 = run(&server, yesterday)
            .trim()
            .parse()
            .expect("the time alone");
        assert!(answer >= before.get() && answer >= yesterday.end.get());
        assert_eq!(server.cli(&["EXISTS", "q"]), "0", "nothing written");
        // Today's: the first count reads TIME and answers in full; the next ones, in the key of
        // the period, answer in one number.
        let today = day.bounds_at(SystemClock.now_us());
        let first = run(&server, today);
        assert_eq!(first.lines().nth(1), Some("1"), "{first}");
        let (radix, _) = codec::quota_radix(today);
        let second: i64 = run(&server, today).trim().parse().unwrap();
        assert_eq!(second / radix as i64, 2, "two counted");
        let third: i64 = run(&server, today).trim().parse().unwrap();
        assert!(third < 0, "a denial");
        assert_eq!(-third / radix as i64, 2, "its count undone");
        assert_eq!(
            server.cli(&["PEXPIRETIME", "q"]).parse::<u64>().unwrap(),
            today.end.as_millis(),
            "the key ends with its period"
        );
    }
}
