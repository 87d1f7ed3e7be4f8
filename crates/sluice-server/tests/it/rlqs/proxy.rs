//! A simulated Envoy `rate_limit_quota` filter with one bucket, driven through envoy-types'
//! generated client, behaving as the filter's documentation says:
//! - the first request of a bucket with no assignment is decided by `no_assignment_behavior`
//!   and reported at once (the subscription); then usage is reported every report interval;
//! - a token bucket assignment starts full when it is new or its settings changed, and an
//!   unchanged one keeps its tokens; it refills continuously (`tokens_per_fill` per
//!   `fill_interval`);
//! - an assignment is applied until its time to live ends, then `expired_assignment_behavior`;
//!   `abandon_action` drops it (back to no assignment);
//! - a broken stream leaves the assignment in force; the proxy opens a new stream when it next
//!   reports.
//!
//! Time is the test's [`ManualClock`]: a request is decided at the clock's reading, and every
//! wait is for an event (an answer on the stream), never for time to pass.

use std::collections::HashMap;
use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use sluice::{Clock, ManualClock};
use std::sync::Arc;
use tokio::sync::mpsc;
use tonic::Streaming;

/// How long a test waits for an answer it is owed before it fails (a hang guard, not a pace).
const ANSWER_GUARD: Duration = Duration::from_secs(30);

/// What a proxy applies to its bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Applied {
    Allow,
    Deny,
    Bucket {
        max: u32,
        per_fill: u32,
        fill_us: u64,
    },
}

fn applied(strategy: Option<&Strategy>) -> Applied {
    match strategy {
        Some(Strategy::BlanketRule(rule)) if *rule == BlanketRule::DenyAll as i32 => Applied::Deny,
        Some(Strategy::TokenBucket(tb)) => Applied::Bucket {
            max: tb.max_tokens,
            per_fill: tb.tokens_per_fill.map_or(1, |v| v.value),
            fill_us: tb.fill_interval.map_or(1_000_000, |d| {
                d.seconds as u64 * 1_000_000 + d.nanos as u64 / 1_000
            }),
        },
        _ => Applied::Allow,
    }
}

/// One proxy and its bucket.
pub struct Proxy {
    pub name: String,
    clock: Arc<ManualClock>,
    domain: String,
    bucket: HashMap<String, String>,
    /// `no_assignment_behavior` (and the expired one: both `DENY_ALL` in these tests unless set).
    pub no_assignment: Applied,
    pub expired: Applied,
    assignment: Option<(Applied, u64)>,
    tokens: f64,
    filled_at_us: u64,
    allowed: u64,
    denied: u64,
    reported_at_us: u64,
    subscribed: bool,
    stream: Option<(
        mpsc::Sender<RateLimitQuotaUsageReports>,
        Streaming<RateLimitQuotaResponse>,
    )>,
    /// The server this proxy connects to.
    pub server: String,
    /// Assignments received, newest last.
    pub assignments: Vec<Applied>,
    /// Streams opened so far.
    pub opened: usize,
}

impl Proxy {
    /// A proxy of domain `edge` whose bucket is `{key: value}`.
    pub fn new(
        name: &str,
        clock: Arc<ManualClock>,
        server: String,
        key: &str,
        value: &str,
    ) -> Proxy {
        Proxy {
            name: name.to_string(),
            domain: "edge".into(),
            bucket: [(key.to_string(), value.to_string())].into(),
            reported_at_us: clock.now_us().get(),
            clock,
            no_assignment: Applied::Deny,
            expired: Applied::Deny,
            assignment: None,
            tokens: 0.0,
            filled_at_us: 0,
            allowed: 0,
            denied: 0,
            subscribed: false,
            stream: None,
            server,
            assignments: Vec::new(),
            opened: 0,
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_us().get()
    }

    /// What applies now.
    pub fn in_force(&self) -> Applied {
        match self.assignment {
            None => self.no_assignment,
            Some((_, expires)) if self.now() >= expires => self.expired,
            Some((applied, _)) => applied,
        }
    }

    /// The units per interval of the token bucket in force (0 when none).
    pub fn units(&self) -> u64 {
        match self.in_force() {
            Applied::Bucket { per_fill, .. } => u64::from(per_fill),
            _ => 0,
        }
    }

    /// What the token bucket in force may admit undrawn from a moment on: its burst (the tokens
    /// it may hold then) and one interval's fill (drawn before). 0 when none is in force.
    pub fn exposure(&self) -> u64 {
        match self.in_force() {
            Applied::Bucket { per_fill, max, .. } => u64::from(per_fill) + u64::from(max),
            _ => 0,
        }
    }

    /// One request now: whether it is admitted. The first one subscribes.
    pub async fn request(&mut self) -> bool {
        let admitted = match self.in_force() {
            Applied::Allow => true,
            Applied::Deny => false,
            Applied::Bucket {
                max,
                per_fill,
                fill_us,
            } => {
                let now = self.now();
                let refill =
                    (now - self.filled_at_us) as f64 * f64::from(per_fill) / fill_us as f64;
                self.tokens = (self.tokens + refill).min(f64::from(max));
                self.filled_at_us = now;
                if self.tokens >= 1.0 {
                    self.tokens -= 1.0;
                    true
                } else {
                    false
                }
            }
        };
        if admitted {
            self.allowed += 1;
        } else {
            self.denied += 1;
        }
        if !self.subscribed {
            self.subscribed = true;
            self.report().await;
        }
        admitted
    }

    /// Reports usage since the last report and applies the answer. A broken stream is opened
    /// again (to `self.server`); a server that cannot be reached leaves the assignment as it is.
    pub async fn report(&mut self) {
        if !self.subscribed {
            return;
        }
        let now = self.now();
        let elapsed = now - self.reported_at_us;
        let message = RateLimitQuotaUsageReports {
            domain: self.domain.clone(),
            bucket_quota_usages: vec![BucketQuotaUsage {
                bucket_id: Some(BucketId {
                    bucket: self.bucket.clone(),
                }),
                time_elapsed: Some(ProtoDuration {
                    seconds: (elapsed / 1_000_000) as i64,
                    nanos: ((elapsed % 1_000_000) * 1_000) as i32,
                }),
                num_requests_allowed: self.allowed,
                num_requests_denied: self.denied,
            }],
        };
        self.allowed = 0;
        self.denied = 0;
        self.reported_at_us = now;
        for _ in 0..2 {
            if self.stream.is_none() {
                self.stream = open(&self.server).await;
                self.opened += usize::from(self.stream.is_some());
            }
            let Some((sender, answers)) = self.stream.as_mut() else {
                return;
            };
            if sender.send(message.clone()).await.is_err() {
                self.stream = None;
                continue;
            }
            match tokio::time::timeout(ANSWER_GUARD, answers.message()).await {
                Ok(Ok(Some(answer))) => {
                    self.apply(answer);
                    return;
                }
                Ok(Ok(None) | Err(_)) => self.stream = None,
                Err(_) => panic!("{}: no answer to a report", self.name),
            }
        }
    }

    /// Drops the stream, as a proxy whose connection broke.
    pub fn break_stream(&mut self) {
        self.stream = None;
    }

    /// Waits for an answer the server sends by itself (after a reload).
    pub async fn pushed(&mut self) {
        let (_, answers) = self.stream.as_mut().expect("an open stream");
        let answer = tokio::time::timeout(ANSWER_GUARD, answers.message())
            .await
            .expect("a pushed answer")
            .expect("the stream is fine")
            .expect("the stream is open");
        self.apply(answer);
    }

    /// Whether the assignment was abandoned.
    pub fn unassigned(&self) -> bool {
        self.assignment.is_none()
    }

    fn apply(&mut self, answer: RateLimitQuotaResponse) {
        let now = self.now();
        for action in answer.bucket_action {
            match action.bucket_action {
                Some(Action::QuotaAssignmentAction(a)) => {
                    let new = applied(a.rate_limit_strategy.and_then(|s| s.strategy).as_ref());
                    let ttl = a
                        .assignment_time_to_live
                        .map_or(0, |d| d.seconds as u64 * 1_000_000 + d.nanos as u64 / 1_000);
                    let same = self
                        .assignment
                        .is_some_and(|(old, until)| old == new && now < until);
                    if !same && let Applied::Bucket { max, .. } = new {
                        self.tokens = f64::from(max);
                        self.filled_at_us = now;
                    }
                    self.assignment = Some((new, now + ttl));
                    self.assignments.push(new);
                }
                Some(Action::AbandonAction(_)) => {
                    self.assignment = None;
                    self.subscribed = false;
                }
                None => {}
            }
        }
    }
}

/// A stream to `server`, or `None` when it cannot be opened.
async fn open(
    server: &str,
) -> Option<(
    mpsc::Sender<RateLimitQuotaUsageReports>,
    Streaming<RateLimitQuotaResponse>,
)> {
    let mut client = RateLimitQuotaServiceClient::connect(server.to_string())
        .await
        .ok()?;
    let (sender, reports) = mpsc::channel(4);
    let reports =
        futures::stream::unfold(
            reports,
            |mut r| async move { r.recv().await.map(|m| (m, r)) },
        );
    let answers = client
        .stream_rate_limit_quotas(reports)
        .await
        .ok()?
        .into_inner();
    Some((sender, answers))
}
