//! Invalidations: how an administrative change made on one node reaches every node's denial cache.
//!
//! A node that resets, blocks or unblocks an identity, or changes its rules, publishes an
//! [`Invalidation`] on an [`InvalidationChannel`]; every node subscribes to the channel and hands
//! what arrives to an [`InvalidationListener`] (the limiter's
//! denial cache). The channel also tells the
//! listener how fresh its view is ([`InvalidationListener::confirmed`]): the listener, not the
//! channel, decides what a silent channel means.
//!
//! The wire form is one JSON object per message: `{"keys":[["rule","limit","identity"],…]}`,
//! `{"rules":["rule",…]}` or `{"all":true}`. Anything else a listener receives is treated as
//! `all` (forgetting more is always safe).

use std::sync::Weak;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{BoxFuture, LimitKey, StoreError};
use crate::model::Micros;

/// What to forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
    /// The state of these keys changed (reset, block, unblock).
    Keys(Vec<LimitKey>),
    /// These rules changed (a reload).
    Rules(Vec<String>),
    /// Anything may have changed (a message was lost or could not be read).
    All,
}

/// The JSON form on the wire.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    keys: Vec<(String, String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rules: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    all: bool,
}

/// Messages larger than this are not parsed (they become [`Invalidation::All`]).
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

impl Invalidation {
    /// The message published for this invalidation.
    pub fn encode(&self) -> String {
        let wire = match self {
            Invalidation::Keys(keys) => Wire {
                keys: keys
                    .iter()
                    .map(|k| {
                        (
                            k.rule.to_string(),
                            k.limit_id.to_string(),
                            k.identity.clone(),
                        )
                    })
                    .collect(),
                rules: Vec::new(),
                all: false,
            },
            Invalidation::Rules(rules) => Wire {
                keys: Vec::new(),
                rules: rules.clone(),
                all: false,
            },
            Invalidation::All => Wire {
                keys: Vec::new(),
                rules: Vec::new(),
                all: true,
            },
        };
        serde_json::to_string(&wire).unwrap_or_else(|_| r#"{"all":true}"#.to_string())
    }

    /// Reads a published message. Whatever cannot be read means [`Invalidation::All`].
    pub fn decode(message: &[u8]) -> Invalidation {
        if message.len() > MAX_MESSAGE_BYTES {
            return Invalidation::All;
        }
        match serde_json::from_slice::<Wire>(message) {
            Ok(w) if w.all || (w.keys.is_empty() == w.rules.is_empty()) => Invalidation::All,
            Ok(w) if !w.keys.is_empty() => Invalidation::Keys(
                w.keys
                    .into_iter()
                    .map(|(rule, limit, identity)| LimitKey {
                        rule: rule.into(),
                        limit_id: limit.into(),
                        identity,
                    })
                    .collect(),
            ),
            Ok(w) => Invalidation::Rules(w.rules),
            Err(_) => Invalidation::All,
        }
    }
}

/// Receives what a channel delivers.
pub trait InvalidationListener: Send + Sync + 'static {
    /// The listener's clock (µs), read by the channel just before it asks the server for a
    /// confirmation, and handed back in [`confirmed`](Self::confirmed).
    fn now_us(&self) -> Micros;

    /// Applies an invalidation published by some node (this one included).
    fn apply(&self, invalidation: Invalidation);

    /// Every invalidation whose [`publish`](InvalidationChannel::publish) had returned when the
    /// listener's clock read `as_of_us` has been delivered through [`apply`](Self::apply).
    fn confirmed(&self, as_of_us: Micros);
}

/// A channel that carries [`Invalidation`]s between nodes.
pub trait InvalidationChannel: Send + Sync + std::fmt::Debug + 'static {
    /// Publishes to every subscribed node (this one included). Returns once the server took it.
    fn publish<'a>(
        &'a self,
        invalidation: &'a Invalidation,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Starts delivering to `listener` in the background, confirming freshness about every
    /// `heartbeat`, and reconnecting whenever the subscription breaks (each new subscription
    /// first delivers [`Invalidation::All`]: messages may have been missed). Stops once the
    /// listener is dropped. Needs a Tokio runtime; without one, nothing is delivered.
    fn subscribe(&self, listener: Weak<dyn InvalidationListener>, heartbeat: Duration);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(identity: &str) -> LimitKey {
        LimitKey {
            rule: "login".into(),
            limit_id: "ip".into(),
            identity: identity.into(),
        }
    }

    #[test]
    fn messages_round_trip() {
        for invalidation in [
            Invalidation::Keys(vec![key("ip=1.2.3.4"), key("*")]),
            Invalidation::Rules(vec!["login".into(), "api".into()]),
            Invalidation::All,
        ] {
            assert_eq!(
                Invalidation::decode(invalidation.encode().as_bytes()),
                invalidation
            );
        }
        assert_eq!(
            Invalidation::Rules(vec!["r".into()]).encode(),
            r#"{"rules":["r"]}"#
        );
    }

    #[test]
    fn anything_unreadable_forgets_everything() {
        for message in [
            &b"not json"[..],
            b"{}",
            b"{\"keys\":[[\"a\",\"b\",\"c\"]],\"rules\":[\"r\"]}",
            b"{\"keys\":[[\"a\",\"b\"]]}",
            b"{\"surprise\":1}",
        ] {
            assert_eq!(Invalidation::decode(message), Invalidation::All);
        }
        let huge = format!("{{\"rules\":[\"{}\"]}}", "x".repeat(MAX_MESSAGE_BYTES));
        assert_eq!(Invalidation::decode(huge.as_bytes()), Invalidation::All);
    }
}
