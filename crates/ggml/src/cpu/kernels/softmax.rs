//! SOFT_MAX with GGML's extensions: `softmax(x * scale + slope * mask)` per row, where the
//! optional mask (F32/F16) is broadcast over rows and heads and `slope` is the ALiBi slope of
//! the head (dimension 2) when `max_bias > 0`. op_params: scale, max_bias.

use super::{is_float, unsupported, KernelFn, NodePtrs, Params};
use crate::error::Result;
use crate::tensor::Tensor;

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    let srcs = t.srcs();
    let mask_ok = srcs.get(1).is_none_or(|m| is_float(m.ty()));
    if !is_float(t.ty()) || !is_float(srcs[0].ty()) || !mask_ok || srcs.len() > 2 {
        return Err(unsupported(t));
    }
    Ok(soft_max)
}

/// One f32 row of scratch per thread.
pub(super) fn work_size(t: &Tensor) -> usize {
    t.ne()[0] as usize * 4
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

fn soft_max(n: &NodePtrs, p: &Params) {
    let (scale, max_bias) = (n.param_f32(0), n.param_f32(1));
    let (d, a, m) = (&n.dst, &n.src[0], &n.src[1]);
    let has_mask = !m.data.is_null();
    let ne0 = a.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values.
    let buf = unsafe { p.scratch_f32(ne0) };
    for r in p.range(a.nrows()) {
        let idx = a.unravel_row(r);
        let slope = alibi_slope(max_bias, idx[1], a.ne[2] as usize);
        let arow = a.row(idx);
        // SAFETY: rows of their tensors, indices below ne[0]; the mask row index is reduced
        // modulo the mask's dimensions.
        unsafe {
            for (i, v) in buf.iter_mut().enumerate() {
                *v = a.get(arow, i) * scale;
            }
            if has_mask {
                let mut midx = [0usize; 4];
                for k in 0..4 {
                    midx[k] = idx[k] % m.ne[k + 1] as usize;
                }
                let mrow = m.row(midx);
                for (i, v) in buf.iter_mut().enumerate() {
                    *v += slope * m.get(mrow, i);
                }
            }
            let max = buf.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f64;
            for v in buf.iter_mut() {
                *v = if *v == f32::NEG_INFINITY {
                    0.0
                } else {
                    (*v - max).exp()
                };
                sum += *v as f64;
            }
            let inv = (1.0 / sum) as f32;
            let drow = d.row(idx);
            for (i, v) in buf.iter().enumerate() {
                d.set(drow, i, v * inv);
            }
        }
    }
}
