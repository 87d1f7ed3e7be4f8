//! The `sluice` binary's tests, in one binary: each module runs the real command line
//! (`CARGO_BIN_EXE_sluice`) on one subject; `common` starts servers and waits for them.
//!
//! Run one subject with `cargo test -p sluice-ratelimit-cli --test it <module>::`.

mod admin;
mod api;
mod billing_days;
mod check_all;
mod commands;
mod common;
mod completions;
mod config_limits;
mod dashboard;
mod deadlines;
mod denial_cache;
mod deploy;
mod docs_links;
mod environment;
mod envoy;
mod envoy_example;
mod envoy_tiers;
mod first_hour;
mod forward_auth;
mod fuzz_http;
mod grpc_limits;
mod hot_keys;
mod import;
mod leases;
mod monitoring;
mod nginx;
mod observability;
mod quota_notices;
mod quotas;
mod redis;
mod redis_ha;
mod reference;
mod reload;
mod reservations;
mod runtime_limits;
mod schema;
mod shutdown;
mod simulate;
mod simulate_docs;
mod simulate_quota;
mod sluice_v1;
mod tiers;
