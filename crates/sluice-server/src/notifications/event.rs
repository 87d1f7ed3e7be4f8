//! A quota crossing as the event its webhook receives: CloudEvents 1.0 in structured mode
//! (`application/cloudevents+json`), its `id` the crossing's own, so every retry of one crossing
//! carries the same id and a receiver can drop the repeats.

use serde_json::{Value, json};
use sluice::{Micros, QuotaCrossing};

/// The media type of an event's body.
pub const CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";

/// The CloudEvents `type` of a crossing.
pub const EVENT_TYPE: &str = "dev.sluice.quota.threshold_crossed";

/// The event of `crossing`.
///
/// ```
/// # use sluice_server::notifications::event;
/// # let crossing = event::example();
/// let e = event::of(&crossing);
/// assert_eq!(e["specversion"], "1.0");
/// assert_eq!(e["id"], crossing.id());
/// assert_eq!(e["data"]["threshold"], 0.8);
/// ```
pub fn of(c: &QuotaCrossing) -> Value {
    json!({
        "specversion": "1.0",
        "type": EVENT_TYPE,
        "source": format!("/sluice/rules/{}/limits/{}", c.rule, c.limit_id),
        "id": c.id(),
        "time": rfc3339(c.at),
        "subject": c.identity,
        "datacontenttype": "application/json",
        "data": {
            "rule": &*c.rule,
            "limit": &*c.limit_id,
            "identity": c.identity,
            "threshold": c.threshold.share(),
            "quota": c.quota,
            "used": c.used,
            "period": {
                "start": rfc3339(c.period.start),
                "end": rfc3339(c.period.end),
            },
        },
    })
}

/// An instant as RFC 3339 in UTC, to the microsecond when it has them.
fn rfc3339(t: Micros) -> String {
    i64::try_from(t.get())
        .ok()
        .and_then(|us| jiff::Timestamp::from_microsecond(us).ok())
        .map_or_else(|| t.get().to_string(), |ts| ts.to_string())
}

/// A crossing to show the event with (80 % of a monthly quota of 100, May 2026).
#[doc(hidden)]
pub fn example() -> QuotaCrossing {
    let mut c = QuotaCrossing::example();
    c.threshold = sluice::model::Threshold::new(0.8).expect("a share");
    c.used = 80;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_names_what_was_crossed() {
        let e = of(&example());
        assert_eq!(e["type"], EVENT_TYPE);
        assert_eq!(e["source"], "/sluice/rules/plan/limits/tenant-quota-month");
        assert_eq!(e["subject"], "tenant=42");
        assert_eq!(e["time"], "2026-05-20T12:00:00Z");
        assert_eq!(e["data"]["period"]["start"], "2026-05-01T00:00:00Z");
        assert_eq!(e["data"]["period"]["end"], "2026-06-01T00:00:00Z");
        assert_eq!(
            (e["data"]["quota"].as_u64(), e["data"]["used"].as_u64()),
            (Some(100), Some(80))
        );
        assert_eq!(e["id"].as_str().unwrap().len(), 40);
    }
}
