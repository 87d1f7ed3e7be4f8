//! The simulator behind `sluice simulate`: traffic replayed through the real limiter and memory store on a simulated
//! clock, measured against an exact sliding log, with a report and plots.
//!
//! Either every algorithm at one `--rate`, or the rules of a `--config` file; traffic from a
//! built-in pattern or a trace file. All subjects see the same requests at the same simulated
//! instants ([`replay`]), so a day of traffic takes seconds and the comparison is exact. With
//! `--store-down FROM..TO` the same requests also go to `--nodes` limiters per fail policy sharing
//! a store that fails during the outage ([`outage`]).
//!
//! # Layout
//! - [`event`]: a request and the identity table; [`traffic`]: the patterns; [`trace`]: CSV and
//!   JSON-lines traces;
//! - [`replay`]: subjects and the run; [`outage`]: the failing store and the fleets per policy;
//!   [`batches`]: the rules replayed again with hot-key batches across nodes;
//! - [`window`]: trailing-window sums; [`reference`](mod@reference): the exact sliding log; [`tally`]: what one
//!   limit did; [`quota`]: a quota's calendar periods and resets; [`series`]: counts over time;
//! - [`report`]: text, `report.md`, `report.json`, with a table per quota (`quota_report`);
//!   [`plot`]: SVG and PNG charts; [`output`]: the files of `--out`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// Returns [`SimulateError::Invalid`] with a formatted message.
macro_rules! bail {
    ($($message:tt)*) => {
        return Err($crate::SimulateError::Invalid(format!($($message)*)))
    };
}

pub mod batches;
mod error;
pub mod event;
mod flags;
pub mod outage;
pub mod output;
pub mod plot;
pub mod quota;
mod quota_report;
pub mod reference;
pub mod replay;
pub mod report;
pub mod series;
pub mod tally;
pub mod trace;
pub mod traffic;
pub mod window;

use std::io::Write;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use sluice::{Algorithm, Clock, Limit, Limiter, ManualClock, MemoryStore, Micros, Rate, Rule};

use sluice_server::config::Config;
use tracing::instrument::WithSubscriber;

pub use error::SimulateError;
use event::Traffic;
use flags::parse_hold;
pub use flags::{Start, parse_span, parse_start};
use replay::{Measured, Subject};
use report::{Outage, Report, Setup};
use traffic::{Pattern, PatternTraffic, TrafficArgs};

/// `sluice simulate`.
#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// Simulate the rules of this file instead of comparing algorithms.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// The rate the algorithms are compared at (`10/1m`).
    #[arg(long, default_value = "10/1m", conflicts_with = "config")]
    pub rate: Rate,
    /// The algorithms to compare (default: every rate algorithm; `concurrency` only when named,
    /// where a simulated request holds its lease until the lease expires, as nothing releases it).
    #[arg(long, value_delimiter = ',', conflicts_with = "config")]
    pub algorithms: Vec<Algorithm>,
    /// Units that may pass at once for token bucket, GCRA and leaky bucket (default: the rate's
    /// count).
    #[arg(long, conflicts_with = "config")]
    pub burst: Option<u64>,
    /// The built-in traffic pattern and its parameters.
    #[command(flatten)]
    pub traffic: TrafficArgs,
    /// Replay a trace file (.csv or .jsonl) instead of a pattern.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// When the simulated clock starts: an instant with its offset (`2026-03-27T00:00:00+01:00`)
    /// or a date, at midnight UTC (`2028-01-01`). Quota periods and their daylight-saving changes
    /// are those of the calendar from there; a trace's first request is at this instant.
    #[arg(long, default_value = "2026-01-01T00:00:00Z", value_parser = parse_start)]
    pub start: Start,
    /// Write report.md, report.json and the plots (SVG and PNG) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Nodes sharing the store during `--store-down`, and taking batches with `--batches`.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Take the store down from FROM to TO (`10m..20m`, from the start) and compare what the
    /// fail policies `open`, `closed` and `local` admit across `--nodes` nodes meanwhile.
    #[arg(long, value_parser = parse_span)]
    pub store_down: Option<(Duration, Duration)>,
    /// Cut one region off from the store from FROM to TO (`10m..20m`): the second half of
    /// `--nodes` lose it while the others keep deciding through it, and the fail policies are
    /// compared on what the fleet admits meanwhile.
    #[arg(long, value_parser = parse_span, conflicts_with = "store_down")]
    pub partition: Option<(Duration, Duration)>,
    /// With `--store-down` or `--partition`, `fail: local` decides each node's share of each
    /// limit (as `store.nodes: N` does, N = `--nodes`) instead of the whole limit. A `--config`
    /// file's own `store.nodes` applies without it.
    #[arg(long)]
    pub shares: bool,
    /// Also replay each rule whose limit can take batches (token_bucket, gcra, fixed_window)
    /// across `--nodes` nodes taking batches of up to this many units, beside the exact path (rows
    /// `<rule>+batches`).
    #[arg(long)]
    pub batches: Option<u64>,
    /// How long a node may spend a batch, with `--batches`.
    #[arg(long, default_value = "1s", value_parser = parse_hold)]
    pub batch_hold: Duration,
}

/// Plot points per series.
const POINTS: usize = 480;

/// The result of a simulation: the report and each limit's series, for the plots.
#[derive(Debug)]
pub struct Simulation {
    /// The report.
    pub report: Report,
    /// Per limit, in report order.
    pub measured: Vec<Measured>,
    /// The window-edge case (comparing algorithms only): per algorithm.
    pub edge: Vec<Measured>,
    /// Per policy and limit, during `--store-down`.
    pub outage: Vec<Measured>,
}

/// What to simulate: the rules, the attribute names requests carry, the rate patterns aim at.
struct Plan {
    rules: Vec<(String, Rule)>,
    /// The config file's `store.nodes` (1 without a file).
    store_nodes: NonZeroU32,
    attributes: Vec<String>,
    limit: u64,
    window: Duration,
}

fn plan(args: &SimulateArgs) -> Result<Plan, SimulateError> {
    let (rules, store_nodes) = match &args.config {
        Some(path) => {
            let config = Config::load(path)?;
            (config.rules_in_force(), config.store.nodes)
        }
        None => (algorithm_rules(args), NonZeroU32::MIN),
    };
    let first = rules
        .first()
        .and_then(|(_, rule)| rule.limits.first())
        .ok_or_else(|| SimulateError::Invalid("the config has no rules".into()))?;
    let mut attributes: Vec<String> = rules
        .iter()
        .flat_map(|(_, rule)| &rule.limits)
        .flat_map(|limit| &limit.by)
        .flat_map(|by| by.alternatives.iter().cloned())
        .collect();
    attributes.sort();
    attributes.dedup();
    Ok(Plan {
        store_nodes,
        limit: first.rate.count(),
        window: first.rate.window(),
        rules,
        attributes,
    })
}

/// One rule per algorithm, named after it, counting per `id`.
fn algorithm_rules(args: &SimulateArgs) -> Vec<(String, Rule)> {
    let algorithms = if args.algorithms.is_empty() {
        Algorithm::ALL
            .into_iter()
            .filter(|a| !a.holds_leases())
            .collect()
    } else {
        args.algorithms.clone()
    };
    algorithms
        .into_iter()
        .map(|algorithm| {
            let mut limit = Limit::new(&["id"], args.rate, algorithm);
            if algorithm.supports_burst() {
                limit.burst = args.burst;
            }
            (algorithm.name().to_string(), Rule::new(vec![limit]))
        })
        .collect()
}

/// The window-edge case's start: 2026-01-01, on a window edge of every window dividing a day,
/// whatever `--start` says, so that its bursts straddle an edge.
fn edge_base_us() -> Micros {
    ManualClock::at_2026().now_us()
}

fn limiter(rules: &[(String, Rule)], clock: &ManualClock) -> Result<Limiter, SimulateError> {
    let clock = std::sync::Arc::new(clock.clone());
    Ok(Limiter::builder(MemoryStore::with_clock(clock.clone()))
        .clock(clock)
        .rules(rules.iter().cloned())
        .build()?)
}

/// Runs the simulation `args` describe (without printing or writing anything).
pub async fn simulate(
    args: &SimulateArgs,
    progress: &ProgressBar,
) -> Result<Simulation, SimulateError> {
    let plan = plan(args)?;
    let start = args.start.us;
    let clock = ManualClock::new(start);
    let (mut traffic, attack, describe): (Box<dyn Traffic>, _, _) = match &args.trace {
        Some(path) => (
            Box::new(trace::TraceTraffic::open(path)?),
            None,
            format!("trace {}", path.display()),
        ),
        None => {
            let (t, attack) =
                PatternTraffic::new(&args.traffic, plan.limit, plan.window, &plan.attributes);
            (Box::new(t), attack, describe_pattern(&args.traffic))
        }
    };
    let bucket_us = match &args.trace {
        Some(_) => Micros::from_secs(1),
        None => (Micros::from(args.traffic.duration) / POINTS as u64).max(Micros::from_millis(1)),
    };
    let main = limiter(&plan.rules, &clock)?;
    let mut subjects: Vec<Subject> = plan
        .rules
        .iter()
        .map(|(name, rule)| {
            let nodes = vec![main.clone()];
            Subject::new(name.clone(), name, rule, nodes, bucket_us, attack, None)
        })
        .collect();
    if let Some(max) = args.batches {
        let rules = batches::rules(&plan.rules, max, args.batch_hold);
        let fleet = batches::fleet(&rules, args.nodes, &clock)?;
        for (name, rule) in &rules {
            subjects.push(Subject::new(
                batches::label(name),
                name,
                rule,
                fleet.clone(),
                bucket_us,
                attack,
                None,
            ));
        }
    }
    let main_count = subjects.len();
    // Offsets from the start of the run, as the report shows them.
    let shares = if args.shares {
        NonZeroU32::new(u32::try_from(args.nodes).unwrap_or(u32::MAX)).unwrap_or(NonZeroU32::MIN)
    } else {
        plan.store_nodes
    };
    let (outage, cut) = match (args.store_down, args.partition) {
        (Some(span), _) => (Some(span), outage::Cut::store_down(args.nodes, shares)),
        (None, span) => (span, outage::Cut::partition(args.nodes, shares)),
    };
    let outage = outage.map(|(from, to)| (Micros::from(from), Micros::from(to)));
    if let Some((from, to)) = outage {
        let down = (start + from, start + to);
        for policy in outage::POLICIES {
            let fleet = outage::fleet(&plan.rules, policy, cut, &clock, down)?;
            for (name, rule) in &plan.rules {
                let label = format!("{}/{name}", outage::policy_name(policy));
                subjects.push(Subject::new(
                    label,
                    name,
                    rule,
                    fleet.clone(),
                    bucket_us,
                    attack,
                    Some((from, to)),
                ));
            }
        }
    }
    let totals = replay::replay(traffic.as_mut(), &mut subjects, &clock, start, progress).await?;
    progress.finish_and_clear();
    let run_us = match &args.trace {
        Some(_) => totals.last_us + Micros::new(1),
        None => Micros::from(args.traffic.duration),
    };
    let mut all = replay::finish(subjects, run_us);
    let outage_rows: Vec<Measured> = all
        .split_off(main_count)
        .into_iter()
        .flat_map(|s| s.1)
        .collect();
    let measured: Vec<Measured> = all.into_iter().flat_map(|s| s.1).collect();
    let edge = if args.config.is_none() && args.trace.is_none() {
        window_edge(args, &plan).await?
    } else {
        Vec::new()
    };
    let report = Report {
        setup: Setup {
            traffic: describe,
            requests: totals.requests,
            identities: traffic.identities().len(),
            start: args.start.text.clone(),
            simulated_s: match &args.trace {
                Some(_) => totals.last_us.as_secs_f64(),
                None => args.traffic.duration.as_secs_f64(),
            },
            command: std::iter::once("sluice".to_string())
                .chain(std::env::args().skip(1))
                .collect::<Vec<_>>()
                .join(" "),
        },
        limits: measured.iter().map(|m| m.summary.clone()).collect(),
        outage: outage.map(|(from, to)| Outage {
            nodes: args.nodes.max(1),
            cut_off: cut.cut_off.min(args.nodes.max(1)),
            shares: cut.shares.get(),
            from_s: from.as_secs_f64(),
            to_s: to.as_secs_f64(),
            limits: outage_rows.iter().map(|m| m.summary.clone()).collect(),
        }),
    };
    Ok(Simulation {
        report,
        measured,
        edge,
        outage: outage_rows,
    })
}

/// The window-edge case at the compared rate: bursts of the limit on both sides of the edge
/// between two windows.
async fn window_edge(args: &SimulateArgs, plan: &Plan) -> Result<Vec<Measured>, SimulateError> {
    let traffic_args = TrafficArgs {
        pattern: Pattern::WindowEdge,
        duration: plan.window * 2,
        identities: 1,
        burst_size: None,
        ..args.traffic.clone()
    };
    let clock = ManualClock::at_2026();
    let (mut traffic, _) =
        PatternTraffic::new(&traffic_args, plan.limit, plan.window, &plan.attributes);
    let bucket_us = (Micros::from(traffic_args.duration) / 4000).max(Micros::new(1));
    let main = limiter(&plan.rules, &clock)?;
    let mut subjects: Vec<Subject> = plan
        .rules
        .iter()
        .map(|(name, rule)| {
            Subject::new(
                name.clone(),
                name,
                rule,
                vec![main.clone()],
                bucket_us,
                None,
                None,
            )
        })
        .collect();
    replay::replay(
        &mut traffic,
        &mut subjects,
        &clock,
        edge_base_us(),
        &ProgressBar::hidden(),
    )
    .await?;
    Ok(
        replay::finish(subjects, Micros::from(traffic_args.duration))
            .into_iter()
            .flat_map(|s| s.1)
            .collect(),
    )
}

fn describe_pattern(t: &TrafficArgs) -> String {
    let name = clap::ValueEnum::to_possible_value(&t.pattern)
        .map_or_else(String::new, |v| v.get_name().to_string());
    let each = match t.pattern {
        Pattern::Steady | Pattern::Attacker | Pattern::Identities => {
            format!(", {} req/s each", t.rps)
        }
        Pattern::Bursts => format!(
            ", a burst every {}",
            sluice::model::format_duration(t.burst_every)
        ),
        Pattern::Ramp => format!(", from {} to {} req/s each", t.rps, t.ramp_to),
        Pattern::WindowEdge => String::new(),
    };
    let attacker = if t.pattern == Pattern::Attacker {
        format!(", an attacker at {} req/s", t.attack_rps)
    } else {
        String::new()
    };
    format!(
        "pattern {name}: {} normal identities{each}{attacker}",
        t.identities
    )
}

/// `sluice simulate`: runs, prints the report to `out`, writes the files of `--out`.
pub async fn run(args: SimulateArgs, out: &mut (impl Write + Send)) -> Result<(), SimulateError> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    let progress = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{bar:40} {percent:>3}% {elapsed} / {duration} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = std::time::Instant::now();
    // The limiter logs the simulated outage as if it were real; keep the terminal for the report.
    let simulation = simulate(&args, &progress)
        .with_subscriber(tracing::subscriber::NoSubscriber::default())
        .await?;
    let printed = |e: std::io::Error| SimulateError::Failed {
        what: "printing the report".to_string(),
        source: Box::new(e),
    };
    write!(out, "{}", simulation.report.text()).map_err(printed)?;
    writeln!(
        out,
        "\nsimulated {:.0} s in {:.2} s",
        simulation.report.setup.simulated_s,
        started.elapsed().as_secs_f64()
    )
    .map_err(printed)?;
    if let Some(dir) = &args.out {
        let files = output::write(&simulation, dir)?;
        let noun = if files.len() == 1 { "file" } else { "files" };
        writeln!(out, "wrote {} {noun} to {}", files.len(), dir.display()).map_err(printed)?;
    }
    Ok(())
}
