//! Built-in traffic patterns: requests over simulated time, in time order.
//!
//! Each identity is a `Source` that says when its next request arrives; a heap merges the
//! sources, so a day of traffic is produced one request at a time in constant memory. Every
//! pattern is deterministic for a given `--seed`. Times are microseconds from the start of the
//! simulation.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use clap::{Args, ValueEnum};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use sluice::Micros;

use super::event::Traffic;
use super::event::{Event, Identities};
use super::parse_span;
use crate::error::SimulateError;

/// The built-in patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every identity sends at `--rps`, evenly spaced.
    Steady,
    /// Every identity sends `--burst-size` requests at once every `--burst-every`.
    Bursts,
    /// `--burst-size` requests in the last 1 % of a window and as many in the first 1 % of the
    /// next, at every other window edge: the case where a fixed window admits twice its limit.
    WindowEdge,
    /// Every identity's rate grows linearly from `--rps` to `--ramp-to`.
    Ramp,
    /// `--identities` normal identities at `--rps` (random arrivals) and one `attacker` sending
    /// `--attack-rps` during `--attack` (at `--rps` outside it).
    Attacker,
    /// `--identities` identities with random (Poisson) arrivals, each at a different rate up to
    /// `--rps`.
    Identities,
}

/// The pattern and its parameters, as given on the command line.
#[derive(Debug, Clone, Args)]
pub struct TrafficArgs {
    /// The traffic pattern.
    #[arg(long, value_enum, default_value_t = Pattern::Steady)]
    pub pattern: Pattern,
    /// Simulated time to cover (`90s`, `1h`, `1d`).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub duration: Duration,
    /// Requests per second of each identity (the start rate of a ramp).
    #[arg(long, default_value_t = 1.0)]
    pub rps: f64,
    /// Number of identities (normal ones, for `attacker`).
    #[arg(long, default_value_t = 1)]
    pub identities: u32,
    /// Requests per burst (`bursts`, `window-edge`; default: the limit, twice it for `bursts`).
    #[arg(long)]
    pub burst_size: Option<u32>,
    /// Time between bursts.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub burst_every: Duration,
    /// Requests per second of each identity at the end of a ramp.
    #[arg(long, default_value_t = 10.0)]
    pub ramp_to: f64,
    /// The attacker's requests per second while attacking.
    #[arg(long, default_value_t = 20.0)]
    pub attack_rps: f64,
    /// When the attacker attacks, `FROM..TO` from the start (default: the middle third).
    #[arg(long, value_parser = parse_span)]
    pub attack: Option<(Duration, Duration)>,
    /// Seed of the random arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    sluice::model::parse_duration(text).map_err(|e| e.message)
}

fn us(d: Duration) -> Micros {
    Micros::from(d)
}

/// `seconds` as whole microseconds, at least one.
fn at_least_one_us(seconds: f64) -> Micros {
    Micros::new((seconds * 1e6).max(1.0) as u64)
}

/// When one identity sends.
#[derive(Debug, Clone)]
enum Source {
    /// One request every `interval`.
    Every { interval: Micros },
    /// `size` requests 1 ms apart every `every`; `sent` counts the requests so far.
    Bursts { size: u32, every: Micros, sent: u64 },
    /// `size` requests spread over the last 1 % before every other multiple of `window` and
    /// `size` over the first 1 % after it.
    Edge {
        size: u32,
        window: Micros,
        sent: u64,
    },
    /// Evenly spaced at a rate growing linearly from `from` to `to` req/s over `over`.
    Ramp { from: f64, to: f64, over: Micros },
    /// Poisson arrivals at `rps`, and at `attack_rps` within `attack`.
    Random {
        rps: f64,
        attack_rps: f64,
        attack: (Micros, Micros),
    },
}

impl Source {
    /// The arrival after one at `t` (`None` for the first request).
    fn next(&mut self, t: Option<Micros>, rng: &mut StdRng) -> Micros {
        match self {
            Source::Every { interval } => t.map_or(Micros::ZERO, |t| t + *interval),
            Source::Bursts { size, every, sent } => {
                let (group, i) = (*sent / u64::from(*size), *sent % u64::from(*size));
                *sent += 1;
                group * *every + Micros::from_millis(i)
            }
            Source::Edge { size, window, sent } => {
                let size = u64::from(*size);
                let (group, i) = (*sent / (2 * size), *sent % (2 * size));
                *sent += 1;
                let spread = (*window / 100).max(Micros::new(size));
                let gap = spread / size;
                let edge = (2 * group + 1) * *window;
                if i < size {
                    edge - spread + i * gap
                } else {
                    edge + (i - size) * gap
                }
            }
            Source::Ramp { from, to, over } => {
                let t = match t {
                    None => return Micros::ZERO,
                    Some(t) => t,
                };
                let progress = (t.get() as f64 / over.get().max(1) as f64).min(1.0);
                let rps = (*from + (*to - *from) * progress).max(1e-6);
                t + at_least_one_us(1.0 / rps)
            }
            Source::Random {
                rps,
                attack_rps,
                attack,
            } => {
                let now = t.unwrap_or_default();
                let rate = if (attack.0..attack.1).contains(&now) {
                    *attack_rps
                } else {
                    *rps
                };
                let exp: f64 = -(1.0 - rng.random::<f64>()).ln() / rate.max(1e-9);
                let mut next = now + at_least_one_us(exp);
                // Rates change at the attack's edges: restart the clock there so a slow rate
                // before the attack does not jump over it.
                if now < attack.0 && next > attack.0 && *attack_rps > *rps {
                    next = attack.0;
                }
                next
            }
        }
    }
}

/// The requests of a built-in pattern, in time order.
#[derive(Debug)]
pub struct PatternTraffic {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(Micros, u32)>>,
    end_us: Micros,
    last_us: Micros,
    rng: StdRng,
    identities: Identities,
}

/// The attacker of the `attacker` pattern: its identity and when it attacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Attack {
    /// The attacker's identity index.
    pub identity: u32,
    /// Start of the attack (from the start).
    pub from_us: Micros,
    /// End of the attack.
    pub to_us: Micros,
}

impl PatternTraffic {
    /// The pattern's requests over `args.duration`. `limit` and `window` are the rate the edge and
    /// burst patterns aim at; `attributes` the names each identity carries a value for.
    pub fn new(
        args: &TrafficArgs,
        limit: u64,
        window: Duration,
        attributes: &[String],
    ) -> (PatternTraffic, Option<Attack>) {
        let mut identities = Identities::default();
        let end_us = us(args.duration);
        let n = args.identities.max(1);
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        let mut attack = None;
        let mut sources = Vec::new();
        let mut add = |name: String, source: Source, sources: &mut Vec<Source>| {
            let values = attributes
                .iter()
                .map(|a| (a.clone(), name.clone()))
                .collect();
            identities.intern(values);
            sources.push(source);
        };
        for i in 0..n {
            let name = format!("u{i}");
            let source = match args.pattern {
                Pattern::Steady => Source::Every {
                    interval: at_least_one_us(1.0 / args.rps.max(1e-6)),
                },
                Pattern::Bursts => Source::Bursts {
                    size: args.burst_size.unwrap_or(2 * limit).max(1),
                    every: us(args.burst_every).max(Micros::new(1)),
                    sent: 0,
                },
                Pattern::WindowEdge => Source::Edge {
                    size: args.burst_size.unwrap_or(limit).max(1),
                    window: us(window).max(Micros::new(2)),
                    sent: 0,
                },
                Pattern::Ramp => Source::Ramp {
                    from: args.rps,
                    to: args.ramp_to,
                    over: end_us,
                },
                Pattern::Attacker | Pattern::Identities => Source::Random {
                    rps: if args.pattern == Pattern::Identities {
                        args.rps * f64::from(n - i) / f64::from(n)
                    } else {
                        args.rps
                    },
                    attack_rps: args.rps,
                    attack: (Micros::ZERO, Micros::ZERO),
                },
            };
            add(name, source, &mut sources);
        }
        if args.pattern == Pattern::Attacker {
            let (from, to) = args
                .attack
                .map_or((end_us / 3, 2 * end_us / 3), |(a, b)| (us(a), us(b)));
            attack = Some(Attack {
                identity: sources.len() as u32,
                from_us: from,
                to_us: to,
            });
            let source = Source::Random {
                rps: args.rps,
                attack_rps: args.attack_rps,
                attack: (from, to),
            };
            add("attacker".to_string(), source, &mut sources);
        }
        let mut traffic = PatternTraffic {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            end_us,
            last_us: Micros::ZERO,
            rng: StdRng::seed_from_u64(args.seed),
            identities,
        };
        for i in 0..traffic.sources.len() {
            let first = traffic.sources[i].next(None, &mut traffic.rng);
            traffic.heap.push(Reverse((first, i as u32)));
        }
        (traffic, attack)
    }
}

impl Traffic for PatternTraffic {
    fn next_event(&mut self) -> Result<Option<Event>, SimulateError> {
        let Some(Reverse((at_us, identity))) = self.heap.pop() else {
            return Ok(None);
        };
        if at_us >= self.end_us {
            self.heap.clear();
            return Ok(None);
        }
        self.last_us = at_us;
        let next = self.sources[identity as usize].next(Some(at_us), &mut self.rng);
        self.heap.push(Reverse((next.max(at_us), identity)));
        Ok(Some(Event {
            at_us,
            identity,
            cost: 1,
        }))
    }

    fn identities(&self) -> &Identities {
        &self.identities
    }

    fn progress(&self) -> (u64, u64) {
        (self.last_us.get(), self.end_us.get())
    }
}
