//! The run: every request, in time order, through every subject's real [`Limiter`], on one
//! simulated clock.
//!
//! A subject is one rule on one or more nodes (limiters sharing a store); requests go to the nodes
//! in turn, as a load balancer would send them. All subjects see the same requests at the same
//! simulated instants, so their tallies compare like with like. The clock only moves when the
//! next request says so: a day of traffic costs what its decisions cost, not a day.

use indicatif::ProgressBar;
use sluice::Check;
use sluice::model::Name;
use sluice::{Limiter, ManualClock, Micros, Rule};

use super::event::Traffic;
use super::series::Series;
use super::tally::{Request, Summary, Tally};
use super::traffic::Attack;
use crate::error::SimulateError;

/// One rule replayed on its nodes.
#[derive(Debug)]
pub struct Subject {
    label: String,
    rule: String,
    nodes: Vec<Limiter>,
    tallies: Vec<Tally>,
    skipped: u64,
}

impl Subject {
    /// `rule` (named `name` in the `nodes`' limiters), shown as `label`; `span` is measured apart.
    pub fn new(
        label: String,
        name: &str,
        rule: &Rule,
        nodes: Vec<Limiter>,
        bucket_us: Micros,
        attack: Option<Attack>,
        span: Option<(Micros, Micros)>,
    ) -> Subject {
        let tallies = rule
            .limits
            .iter()
            .map(|limit| Tally::new(&label, limit, bucket_us, attack, span))
            .collect();
        Subject {
            label,
            rule: name.to_string(),
            nodes,
            tallies,
            skipped: 0,
        }
    }
}

/// The outcome of one limit of one subject.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The counts.
    pub summary: Summary,
    /// Counts over time.
    pub series: Series,
}

/// How far a replay got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Requests read.
    pub requests: u64,
    /// Time of the last request (from the start).
    pub last_us: Micros,
}

/// Replays `traffic` through the subjects; the clock shows `base_us` plus each request's time.
pub async fn replay(
    traffic: &mut dyn Traffic,
    subjects: &mut [Subject],
    clock: &ManualClock,
    base_us: Micros,
    progress: &ProgressBar,
) -> Result<Totals, SimulateError> {
    let mut totals = Totals::default();
    let mut key = String::new();
    while let Some(event) = traffic.next_event()? {
        clock.set_us(base_us + event.at_us);
        let attributes = traffic.identities().get(event.identity);
        for subject in subjects.iter_mut() {
            let node = &subject.nodes[(totals.requests % subject.nodes.len() as u64) as usize];
            let decision = match node
                .check_with(&subject.rule, attributes, Check::cost(event.cost))
                .await
            {
                Ok(decision) => decision,
                Err(_) => {
                    subject.skipped += 1;
                    continue;
                }
            };
            for (tally, limit) in subject.tallies.iter_mut().zip(&decision.limits) {
                identity_key(&limit.attributes, attributes, &mut key);
                let request = Request {
                    at_us: event.at_us,
                    start_us: base_us,
                    limit: limit.quota,
                    requester: event.identity,
                    identity: &key,
                    cost: event.cost,
                };
                tally.record(request, decision.allowed, limit.allowed);
            }
        }
        totals.requests += 1;
        totals.last_us = event.at_us;
        if totals.requests % 4096 == 0 {
            let (at, of) = traffic.progress();
            progress.set_length(of);
            progress.set_position(at);
        }
    }
    Ok(totals)
}

/// Ends a run of `run_us`: each limit's counts and series, subject by subject.
pub fn finish(subjects: Vec<Subject>, run_us: Micros) -> Vec<(String, Vec<Measured>)> {
    subjects
        .into_iter()
        .map(|subject| {
            let skipped = subject.skipped;
            let limits = subject
                .tallies
                .into_iter()
                .map(|tally| {
                    let (summary, series) = tally.finish(skipped, run_us);
                    Measured { summary, series }
                })
                .collect();
            (subject.label, limits)
        })
        .collect()
}

/// `name=value,...` of the attributes a limit's identity used; `*` for a global limit.
fn identity_key(names: &[Name], attributes: &[(String, String)], out: &mut String) {
    out.clear();
    if names.is_empty() {
        out.push('*');
    }
    for name in names {
        if !out.is_empty() {
            out.push(',');
        }
        let value = attributes
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str());
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
}
