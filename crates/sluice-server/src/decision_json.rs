//! A [`Decision`] as JSON, written straight into a byte buffer.
//!
//! The output is byte for byte what `serde_json` writes from `Decision`'s `Serialize` (the
//! tests below hold the two together on random decisions), optionally followed by a `message`
//! field. It exists because the decision service writes one per request: through serde, every
//! key is escaped again and every piece of punctuation is a call of its own, which made the
//! body cost more than the decision. Here keys are constants, numbers go through `itoa`, and
//! only strings that need escaping go through `serde_json`.

use sluice::{Decision, LimitDecision};

/// Appends `d` as a JSON object to `out`, with `"message": message` as its last field when
/// given (the service's body for a denied check).
pub fn write_decision_json(out: &mut Vec<u8>, d: &Decision, message: Option<&str>) {
    push_bool(out, b"{\"allowed\":", d.allowed);
    out.extend_from_slice(b",\"rule\":");
    push_str(out, &d.rule);
    push_number(out, b",\"limit\":", d.quota);
    push_number(out, b",\"remaining\":", d.remaining);
    push_number(out, b",\"reset_after_ms\":", d.reset_after_ms);
    push_option(out, b",\"retry_after_ms\":", d.retry_after_ms);
    push_option(out, b",\"blocked_until_ms\":", d.blocked_until_ms);
    push_number(out, b",\"violations\":", d.violations);
    push_bool(out, b",\"warning\":", d.warning);
    push_bool(out, b",\"degraded\":", d.degraded);
    push_bool(out, b",\"shadow\":", d.shadow);
    if d.over_quota {
        out.extend_from_slice(b",\"over_quota\":true");
    }
    push_number(out, b",\"delay_ms\":", d.delay_ms);
    if let Some(reason) = &d.reason {
        out.extend_from_slice(b",\"reason\":");
        push_str(out, reason);
    }
    out.extend_from_slice(b",\"limits\":[");
    for (i, limit) in d.limits.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_limit(out, limit);
    }
    out.push(b']');
    if let Some(lease) = &d.lease {
        out.extend_from_slice(b",\"lease\":");
        push_str(out, lease);
    }
    if let Some(until) = d.lease_until_ms {
        push_number(out, b",\"lease_until_ms\":", until);
    }
    if let Some(reservation) = &d.reservation {
        out.extend_from_slice(b",\"reservation\":");
        push_str(out, reservation);
    }
    if let Some(until) = d.reservation_until_ms {
        push_number(out, b",\"reservation_until_ms\":", until);
    }
    if let Some(message) = message {
        out.extend_from_slice(b",\"message\":");
        push_str(out, message);
    }
    out.push(b'}');
}

fn push_limit(out: &mut Vec<u8>, l: &LimitDecision) {
    out.extend_from_slice(b"{\"id\":");
    push_str(out, &l.id);
    out.extend_from_slice(b",\"identity\":[");
    for (i, name) in l.attributes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, name);
    }
    out.extend_from_slice(b"],\"algorithm\":");
    push_str(out, l.algorithm.name());
    push_bool(out, b",\"allowed\":", l.allowed);
    push_number(out, b",\"limit\":", l.quota);
    push_number(out, b",\"window_ms\":", l.window_ms);
    push_number(out, b",\"remaining\":", l.remaining);
    push_number(out, b",\"reset_after_ms\":", l.reset_after_ms);
    push_option(out, b",\"retry_after_ms\":", l.retry_after_ms);
    push_option(out, b",\"blocked_until_ms\":", l.blocked_until_ms);
    push_number(out, b",\"violations\":", l.violations);
    push_bool(out, b",\"warning\":", l.warning);
    push_number(out, b",\"delay_ms\":", l.delay_ms);
    push_bool(out, b",\"shadow\":", l.shadow);
    if l.over_quota {
        out.extend_from_slice(b",\"over_quota\":true");
    }
    out.push(b'}');
}

fn push_bool(out: &mut Vec<u8>, key: &[u8], b: bool) {
    out.extend_from_slice(key);
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

fn push_number(out: &mut Vec<u8>, key: &[u8], n: u64) {
    out.extend_from_slice(key);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn push_option(out: &mut Vec<u8>, key: &[u8], n: Option<u64>) {
    match n {
        Some(n) => push_number(out, key, n),
        None => {
            out.extend_from_slice(key);
            out.extend_from_slice(b"null");
        }
    }
}

/// A JSON string: copied as it is when nothing in it needs escaping (names are token
/// characters), escaped by `serde_json` otherwise.
fn push_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::bodies::DecisionBody;
    use proptest::prelude::*;
    use sluice::model::{Algorithm, AttributeNames, LimitDecisions, Name};

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9_.-]{1,12}",
            any::<String>(),
            Just("quote\" back\\slash \n tab\t \u{1} é ☃".to_string()),
        ]
    }

    /// A limit's decision with every field at its zero, to be filled in.
    pub(crate) fn blank_limit() -> LimitDecision {
        serde_json::from_value(serde_json::json!({
            "id": "l", "identity": [], "algorithm": "gcra", "allowed": false, "limit": 0,
            "window_ms": 0, "remaining": 0, "reset_after_ms": 0, "violations": 0,
            "warning": false, "delay_ms": 0, "shadow": false,
        }))
        .expect("a limit's decision")
    }

    fn number() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0), Just(u64::MAX), any::<u64>(), 0..1000u64]
    }

    prop_compose! {
        fn limit()(
            id in text(),
            identity in prop::collection::vec(text(), 0..4),
            algorithm in prop::sample::select(Algorithm::ALL.to_vec()),
            flags in any::<[bool; 4]>(),
            numbers in prop::array::uniform6(number()),
            options in any::<[Option<u64>; 2]>(),
        ) -> LimitDecision {
            // Both types are `#[non_exhaustive]`: start from a blank one and set every field.
            let mut d = blank_limit();
            d.id = Name::from(id.as_str());
            d.attributes = identity.iter().map(|n| Name::from(n.as_str())).collect::<AttributeNames>();
            d.algorithm = algorithm;
            d.allowed = flags[0];
            d.quota = numbers[0];
            d.window_ms = numbers[1];
            d.remaining = numbers[2];
            d.reset_after_ms = numbers[3];
            d.retry_after_ms = options[0];
            d.blocked_until_ms = options[1];
            d.violations = numbers[4];
            d.warning = flags[1];
            d.delay_ms = numbers[5];
            d.shadow = flags[2];
            d.over_quota = flags[3];
            d
        }
    }

    prop_compose! {
        fn decision()(
            rule in text(),
            limits in prop::collection::vec(limit(), 0..4),
            flags in any::<[bool; 5]>(),
            numbers in prop::array::uniform5(number()),
            options in any::<[Option<u64>; 4]>(),
            strings in prop::array::uniform3(prop::option::of(text())),
        ) -> Decision {
            let mut d = Decision::pass_through(rule.as_str(), "");
            d.allowed = flags[0];
            d.quota = numbers[0];
            d.remaining = numbers[1];
            d.reset_after_ms = numbers[2];
            d.retry_after_ms = options[0];
            d.blocked_until_ms = options[1];
            d.violations = numbers[3];
            d.warning = flags[1];
            d.degraded = flags[2];
            d.shadow = flags[3];
            d.over_quota = flags[4];
            d.delay_ms = numbers[4];
            d.reason = strings[0].clone();
            d.limits = LimitDecisions::from_vec(limits);
            d.lease = strings[1].clone();
            d.lease_until_ms = options[2];
            d.reservation = strings[2].clone();
            d.reservation_until_ms = options[3];
            d
        }
    }

    proptest! {
        #[test]
        fn writes_what_serde_writes(d in decision(), message in prop::option::of(text())) {
            let mut ours = Vec::new();
            write_decision_json(&mut ours, &d, message.as_deref());
            // The body the API document describes, through serde.
            let reference = serde_json::to_vec(&DecisionBody { decision: &d, message: message.as_deref() }).unwrap();
            prop_assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(reference).unwrap());
        }
    }
}
