//! The Redis store.
