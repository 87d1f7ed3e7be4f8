//! The memory store's settings: how many shards it has and how many keys it holds at most.

/// Number of shards; a power of two well above the core count keeps contention low.
pub const SHARDS: usize = 64;

/// Default [`MemoryOptions::max_keys`]: 64 MB of entries at the cap (the tables' free slots
/// can double it).
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// Settings of a [`MemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryOptions {
    /// Most keys held at once (rounded up to a multiple of [`SHARDS`]; each shard holds its
    /// share). See the module docs for what happens at the cap.
    pub max_keys: usize,
}

impl Default for MemoryOptions {
    fn default() -> MemoryOptions {
        MemoryOptions {
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}
