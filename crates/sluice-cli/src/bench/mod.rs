//! `sluice bench`: the load tool.
//!
//! Drives the library against a store (`memory://` or a Redis URL) — or, with `--via`, a running
//! `sluice serve` over HTTP — with N concurrent tasks over K keys for a fixed duration (or
//! number of decisions), and reports decisions per second, latency percentiles and the
//! allowed/denied split. Latencies are recorded per task in HDR histograms (no shared state on
//! the hot path) and merged at the end.
//!
//! By default each task asks again as soon as it has its answer (a closed loop, as `wrk` does):
//! a server that slows down is asked less, which hides how slow it got. `--rate` makes the loop
//! open, as `wrk2` does: decisions are due at a fixed rate whatever the answers, each task
//! taking its share of the schedule, and a decision's latency counts from when it was due, so
//! time spent waiting behind a slow answer is counted too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use sluice::limiter::InFlightLimit;
use sluice::model::{Algorithm, PeriodUnit, Rate, parse_duration};
use sluice_server::store_url;

mod ceiling;
mod driver;
mod report;
mod tally;

use ceiling::ceiling;
use driver::Driver;
pub use report::{BatchTotals, Report};
use tally::Tally;

/// `sluice bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Store URL: memory:// or redis://host:port/db.
    #[arg(long, default_value = "memory://")]
    pub store: String,
    /// Algorithm of the benchmark rule.
    #[arg(long, default_value = "gcra", value_parser = parse_algorithm)]
    pub algorithm: Algorithm,
    /// Concurrent tasks.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Distinct keys, visited in turn.
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// How long to run.
    #[arg(long, default_value = "10s", value_parser = parse_duration_arg)]
    pub duration: Duration,
    /// Stop after this many decisions, or at `--duration` if that comes first. Runs of the same
    /// number of decisions over the same keys leave each key with as many calls, whatever their
    /// rates: so many windows started, so much state.
    #[arg(long)]
    pub decisions: Option<u64>,
    /// The limit per key (the default lets nearly every decision through).
    #[arg(long, default_value = "10000000/1s")]
    pub limit: Rate,
    /// Make each limit a quota of `--limit`'s count per calendar period (`day`, `week`, `month`
    /// or `year`, in UTC): what a quota costs a decision on this store.
    #[arg(long, value_parser = parse_period)]
    pub period: Option<PeriodUnit>,
    /// Limits in the benchmark rule, all counting by the same key (each with a window one second
    /// longer than the previous, so each is its own limit).
    #[arg(long, default_value_t = 1)]
    pub limits: usize,
    /// Block an identity for this long once a limit denies it.
    #[arg(long, value_parser = parse_duration_arg)]
    pub block: Option<Duration>,
    /// Give each limit a penalty (warning after 1 violation, ban for an hour after 3, violations
    /// remembered for an hour).
    #[arg(long)]
    pub penalty: bool,
    /// Make each limit `settable` and give every key run-time numbers equal to the limit's
    /// (library mode): what a decision costs when the store reads an identity's own numbers.
    #[arg(long)]
    pub settable: bool,
    /// Give each limit three overrides and the rule a condition, as README's "Tiers and
    /// conditions" writes them, with requests that hold the condition and fall through every
    /// override (library mode): what a tiered rule costs a decision on this store.
    #[arg(long)]
    pub tiers: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Drive a running `sluice serve` at this base URL (http://HOST:PORT) instead of the library.
    #[arg(long)]
    pub via: Option<String>,
    /// With --via: the rule to check (it must count by `--attribute`).
    #[arg(long, default_value = "bench")]
    pub rule: String,
    /// With --via: the attribute that carries the key.
    #[arg(long, default_value = "key")]
    pub attribute: String,
    /// With a Redis store: also run `redis-benchmark` on Sluice's own decision script with the
    /// same concurrency and key spread, and report Sluice's rate as a ratio of that ceiling.
    #[arg(long)]
    pub ceiling: bool,
    /// Deadline of one store call (library mode).
    #[arg(long, default_value = "1s", value_parser = parse_duration_arg)]
    pub timeout: Duration,
    /// Ask the store for every decision: no local cache of denials (library mode).
    #[arg(long)]
    pub no_denial_cache: bool,
    /// Runtime worker threads (default: one per core). The client shares the machine with what
    /// it measures: on 2 cores, `--threads 1` leaves Redis (or the server) a core of its own, as
    /// `redis-benchmark`, a single-threaded event loop, does.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Open loop: decisions due at this many per second in all, whatever the answers, and each
    /// latency measured from when its decision was due (not when it was sent). The tasks share
    /// the schedule; when they are all waiting, the due decisions wait with them and their wait
    /// is counted.
    #[arg(long, value_parser = parse_rate_arg)]
    pub rate: Option<f64>,
    /// Library mode on a remote store: how many decisions may wait for it at once (a number,
    /// or `unbounded`); past it, the fail policy answers at once (counted as errors).
    #[arg(long, default_value_t = InFlightLimit::DEFAULT, value_parser = parse_in_flight)]
    pub in_flight: InFlightLimit,
    /// Visit every key this many times before the timed run (with `--limit 1/60s`, 2 passes
    /// leave every key denied: the all-denied shape).
    #[arg(long, default_value_t = 0)]
    pub warm_up: u32,
    /// Take the benchmark limit's units from the store in batches of up to this many and spend
    /// them in this process (hot keys; with `--limits 1`). The units still held at the end are
    /// given back.
    #[arg(long)]
    pub batch: Option<u64>,
    /// How long a batch may be spent, with `--batch`.
    #[arg(long, default_value = "1s", value_parser = parse_duration_arg)]
    pub batch_hold: Duration,
}

fn parse_in_flight(text: &str) -> Result<InFlightLimit, String> {
    text.parse()
}

fn parse_period(text: &str) -> Result<PeriodUnit, String> {
    text.parse()
}

fn parse_algorithm(text: &str) -> Result<Algorithm, String> {
    text.parse()
        .map_err(|e: sluice::model::ModelError| e.message)
}

fn parse_rate_arg(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 && rate <= 1e9 => Ok(rate),
        _ => Err(format!("`{text}`: a rate per second, more than 0")),
    }
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.message)
}

/// Runs the benchmark and prints its report.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.concurrency == 0 || args.keys == 0 {
        bail!("--concurrency and --keys must be at least 1");
    }
    let report = measure(&args).await?;
    if args.json {
        crate::stdout::line(serde_json::to_string(&report)?)?;
    } else {
        report.print()?;
    }
    Ok(())
}

/// Runs the benchmark and returns its report.
pub async fn measure(args: &BenchArgs) -> anyhow::Result<Report> {
    let keys: Arc<Vec<String>> = Arc::new((0..args.keys).map(|i| format!("k{i}")).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let driver = match &args.via {
        Some(_) if args.tiers => {
            bail!("--tiers is for library mode: with --via, the rule is the service's")
        }
        Some(base) => Driver::http(base, &args.rule, &args.attribute)?,
        None => Driver::library(args, &keys).await?,
    };
    warm_up(&driver, &keys, args).await;
    let progress = progress_bar(args);
    let cap = args.decisions.unwrap_or(u64::MAX);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.concurrency);
    for task in 0..args.concurrency {
        let (driver, keys, stop, done) = (driver.clone(), keys.clone(), stop.clone(), done.clone());
        let stride = args.concurrency;
        // Open loop: this task's decisions are due every `pace`, staggered among the tasks.
        let pace = args
            .rate
            .map(|rate| Duration::from_secs_f64(stride as f64 / rate));
        let mut due = started + pace.map_or(Duration::ZERO, |p| p * task as u32 / stride as u32);
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::new()?;
            let mut i = task;
            // A decision is claimed before it is made, so that --decisions makes no more.
            while !stop.load(Ordering::Relaxed) && done.fetch_add(1, Ordering::Relaxed) < cap {
                let key = &keys[i % keys.len()];
                i += stride;
                let t = match pace {
                    Some(pace) => {
                        tokio::time::sleep_until(due.into()).await;
                        let t = due;
                        due += pace;
                        t
                    }
                    None => Instant::now(),
                };
                let sent = Instant::now();
                let outcome = driver.check(key).await;
                tally.record(t, sent, outcome);
                // The memory store answers without awaiting anything: yield now and then so the
                // timer that ends the run (and the other tasks) get a turn.
                if i % (stride * 64) < stride {
                    tokio::task::yield_now().await;
                }
            }
            anyhow::Ok(tally)
        }));
    }
    let deadline = started + args.duration;
    while Instant::now() < deadline && done.load(Ordering::Relaxed) < cap {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
        progress.set_position(millis(started.elapsed()));
        progress.set_message(format!(
            "{} decisions",
            done.load(Ordering::Relaxed).min(cap)
        ));
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::new()?;
    total.ended = started;
    for task in tasks {
        let tally = task.await.context("a benchmark task panicked")??;
        total
            .histogram
            .add(&tally.histogram)
            .context("merging histograms")?;
        total
            .answered
            .add(&tally.answered)
            .context("merging histograms")?;
        total
            .service
            .add(&tally.service)
            .context("merging histograms")?;
        total.allowed += tally.allowed;
        total.denied += tally.denied;
        total.errors += tally.errors;
        total.ended = total.ended.max(tally.ended);
    }
    // Until the last decision: with --decisions, tasks stop before the loop above notices.
    let elapsed = (total.ended - started).as_secs_f64();
    progress.finish_and_clear();
    let h = &total.histogram;
    let decisions_per_sec = h.len() as f64 / elapsed;
    let batches = match &driver {
        Driver::Library { limiter, .. } if args.batch.is_some() => {
            limiter.give_back_batches().await;
            limiter.held_units().first().map(|u| BatchTotals {
                taken: u.taken,
                given_back: u.given_back,
            })
        }
        _ => None,
    };
    let ceiling_per_sec = match (&driver, args.ceiling) {
        (Driver::Library { limiter, .. }, true) => Some(ceiling(args, limiter, h.len()).await?),
        (Driver::Http { .. }, true) => bail!("--ceiling measures a Redis store: not with --via"),
        _ => None,
    };
    Ok(Report {
        decisions_per_sec,
        offered_per_sec: args.rate,
        ceiling_per_sec,
        ratio_to_ceiling: ceiling_per_sec.map(|c| decisions_per_sec / c),
        batches,
        p50_us: h.value_at_quantile(0.5) as f64 / 1_000.0,
        p99_us: h.value_at_quantile(0.99) as f64 / 1_000.0,
        p999_us: h.value_at_quantile(0.999) as f64 / 1_000.0,
        p99_answered_us: total.answered.value_at_quantile(0.99) as f64 / 1_000.0,
        service_p50_us: total.service.value_at_quantile(0.5) as f64 / 1_000.0,
        service_p99_us: total.service.value_at_quantile(0.99) as f64 / 1_000.0,
        allowed: total.allowed,
        denied: total.denied,
        errors: total.errors,
        target: args
            .via
            .clone()
            .unwrap_or_else(|| store_url::redact(&args.store)),
        algorithm: if args.via.is_some() {
            format!("rule {}", args.rule)
        } else {
            args.algorithm.to_string()
        },
        concurrency: args.concurrency,
        keys: args.keys,
        duration_s: elapsed,
    })
}

/// Visits every key `--warm-up` times, `--concurrency` keys at once, untimed.
async fn warm_up(driver: &Driver, keys: &Arc<Vec<String>>, args: &BenchArgs) {
    for _ in 0..args.warm_up {
        let tasks: Vec<_> = (0..args.concurrency)
            .map(|task| {
                let (driver, keys, stride) = (driver.clone(), keys.clone(), args.concurrency);
                tokio::spawn(async move {
                    for key in keys.iter().skip(task).step_by(stride) {
                        driver.check(key).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    }
}

fn progress_bar(args: &BenchArgs) -> ProgressBar {
    if args.json {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(millis(args.duration));
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {elapsed_precise} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// A length of time in whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
