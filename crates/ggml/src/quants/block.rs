//! What every block format shares: the [`Block`] layout trait, the traits of the per-block
//! kernels, and the drivers that run those kernels over rows of bytes (GGML's `to_float`,
//! `from_float_ref` and `quantize_<t>` loops).

use bytemuck::Pod;

/// A GGML block layout: [`Block::VALUES`] values stored in `size_of::<Self>()` bytes, with
/// alignment 1 so that any byte buffer of whole blocks can be viewed as blocks in place.
pub(crate) trait Block: Pod {
    /// Values per block (GGML's `blck_size`).
    const VALUES: usize;
}

/// Declares a block struct's GGML layout: implements [`Block`] with `values` values per block
/// and checks at compile time that the struct takes `bytes` bytes with alignment 1.
macro_rules! block_layout {
    ($block:ty, values: $values:expr, bytes: $bytes:expr) => {
        impl $crate::quants::block::Block for $block {
            const VALUES: usize = $values;
        }
        const _: () = assert!(::core::mem::size_of::<$block>() == $bytes);
        const _: () = assert!(::core::mem::align_of::<$block>() == 1);
    };
}
pub(crate) use block_layout;

/// A block that dequantizes on its own (the body of GGML's `dequantize_row_<t>` loop).
pub(crate) trait Dequantize: Block {
    /// Writes the block's [`Block::VALUES`] values to `y`.
    fn dequantize(&self, y: &mut [f32]);
}

/// A block whose reference quantizer (GGML's `quantize_row_<t>_ref`) depends on the block's own
/// values only.
pub(crate) trait QuantizeRef: Block {
    /// Quantizes the [`Block::VALUES`] values of `x` into `y`.
    fn quantize_ref(x: &[f32], y: &mut Self);
}

/// A format whose `quantize_<t>` has an imatrix variant: without an imatrix it is the reference
/// quantizer over all rows; with one it runs row by row (it may use whole-row statistics).
pub(crate) trait QuantizeImatrix: QuantizeRef {
    /// Quantizes one row with the imatrix `qw` (one weight per column).
    fn quantize_row_imatrix(row: &[f32], out: &mut [Self], qw: &[f32]);
}

/// A format quantized one block at a time with the block's imatrix entries, if any (GGML's
/// `quantize_<t>` of the i-quants).
pub(crate) trait QuantizeBlock: Block {
    /// Quantizes the [`Block::VALUES`] values of `x` into `y`, with importance `qw` (the
    /// matching imatrix entries) when given.
    fn quantize_block(x: &[f32], qw: Option<&[f32]>, y: &mut Self);
}

/// Implements [`Dequantize`], [`QuantizeRef`] and [`QuantizeImatrix`] for each `$block` with the
/// generic functions `dequantize(&block, y)`, `quantize_ref(x, &mut block)` and
/// `quantize_row_imatrix(row, blocks, qw)` of module `$kernels` (for formats that share them).
macro_rules! forward_kernels {
    ($kernels:ident => $($block:ty),+) => {$(
        impl $crate::quants::block::Dequantize for $block {
            #[inline(always)]
            fn dequantize(&self, y: &mut [f32]) {
                $kernels::dequantize(self, y);
            }
        }

        impl $crate::quants::block::QuantizeRef for $block {
            #[inline(always)]
            fn quantize_ref(x: &[f32], y: &mut Self) {
                $kernels::quantize_ref(x, y);
            }
        }

        impl $crate::quants::block::QuantizeImatrix for $block {
            fn quantize_row_imatrix(row: &[f32], out: &mut [Self], qw: &[f32]) {
                $kernels::quantize_row_imatrix(row, out, qw);
            }
        }
    )+};
}
pub(crate) use forward_kernels;

/// The blocks of a row with their values and imatrix weights, `(x, qw, y)` per block.
pub(crate) fn with_weights<'a, B: Block>(
    row: &'a [f32],
    qw: &'a [f32],
    out: &'a mut [B],
) -> impl Iterator<Item = (&'a [f32], &'a [f32], &'a mut B)> {
    row.chunks_exact(B::VALUES)
        .zip(qw.chunks_exact(B::VALUES))
        .zip(out)
        .map(|((x, w), y)| (x, w, y))
}

/// Views a byte buffer as blocks. The block types all have alignment 1 and the dispatcher has
/// checked the length, so this cannot fail.
#[inline(always)]
pub(crate) fn blocks<B: Pod>(bytes: &[u8]) -> &[B] {
    bytemuck::cast_slice(bytes)
}

/// Mutable counterpart of [`blocks`].
#[inline(always)]
pub(crate) fn blocks_mut<B: Pod>(bytes: &mut [u8]) -> &mut [B] {
    bytemuck::cast_slice_mut(bytes)
}

/// GGML's `to_float` for a [`Dequantize`] format: whole blocks of `src` into `dst`.
pub(crate) fn to_float<B: Dequantize>(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<B>(src).iter().zip(dst.chunks_exact_mut(B::VALUES)) {
        b.dequantize(y);
    }
}

/// GGML's `from_float_ref` for a [`QuantizeRef`] format: whole blocks of `src` into `dst`.
pub(crate) fn from_float_ref<B: QuantizeRef>(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(B::VALUES).zip(blocks_mut::<B>(dst)) {
        B::quantize_ref(x, y);
    }
}

/// Runs `quantize_row` on each row: `src` holds whole rows of `n_per_row` values and `dst` the
/// same number of rows of blocks.
#[inline]
pub(crate) fn for_each_row<B: Pod>(
    src: &[f32],
    dst: &mut [B],
    n_per_row: usize,
    mut quantize_row: impl FnMut(&[f32], &mut [B]),
) {
    let n_rows = src.len().checked_div(n_per_row).unwrap_or(0);
    if n_rows == 0 {
        return;
    }
    let blocks_per_row = dst.len() / n_rows;
    for (x, y) in src
        .chunks_exact(n_per_row)
        .zip(dst.chunks_exact_mut(blocks_per_row))
    {
        quantize_row(x, y);
    }
}

/// GGML's `quantize_<t>` for a [`QuantizeImatrix`] format (the dispatcher's `Quantize` shape).
/// Returns the bytes written.
pub(crate) fn quantize_rows<B: QuantizeImatrix>(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    match imatrix {
        None => from_float_ref::<B>(src, dst),
        Some(qw) => for_each_row(src, blocks_mut::<B>(dst), n_per_row, |row, out| {
            B::quantize_row_imatrix(row, out, qw)
        }),
    }
    dst.len()
}

/// GGML's `quantize_<t>` loop for formats whose quantizer takes one block at a time with its
/// imatrix entries: `block(x, qw, y)` gets each block's values, the matching entries of
/// `imatrix` (if any) and the block to fill. `dst` holds exactly the blocks of `src` (checked by
/// the dispatcher). Returns the bytes written.
pub(crate) fn quantize_each_block<B: Block>(
    src: &[f32],
    dst: &mut [u8],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
    mut block: impl FnMut(&[f32], Option<&[f32]>, &mut B),
) -> usize {
    for_each_row(src, blocks_mut::<B>(dst), n_per_row, |row, out| {
        for (ib, (x, y)) in row.chunks_exact(B::VALUES).zip(out).enumerate() {
            let qw = imatrix.and_then(|w| w.get(B::VALUES * ib..B::VALUES * (ib + 1)));
            block(x, qw, y);
        }
    });
    dst.len()
}

/// GGML's `quantize_<t>` for a [`QuantizeBlock`] format (the dispatcher's `Quantize` shape).
pub(crate) fn quantize_blocks<B: QuantizeBlock>(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    quantize_each_block(src, dst, n_per_row, imatrix, B::quantize_block)
}
