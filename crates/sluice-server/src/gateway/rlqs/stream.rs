//! One proxy's `StreamRateLimitQuotas` stream: its reports in, its assignments out.
//!
//! The first message names the domain; every later one must name the same domain (or none).
//! Each message is checked whole before anything changes ([`Report::read`]): a message with a
//! bad bucket id, a different domain or more buckets than [`MAX_BUCKETS_PER_STREAM`] ends the
//! stream with `INVALID_ARGUMENT` or `RESOURCE_EXHAUSTED` and changes nothing. A checked message
//! is answered with one response holding an action for each bucket it reported; a bucket whose
//! units could not be drawn is left out (see [`super::assign`]), so while the store is down the
//! answer to a report may hold no action at all: it is sent all the same, as an acknowledgement.
//!
//! Buckets are matched to rules through the `envoy` section, as RLS descriptors are
//! ([`find_bucket_mapping`]); a bucket no mapping covers is `ALLOW_ALL`, as an unmatched RLS
//! descriptor is `OK`. When the rules are reloaded, the stream answers at once, without waiting
//! for a report: `abandon_action` for each bucket that mapped to a rule and no longer does, and a
//! fresh assignment for each one whose mapping, rule or timing changed; the others keep theirs.
//!
//! When the stream ends (the proxy went away, the server is stopping), its demands are forgotten
//! here; the proxy keeps its assignments until their time to live.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    AbandonAction, BucketAction as Action, QuotaAssignmentAction,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use super::MAX_BUCKETS_PER_STREAM;
use super::assign::{self, Assignment};
use super::bucket_id::{self, BucketKey};
use super::demand::Ask;
use super::streams::StreamSlot;
use crate::config::gateway::find_bucket_mapping;
use crate::metrics::{RLQS_ACTIONS, RLQS_REPORTS, RLQS_UNITS};
use crate::state::{AppState, Live};

/// What this stream knows of one bucket.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The last demand reported, per report interval.
    demand: u64,
    /// The last assignment sent, and when its time to live ends (microseconds).
    sent: Option<(Assignment, u64)>,
}

/// One bucket's usage from a checked message.
struct Usage {
    bucket: BucketKey,
    demand: u64,
}

/// A checked message.
struct Report {
    usages: Vec<Usage>,
}

impl Report {
    /// Checks a message against the stream's domain and bounds; changes nothing.
    fn read(
        message: &RateLimitQuotaUsageReports,
        domain: Option<&str>,
        held: &HashMap<BucketKey, Held>,
        interval: Duration,
    ) -> Result<Report, Status> {
        match domain {
            None if message.domain.is_empty() => {
                return Err(Status::invalid_argument(
                    "the first message of a stream must name its domain",
                ));
            }
            Some(domain) if !message.domain.is_empty() && message.domain != domain => {
                return Err(Status::invalid_argument(format!(
                    "the stream's domain is `{domain}`; a message named `{}`",
                    message.domain
                )));
            }
            _ => {}
        }
        if message.bucket_quota_usages.len() > MAX_BUCKETS_PER_STREAM {
            return Err(Status::resource_exhausted(format!(
                "a message reports {} buckets; at most {MAX_BUCKETS_PER_STREAM} per stream",
                message.bucket_quota_usages.len()
            )));
        }
        let mut usages: Vec<Usage> = Vec::with_capacity(message.bucket_quota_usages.len());
        let mut seen: HashMap<BucketKey, usize> = HashMap::new();
        let mut new = 0;
        for usage in &message.bucket_quota_usages {
            let bucket = bucket_id::canonical(usage.bucket_id.as_ref())?;
            let asked = usage
                .num_requests_allowed
                .saturating_add(usage.num_requests_denied);
            let demand = per_interval(asked, usage.time_elapsed.as_ref(), interval);
            // A bucket reported twice in one message asks for both.
            if let Some(&at) = seen.get(&bucket) {
                usages[at].demand = usages[at].demand.saturating_add(demand);
                continue;
            }
            new += usize::from(!held.contains_key(&bucket));
            seen.insert(bucket.clone(), usages.len());
            usages.push(Usage { bucket, demand });
        }
        if held.len() + new > MAX_BUCKETS_PER_STREAM {
            return Err(Status::resource_exhausted(format!(
                "a stream may report at most {MAX_BUCKETS_PER_STREAM} buckets"
            )));
        }
        Ok(Report { usages })
    }
}

/// A count over `elapsed` scaled to one report interval, at least 1 (a proxy that reports a
/// bucket may need it); a missing or zero `elapsed` takes the count as it is.
fn per_interval(
    count: u64,
    elapsed: Option<&envoy_types::pb::google::protobuf::Duration>,
    interval: Duration,
) -> u64 {
    let elapsed_us = elapsed
        .map(|d| {
            u128::try_from(d.seconds).unwrap_or(0) * 1_000_000
                + u128::try_from(d.nanos).unwrap_or(0) / 1_000
        })
        .unwrap_or(0);
    let scaled = match elapsed_us {
        0 => u128::from(count),
        us => (u128::from(count) * interval.as_micros()).div_ceil(us),
    };
    u64::try_from(scaled).unwrap_or(u64::MAX).max(1)
}

/// One stream, until the proxy or the server ends it.
pub struct QuotaStream {
    state: Arc<AppState>,
    slot: StreamSlot,
    domain: Option<String>,
    held: HashMap<BucketKey, Held>,
    out: mpsc::Sender<Result<RateLimitQuotaResponse, Status>>,
    /// The config this stream last answered a reload with (or started under).
    live: Arc<Live>,
}

impl QuotaStream {
    /// A stream over `state`, answering on `out`, counted in `slot`.
    pub fn new(
        state: Arc<AppState>,
        slot: StreamSlot,
        out: mpsc::Sender<Result<RateLimitQuotaResponse, Status>>,
    ) -> QuotaStream {
        QuotaStream {
            live: state.live.load_full(),
            state,
            slot,
            domain: None,
            held: HashMap::new(),
            out,
        }
    }

    /// Serves the stream until the proxy closes it, a message is refused, the answers cannot
    /// be sent, or `stopping` turns true.
    pub async fn run(
        mut self,
        mut reports: Streaming<RateLimitQuotaUsageReports>,
        mut stopping: watch::Receiver<bool>,
    ) {
        let mut reloaded = self.state.rlqs.reloads();
        loop {
            tokio::select! {
                message = reports.message() => match message {
                    Ok(Some(message)) => {
                        if let Err(status) = self.report(&message).await {
                            metrics::counter!(RLQS_REPORTS, "result" => "refused").increment(1);
                            let _ = self.out.send(Err(status)).await;
                            break;
                        }
                        metrics::counter!(RLQS_REPORTS, "result" => "answered").increment(1);
                    }
                    // The proxy closed its side, or the connection broke.
                    Ok(None) | Err(_) => break,
                },
                changed = reloaded.changed() => {
                    if changed.is_err() || !self.rules_changed().await {
                        break;
                    }
                }
                () = stopped(&mut stopping) => break,
            }
            if self.out.is_closed() {
                break;
            }
        }
        self.forget_all();
    }

    /// Answers one message.
    async fn report(&mut self, message: &RateLimitQuotaUsageReports) -> Result<(), Status> {
        let interval = self.state.live.load().config.rlqs.report_interval;
        let report = Report::read(message, self.domain.as_deref(), &self.held, interval)?;
        let domain = self
            .domain
            .get_or_insert_with(|| message.domain.clone())
            .clone();
        let mut actions = Vec::with_capacity(report.usages.len());
        for usage in report.usages {
            let held = self.held.entry(usage.bucket.clone()).or_insert(Held {
                demand: usage.demand,
                sent: None,
            });
            held.demand = usage.demand;
            if let Some(action) = self.assign(&domain, &usage.bucket).await {
                actions.push(action);
            }
        }
        self.answer(actions).await;
        Ok(())
    }

    /// After a reload: abandons the buckets that a rule covered and none covers now, assigns
    /// afresh those whose mapping, rule or timing changed, and leaves the others as they are (a
    /// fresh assignment would draw its units again). False when the answers can no longer be
    /// sent.
    async fn rules_changed(&mut self) -> bool {
        let now = self.state.live.load_full();
        let before = std::mem::replace(&mut self.live, now.clone());
        let Some(domain) = self.domain.clone() else {
            return true;
        };
        let buckets: Vec<BucketKey> = self.held.keys().cloned().collect();
        let mut actions = Vec::with_capacity(buckets.len());
        for bucket in buckets {
            let covered = find_bucket_mapping(&now.config.envoy, &domain, &bucket).is_some();
            let was = find_bucket_mapping(&before.config.envoy, &domain, &bucket).is_some();
            if !covered && was {
                self.held.remove(&bucket);
                self.state
                    .rlqs
                    .demands
                    .forget(&domain, &bucket, self.slot.id());
                metrics::counter!(RLQS_ACTIONS, "action" => "abandon").increment(1);
                actions.push(BucketAction {
                    bucket_id: Some(bucket_id::wire(&bucket)),
                    bucket_action: Some(Action::AbandonAction(AbandonAction {})),
                });
                continue;
            }
            if same_terms(&before, &now, &domain, &bucket) {
                continue;
            }
            if let Some(action) = self.assign(&domain, &bucket).await {
                actions.push(action);
            }
        }
        self.send(actions).await;
        !self.out.is_closed()
    }

    /// The assignment of one held bucket, its units drawn; `None` when the store could not be
    /// asked.
    async fn assign(&mut self, domain: &str, bucket: &BucketKey) -> Option<BucketAction> {
        let live = self.state.live.load_full();
        let settings = live.config.rlqs;
        let held = *self.held.get(bucket)?;
        let assignment = match find_bucket_mapping(&live.config.envoy, domain, bucket) {
            None => Assignment::Allow,
            Some((mapping, attributes)) => {
                let rules = self.state.limiter.rules();
                let allowance = rules.get(mapping.rule.as_str()).and_then(|rule| {
                    assign::interval_allowance(
                        &rule.definition.limits,
                        &attributes,
                        settings.report_interval,
                    )
                });
                match allowance {
                    None => Assignment::Allow,
                    Some(pool) => {
                        let now_us = self.state.clock.now_us().get();
                        let ttl_us = micros(settings.ttl());
                        let ask = Ask {
                            stream: self.slot.id(),
                            demand: held.demand,
                            now_us,
                            ttl_us,
                            pool,
                        };
                        let share = self.state.rlqs.demands.share(domain, bucket, ask);
                        // An assignment past its time to live is no longer the proxy's: the next
                        // one starts a new bucket.
                        let holds = held
                            .sent
                            .and_then(|(sent, until)| (now_us < until).then_some(sent));
                        let drawn =
                            assign::draw(&self.state, &mapping.rule, &attributes, share, holds)
                                .await;
                        let Some(drawn) = drawn else {
                            metrics::counter!(RLQS_ACTIONS, "action" => "unanswered").increment(1);
                            return None;
                        };
                        metrics::counter!(RLQS_UNITS, "rule" => mapping.rule.clone())
                            .increment(drawn.units);
                        drawn.assignment
                    }
                }
            }
        };
        let action = match assignment {
            Assignment::Allow => "allow_all",
            Assignment::Deny => "deny_all",
            Assignment::Units(_) => "token_bucket",
        };
        metrics::counter!(RLQS_ACTIONS, "action" => action).increment(1);
        if let Some(entry) = self.held.get_mut(bucket) {
            let until = self
                .state
                .clock
                .now_us()
                .get()
                .saturating_add(micros(settings.ttl()));
            entry.sent = Some((assignment, until));
        }
        Some(BucketAction {
            bucket_id: Some(bucket_id::wire(bucket)),
            bucket_action: Some(Action::QuotaAssignmentAction(QuotaAssignmentAction {
                assignment_time_to_live: Some(assign::proto_duration(settings.ttl())),
                rate_limit_strategy: Some(assign::strategy(assignment, settings.report_interval)),
            })),
        })
    }

    /// Sends actions the server decided by itself (after a reload), when there are any.
    async fn send(&self, actions: Vec<BucketAction>) {
        if !actions.is_empty() {
            self.answer(actions).await;
        }
    }

    /// Sends one response.
    async fn answer(&self, actions: Vec<BucketAction>) {
        let _ = self
            .out
            .send(Ok(RateLimitQuotaResponse {
                bucket_action: actions,
            }))
            .await;
    }

    fn forget_all(&mut self) {
        if let Some(domain) = &self.domain {
            for bucket in self.held.keys() {
                self.state
                    .rlqs
                    .demands
                    .forget(domain, bucket, self.slot.id());
            }
        }
        self.held.clear();
    }
}

/// The rule of that name in a config.
fn rule_in<'a>(live: &'a Live, name: &str) -> Option<&'a sluice::model::Rule> {
    live.config
        .rules
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, rule)| rule)
}

/// Whether a bucket is assigned on the same terms under two configs: the same mapping and
/// attributes, the same rule, the same RLQS timing and the same on/off switch.
fn same_terms(before: &Live, now: &Live, domain: &str, bucket: &BucketKey) -> bool {
    if before.config.rlqs != now.config.rlqs || before.config.enabled != now.config.enabled {
        return false;
    }
    match (
        find_bucket_mapping(&before.config.envoy, domain, bucket),
        find_bucket_mapping(&now.config.envoy, domain, bucket),
    ) {
        (None, None) => true,
        (Some((m1, a1)), Some((m2, a2))) => {
            m1 == m2 && a1 == a2 && rule_in(before, &m1.rule) == rule_in(now, &m2.rule)
        }
        _ => false,
    }
}

/// Resolves once `stopping` turns true (or its sender is gone).
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Duration as ProtoDuration;

    #[test]
    fn demand_is_scaled_to_one_interval() {
        let second = Duration::from_secs(1);
        let half = ProtoDuration {
            seconds: 0,
            nanos: 500_000_000,
        };
        assert_eq!(per_interval(10, Some(&half), second), 20);
        assert_eq!(per_interval(10, None, second), 10);
        assert_eq!(per_interval(0, None, second), 1);
    }

    #[test]
    fn a_bucket_reported_twice_in_one_message_asks_for_both() {
        use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
        use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
        let usage = |order: [(&str, &str); 2], allowed| BucketQuotaUsage {
            bucket_id: Some(BucketId {
                bucket: order
                    .iter()
                    .map(|&(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }),
            num_requests_allowed: allowed,
            ..BucketQuotaUsage::default()
        };
        let message = RateLimitQuotaUsageReports {
            domain: "edge".into(),
            bucket_quota_usages: vec![
                usage([("a", "1"), ("b", "2")], 3),
                usage([("b", "2"), ("a", "1")], 4),
            ],
        };
        let report = Report::read(&message, None, &HashMap::new(), Duration::from_secs(1)).unwrap();
        assert_eq!(report.usages.len(), 1);
        assert_eq!(report.usages[0].demand, 7);
        // Another domain on the same stream is refused.
        let refused = Report::read(
            &message,
            Some("other"),
            &HashMap::new(),
            Duration::from_secs(1),
        );
        assert_eq!(
            refused.err().map(|s| s.code()),
            Some(tonic::Code::InvalidArgument)
        );
    }
}
