//! `GET /v1/stats`: what the dashboard shows besides the rules and blocks, and
//! `POST /v1/blocks/lift`: lifting a block as the blocks listing names it.
//!
//! Decision counts are this process's own `sluice_decisions_total` and
//! `sluice_degraded_decisions_total` counters (read from the metrics recorder, so every way a
//! decision is made, HTTP, gateway or gRPC, is counted once), totals since the start; the page
//! turns them into rates. Each node of a fleet reports its own decisions. A rule whose limit
//! takes batches (hot keys) also has `batch`: the units this process holds now, and those it
//! took and gave back since it started.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sluice::store::LimitKey;

use super::super::bodies::LiftBody;
use super::super::error::{ApiError, ErrorCode, json_body};
use super::super::routes::store_answer;
use crate::api_error::ErrorBody;
use crate::metrics;
use crate::state::{AppState, now_ms};

/// Longest identity accepted by `lift` (escaped identities of the longest attributes fit).
const MAX_IDENTITY: usize = 4096;

/// Decision counts of one rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Allowed decisions.
    pub allowed: u64,
    /// Denied decisions.
    pub denied: u64,
    /// Decisions a shadow rule would have denied (allowed).
    pub shadow_denied: u64,
    /// Decisions made by the fail policy while the store was unavailable.
    pub degraded: u64,
}

/// The per-rule counters in Prometheus text (the recorder's own rendering).
pub fn counts(text: &str) -> BTreeMap<String, Counts> {
    let mut out: BTreeMap<String, Counts> = BTreeMap::new();
    for line in text.lines() {
        let Some((name, labels, value)) = sample(line) else {
            continue;
        };
        let label = |key: &str| {
            labels
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        };
        let Some(rule) = label("rule") else {
            continue;
        };
        let counts = out.entry(rule).or_default();
        match (name, label("outcome").as_deref()) {
            ("sluice_decisions_total", Some("allowed")) => counts.allowed += value,
            ("sluice_decisions_total", Some("denied")) => counts.denied += value,
            ("sluice_decisions_total", Some("shadow_denied")) => counts.shadow_denied += value,
            ("sluice_degraded_decisions_total", _) => counts.degraded += value,
            _ => {}
        }
    }
    out
}

/// One Prometheus sample: metric name, labels (values unescaped), value.
type Sample<'a> = (&'a str, Vec<(&'a str, String)>, u64);

/// `name{k="v",...} value` → its parts; `None` for anything else.
fn sample(line: &str) -> Option<Sample<'_>> {
    let (name, rest) = line.split_once('{')?;
    let mut labels = Vec::new();
    let mut rest = rest;
    loop {
        rest = rest.trim_start_matches(',');
        if let Some(after) = rest.strip_prefix('}') {
            let value: f64 = after.trim().split(' ').next()?.parse().ok()?;
            return Some((name, labels, value as u64));
        }
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key, value));
        rest = &after[end + 1..];
    }
}

#[utoipa::path(get, path = "/v1/stats", tag = "admin", description = "What the dashboard shows: decisions per rule (and, for a rule whose limit takes hot-key batches, `batch`: the units this node holds, took and gave back), the store's health, the most denied identities.", security(("admin_token" = [])), responses((status = 200, description = "The counters", body = Object), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody)))]
pub(in crate::http) async fn stats(State(state): State<Arc<AppState>>) -> Json<Value> {
    let counts = counts(&metrics::render());
    let live = state.live.load();
    let held = state.limiter.held_units();
    let rules: serde_json::Map<String, Value> = state
        .limiter
        .rules()
        .keys()
        .map(|rule| {
            let c = counts.get(rule).copied().unwrap_or_default();
            let top: Vec<Value> = state
                .top_denied
                .top(rule)
                .into_iter()
                .map(|(identity, denials)| json!({ "identity": identity, "denials": denials }))
                .collect();
            let mut entry = serde_json::to_value(c).unwrap_or(Value::Null);
            if let Value::Object(fields) = &mut entry {
                fields.insert("top_denied".into(), Value::Array(top));
                if let Some(units) = held.iter().find(|u| &u.rule == rule) {
                    fields.insert(
                        "batch".into(),
                        json!({
                            "held": units.held,
                            "given_back": units.given_back,
                            "taken": units.taken,
                        }),
                    );
                }
            }
            (rule.clone(), entry)
        })
        .collect();
    let store = state.limiter.store();
    let answer = store_answer(&state).await;
    let (in_flight, in_flight_limit) = state.limiter.store_in_flight();
    Json(json!({
        "now_ms": now_ms(),
        "version": live.version,
        "loaded_at_ms": live.loaded_at_ms,
        "enabled": live.config.enabled,
        "store": {
            "name": store.name(),
            "healthy": answer.is_ok(),
            "skipped": state.limiter.store_skipped(),
            "in_flight": in_flight,
            "in_flight_limit": in_flight_limit,
            "error": answer.err(),
        },
        "rules": rules,
    }))
}

/// The body of `POST /v1/blocks/lift`: one entry of `GET /v1/blocks`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct LiftRequest {
    /// The rule.
    rule: String,
    /// The limit's id.
    limit: String,
    /// The identity, as listed.
    identity: String,
}

/// Whether `identity` has the shape of an escaped identity (see `sluice::limiter::identity`).
fn is_identity(identity: &str) -> bool {
    !identity.is_empty()
        && identity.len() <= MAX_IDENTITY
        && identity
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@+-~=,*|".contains(&b))
}

#[utoipa::path(post, path = "/v1/blocks/lift", tag = "admin", description = "Lifts one block as `GET /v1/blocks` lists it.", security(("admin_token" = [])), request_body(content = LiftRequest, content_type = "application/json"), responses((status = 200, description = "Whether it was blocked", body = LiftBody), (status = 400, description = "Bad input (`bad_json`, `unknown_limit`, `bad_identity`, …)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(in crate::http) async fn lift(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<LiftBody>, ApiError> {
    let request: LiftRequest = json_body(body)?;
    let rules = state.limiter.rules();
    let rule = rules.get(&request.rule).ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnknownRule,
            format!("no rule `{}` in force", request.rule),
        )
        .with_rule(&request.rule)
    })?;
    let Some(limit) = rule
        .definition
        .limits
        .iter()
        .map(|l| l.id())
        .find(|id| *id == request.limit)
    else {
        return Err(ApiError {
            rule: Some(request.rule.clone()),
            limit_id: Some(request.limit.clone()),
            ..ApiError::new(
                ErrorCode::UnknownLimit,
                format!("rule `{}` has no limit `{}`", request.rule, request.limit),
            )
        });
    };
    if !is_identity(&request.identity) {
        return Err(ApiError::new(
            ErrorCode::BadIdentity,
            "`identity` must be an identity as `GET /v1/blocks` lists it",
        ));
    }
    let key = LimitKey {
        rule: request.rule.as_str().into(),
        limit_id: limit.into(),
        identity: request.identity.clone(),
    };
    let was = state.limiter.unblock_key(&key).await?;
    tracing::info!(rule = %request.rule, limit = %request.limit, identity = %request.identity,
        was_blocked = was, "block lifted from the dashboard");
    Ok(Json(LiftBody {
        rule: request.rule,
        limit: request.limit,
        identity: request.identity,
        unblocked: was,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_per_rule_and_outcome() {
        let text = "# TYPE sluice_decisions_total counter\n\
            sluice_decisions_total{rule=\"login\",outcome=\"allowed\"} 3\n\
            sluice_decisions_total{outcome=\"denied\",rule=\"login\"} 2\n\
            sluice_decisions_total{rule=\"api\",outcome=\"shadow_denied\"} 7\n\
            sluice_degraded_decisions_total{rule=\"api\"} 4\n\
            sluice_store_errors_total{store=\"redis\"} 9\n\
            sluice_top_denied_identities{rule=\"x\",identity=\"a\\\"b,c}\"} 1\n";
        let counts = counts(text);
        assert_eq!(
            counts["login"],
            Counts {
                allowed: 3,
                denied: 2,
                ..Counts::default()
            }
        );
        assert_eq!(
            (counts["api"].shadow_denied, counts["api"].degraded),
            (7, 4)
        );
        assert_eq!(counts["x"], Counts::default(), "other series are ignored");
    }

    #[test]
    fn only_escaped_identities_are_lifted() {
        assert!(is_identity("ip=203.0.113.9"));
        assert!(is_identity("member=m1,promo_code=~0a1b"));
        assert!(is_identity("*"));
        for bad in ["", "a:b", "a b", "x{y}", &"a".repeat(MAX_IDENTITY + 1)] {
            assert!(!is_identity(bad), "{bad}");
        }
    }
}
