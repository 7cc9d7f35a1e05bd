//! F32, F16 and BF16 rows: the float types `ggml_quantize_chunk` and the type traits convert.

use super::common::{fp16_to_fp32, fp32_to_fp16};
use crate::bf16;
use crate::types::{bf16_to_f32, f32_to_bf16};

/// F32 "dequantization": a copy of the little-endian floats.
pub(crate) fn f32_to_float(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

/// f32 → F32 (the copy `ggml_quantize_chunk` makes).
pub(crate) fn f32_from_float(src: &[f32], dst: &mut [u8]) {
    for (b, x) in dst.chunks_exact_mut(4).zip(src) {
        b.copy_from_slice(&x.to_le_bytes());
    }
}

/// F16 → f32 (`ggml_fp16_to_fp32_row`).
pub(crate) fn f16_to_float(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *y = fp16_to_fp32(u16::from_le_bytes([b[0], b[1]]));
    }
}

/// f32 → F16 (`ggml_fp32_to_fp16_row`).
pub(crate) fn f16_from_float(src: &[f32], dst: &mut [u8]) {
    for (b, &x) in dst.chunks_exact_mut(2).zip(src) {
        b.copy_from_slice(&fp32_to_fp16(x).to_le_bytes());
    }
}

/// BF16 → f32 (`ggml_bf16_to_fp32_row`).
pub(crate) fn bf16_to_float(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *y = bf16_to_f32(bf16::from_bits(u16::from_le_bytes([b[0], b[1]])));
    }
}

/// f32 → BF16 (`ggml_fp32_to_bf16_row_ref`: round to nearest even, NaN kept quiet).
pub(crate) fn bf16_from_float(src: &[f32], dst: &mut [u8]) {
    for (b, &x) in dst.chunks_exact_mut(2).zip(src) {
        b.copy_from_slice(&f32_to_bf16(x).to_bits().to_le_bytes());
    }
}
