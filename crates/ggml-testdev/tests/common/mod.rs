//! Helpers shared by the test-device tests.

/// A deterministic input of `n` values in roughly [-2, 2), different for each `seed`.
pub fn input(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 4000;
            h as f32 / 1000.0 - 2.0
        })
        .collect()
}
