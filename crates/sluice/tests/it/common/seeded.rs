//! Seeded randomness for the differential tests: [`Rng`] picks their inputs, and [`seed`] is
//! where a run starts, so a failure that prints its seed replays exactly
//! (`SLUICE_DIFF_SEED=<seed>`, decimal or `0x` hex as printed).

use sluice::algorithm::LeaseToken;

/// splitmix64: small, seedable, good enough to pick test inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn token(&mut self) -> LeaseToken {
        let bits = u128::from(self.next()) << 64 | u128::from(self.next());
        LeaseToken(bits.to_be_bytes())
    }
}

/// The seed of this run: `SLUICE_DIFF_SEED` if set, else a fixed one.
pub fn seed() -> u64 {
    let given = std::env::var("SLUICE_DIFF_SEED").ok();
    given
        .as_deref()
        .map(str::trim)
        .and_then(|s| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        })
        .unwrap_or(0x5EED_2026)
}
