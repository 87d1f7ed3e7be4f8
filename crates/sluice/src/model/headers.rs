//! The HTTP headers that carry a decision, shared by the service and the middleware.
//!
//! IETF `RateLimit-Policy` / `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11): one item per
//! limit, `q` the quota, `w` the window in whole seconds, `r` the units left, `t` whole seconds
//! until the quota is back. The legacy `X-RateLimit-Limit/-Remaining/-Reset` (reset in seconds)
//! describe the most restrictive limit. `Retry-After` is added when denied, in whole seconds
//! rounded up (rounding down would send clients back too early), at least 1.
//! `Sluice-Over-Quota: true` marks a request admitted past a quota that admits past itself
//! (`over: allow`), whatever the style: it is the overage to bill, not a rate-limit header.
//!
//! For a concurrency limit the same fields read as leases: `q` (and `X-RateLimit-Limit`) is the
//! number of leases that may be held at once, `w` the lease duration, `r` the leases still free
//! after this decision, `t` the seconds until every lease held now would have expired by itself
//! (releases make it sooner). When denied, `Retry-After` is the wait until enough leases expire
//! by themselves; a release may let the request in earlier.

use serde::{Deserialize, Serialize};

use super::{Decision, LimitDecision};

/// Which rate-limit headers to send: `RateLimit-Policy` and `RateLimit` (IETF draft),
/// `X-RateLimit-Limit`, `-Remaining` and `-Reset` (legacy), both, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeaderStyle {
    /// The IETF draft headers only.
    Ietf,
    /// The `X-RateLimit-*` headers only.
    Legacy,
    /// Both (the default).
    #[default]
    Both,
    /// None (`Retry-After` is still sent on denial).
    None,
}

fn secs_up(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// The headers for a decision, as (name, value) pairs.
///
/// ```
/// use sluice::model::{Decision, HeaderStyle, headers};
/// let d = Decision::pass_through("login", "example");
/// assert!(headers(&d, HeaderStyle::Both).iter().all(|(n, _)| *n != "Retry-After"));
/// ```
pub fn headers(d: &Decision, style: HeaderStyle) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(6);
    write_headers(d, style, &mut String::new(), |name, value| {
        out.push((name, value.to_owned()));
    });
    out
}

/// Hands each of the decision's headers, in [`headers`]' order, to `each`, building the values
/// in `buffer`: the per-request path writes them straight into a response without a `String`
/// per header.
pub fn write_headers(
    d: &Decision,
    style: HeaderStyle,
    buffer: &mut String,
    mut each: impl FnMut(&'static str, &str),
) {
    let ietf = matches!(style, HeaderStyle::Ietf | HeaderStyle::Both);
    let legacy = matches!(style, HeaderStyle::Legacy | HeaderStyle::Both);
    let mut write = |name: &'static str, parts: &dyn Fn(&mut String)| {
        buffer.clear();
        parts(buffer);
        each(name, buffer);
    };
    if ietf && !d.limits.is_empty() {
        // One item per limit; with several, each is named `<rule>.<limit id>`.
        let items = |out: &mut String, item: &dyn Fn(&mut String, &LimitDecision)| {
            for (i, l) in d.limits.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('"');
                out.push_str(&d.rule);
                if d.limits.len() > 1 {
                    out.push('.');
                    out.push_str(&l.id);
                }
                out.push('"');
                item(out, l);
            }
        };
        write("RateLimit-Policy", &|out| {
            items(out, &|out, l| {
                push_number(out, ";q=", l.quota);
                push_number(out, ";w=", secs_up(l.window_ms).max(1));
            });
        });
        write("RateLimit", &|out| {
            items(out, &|out, l| {
                push_number(out, ";r=", l.remaining);
                push_number(out, ";t=", secs_up(l.reset_after_ms));
            });
        });
    }
    if legacy && !d.limits.is_empty() {
        write("X-RateLimit-Limit", &|out| push_number(out, "", d.quota));
        write("X-RateLimit-Remaining", &|out| {
            push_number(out, "", d.remaining);
        });
        write("X-RateLimit-Reset", &|out| {
            push_number(out, "", secs_up(d.reset_after_ms));
        });
    }
    if !d.allowed {
        write("Retry-After", &|out| {
            push_number(out, "", retry_after_secs(d))
        });
    }
    if d.over_quota {
        write("Sluice-Over-Quota", &|out| out.push_str("true"));
    }
}

/// Appends `prefix` and `n` in decimal (without `fmt`'s machinery: this runs for every
/// response).
fn push_number(out: &mut String, prefix: &str, n: u64) {
    out.push_str(prefix);
    out.push_str(itoa::Buffer::new().format(n));
}

/// Whole seconds to wait before retrying a denied request, rounded up, at least 1.
pub fn retry_after_secs(d: &Decision) -> u64 {
    secs_up(d.retry_after_ms.unwrap_or(1000)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Algorithm, LimitDecision};

    fn decision(allowed: bool, retry_ms: Option<u64>) -> Decision {
        let limit = LimitDecision {
            id: "ip-gcra-1m".into(),
            attributes: ["ip".into()].into_iter().collect(),
            algorithm: Algorithm::Gcra,
            allowed,
            quota: 5,
            window_ms: 60_000,
            remaining: 3,
            reset_after_ms: 24_001,
            retry_after_ms: retry_ms,
            blocked_until_ms: None,
            violations: 0,
            warning: false,
            delay_ms: 0,
            shadow: false,
            over_quota: false,
        };
        Decision::of_limits("login", false, [limit])
    }

    #[test]
    fn ietf_and_legacy_headers() {
        let h = headers(&decision(true, None), HeaderStyle::Both);
        assert_eq!(
            h,
            [
                ("RateLimit-Policy", "\"login\";q=5;w=60".to_string()),
                ("RateLimit", "\"login\";r=3;t=25".to_string()),
                ("X-RateLimit-Limit", "5".to_string()),
                ("X-RateLimit-Remaining", "3".to_string()),
                ("X-RateLimit-Reset", "25".to_string()),
            ]
        );
    }

    #[test]
    fn several_limits_are_named_after_rule_and_limit() {
        let one = decision(false, Some(2_000)).limits[0].clone();
        let mut other = one.clone();
        other.id = "user-gcra-1h".into();
        other.allowed = true;
        other.quota = 100;
        other.window_ms = 3_600_000;
        other.remaining = 99;
        other.reset_after_ms = 36_000;
        let d = Decision::of_limits("login", false, vec![one, other]);
        assert_eq!(
            headers(&d, HeaderStyle::Ietf),
            [
                (
                    "RateLimit-Policy",
                    "\"login.ip-gcra-1m\";q=5;w=60, \"login.user-gcra-1h\";q=100;w=3600"
                        .to_string()
                ),
                (
                    "RateLimit",
                    "\"login.ip-gcra-1m\";r=3;t=25, \"login.user-gcra-1h\";r=99;t=36".to_string()
                ),
                ("Retry-After", "2".to_string()),
            ]
        );
    }

    #[test]
    fn retry_after_rounds_up() {
        let h = headers(&decision(false, Some(1_001)), HeaderStyle::None);
        assert_eq!(h, [("Retry-After", "2".to_string())]);
        let h = headers(&decision(false, Some(0)), HeaderStyle::None);
        assert_eq!(h, [("Retry-After", "1".to_string())]);
    }
}
