//! GGML's quantization formats: block layouts, reference quantizers, imatrix-aware quantizers and
//! dequantizers, byte-identical with GGML's `ggml-quants.c`.
//!
//! The entry points mirror GGML's C API:
//!
//! | GGML | here |
//! |---|---|
//! | `type_traits[t].to_float` | [`dequantize_row`] |
//! | `type_traits[t].from_float_ref` | [`quantize_row_ref`] |
//! | `ggml_quantize_chunk` | [`quantize_chunk`] |
//! | `ggml_quantize_requires_imatrix` | [`quantize_requires_imatrix`] |
//!
//! Every block struct has alignment 1 (its multi-byte fields are stored as little-endian byte
//! pairs, see [`PackedF16`]), so a byte buffer of whole blocks can be viewed as blocks in place
//! with `bytemuck::cast_slice`, whatever its address.

mod common;
mod float_rows;
mod fp4;
mod iq1;
mod iq2;
mod iq3;
mod iq4;
mod iq_common;
mod iq_grids;
mod iq_search;
mod kquants;
mod legacy;
mod low_bit;
mod q2_k;
mod q3_k;
mod q45_k;
mod q6_k;
mod q8_k;
mod search;
mod ternary;

use crate::{Error, Result, Type};

pub use common::{PackedF16, PackedF32, PackedI16, PackedU16};
pub use fp4::{BlockMxfp4, BlockNvfp4};
pub use iq1::{BlockIq1M, BlockIq1S};
pub use iq2::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs};
pub use iq3::{BlockIq3S, BlockIq3Xxs};
pub use iq4::{BlockIq4Nl, BlockIq4Xs, IQ4_NL_VALUES};
pub use legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
pub use low_bit::{BlockQ1_0, BlockQ2_0};
pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q45_k::{BlockQ4K, BlockQ5K};
pub use q6_k::BlockQ6K;
pub use q8_k::BlockQ8K;
pub use ternary::{BlockTq1_0, BlockTq2_0};

/// `to_float`: one run of whole blocks → f32 (lengths checked by the dispatcher).
type ToFloat = fn(&[u8], &mut [f32]);
/// `from_float_ref`: f32 → whole blocks (lengths checked by the dispatcher).
type FromFloatRef = fn(&[f32], &mut [u8]);
/// `quantize_<t>`: `n_rows` rows of `n_per_row` values, optional imatrix of `n_per_row` weights;
/// returns the bytes written.
type Quantize = fn(&[f32], &mut [u8], usize, usize, Option<&[f32]>) -> usize;

/// The functions that implement one type; `None` where GGML has no such function.
#[derive(Clone, Copy)]
struct Kernels {
    to_float: Option<ToFloat>,
    from_float_ref: Option<FromFloatRef>,
    quantize: Option<Quantize>,
    /// GGML's reference quantizer is `quantize` on one row without an imatrix (the grid
    /// i-quants IQ3_XXS, IQ3_S and IQ2_S).
    ref_is_quantize: bool,
}

impl Kernels {
    const fn new(
        to_float: Option<ToFloat>,
        from_float_ref: Option<FromFloatRef>,
        quantize: Option<Quantize>,
    ) -> Kernels {
        Kernels {
            to_float,
            from_float_ref,
            quantize,
            ref_is_quantize: false,
        }
    }

    /// A type with all three functions.
    const fn full(to_float: ToFloat, from_float_ref: FromFloatRef, quantize: Quantize) -> Kernels {
        Kernels::new(Some(to_float), Some(from_float_ref), Some(quantize))
    }

    /// A grid i-quant: dequantizer and quantizer; `has_ref` when GGML's reference quantizer is
    /// the quantizer applied to one row without an imatrix.
    const fn grid(to_float: ToFloat, quantize: Quantize, has_ref: bool) -> Kernels {
        Kernels {
            to_float: Some(to_float),
            from_float_ref: None,
            quantize: Some(quantize),
            ref_is_quantize: has_ref,
        }
    }
}

/// The kernels of `ty`, or `Unsupported` for types GGML cannot convert at all (integers, f64).
fn kernels(ty: Type) -> Result<Kernels> {
    use Type::*;
    Ok(match ty {
        F32 => Kernels::new(
            Some(float_rows::f32_to_float),
            None,
            Some(float_rows::quantize_f32),
        ),
        F16 => Kernels::full(
            float_rows::f16_to_float,
            float_rows::f16_from_float,
            float_rows::quantize_f16,
        ),
        BF16 => Kernels::full(
            float_rows::bf16_to_float,
            float_rows::bf16_from_float,
            float_rows::quantize_bf16,
        ),
        Q4_0 => Kernels::full(
            legacy::dequantize_row_q4_0,
            legacy::quantize_row_q4_0_ref,
            legacy::quantize_q4_0,
        ),
        Q4_1 => Kernels::full(
            legacy::dequantize_row_q4_1,
            legacy::quantize_row_q4_1_ref,
            legacy::quantize_q4_1,
        ),
        Q5_0 => Kernels::full(
            legacy::dequantize_row_q5_0,
            legacy::quantize_row_q5_0_ref,
            legacy::quantize_q5_0,
        ),
        Q5_1 => Kernels::full(
            legacy::dequantize_row_q5_1,
            legacy::quantize_row_q5_1_ref,
            legacy::quantize_q5_1,
        ),
        Q8_0 => Kernels::full(
            legacy::dequantize_row_q8_0,
            legacy::quantize_row_q8_0_ref,
            legacy::quantize_q8_0,
        ),
        // GGML has no dequantizer for Q8_1 and does not quantize it in ggml_quantize_chunk.
        Q8_1 => Kernels::new(None, Some(legacy::quantize_row_q8_1_ref), None),
        Q2_K => Kernels::full(
            q2_k::dequantize_row_q2_k,
            q2_k::quantize_row_q2_k_ref,
            q2_k::quantize_q2_k,
        ),
        Q3_K => Kernels::full(
            q3_k::dequantize_row_q3_k,
            q3_k::quantize_row_q3_k_ref,
            q3_k::quantize_q3_k,
        ),
        Q4_K => Kernels::full(
            q45_k::dequantize_row_q4_k,
            q45_k::quantize_row_q4_k_ref,
            q45_k::quantize_q4_k,
        ),
        Q5_K => Kernels::full(
            q45_k::dequantize_row_q5_k,
            q45_k::quantize_row_q5_k_ref,
            q45_k::quantize_q5_k,
        ),
        Q6_K => Kernels::full(
            q6_k::dequantize_row_q6_k,
            q6_k::quantize_row_q6_k_ref,
            q6_k::quantize_q6_k,
        ),
        // GGML's base type traits leave Q8_K's to_float and from_float_ref empty, but
        // ggml-quants exports dequantize_row_q8_K and quantize_row_q8_K_ref; both are offered.
        Q8_K => Kernels::new(
            Some(q8_k::dequantize_row_q8_k),
            Some(q8_k::quantize_row_q8_k_ref),
            None,
        ),
        IQ4_NL => Kernels::full(
            iq4::dequantize_row_iq4_nl,
            iq4::quantize_row_iq4_nl_ref,
            iq4::quantize_iq4_nl,
        ),
        IQ4_XS => Kernels::full(
            iq4::dequantize_row_iq4_xs,
            iq4::quantize_row_iq4_xs_ref,
            iq4::quantize_iq4_xs,
        ),
        TQ1_0 => Kernels::full(
            ternary::dequantize_row_tq1_0,
            ternary::quantize_row_tq1_0_ref,
            ternary::quantize_tq1_0,
        ),
        TQ2_0 => Kernels::full(
            ternary::dequantize_row_tq2_0,
            ternary::quantize_row_tq2_0_ref,
            ternary::quantize_tq2_0,
        ),
        MXFP4 => Kernels::full(
            fp4::dequantize_row_mxfp4,
            fp4::quantize_row_mxfp4_ref,
            fp4::quantize_mxfp4,
        ),
        NVFP4 => Kernels::full(
            fp4::dequantize_row_nvfp4,
            fp4::quantize_row_nvfp4_ref,
            fp4::quantize_nvfp4,
        ),
        Q1_0 => Kernels::full(
            low_bit::dequantize_row_q1_0,
            low_bit::quantize_row_q1_0_ref,
            low_bit::quantize_q1_0,
        ),
        Q2_0 => Kernels::full(
            low_bit::dequantize_row_q2_0,
            low_bit::quantize_row_q2_0_ref,
            low_bit::quantize_q2_0,
        ),
        IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ1_M => grid_iquant_kernels(ty)?,
        I8 | I16 | I32 | I64 | F64 => {
            return Err(Error::unsupported(format!(
                "type {ty} has no conversion to or from f32 in GGML's type traits"
            )))
        }
    })
}

/// The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M); `true` where GGML's
/// reference quantizer is the quantizer without an imatrix.
fn grid_iquant_kernels(ty: Type) -> Result<Kernels> {
    use Type::*;
    Ok(match ty {
        IQ2_XXS => Kernels::grid(iq2::dequantize_row_iq2_xxs, iq2::quantize_iq2_xxs, false),
        IQ2_XS => Kernels::grid(iq2::dequantize_row_iq2_xs, iq2::quantize_iq2_xs, false),
        IQ2_S => Kernels::grid(iq2::dequantize_row_iq2_s, iq2::quantize_iq2_s, true),
        IQ3_XXS => Kernels::grid(iq3::dequantize_row_iq3_xxs, iq3::quantize_iq3_xxs, true),
        IQ3_S => Kernels::grid(iq3::dequantize_row_iq3_s, iq3::quantize_iq3_s, true),
        IQ1_S => Kernels::grid(iq1::dequantize_row_iq1_s, iq1::quantize_iq1_s, false),
        IQ1_M => Kernels::grid(iq1::dequantize_row_iq1_m, iq1::quantize_iq1_m, false),
        _ => return Err(Error::invalid(format!("type {ty} is not a grid i-quant"))),
    })
}

/// Whether [`dequantize_row`] supports `ty`: GGML's `to_float` types (every block-quantized type
/// but Q8_1, plus F16, BF16 and F32) and Q8_K (GGML's `dequantize_row_q8_K`).
pub fn has_to_float(ty: Type) -> bool {
    kernels(ty).is_ok_and(|k| k.to_float.is_some())
}

/// Whether [`quantize_row_ref`] supports `ty` (GGML's `from_float_ref`, plus Q8_K's exported
/// `quantize_row_q8_K_ref`).
pub fn has_from_float_ref(ty: Type) -> bool {
    kernels(ty).is_ok_and(|k| k.from_float_ref.is_some() || k.ref_is_quantize)
}

/// Whether [`quantize_chunk`] supports `ty` (the types `ggml_quantize_chunk` handles: every
/// block-quantized type but Q8_1 and Q8_K, plus F16, BF16 and F32).
pub fn has_quantizer(ty: Type) -> bool {
    kernels(ty).is_ok_and(|k| k.quantize.is_some())
}

/// Whether quantizing to `ty` needs an importance matrix (`ggml_quantize_requires_imatrix`):
/// IQ2_XXS, IQ2_XS and IQ1_S.
pub fn quantize_requires_imatrix(ty: Type) -> bool {
    matches!(ty, Type::IQ2_XXS | Type::IQ2_XS | Type::IQ1_S)
}

/// Bytes of `n` elements of `ty`, checking that `n` is a whole number of blocks; `what` names the
/// argument in the error.
fn bytes_for(ty: Type, n: usize, what: &str) -> Result<usize> {
    let blck = ty.blck_size();
    if n % blck != 0 {
        return Err(Error::invalid(format!(
            "{what} has {n} elements, not a multiple of the {ty} block size {blck}"
        )));
    }
    Ok(n / blck * ty.type_size())
}

/// Dequantizes whole blocks of `ty` from `src` into `dst` (GGML's `to_float`).
///
/// `dst.len()` must be a multiple of `ty`'s block size and `src.len()` the matching number of
/// bytes (`ty.row_size(dst.len())`).
pub fn dequantize_row(ty: Type, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = bytes_for(ty, dst.len(), "dst")?;
    if src.len() != need {
        return Err(Error::invalid(format!(
            "src has {} bytes, but {} {ty} values take {need}",
            src.len(),
            dst.len()
        )));
    }
    let to_float = kernels(ty)?
        .to_float
        .ok_or_else(|| Error::unsupported(format!("GGML has no dequantizer for type {ty}")))?;
    to_float(src, dst);
    Ok(())
}

/// Quantizes `src` into whole blocks of `ty` with GGML's reference quantizer
/// (`from_float_ref`, the deterministic one used to write model files).
///
/// `src.len()` must be a multiple of `ty`'s block size and `dst.len()` the matching number of
/// bytes.
pub fn quantize_row_ref(ty: Type, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let need = bytes_for(ty, src.len(), "src")?;
    if dst.len() != need {
        return Err(Error::invalid(format!(
            "dst has {} bytes, but {} {ty} values take {need}",
            dst.len(),
            src.len()
        )));
    }
    let k = kernels(ty)?;
    if src.is_empty() && (k.from_float_ref.is_some() || k.ref_is_quantize) {
        return Ok(());
    }
    match (k.from_float_ref, k.quantize) {
        (Some(from_float), _) => from_float(src, dst),
        (None, Some(quantize)) if k.ref_is_quantize => {
            quantize(src, dst, 1, src.len(), None);
        }
        _ => {
            return Err(Error::unsupported(format!(
                "GGML has no reference quantizer for type {ty}"
            )))
        }
    }
    Ok(())
}

/// Quantizes rows `start_row .. start_row + n_rows` of the matrix `src` (rows of `n_per_row`
/// values) into the same rows of `dst` (rows of `ty.row_size(n_per_row)` bytes), exactly as
/// `ggml_quantize_chunk` does with `start = start_row * n_per_row`. Returns the bytes written.
///
/// `imatrix`, when given, holds one importance weight per column (`n_per_row` values); it is
/// required for the types where [`quantize_requires_imatrix`] is true and ignored by the types
/// that do not use one.
pub fn quantize_chunk(
    ty: Type,
    src: &[f32],
    dst: &mut [u8],
    start_row: usize,
    n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> Result<usize> {
    if n_per_row == 0 {
        return Err(Error::invalid("n_per_row is 0; rows must have elements"));
    }
    let row_size = bytes_for(ty, n_per_row, "each row (n_per_row)")?;
    if quantize_requires_imatrix(ty) && imatrix.is_none() {
        return Err(Error::invalid(format!(
            "quantizing to {ty} requires an imatrix, and imatrix is None"
        )));
    }
    if let Some(w) = imatrix {
        if w.len() != n_per_row {
            return Err(Error::invalid(format!(
                "imatrix has {} weights, but rows have n_per_row = {n_per_row} columns",
                w.len()
            )));
        }
    }
    let overflow = || {
        Error::invalid(format!(
            "start_row {start_row} + n_rows {n_rows} rows of {n_per_row} overflow usize"
        ))
    };
    let end_row = start_row.checked_add(n_rows).ok_or_else(overflow)?;
    let src_end = end_row.checked_mul(n_per_row).ok_or_else(overflow)?;
    let dst_end = end_row.checked_mul(row_size).ok_or_else(overflow)?;
    if src.len() < src_end {
        return Err(Error::invalid(format!(
            "src has {} values, but rows {start_row}..{end_row} of {n_per_row} need {src_end}",
            src.len()
        )));
    }
    if dst.len() < dst_end {
        return Err(Error::invalid(format!(
            "dst has {} bytes, but rows {start_row}..{end_row} of {row_size} bytes need {dst_end}",
            dst.len()
        )));
    }
    let quantize = kernels(ty)?.quantize.ok_or_else(|| {
        Error::unsupported(format!("ggml_quantize_chunk does not quantize type {ty}"))
    })?;
    let src = &src[start_row * n_per_row..src_end];
    let dst = &mut dst[start_row * row_size..dst_end];
    let written = quantize(src, dst, n_rows, n_per_row, imatrix);
    debug_assert_eq!(written, n_rows * row_size);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_match_the_type_table() {
        use std::mem::size_of;
        let sizes = [
            (Type::Q4_0, size_of::<BlockQ4_0>()),
            (Type::Q4_1, size_of::<BlockQ4_1>()),
            (Type::Q5_0, size_of::<BlockQ5_0>()),
            (Type::Q5_1, size_of::<BlockQ5_1>()),
            (Type::Q8_0, size_of::<BlockQ8_0>()),
            (Type::Q8_1, size_of::<BlockQ8_1>()),
            (Type::Q2_K, size_of::<BlockQ2K>()),
            (Type::Q3_K, size_of::<BlockQ3K>()),
            (Type::Q4_K, size_of::<BlockQ4K>()),
            (Type::Q5_K, size_of::<BlockQ5K>()),
            (Type::Q6_K, size_of::<BlockQ6K>()),
            (Type::Q8_K, size_of::<BlockQ8K>()),
            (Type::IQ4_NL, size_of::<BlockIq4Nl>()),
            (Type::IQ4_XS, size_of::<BlockIq4Xs>()),
            (Type::TQ1_0, size_of::<BlockTq1_0>()),
            (Type::TQ2_0, size_of::<BlockTq2_0>()),
            (Type::MXFP4, size_of::<BlockMxfp4>()),
            (Type::NVFP4, size_of::<BlockNvfp4>()),
            (Type::Q1_0, size_of::<BlockQ1_0>()),
            (Type::Q2_0, size_of::<BlockQ2_0>()),
        ];
        for (ty, size) in sizes {
            assert_eq!(size, ty.type_size(), "{ty}");
        }
    }

    #[test]
    fn introspection_follows_ggml() {
        assert!(has_to_float(Type::F32) && has_quantizer(Type::F32));
        assert!(!has_from_float_ref(Type::F32));
        assert!(!has_to_float(Type::Q8_1) && has_from_float_ref(Type::Q8_1));
        assert!(!has_quantizer(Type::Q8_1) && !has_quantizer(Type::Q8_K));
        assert!(!has_to_float(Type::I32) && !has_quantizer(Type::F64));
        assert!(quantize_requires_imatrix(Type::IQ1_S));
        assert!(!quantize_requires_imatrix(Type::IQ1_M));
        assert!(!quantize_requires_imatrix(Type::Q4_K));
    }
}
