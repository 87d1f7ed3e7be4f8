//! A quota alone on Redis (`lua/quota.lua`): one `DECRBY` in the key format the general decision
//! reads and, for a count in the key of the period sent, its `PTTL` (the key ends with its
//! period, so Redis' time is in it); the first count of a period reads `TIME` and writes the
//! period's end as the key's expiry. It is sent the period that holds this node's clock; when
//! Redis' time is in another, it answers that time and changes nothing, and the quota is asked
//! again in the period that holds it.
//!
//! Invariant: it decides only what it restates exactly — one quota, applied, without a block, a
//! penalty, or numbers set at run time, counting denials only as `over: allow` does — and
//! leaves anything else to the general decision.

use redis::{Cmd, Value};

use super::RedisStore;
use super::codec::{self, Decided, Reading};
use super::constants::FIXED_WINDOW_SLOTS;
use super::keys;
use crate::algorithm::Mode;
use crate::clock::{Clock, SystemClock};
use crate::model::{Micros, Period};
use crate::store::{LimitCall, StoreError};

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

/// A period's slot in its key (`lua/fixed_window.lua`, `fixed_window_slot`): its first hour, so
/// that no two periods share one (the shortest lasts 23 hours).
fn slot(start: Micros) -> u64 {
    start.get() / 3_600_000_000 % FIXED_WINDOW_SLOTS + 1
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
        let now = self.client_now();
        let mut at = now.unwrap_or_else(|| SystemClock.now_us());
        // A second answer in another period would need Redis' time to cross another end.
        for _ in 0..3 {
            let cmd = self.quota_command(&calls[0], period, at, now);
            let reply: Value = self.eval_script(&self.inner.scripts.quota, &cmd).await?;
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
        let now = self.client_now();
        let at = now.unwrap_or_else(|| SystemClock.now_us());
        Some(self.quota_command(&calls[0], period, at, now))
    }

    /// The `EVALSHA` of the quota script for `call`, in the period of `period` that holds `at`.
    fn quota_command(
        &self,
        call: &LimitCall,
        period: &Period,
        at: Micros,
        now: Option<Micros>,
    ) -> Cmd {
        let bounds = period.bounds_at(at);
        let p = &call.step.params;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.inner.scripts.quota.get_hash())
            .arg(1)
            .arg(keys::state_key(&self.inner.prefix, &call.key))
            .arg(call.step.cost)
            .arg(p.capacity)
            .arg(slot(bounds.start))
            .arg(bounds.start)
            .arg(bounds.end)
            .arg(if p.admits_over { "1" } else { "0" });
        if let Some(now) = now {
            cmd.arg(now).arg(self.inner.min_ttl_us);
        }
        cmd
    }
}
