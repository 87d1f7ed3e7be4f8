//! Concurrency: at most `capacity` units held at once by leases, a count of work in progress
//! rather than a rate.
//!
//! An admitted request takes a lease of `cost` units under a token the caller chose (see
//! [`LeaseToken`]), lasting `window` (the limit's `lease` duration) from `now`. The lease ends
//! when its holder [`release`]s it, or by itself when it expires; [`renew`] moves its end to
//! `window` from now. A request of `cost` is admitted when the units of the leases still in force
//! plus `cost` fit in `capacity`. When denied, `retry_after` is the wait until enough leases
//! expire by themselves (an earlier release lets the request in sooner); `reset_after` is the
//! wait until every lease held now has expired. Leases are kept in order of expiry, so expired
//! ones are dropped from the front and the retry time is a walk from the oldest.
//!
//! Releasing or renewing a lease that has expired or was released already changes nothing and
//! says so. A token names one lease: a request admitted under a token that holds a lease adds
//! its units to that lease and moves its end (the limiter draws a fresh token per check, so this
//! only happens to direct store calls). Requests without a token share the anonymous lease,
//! which only expiry ends. The Redis script keeps the same leases in a sorted set scored by
//! expiry.

use std::fmt;
use std::str::FromStr;

use super::{Mode, Outcome, Params};
use crate::model::Micros;

/// The token a lease is held under: 128 bits the caller draws at random, so that nobody can
/// release or renew a lease they were not given. Written as 22 URL-safe base64 characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LeaseToken(pub [u8; 16]);

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl LeaseToken {
    /// Length of the text form.
    pub const TEXT_LEN: usize = 22;

    /// The token of leases taken without one: they can only expire.
    pub const ANONYMOUS: LeaseToken = LeaseToken([0; 16]);
}

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = u128::from_be_bytes(self.0);
        let mut out = [0u8; LeaseToken::TEXT_LEN];
        // 21 characters of 6 bits, then the last 2 bits shifted to the top of the 22nd.
        for (i, c) in out.iter_mut().enumerate() {
            let shift = 128 - 6 * (i as i32 + 1);
            let six = if shift >= 0 {
                (bits >> shift) & 63
            } else {
                (bits << -shift) & 63
            };
            *c = ALPHABET[six as usize];
        }
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

/// Why a text is not a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadToken;

impl FromStr for LeaseToken {
    type Err = BadToken;
    /// Parses the text form, refusing anything but the canonical 22 characters.
    fn from_str(text: &str) -> Result<LeaseToken, BadToken> {
        if text.len() != LeaseToken::TEXT_LEN {
            return Err(BadToken);
        }
        let mut bits: u128 = 0;
        for (i, b) in text.bytes().enumerate() {
            let six = ALPHABET.iter().position(|&a| a == b).ok_or(BadToken)? as u128;
            if i < LeaseToken::TEXT_LEN - 1 {
                bits = (bits << 6) | six;
            } else {
                // The last character carries 2 bits; the other 4 must be zero (one text per token).
                if six & 15 != 0 {
                    return Err(BadToken);
                }
                bits = (bits << 2) | (six >> 4);
            }
        }
        Ok(LeaseToken(bits.to_be_bytes()))
    }
}

/// One lease in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it.
    pub token: LeaseToken,
    /// The units it holds (the cost of the request that took it).
    pub units: u64,
    /// When it ends unless released or renewed.
    pub expires_us: Micros,
}

/// The leases in force, earliest expiry first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// Ordered by `expires_us`.
    pub leases: Vec<Lease>,
}

impl State {
    /// Units held by the leases (expired ones included until [`State::prune`]).
    pub fn held(&self) -> u64 {
        self.leases.iter().map(|l| l.units).sum()
    }

    /// Drops the leases that have expired at `now`.
    pub fn prune(&mut self, now: Micros) {
        let expired = self.leases.partition_point(|l| l.expires_us <= now);
        self.leases.drain(..expired);
    }

    fn insert(&mut self, lease: Lease) {
        let at = self
            .leases
            .partition_point(|l| l.expires_us <= lease.expires_us);
        self.leases.insert(at, lease);
    }

    fn position(&self, token: LeaseToken) -> Option<usize> {
        self.leases.iter().position(|l| l.token == token)
    }

    /// Until every lease has expired (0 without leases): how long the state matters.
    pub fn reset_after_us(&self, now: Micros) -> Micros {
        self.leases
            .last()
            .map_or(Micros::ZERO, |l| l.expires_us.saturating_sub(now))
    }
}

/// Decides `cost` units at `now`; when applied and admitted, takes a lease under `token`
/// (anonymous when `None`).
pub fn decide(
    state: &mut State,
    now: Micros,
    p: &Params,
    cost: u64,
    mode: Mode,
    token: Option<LeaseToken>,
) -> Outcome {
    state.prune(now);
    let held = state.held();
    let allowed = held.saturating_add(cost) <= p.capacity;
    let retry_after_us = (!allowed).then(|| {
        // The request fits once leases holding `need` units have expired, oldest first.
        let need = held + cost - p.capacity;
        let mut freed = 0;
        state
            .leases
            .iter()
            .find(|l| {
                freed += l.units;
                freed >= need
            })
            .map_or(p.window_us, |l| l.expires_us - now)
    });
    if mode == Mode::Apply && allowed {
        let token = token.unwrap_or(LeaseToken::ANONYMOUS);
        // A token names one lease: taking another under it adds to that one.
        let before = state
            .position(token)
            .map_or(0, |i| state.leases.remove(i).units);
        state.insert(Lease {
            token,
            units: before + cost,
            expires_us: now.saturating_add(p.window_us),
        });
    }
    Outcome::unshaped(
        allowed,
        p.capacity.saturating_sub(state.held()),
        state.reset_after_us(now),
        retry_after_us,
    )
}

/// Ends the lease held under `token`. Returns whether it was in force (false when it expired or
/// was released already: nothing changes then).
pub fn release(state: &mut State, now: Micros, token: LeaseToken) -> bool {
    state.prune(now);
    match state.position(token) {
        Some(i) => {
            state.leases.remove(i);
            true
        }
        None => false,
    }
}

/// Moves the end of the lease held under `token` to `lease_us` (the limit's lease duration)
/// from `now`. Returns its new end, or `None` when it is no longer in force (a lease that lapsed
/// is not taken again: the units may be held by someone else by now).
pub fn renew(
    state: &mut State,
    now: Micros,
    lease_us: Micros,
    token: LeaseToken,
) -> Option<Micros> {
    state.prune(now);
    let i = state.position(token)?;
    let mut lease = state.leases.remove(i);
    lease.expires_us = now.saturating_add(lease_us);
    state.insert(lease);
    Some(lease.expires_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    fn token(n: u8) -> Option<LeaseToken> {
        Some(LeaseToken([n; 16]))
    }

    #[test]
    fn holds_n_denies_the_next_until_a_release() {
        let p = Params::new(3, 30 * S, 3);
        let mut s = State::default();
        for i in 0..3 {
            let o = decide(&mut s, i * S, &p, 1, Mode::Apply, token(i as u8 + 1));
            assert!(o.allowed);
            assert_eq!(o.remaining, 2 - i);
        }
        let denied = decide(&mut s, 5 * S, &p, 1, Mode::Apply, token(9));
        assert!(!denied.allowed);
        // The first lease (taken at 0) expires at 30 s; all are gone at 32 s.
        assert_eq!(denied.retry_after_us, Some(25 * S));
        assert_eq!(denied.reset_after_us, 27 * S);
        assert!(release(&mut s, 6 * S, LeaseToken([2; 16])));
        assert!(
            !release(&mut s, 6 * S, LeaseToken([2; 16])),
            "released twice"
        );
        assert!(decide(&mut s, 6 * S, &p, 1, Mode::Apply, token(9)).allowed);
        assert!(!decide(&mut s, 6 * S, &p, 1, Mode::Apply, token(10)).allowed);
    }

    #[test]
    fn leases_expire_and_renewals_move_their_end() {
        let p = Params::new(1, 10 * S, 1);
        let mut s = State::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply, token(1)).allowed);
        assert_eq!(
            renew(&mut s, 8 * S, 10 * S, LeaseToken([1; 16])),
            Some(18 * S)
        );
        assert!(!decide(&mut s, 17 * S, &p, 1, Mode::Apply, token(2)).allowed);
        assert!(decide(&mut s, 18 * S, &p, 1, Mode::Apply, token(2)).allowed);
        // The first lease lapsed: it is not renewed, nor released.
        assert_eq!(renew(&mut s, 18 * S, 10 * S, LeaseToken([1; 16])), None);
        assert!(!release(&mut s, 18 * S, LeaseToken([1; 16])));
    }

    #[test]
    fn costs_hold_units_and_retry_waits_for_enough_of_them() {
        let p = Params::new(5, 10 * S, 5);
        let mut s = State::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 2, Mode::Apply, token(1)).allowed);
        assert!(decide(&mut s, S, &p, 3, Mode::Apply, token(2)).allowed);
        let o = decide(&mut s, 2 * S, &p, 4, Mode::Apply, token(3));
        assert!(!o.allowed);
        // Four units must go: both leases, the second ending at 11 s.
        assert_eq!(o.retry_after_us, Some(9 * S));
        assert!(!decide(&mut s, 2 * S, &p, 1, Mode::Peek, None).allowed);
        assert_eq!(s.held(), 5, "a peek takes nothing");
    }

    #[test]
    fn tokens_round_trip_and_only_canonical_text_parses() {
        for bytes in [[0u8; 16], [255; 16], *b"0123456789abcdef"] {
            let t = LeaseToken(bytes);
            let text = t.to_string();
            assert_eq!(text.len(), LeaseToken::TEXT_LEN);
            assert_eq!(text.parse(), Ok(t));
        }
        assert_eq!("A".repeat(21).parse::<LeaseToken>(), Err(BadToken));
        assert_eq!(
            format!("{}B", "A".repeat(21)).parse::<LeaseToken>(),
            Err(BadToken)
        );
        assert_eq!(
            format!("{}Q", "A".repeat(21))
                .parse::<LeaseToken>()
                .map(|t| t.0[15]),
            Ok(1)
        );
        assert_eq!(
            format!("{}:", "A".repeat(21)).parse::<LeaseToken>(),
            Err(BadToken)
        );
    }
}
