//! Deterministic inputs. `test-backend-ops` draws uniform values from a randomly seeded engine;
//! here every tensor gets values from a fixed-seed generator, so two runs time the same data.
//! Float inputs are uniform in the case's range (converted or quantized with
//! [`ggml::quantize_chunk`] for F16, BF16 and the block types, with an all-ones importance
//! matrix for the types that need one), index inputs are uniform in `0..bound`.

use ggml::{quantize_chunk, quantize_requires_imatrix, Context, Op, Tensor, Type};

/// SplitMix64: a small, fast generator whose output passes the usual statistical tests; plenty
/// for benchmark inputs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`, from the top 24 bits (an f32 mantissa's worth).
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u32 << 24) as f32;
        lo + (hi - lo) * unit
    }
}

/// `n` values uniform in `[lo, hi)` from the generator seeded with `seed`.
pub fn uniform_values(n: usize, (lo, hi): (f32, f32), seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64(seed);
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

/// Writes values uniform in `range` into `t`, a contiguous F32 tensor or one of a type that
/// [`quantize_chunk`] writes (F16, BF16, the block types); rows are `ne[0]` values.
pub fn fill_uniform(t: &Tensor, range: (f32, f32), seed: u64) -> Result<(), String> {
    let n = usize::try_from(t.nelements()).map_err(|e| e.to_string())?;
    let values = uniform_values(n, range, seed);
    if t.ty() == Type::F32 {
        return t.set_f32(&values).map_err(|e| e.to_string());
    }
    let n_per_row = usize::try_from(t.ne()[0]).map_err(|e| e.to_string())?;
    let rows = n.checked_div(n_per_row).unwrap_or(0);
    let imatrix = quantize_requires_imatrix(t.ty()).then(|| vec![1.0f32; n_per_row]);
    let mut bytes = vec![0u8; t.nbytes()];
    quantize_chunk(
        t.ty(),
        &values,
        &mut bytes,
        0,
        rows,
        n_per_row,
        imatrix.as_deref(),
    )
    .map_err(|e| format!("cannot fill {} tensor: {e}", t.ty()))?;
    t.set_bytes(&bytes, 0).map_err(|e| e.to_string())
}

/// Writes indices uniform in `0..bound` into the I32 tensor `t`.
fn fill_indices(t: &Tensor, bound: i64, seed: u64) -> Result<(), String> {
    let bound = u64::try_from(bound)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            format!(
                "index bound {bound} for tensor {:?} must be positive",
                t.name()
            )
        })?;
    let mut rng = SplitMix64(seed);
    let n = usize::try_from(t.nelements()).map_err(|e| e.to_string())?;
    // bound fits an i32 for any table a context can hold rows of; the modulo keeps it below.
    let values: Vec<i32> = (0..n)
        .map(|_| (rng.next_u64() % bound).min(i32::MAX as u64) as i32)
        .collect();
    t.set_i32(&values).map_err(|e| e.to_string())
}

/// Fills every input of `ctx` (tensors that are neither results nor views): I32 tensors with
/// indices below `index_bound`, the others with values uniform in `range`. Tensor `i` of the
/// context uses seed `i`.
pub fn fill_inputs(
    ctx: &Context,
    range: (f32, f32),
    index_bound: Option<i64>,
) -> Result<(), String> {
    let inputs = ctx
        .tensors()
        .into_iter()
        .filter(|t| t.op() == Op::None && t.view_src().is_none());
    for (seed, t) in (0u64..).zip(inputs) {
        match (t.ty(), index_bound) {
            (Type::I32, Some(bound)) => fill_indices(&t, bound, seed)?,
            (Type::I32, None) => {
                return Err(format!(
                    "tensor {:?} holds indices, but the case gives no bound for them",
                    t.name()
                ))
            }
            _ => fill_uniform(&t, range, seed)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::{backend, quants};

    #[test]
    fn values_are_deterministic_and_within_range() {
        let a = uniform_values(10_000, (-150.0, 150.0), 7);
        assert_eq!(a, uniform_values(10_000, (-150.0, 150.0), 7));
        assert_ne!(a, uniform_values(10_000, (-150.0, 150.0), 8));
        assert!(a.iter().all(|&v| (-150.0..150.0).contains(&v)));
        // A uniform sample's mean is near the middle of the interval.
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / a.len() as f64;
        assert!(mean.abs() < 5.0, "mean {mean}");
    }

    #[test]
    fn quantized_inputs_hold_the_values_they_were_drawn_from() {
        let cpu = backend::cpu_init().unwrap();
        let ctx = Context::init(4 * ggml::tensor_overhead(), true).unwrap();
        let q = ctx.new_tensor_2d(Type::Q8_0, 64, 3).unwrap();
        let h = ctx.new_tensor_2d(Type::F16, 64, 3).unwrap();
        let idx = ctx.new_tensor_1d(Type::I32, 100).unwrap();
        let _buf = backend::alloc_ctx_tensors(&ctx, &cpu).unwrap();
        fill_inputs(&ctx, (-1.0, 1.0), Some(5)).unwrap();

        // Tensor 0 (q) got seed 0, tensor 1 (h) seed 1; decode and compare with the draws.
        for (t, seed, tol) in [(&q, 0, 1.0 / 127.0), (&h, 1, 1e-3)] {
            let want = uniform_values(192, (-1.0, 1.0), seed);
            let mut got = vec![0f32; 192];
            quants::dequantize_row(t.ty(), &t.to_bytes().unwrap(), &mut got).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= tol, "{} {g} vs {w}", t.ty());
            }
        }
        let rows = idx.get_i32().unwrap();
        assert!(rows.iter().all(|&r| (0..5).contains(&r)));
        assert!((0..5).all(|r| rows.contains(&r)), "{rows:?}");
    }

    #[test]
    fn index_tensors_need_a_bound() {
        let cpu = backend::cpu_init().unwrap();
        let ctx = Context::init(2 * ggml::tensor_overhead(), true).unwrap();
        ctx.new_tensor_1d(Type::I32, 4).unwrap();
        let _buf = backend::alloc_ctx_tensors(&ctx, &cpu).unwrap();
        let err = fill_inputs(&ctx, (-1.0, 1.0), None).unwrap_err();
        assert!(err.contains("no bound"), "{err}");
    }
}
