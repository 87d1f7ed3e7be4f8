//! The conformance suite: the behaviours every [`Store`](crate::Store) must show, written once
//! and run against each store with one macro call (feature `conformance`).
//!
//! Each behaviour is an `async fn(Subject)`: it drives a store through its [`Subject`] (the
//! store and the [`ManualClock`] it decides with) and asserts exact numbers, so two stores that
//! pass give the same answers. The memory store, the Redis store on one server, on a Redis Cluster
//! and behind sentinels all run it (`tests/it/conformance.rs`); a store written outside this crate
//! runs it the same way:
//!
//! ```ignore
//! crate::conformance_suite!(my_store, async {
//!     let clock = crate::ManualClock::at_2026();
//!     crate::conformance::Subject::new(std::sync::Arc::new(MyStore::new(clock.clone())), clock)
//! });
//! ```
//!
//! This expands to a module `my_store` with one `#[test]` per behaviour. The expression is
//! evaluated afresh for each test; it may be any future whose output is a [`Subject`] or
//! something that keeps one (`AsRef<Subject>`), for example a value that also owns the server the
//! store talks to. The store must read time from the given clock (or be told it, as the Redis
//! store is through `RedisOptions::clock`) and keep state at least as long as that clock needs.
//!
//! Invariant kept by every behaviour: it uses only the public API of a store and the limiter, so
//! a behaviour that passes on one store and fails on another is a difference between stores.

mod algorithms;
mod batches;
mod billing_days;
mod blocks;
mod crossings;
mod leases;
mod quotas;
mod repeated;
mod requests;
mod reservations;
mod runtime;
mod tiers;

pub use algorithms::*;
pub use batches::*;
pub use billing_days::*;
pub use blocks::*;
pub use crossings::*;
pub use leases::*;
pub use quotas::*;
pub use repeated::*;
pub use requests::*;
pub use reservations::*;
pub use runtime::*;
pub use tiers::*;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::{LimitOutcome, LimitStep, Mode, Params};
use crate::model::{Algorithm, Micros};
use crate::store::{LimitCall, LimitKey, StoreReply};
use crate::{Clock, DynStore, Limiter, ManualClock, Options, Rule};

/// One second.
pub const S: Micros = Micros::from_secs(1);

/// A store under test and the clock it decides with.
#[derive(Clone)]
pub struct Subject {
    /// The clock every decision reads.
    pub clock: ManualClock,
    /// The store.
    pub store: Arc<dyn DynStore>,
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject").finish_non_exhaustive()
    }
}

impl AsRef<Subject> for Subject {
    fn as_ref(&self) -> &Subject {
        self
    }
}

impl Subject {
    /// `store`, deciding with `clock`.
    pub fn new(store: Arc<dyn DynStore>, clock: ManualClock) -> Subject {
        Subject { clock, store }
    }

    /// A limiter over the store with a generous timeout (decisions must not degrade here).
    pub fn limiter(&self, rules: Vec<(&str, Rule)>) -> Limiter {
        self.limiter_with(
            rules,
            Options {
                timeout: Duration::from_secs(5),
                max_attribute_len: 16 * 1024,
                ..Options::default()
            },
        )
    }

    /// A limiter over the store with these options.
    pub fn limiter_with(&self, rules: Vec<(&str, Rule)>, options: Options) -> Limiter {
        Limiter::builder(self.store.clone())
            .rules(rules.into_iter().map(|(n, r)| (n.to_string(), r)))
            .clock(Arc::new(self.clock.clone()))
            .options(options)
            .build()
            .expect("test rules are valid")
    }

    /// Moves the clock forward by `us`.
    pub fn advance_us(&self, us: Micros) {
        self.clock.advance(us.into());
    }

    /// The clock's time.
    pub fn now_us(&self) -> Micros {
        self.clock.now_us()
    }

    /// Decides through the store directly.
    pub async fn decide(&self, calls: &[LimitCall], mode: Mode) -> StoreReply {
        self.store
            .decide(calls, mode)
            .await
            .expect("the store answers")
    }

    /// Decides one call through the store directly and returns its outcome.
    pub async fn one(&self, call: &LimitCall) -> LimitOutcome {
        self.decide(std::slice::from_ref(call), Mode::Apply)
            .await
            .outcomes[0]
    }
}

/// A key of rule `r` for direct store calls.
pub fn key(limit_id: &str, identity: &str) -> LimitKey {
    LimitKey {
        rule: "r".into(),
        limit_id: limit_id.into(),
        identity: identity.into(),
    }
}

/// A plain step: `count` per `window_us`, capacity `count`, cost 1, not shadow.
pub fn step(algorithm: Algorithm, count: u64, window_us: Micros) -> LimitStep {
    LimitStep {
        algorithm,
        params: Params::new(count, window_us, count),
        cost: 1,
        block_us: None,
        penalty: None,
        shadow: false,
        lease: None,
        settable: false,
    }
}

/// A call on `key(limit_id, "ip=1")`.
pub fn call(limit_id: &str, step: LimitStep) -> LimitCall {
    LimitCall {
        key: key(limit_id, "ip=1"),
        step,
    }
}

/// Runs one behaviour on a fresh subject, on a current-thread runtime with time and I/O.
///
/// The behaviour gets a clone of the subject (the same store and clock); `H` itself lives until
/// the behaviour ends, so whatever it owns (a server) outlives the test.
pub fn run<H, B>(subject: impl Future<Output = H>, behaviour: impl FnOnce(Subject) -> B)
where
    H: AsRef<Subject>,
    B: Future<Output = ()>,
{
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test runtime starts")
        .block_on(async {
            let h = subject.await;
            behaviour(h.as_ref().clone()).await;
        });
}

/// Generates a module `$store` with one `#[test]` per behaviour of the suite, each running on a
/// fresh value of `$subject` (a future of a [`Subject`] or of anything `AsRef<Subject>`).
#[macro_export]
macro_rules! conformance_suite {
    ($store:ident, $subject:expr) => {
        $crate::conformance_suite!(@each $store, $subject, [
            sliding_log_admits_limit_then_slides,
            sliding_log_same_instant_units_are_distinct,
            sliding_window_admits_limit_and_slides_by_bucket,
            fixed_window_counts_per_aligned_window,
            a_monthly_quota_resets_on_its_anchor_day,
            a_daily_quota_follows_its_zone_across_daylight_saving,
            weekly_and_yearly_quotas_begin_on_monday_and_new_year,
            a_quota_that_admits_past_itself_marks_the_overage,
            a_billing_day_per_identity_decides_its_own_month,
            changing_the_billing_day_keeps_the_count,
            a_billing_day_of_31_falls_on_februarys_last_day,
            a_billing_day_holds_in_a_rule_of_several_limits,
            token_bucket_bursts_then_refills_keeping_fractions,
            gcra_bursts_then_spaces_units,
            leaky_bucket_delays_then_denies_and_keeps_fractional_leak,
            cost_is_admitted_whole_or_not_at_all,
            cost_above_capacity_is_refused_with_a_reason,
            count_denied_makes_denials_count,
            peek_consumes_nothing,
            quota_thresholds_are_crossed_once_per_period,
            quota_crossings_follow_what_the_rule_counts,
            quota_crossings_follow_an_identitys_own_numbers,
            multi_limit_rules_are_all_or_nothing,
            repeated_parts_add_up_against_one_count,
            repeated_parts_share_one_lease,
            shadow_limits_and_rules_never_deny,
            a_named_limit_that_changes_algorithm_starts_fresh,
            identities_are_counted_separately,
            block_lock_answers_until_its_end,
            penalty_warns_then_bans,
            admin_block_unblock_blocks_and_reset,
            a_block_shorter_than_the_window_keeps_the_count,
            block_listings_are_paged_and_complete,
            concurrency_holds_n_then_a_release_lets_the_next_in,
            concurrency_leases_expire_and_double_releases_are_harmless,
            concurrency_renewals_extend_leases,
            concurrency_composes_all_or_nothing,
            concurrency_with_shadow_and_block,
            concurrency_refuses_bad_lease_ids,
            reservations_give_back_or_charge_the_difference_once,
            reservations_settle_late_or_keep_their_estimate,
            reservations_refuse_rules_and_ids_they_cannot_settle,
            batches_admit_the_limit_across_nodes,
            batches_give_back_what_they_did_not_spend,
            batches_keep_blocks_and_shadow,
            runtime_limits_replace_the_numbers_of_one_identity,
            runtime_limits_set_bursts_and_leases,
            runtime_limits_are_validated_and_bounded,
            runtime_limits_are_exact_under_concurrency_right_after_a_change,
            runtime_limits_reach_every_node_at_once,
            overrides_pick_numbers_and_keep_the_counter,
            unlimited_deny_and_conditions_count_only_what_they_should,
            addresses_are_counted_by_network,
            runtime_limits_beat_numeric_overrides_and_deny_still_denies,
        ]);
    };
    (@each $store:ident, $subject:expr, [$($behaviour:ident),* $(,)?]) => {
        mod $store {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $behaviour() {
                    $crate::conformance::run($subject, $crate::conformance::$behaviour);
                }
            )*
        }
    };
}
