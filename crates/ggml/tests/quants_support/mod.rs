//! Helpers shared by the quantization tests (`quants_api.rs`, `quants_fixtures.rs`,
//! `quants_iq.rs`): the list of grid i-quants, whole-matrix quantization into a fresh buffer, and
//! a deterministic input ramp.
#![allow(dead_code)]

use ggml::quants::quantize_chunk;
use ggml::{Error, Type};

/// The grid i-quants: the types whose quantizers search a lattice grid (and build its lookup
/// tables on first use).
pub const GRID_IQUANTS: [Type; 7] = [
    Type::IQ2_XXS,
    Type::IQ2_XS,
    Type::IQ2_S,
    Type::IQ3_XXS,
    Type::IQ3_S,
    Type::IQ1_S,
    Type::IQ1_M,
];

/// Quantizes the `n_rows` rows of `x` (all of it) to `ty` with `quantize_chunk` into a fresh
/// buffer; an error, or a byte count other than the buffer's length, is returned as a message.
pub fn try_quantize(
    ty: Type,
    x: &[f32],
    n_rows: usize,
    imatrix: Option<&[f32]>,
) -> Result<Vec<u8>, String> {
    let n_per_row = x.len() / n_rows;
    let row_size = ty
        .row_size(n_per_row as i64)
        .map_err(|e: Error| e.to_string())?;
    let mut q = vec![0u8; n_rows * row_size];
    let n = quantize_chunk(ty, x, &mut q, 0, n_rows, n_per_row, imatrix)
        .map_err(|e| format!("quantize_chunk failed: {e}"))?;
    if n != q.len() {
        return Err(format!(
            "quantize_chunk wrote {n} bytes, expected {}",
            q.len()
        ));
    }
    Ok(q)
}

/// [`try_quantize`], panicking on failure.
pub fn quantize(ty: Type, x: &[f32], n_rows: usize, imatrix: Option<&[f32]>) -> Vec<u8> {
    try_quantize(ty, x, n_rows, imatrix).unwrap_or_else(|e| panic!("{ty}: {e}"))
}

/// `n` deterministic values in about -3..3, with many repeats (a cheap, seedless input).
pub fn ramp(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
        .collect()
}
