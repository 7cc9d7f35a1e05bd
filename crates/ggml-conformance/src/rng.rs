//! Deterministic inputs: a small seeded generator and the derivation of each case's seed from
//! the suite's base seed and the case's name, so that a case gets the same inputs whatever other
//! cases run, in whatever order.

/// The base seed used when none is given (`--seed`); fixtures are made with it.
pub const DEFAULT_SEED: u64 = 0x6767_6d6c_2d72_7321;

/// FNV-1a (64 bit) of `bytes`, continuing from `state` (start with [`FNV_OFFSET`]).
pub fn fnv1a(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a's initial state.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The seed of the case named `name` under base seed `base`.
pub fn case_seed(base: u64, name: &str) -> u64 {
    fnv1a(fnv1a(FNV_OFFSET, &base.to_le_bytes()), name.as_bytes())
}

/// SplitMix64: tiny, fast, and plenty for test data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }

    /// Uniform integer in `lo..=hi` (`lo <= hi`).
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo) as u64 + 1;
        lo + (self.next_u64() % span) as i64
    }

    /// Shuffles `items` (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_depend_on_base_and_name_only() {
        assert_eq!(case_seed(1, "ADD(x)"), case_seed(1, "ADD(x)"));
        assert_ne!(case_seed(1, "ADD(x)"), case_seed(2, "ADD(x)"));
        assert_ne!(case_seed(1, "ADD(x)"), case_seed(1, "ADD(y)"));
        // FNV-1a's published test vector.
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn ranges_are_respected() {
        let mut r = Rng::new(7);
        for _ in 0..1000 {
            let x = r.uniform(-2.0, 3.0);
            assert!((-2.0..3.0).contains(&x));
            let k = r.int(-3, 4);
            assert!((-3..=4).contains(&k));
        }
        let mut v: Vec<u32> = (0..50).collect();
        r.shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(v, s);
    }
}
