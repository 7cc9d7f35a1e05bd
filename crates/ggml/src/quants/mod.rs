#![doc = include_str!("../doc/quants.md")]
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

mod block;
mod common;
mod float_rows;
mod fp4;
mod iq1;
mod iq2;
mod iq3;
mod iq4;
mod iq_common;
mod iq_grids;
mod iq_groups;
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
use block::{
    from_float_ref, quantize_blocks, quantize_rows, to_float, Dequantize, QuantizeBlock,
    QuantizeImatrix, QuantizeRef,
};

pub(crate) use iq_common::read_u32;
pub(crate) use iq_grids::{
    IQ1_SHIFTED, IQ2S_GRID, IQ2XXS_GRID, IQ2_LEVEL_BYTES, IQ3S_GRID, IQ3S_LEVEL_BYTES, IQ3XXS_GRID,
    IQ3XXS_LEVEL_BYTES, KGRID_2BIT_256, KGRID_2BIT_512, KGRID_3BIT_256, KGRID_3BIT_512,
    KSIGNS_IQ2XS,
};
pub(crate) use iq_groups::{even_signs, GridGroups, GroupBytes};
pub(crate) use kquants::unpack_2bit;
pub(crate) use q3_k::scale as q3k_scale;
pub(crate) use q45_k::{q4k_levels, q5k_levels, scale_min};

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

/// GGML's reference quantizer of a type.
#[derive(Clone, Copy)]
enum Reference {
    /// GGML has none.
    None,
    /// A `from_float_ref` of its own.
    Fn(FromFloatRef),
    /// The type's `quantize_<t>` on one row without an imatrix (IQ4_XS and the grid i-quants
    /// IQ3_XXS, IQ3_S and IQ2_S).
    Quantize(Quantize),
}

/// What `ggml_quantize_chunk` does for a type.
#[derive(Clone, Copy)]
enum Chunk {
    /// It does not quantize the type.
    None,
    /// The reference quantizer over all rows; any imatrix is ignored.
    Reference(FromFloatRef),
    /// A `quantize_<t>` of its own.
    Quantize(Quantize),
}

/// The functions that implement one type.
#[derive(Clone, Copy)]
struct Kernels {
    /// `None` where GGML has no dequantizer.
    to_float: Option<ToFloat>,
    reference: Reference,
    chunk: Chunk,
}

impl Kernels {
    /// A block format whose `ggml_quantize_chunk` is its reference quantizer (no imatrix use).
    fn reference_only<B: Dequantize + QuantizeRef>() -> Kernels {
        Kernels {
            to_float: Some(to_float::<B>),
            reference: Reference::Fn(from_float_ref::<B>),
            chunk: Chunk::Reference(from_float_ref::<B>),
        }
    }

    /// A block format with an imatrix quantizer.
    fn with_imatrix<B: Dequantize + QuantizeImatrix>() -> Kernels {
        Kernels {
            to_float: Some(to_float::<B>),
            reference: Reference::Fn(from_float_ref::<B>),
            chunk: Chunk::Quantize(quantize_rows::<B>),
        }
    }

    /// A format quantized a block at a time (the i-quants); `is_reference` when GGML's reference
    /// quantizer is that quantizer on one row without an imatrix.
    fn per_block<B: Dequantize + QuantizeBlock>(is_reference: bool) -> Kernels {
        let quantize: Quantize = quantize_blocks::<B>;
        Kernels {
            to_float: Some(to_float::<B>),
            reference: if is_reference {
                Reference::Quantize(quantize)
            } else {
                Reference::None
            },
            chunk: Chunk::Quantize(quantize),
        }
    }
}

/// The kernels of `ty`, or `Unsupported` for types GGML cannot convert at all (integers, f64).
fn kernels(ty: Type) -> Result<Kernels> {
    use Type::*;
    Ok(match ty {
        F32 => Kernels {
            to_float: Some(float_rows::f32_to_float),
            reference: Reference::None,
            chunk: Chunk::Reference(float_rows::f32_from_float),
        },
        F16 => Kernels {
            to_float: Some(float_rows::f16_to_float),
            reference: Reference::Fn(float_rows::f16_from_float),
            chunk: Chunk::Reference(float_rows::f16_from_float),
        },
        BF16 => Kernels {
            to_float: Some(float_rows::bf16_to_float),
            reference: Reference::Fn(float_rows::bf16_from_float),
            chunk: Chunk::Reference(float_rows::bf16_from_float),
        },
        Q4_0 => Kernels::with_imatrix::<BlockQ4_0>(),
        Q4_1 => Kernels::with_imatrix::<BlockQ4_1>(),
        Q5_0 => Kernels::with_imatrix::<BlockQ5_0>(),
        Q5_1 => Kernels::with_imatrix::<BlockQ5_1>(),
        Q8_0 => Kernels::reference_only::<BlockQ8_0>(),
        // GGML has no dequantizer for Q8_1 and does not quantize it in ggml_quantize_chunk.
        Q8_1 => Kernels {
            to_float: None,
            reference: Reference::Fn(from_float_ref::<BlockQ8_1>),
            chunk: Chunk::None,
        },
        Q2_K => Kernels::with_imatrix::<BlockQ2K>(),
        Q3_K => Kernels::with_imatrix::<BlockQ3K>(),
        Q4_K => Kernels::with_imatrix::<BlockQ4K>(),
        Q5_K => Kernels::with_imatrix::<BlockQ5K>(),
        Q6_K => Kernels::with_imatrix::<BlockQ6K>(),
        // GGML's base type traits leave Q8_K's to_float and from_float_ref empty, but
        // ggml-quants exports dequantize_row_q8_K and quantize_row_q8_K_ref; both are offered.
        Q8_K => Kernels {
            chunk: Chunk::None,
            ..Kernels::reference_only::<BlockQ8K>()
        },
        // quantize_row_iq4_nl_ref carries state from block to block (see iq4.rs).
        IQ4_NL => Kernels {
            reference: Reference::Fn(iq4::quantize_row_iq4_nl_ref),
            ..Kernels::per_block::<BlockIq4Nl>(false)
        },
        IQ4_XS => Kernels::per_block::<BlockIq4Xs>(true),
        TQ1_0 => Kernels::reference_only::<BlockTq1_0>(),
        TQ2_0 => Kernels::reference_only::<BlockTq2_0>(),
        MXFP4 => Kernels::reference_only::<BlockMxfp4>(),
        NVFP4 => Kernels::reference_only::<BlockNvfp4>(),
        Q1_0 => Kernels::reference_only::<BlockQ1_0>(),
        Q2_0 => Kernels::reference_only::<BlockQ2_0>(),
        IQ2_XXS => Kernels::per_block::<BlockIq2Xxs>(false),
        IQ2_XS => Kernels::per_block::<BlockIq2Xs>(false),
        IQ2_S => Kernels::per_block::<BlockIq2S>(true),
        IQ3_XXS => Kernels::per_block::<BlockIq3Xxs>(true),
        IQ3_S => Kernels::per_block::<BlockIq3S>(true),
        IQ1_S => Kernels::per_block::<BlockIq1S>(false),
        IQ1_M => Kernels::per_block::<BlockIq1M>(false),
        I8 | I16 | I32 | I64 | F64 => {
            return Err(Error::unsupported(format!(
                "type {ty} has no conversion to or from f32 in GGML's type traits"
            )))
        }
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
    kernels(ty).is_ok_and(|k| !matches!(k.reference, Reference::None))
}

/// Whether [`quantize_chunk`] supports `ty` (the types `ggml_quantize_chunk` handles: every
/// block-quantized type but Q8_1 and Q8_K, plus F16, BF16 and F32).
pub fn has_quantizer(ty: Type) -> bool {
    kernels(ty).is_ok_and(|k| !matches!(k.chunk, Chunk::None))
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

/// Checks that the `(name, length)` buffers `values` (f32) and `bytes` hold the same whole
/// blocks of `ty`.
fn check_row(ty: Type, values: (&str, usize), bytes: (&str, usize)) -> Result<()> {
    let need = bytes_for(ty, values.1, values.0)?;
    if bytes.1 != need {
        return Err(Error::invalid(format!(
            "{} has {} bytes, but {} {ty} values take {need}",
            bytes.0, bytes.1, values.1
        )));
    }
    Ok(())
}

/// Dequantizes whole blocks of `ty` from `src` into `dst` (GGML's `to_float`).
///
/// `dst.len()` must be a multiple of `ty`'s block size and `src.len()` the matching number of
/// bytes (`ty.row_size(dst.len())`).
pub fn dequantize_row(ty: Type, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_row(ty, ("dst", dst.len()), ("src", src.len()))?;
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
    check_row(ty, ("src", src.len()), ("dst", dst.len()))?;
    match kernels(ty)?.reference {
        Reference::None => {
            return Err(Error::unsupported(format!(
                "GGML has no reference quantizer for type {ty}"
            )))
        }
        _ if src.is_empty() => {}
        Reference::Fn(from_float) => from_float(src, dst),
        Reference::Quantize(quantize) => {
            quantize(src, dst, 1, src.len(), None);
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
    let chunk = kernels(ty)?.chunk;
    let src = &src[start_row * n_per_row..src_end];
    let dst = &mut dst[start_row * row_size..dst_end];
    let written = match chunk {
        Chunk::None => {
            return Err(Error::unsupported(format!(
                "ggml_quantize_chunk does not quantize type {ty}"
            )))
        }
        Chunk::Reference(from_float) => {
            from_float(src, dst);
            dst.len()
        }
        Chunk::Quantize(quantize) => quantize(src, dst, n_rows, n_per_row, imatrix),
    };
    debug_assert_eq!(written, n_rows * row_size);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block struct has its type's byte size and values per block.
    #[test]
    fn block_layouts_match_the_type_table() {
        use block::Block;
        use std::mem::size_of;
        fn layout<B: Block>() -> (usize, usize) {
            (size_of::<B>(), B::VALUES)
        }
        let layouts = [
            (Type::Q4_0, layout::<BlockQ4_0>()),
            (Type::Q4_1, layout::<BlockQ4_1>()),
            (Type::Q5_0, layout::<BlockQ5_0>()),
            (Type::Q5_1, layout::<BlockQ5_1>()),
            (Type::Q8_0, layout::<BlockQ8_0>()),
            (Type::Q8_1, layout::<BlockQ8_1>()),
            (Type::Q2_K, layout::<BlockQ2K>()),
            (Type::Q3_K, layout::<BlockQ3K>()),
            (Type::Q4_K, layout::<BlockQ4K>()),
            (Type::Q5_K, layout::<BlockQ5K>()),
            (Type::Q6_K, layout::<BlockQ6K>()),
            (Type::Q8_K, layout::<BlockQ8K>()),
            (Type::IQ2_XXS, layout::<BlockIq2Xxs>()),
            (Type::IQ2_XS, layout::<BlockIq2Xs>()),
            (Type::IQ2_S, layout::<BlockIq2S>()),
            (Type::IQ3_XXS, layout::<BlockIq3Xxs>()),
            (Type::IQ3_S, layout::<BlockIq3S>()),
            (Type::IQ1_S, layout::<BlockIq1S>()),
            (Type::IQ1_M, layout::<BlockIq1M>()),
            (Type::IQ4_NL, layout::<BlockIq4Nl>()),
            (Type::IQ4_XS, layout::<BlockIq4Xs>()),
            (Type::TQ1_0, layout::<BlockTq1_0>()),
            (Type::TQ2_0, layout::<BlockTq2_0>()),
            (Type::MXFP4, layout::<BlockMxfp4>()),
            (Type::NVFP4, layout::<BlockNvfp4>()),
            (Type::Q1_0, layout::<BlockQ1_0>()),
            (Type::Q2_0, layout::<BlockQ2_0>()),
        ];
        for (ty, got) in layouts {
            assert_eq!(got, (ty.type_size(), ty.blck_size()), "{ty}");
        }
        let quantized = Type::ALL.iter().filter(|t| t.is_quantized()).count();
        assert_eq!(
            layouts.len(),
            quantized,
            "a quantized type has no block struct here"
        );
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
