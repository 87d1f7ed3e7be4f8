//! [`Over`]: what a quota does past itself — refuse (the default), or admit and mark each such
//! decision `over_quota`, so that the overage can be billed (`over: allow`).
//!
//! Invariant (kept by `Limit::validate`): `allow` only on a quota (a limit with a `period`). A
//! quota that admits past itself counts every request that passes, past its quota too, and
//! nothing for a request another limit refuses.

use serde::{Deserialize, Serialize};

/// What a quota does once it is used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Over {
    /// Refuse, as every limit does.
    #[default]
    Deny,
    /// Admit, count, and mark the decision `over_quota` (overage to bill).
    Allow,
}
