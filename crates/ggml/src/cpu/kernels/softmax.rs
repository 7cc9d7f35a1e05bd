//! SOFT_MAX with GGML's extensions: `softmax(x * scale + slope * mask)` per row, where the
//! optional mask (F32/F16) is broadcast over rows and heads and `slope` is the ALiBi slope of
//! the head (dimension 2) when `max_bias > 0`. op_params: scale, max_bias. Optional F32
//! sinks (one per head) join each row's normalisation as one more logit.
//!
//! The exponentials are [`vec::exp_fma`]'s, summed in f64 in [`sum_f64`](super::sum_f64)'s
//! order: the same bits on every ISA path (which ggml-wgpu reproduces). GGML's CPU takes its
//! build's SIMD exp and libm's `expf` for a row's tail, so its last bits vary by build.

use super::vec::MaskRow;
use super::{is_float, st, unsupported, vec, NodePtrs, Params};
use super::{operand, Planned};
use crate::error::Result;
use crate::ops::SoftMaxParams;
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel for float rows and an optional float mask, with three f32 rows of scratch per
/// thread (the logits, and `a`'s and the mask's rows when they are not packed F32).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let mask_ok = t.src(1).is_none_or(|m| is_float(m.ty()));
    let sinks_ok = t.src(2).is_none_or(|s| s.ty() == Type::F32);
    if !is_float(t.ty()) || !is_float(operand(t, 0)?.ty()) || !mask_ok || !sinks_ok {
        return Err(unsupported(t));
    }
    Ok(Planned::new(soft_max, t.ne()[0] as usize * 12))
}

/// ALiBi slope of head `h` of `n_head` for `max_bias` (1 when `max_bias <= 0`).
pub(crate) fn alibi_slope(max_bias: f32, h: usize, n_head: usize) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1usize << (usize::BITS - 1 - n_head.max(1).leading_zeros());
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-max_bias / 2.0 / n_head_log2 as f32);
    if h < n_head_log2 {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi(2 * (h - n_head_log2) as i32 + 1)
    }
}

pub(super) unsafe fn soft_max(n: &NodePtrs, p: &Params) {
    soft_max_wide(n, p)
}

vec::wide_fn!(
    /// [`soft_max_rows`] compiled for the CPU's ISA path.
    fn soft_max_wide(n: &NodePtrs, p: &Params) = soft_max_rows
);

/// This thread's rows in three passes over a row of scratch: the logits `x·scale (+
/// slope·mask)` and their largest value ([`vec::logits_max`]; read straight from packed F32
/// rows and packed F32 or F16 mask rows, other layouts converted into scratch first),
/// `e^(logit − max)` with their sum ([`vec::exp_shifted`]), then the normalised values
/// written to `dst`.
#[inline(always)]
fn soft_max_rows(n: &NodePtrs, p: &Params) {
    let SoftMaxParams { scale, max_bias } = n.params();
    let (d, a, m, sk) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let has_mask = !m.data.is_null();
    let ne0 = a.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for 3·ne0 f32 values.
    let scratch = unsafe { p.scratch_f32(3 * ne0) };
    let (buf, rest) = scratch.split_at_mut(ne0);
    let (abuf, mbuf) = rest.split_at_mut(ne0);
    for r in p.range(a.nrows()) {
        let idx = a.unravel_row(r);
        let slope = alibi_slope(max_bias, idx[1], a.ne[2] as usize);
        // SAFETY: rows of their tensors, indices below ne[0]; the mask row index is reduced
        // modulo the mask's dimensions; the sinks hold one value per head. dst may be `a`
        // exactly: the row is read whole into `buf` before dst's row is written.
        unsafe {
            let arow = if a.f32_rows() {
                a.row(idx) as *const u8
            } else {
                a.read_row(a.row(idx), abuf);
                abuf.as_ptr() as *const u8
            };
            // packed F32 and F16 mask rows are read where they lie, others converted first
            let mask = if has_mask {
                let midx: [usize; 4] = std::array::from_fn(|k| idx[k] % m.ne[k + 1] as usize);
                let mrow = m.row(midx);
                if m.f32_rows() {
                    MaskRow::F32(mrow as *const f32)
                } else if m.ty == Type::F16 && m.rows_packed() {
                    MaskRow::F16(mrow as *const u16)
                } else {
                    m.read_row(mrow, mbuf);
                    MaskRow::F32(mbuf.as_ptr())
                }
            } else {
                MaskRow::None
            };
            let mut max = vec::logits_max(arow as *const f32, mask, scale, slope, buf);
            // The head's sink (F32 vector, element idx[1] < a.ne2) counts as one more logit.
            let sink = (!sk.data.is_null())
                .then(|| (sk.data.add(idx[1] * sk.nb[0]) as *const f32).read_unaligned());
            if let Some(s) = sink {
                max = if max > s { max } else { s };
            }
            // exp(-inf - max) is 0; a row of only -inf has max = -inf and gives NaN, as GGML.
            let mut sum = vec::exp_shifted(buf, max);
            if let Some(s) = sink {
                sum += f64::from((s - max).exp());
            }
            let inv = (1.0 / sum) as f32;
            let drow = d.row(idx);
            if d.f32_rows() {
                for (i, &v) in buf.iter().enumerate() {
                    st(drow, i, v * inv);
                }
            } else {
                for v in buf.iter_mut() {
                    *v *= inv;
                }
                d.write_row(drow, buf);
            }
        }
    }
}
