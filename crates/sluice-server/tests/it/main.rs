//! The service as a library, in one binary: each module is one subject.
//!
//! Run one subject with `cargo test -p sluice-ratelimit-server --test it <module>::`.

mod fuzz;
mod in_process;
mod rlqs;
