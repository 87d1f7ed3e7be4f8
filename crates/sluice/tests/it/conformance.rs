//! One conformance suite, every store: each behaviour of `sluice::conformance` runs against the
//! memory store and (feature `redis`) the Redis store on a real `redis-server`, on a
//! `valkey-server` (Valkey 8, see `sluice_test_support::valkey`), on a Redis Cluster
//! (3 primaries, 3 replicas; multi-limit rules there cross slots) and behind sentinels, with the
//! same manual clock, and must give the same numbers. The cluster and the sentinel set-up are
//! shared by the tests of this binary, each test under its own key prefix.
#![cfg(feature = "conformance")]

use crate::common;

use common::Harness;

sluice::conformance_suite!(memory, async { Harness::memory() });
#[cfg(feature = "redis")]
sluice::conformance_suite!(redis, Harness::redis());
#[cfg(feature = "redis")]
sluice::conformance_suite!(valkey, Harness::valkey());
#[cfg(feature = "redis")]
sluice::conformance_suite!(cluster, Harness::cluster());
#[cfg(feature = "redis")]
sluice::conformance_suite!(sentinel, Harness::sentinel());
