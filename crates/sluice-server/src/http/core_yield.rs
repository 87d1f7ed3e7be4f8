//! A worker thread gives its core back to the OS after every [`RESPONSES_PER_YIELD`] responses.
//!
//! The OS lets a thread that never blocks run out its time slice (a few milliseconds on Linux)
//! before another thread waiting for the same core gets it. A worker of a busy server hardly ever
//! blocks: another request is always ready. When the server shares its cores with its clients
//! (the application beside a sidecar, a proxy on the same host, a load generator), a client that
//! has just been sent its response waits out that slice before it can read it, and the slow
//! tail of what clients see is the slice. Yielding the core every few dozen responses bounds that
//! wait to the time they take (a few hundred microseconds); on a core with nothing else ready the
//! call returns at once, one system call per [`RESPONSES_PER_YIELD`] responses.
//!
//! Invariant: the count is per thread, so each worker yields after its own responses, wherever
//! the connections' tasks run.

use std::cell::Cell;

/// Responses a worker thread sends between two yields of its core. On two cores shared with
/// `wrk -t2 -c50`, 16 cost throughput on some rows, 64 gave a longer tail than 32; 32 kept the
/// rate of not yielding.
const RESPONSES_PER_YIELD: u32 = 32;

thread_local! {
    /// Responses this thread has sent since it last yielded.
    static SENT: Cell<u32> = const { Cell::new(0) };
}

/// Counts one response sent by this thread, and yields its core when it is the one to.
pub(super) fn responded() {
    if count_one() {
        std::thread::yield_now();
    }
}

/// Counts one response on this thread: whether the core is to be yielded now.
fn count_one() -> bool {
    SENT.with(|sent| {
        let n = sent.get() + 1;
        let due = n >= RESPONSES_PER_YIELD;
        sent.set(if due { 0 } else { n });
        due
    })
}

/// Responses this thread has counted since it last yielded.
#[cfg(test)]
pub(super) fn sent_on_this_thread() -> u32 {
    SENT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_yields_its_core_on_every_32nd_response() {
        std::thread::spawn(|| {
            for round in 0..3 {
                for n in 1..RESPONSES_PER_YIELD {
                    assert!(!count_one(), "round {round}: response {n} keeps the core");
                }
                assert!(count_one(), "round {round}: the 32nd yields it");
                assert_eq!(sent_on_this_thread(), 0, "and starts a new count");
            }
        })
        .join()
        .expect("the assertions hold");
    }

    #[test]
    fn each_thread_counts_its_own_responses() {
        for _ in 1..RESPONSES_PER_YIELD {
            assert!(!count_one());
        }
        let elsewhere = std::thread::spawn(|| (count_one(), sent_on_this_thread()));
        assert_eq!(elsewhere.join().expect("it ends"), (false, 1));
        assert!(count_one(), "this thread's 32nd response yields");
    }
}
