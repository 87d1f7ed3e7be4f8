//! Max-min fair shares: how one bucket's allowance for a report interval is split among the
//! proxies that report demand for it. Pure arithmetic, no I/O and no clock.
//!
//! Water filling: proxies are served from the smallest demand up; each gets the smaller of its
//! demand and an equal split of what is left among those not yet served. Units that do not
//! divide evenly go one each to the proxies with the largest demands (ties by position), so the
//! result depends only on the inputs.
//!
//! Invariants (each a property test below):
//! - no proxy gets more than it asked for, and the shares never add up to more than `pool`;
//! - when the demands fit in `pool`, every proxy gets its demand; otherwise the whole pool is
//!   handed out (nothing is held back while someone is short);
//! - max-min: a proxy that gets less than its demand gets at least every other proxy's share
//!   minus one unit (the indivisible remainder).

/// The shares of `pool` units among proxies asking for `demands`, in the same order.
pub fn max_min(pool: u64, demands: &[u64]) -> Vec<u64> {
    let mut shares = vec![0; demands.len()];
    // Served from the smallest demand; the largest last, so they take the odd units.
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&i| (demands[i], i));
    let mut left = pool;
    for (served, &i) in order.iter().enumerate() {
        let waiting = (order.len() - served) as u64;
        let equal = left / waiting;
        if demands[i] <= equal {
            shares[i] = demands[i];
            left -= demands[i];
            continue;
        }
        // Everyone still waiting asks for more than an equal split: split what is left.
        let rest = &order[served..];
        let odd = left % waiting;
        for (k, &j) in rest.iter().enumerate() {
            // The last `odd` of them (the largest demands) get one unit more.
            let extra = u64::from((k as u64) >= waiting - odd);
            shares[j] = equal + extra;
        }
        break;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_demands_keep_what_they_need_and_the_rest_is_split() {
        assert_eq!(max_min(100, &[10, 80, 80]), vec![10, 45, 45]);
        assert_eq!(max_min(100, &[10, 20, 30]), vec![10, 20, 30]);
        assert_eq!(max_min(10, &[100, 100, 100]), vec![3, 3, 4]);
        assert_eq!(max_min(0, &[5, 5]), vec![0, 0]);
        assert_eq!(max_min(7, &[]), Vec::<u64>::new());
    }

    #[test]
    fn ten_to_one_skew_gives_the_heavy_proxies_what_the_light_ones_leave() {
        // 2 heavy proxies asking 100, 18 light ones asking 10, a pool of 200.
        let mut demands = vec![100, 100];
        demands.extend([10; 18]);
        let shares = max_min(200, &demands);
        assert_eq!(&shares[2..], &[10; 18]);
        assert_eq!(shares[0] + shares[1], 20);
    }

    proptest! {
        #[test]
        fn shares_are_max_min_fair(
            pool in 0u64..10_000,
            demands in proptest::collection::vec(0u64..5_000, 0..40),
        ) {
            let shares = max_min(pool, &demands);
            prop_assert_eq!(shares.len(), demands.len());
            let total: u64 = shares.iter().sum();
            let wanted: u64 = demands.iter().sum();
            prop_assert!(total <= pool);
            for (s, d) in shares.iter().zip(&demands) {
                prop_assert!(s <= d);
            }
            if wanted <= pool {
                prop_assert_eq!(&shares, &demands);
            } else {
                prop_assert_eq!(total, pool);
            }
            let largest = shares.iter().copied().max().unwrap_or(0);
            for (s, d) in shares.iter().zip(&demands) {
                if s < d {
                    prop_assert!(s + 1 >= largest, "short {} vs largest {}", s, largest);
                }
            }
        }
    }
}
