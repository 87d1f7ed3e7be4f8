//! The library's integration tests, in one binary: linking one test binary per file cost more
//! than running them. Each module is one subject; `common` holds the shared harnesses.
//!
//! Run one subject with `cargo test -p sluice-ratelimit --all-features --test it <module>::`.

mod check_all;
mod common;
mod concurrency;
mod conformance;
mod denial_cache;
mod denial_cache_attacker;
mod doc_snippets;
mod leases;
mod limiter;
mod memory_cap;
mod middleware_client_ip;
mod middleware_example;
mod middleware_http;
mod middleware_leases;
mod middleware_reservations;
mod middleware_service;
mod middleware_store_down;
mod paths_differential;
mod redis_auth;
mod redis_billing_days;
mod redis_channel;
mod redis_cluster;
mod redis_deadlines;
mod redis_differential;
mod redis_exactness;
mod redis_fault_proxy;
mod redis_faults;
mod redis_hostile;
mod redis_in_flight;
mod redis_marked;
mod redis_marked_blocks;
mod redis_memory;
mod redis_quotas;
mod redis_regions;
mod redis_reshard;
mod redis_sentinel;
mod redis_shared_calls;
mod redis_store;
mod standing_queue;
