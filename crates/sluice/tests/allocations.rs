//! An allowed check of a one-limit rule on the memory store allocates nothing, whether it answers
//! with the full decision or the verdict: the identity is written into a reused buffer, the store
//! decides from borrowed key parts, the decision holds interned names and its one limit inline,
//! and the metrics are handles registered once.
//!
//! This binary counts every allocation made on the test's thread; it has one test, so that the
//! metrics recorder it installs is the only one.

// Its own binary: it installs its own `#[global_allocator]` and a process-wide metrics recorder.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use sluice::model::{Algorithm, Limit};
use sluice::{Decision, Limiter, MemoryStore, Rule, Verdict};

struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

/// Polls a check once: the memory store answers at once.
fn ready<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("an in-process check does not wait"),
    }
}

/// A recorder whose handles count without allocating, by metric name and labels.
#[derive(Default)]
struct Totals {
    counters: Mutex<HashMap<String, Arc<Total>>>,
}

#[derive(Default)]
struct Total(AtomicU64);

impl CounterFn for Total {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::Relaxed);
    }
}

impl HistogramFn for Total {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Totals {
    fn total(&self, key: &Key) -> Arc<Total> {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        self.counters
            .lock()
            .unwrap()
            .entry(name)
            .or_default()
            .clone()
    }

    fn get(&self, name: &str) -> u64 {
        self.counters
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |t| t.0.load(Ordering::Relaxed))
    }
}

struct SharedTotals(Arc<Totals>);

impl Recorder for SharedTotals {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.0.total(key))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.0.total(key))
    }
}

fn limiter(algorithm: Algorithm) -> Limiter {
    let rate = "1000000/1s".parse().expect("a valid rate");
    Limiter::builder(MemoryStore::new())
        .rule(
            "api",
            Rule::new(vec![Limit::new(&["user"], rate, algorithm)]),
        )
        .build()
        .expect("a valid rule")
}

/// Checks every user `rounds` times, for the full decision and for the verdict; every check
/// must be allowed.
fn check_all(limiter: &Limiter, users: &[[(&str, String); 1]], rounds: usize) {
    for _ in 0..rounds {
        for attrs in users {
            let d: Decision = ready(limiter.check("api", attrs)).expect("a valid check");
            assert!(d.allowed, "{d:?}");
            let v: Verdict = ready(limiter.verdict("api", attrs)).expect("a valid check");
            assert!(v.allowed, "{v:?}");
        }
    }
}

#[test]
fn an_allowed_one_limit_check_on_the_memory_store_allocates_nothing() {
    let users: Vec<[(&str, String); 1]> = (0..100).map(|i| [("user", format!("u{i}"))]).collect();
    // Every algorithm whose state has a fixed size (a sliding log keeps one entry per admitted
    // request, so it grows with the traffic by design).
    let algorithms = Algorithm::ALL
        .into_iter()
        .filter(|a| *a != Algorithm::SlidingLog && !a.holds_leases());
    let checks = 2 * 1100 * algorithms.clone().count() as u64;
    for algorithm in algorithms.clone() {
        let limiter = limiter(algorithm);
        // The first check of a key stores it (the table grows); later checks find it.
        check_all(&limiter, &users, 1);
        let made = allocations(|| check_all(&limiter, &users, 10));
        assert_eq!(made, 0, "{algorithm}: 2000 checks allocated {made} times");
    }

    // With a recorder installed after the limiters were built: the decisions are counted by it,
    // through handles registered once.
    let totals = Arc::new(Totals::default());
    metrics::set_global_recorder(SharedTotals(totals.clone())).expect("the only recorder");
    for algorithm in algorithms {
        let limiter = limiter(algorithm);
        check_all(&limiter, &users, 1);
        let made = allocations(|| check_all(&limiter, &users, 10));
        assert_eq!(
            made, 0,
            "{algorithm}, recorded: 2000 checks allocated {made} times"
        );
    }
    let decided = totals.get("sluice_decisions_total{rule=api,outcome=allowed}");
    let timed = totals.get("sluice_store_latency_seconds{store=memory}");
    assert_eq!(decided, checks, "every decision is counted once");
    assert_eq!(timed, checks, "every store call is timed once");
}
