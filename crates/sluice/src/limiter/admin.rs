//! Admin operations on one identity under a rule: reset, block, unblock, and the blocks in force.
//!
//! They reach the keys of every limit of the rule that the given attributes resolve (a limit
//! whose attributes are missing is skipped; it is an error only if none resolves). Reset, block
//! and unblock apply to the store and to the local store that the `local` fail policy decides
//! on, so an identity reset, blocked or unblocked while the store was down is treated the same
//! once decisions fall back to this node. Admin calls have no fail policy: a store error is an
//! [`Error::Store`].

use std::time::Duration;

use super::{Attributes, Limiter, keys};
use crate::error::Error;
use crate::metric_catalog::names;
use crate::model::Micros;
use crate::store::{BlocksCursor, LimitKey, Store};

/// An active block, as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BlockInfo {
    /// The limit's id (`"limit"` in the admin API's JSON).
    #[serde(rename = "limit")]
    pub limit_id: String,
    /// The (escaped) identity.
    pub identity: String,
    /// When it ends (epoch ms).
    pub blocked_until_ms: u64,
}

/// A page of blocks, as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BlockList {
    /// The blocks and bans in force found in this page.
    pub blocks: Vec<BlockInfo>,
    /// The cursor of the next page; `None` when the listing is complete.
    pub next: Option<String>,
    /// Unreadable block values left out of this page.
    pub skipped: u64,
}

impl Limiter {
    /// The keys of the limits of `rule` that these attributes resolve.
    fn admin_keys(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<Vec<LimitKey>, Error> {
        let rule = self.rule(name)?;
        let mut first_error = None;
        let mut out = Vec::new();
        for limit in &rule.limits {
            match keys::limit_key(&rule, limit, attrs, self.inner.options.max_attribute_len) {
                Ok(key) => out.push(key),
                Err(e @ Error::AttributeTooLong { .. }) => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (out.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(out),
        }
    }

    /// Forgets the counters, blocks and violations of one identity under a rule.
    pub async fn reset(&self, rule: &str, attrs: &(impl Attributes + ?Sized)) -> Result<(), Error> {
        let keys = self.admin_keys(rule, attrs)?;
        self.inner.store.reset(&keys).await?;
        Store::reset(&self.inner.local, &keys).await?;
        self.invalidate(keys).await
    }

    /// Blocks one identity under a rule for `duration`. Returns the block's end (epoch ms).
    pub async fn block(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        duration: Duration,
    ) -> Result<u64, Error> {
        let keys = self.admin_keys(rule, attrs)?;
        let mut until = Micros::ZERO;
        for key in &keys {
            until = until.max(self.inner.store.block(key, duration).await?);
            Store::block(&self.inner.local, key, duration).await?;
        }
        self.invalidate(keys).await?;
        Ok(until.as_millis_ceil())
    }

    /// Lifts a block or ban (and forgets violations). Returns whether one was in force in the
    /// store.
    pub async fn unblock(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<bool, Error> {
        let mut was = false;
        for key in self.admin_keys(rule, attrs)? {
            was |= self.unblock_key(&key).await?;
        }
        Ok(was)
    }

    /// Lifts one block as [`Limiter::blocks`] lists it (rule, limit id and escaped identity), on
    /// the store and the local store, and drops cached denials of it on every node. Returns
    /// whether it was blocked.
    pub async fn unblock_key(&self, key: &LimitKey) -> Result<bool, Error> {
        let was = self.inner.store.unblock(key).await?;
        Store::unblock(&self.inner.local, key).await?;
        self.invalidate(vec![key.clone()]).await?;
        Ok(was)
    }

    /// One page of the blocks and bans in force under a rule (see [`Store::blocks`]): pass
    /// `next` back to get the following page. Unreadable values are skipped and counted in
    /// `sluice_block_listing_skipped_total`.
    pub async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlockList, Error> {
        self.rule(rule)?;
        let page = self.inner.store.blocks(rule, cursor).await?;
        if page.skipped > 0 {
            tracing::warn!(
                rule,
                skipped = page.skipped,
                "unreadable block values left out"
            );
            metrics::counter!(names::BLOCK_LISTING_SKIPPED_TOTAL).increment(page.skipped);
        }
        Ok(BlockList {
            blocks: page
                .entries
                .into_iter()
                .map(|b| BlockInfo {
                    limit_id: b.key.limit_id.to_string(),
                    identity: b.key.identity,
                    blocked_until_ms: b.until_us.as_millis_ceil(),
                })
                .collect(),
            next: page.next,
            skipped: page.skipped,
        })
    }
}
