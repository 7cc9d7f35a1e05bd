//! OUT_PROD: `dst[:, j, …] = Σₖ b[j, k, …] · a[:, k, …]`, accumulated in f32 in order of `k`
//! (as GGML's `ggml_vec_mad_f32`), with `a` broadcast over `b`'s batch dimensions. Threads
//! split the result rows; each converts the rows of `a` it needs to f32 in its scratch.

use super::Planned;
use super::{dequantizable, dequantize_into, is_float, operand, unsupported, NodePtrs, Params};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel, with scratch for one row of `a` and one result row as f32.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    let a_ok = is_float(a.ty()) || dequantizable(a.ty());
    if t.ty() != Type::F32 || !a_ok || !is_float(b.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(out_prod, 2 * a.ne()[0] as usize * 4))
}

unsafe fn out_prod(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let m = a.ne[0] as usize;
    let kk = a.ne[1] as usize;
    // SAFETY: the plan sized each thread's scratch for 2·M f32 values.
    let scratch = unsafe { p.scratch_f32(2 * m) };
    let (arow, acc) = scratch.split_at_mut(m);
    let ratio: [usize; 3] = std::array::from_fn(|i| (b.ne[i + 2] / a.ne[i + 2]) as usize);
    let quantized = a.ty.is_quantized();
    for r in p.range(d.nrows()) {
        let [j, i2, i3, i4] = d.unravel_row(r);
        let ai = [i2 / ratio[0], i3 / ratio[1], i4 / ratio[2]];
        acc.fill(0.0);
        for k in 0..kk {
            let src = a.row([k, ai[0], ai[1], ai[2]]);
            // SAFETY: k < a.ne1 and ai within a's batch dimensions (the shape rule's
            // broadcast); element j of b's row (k, i2, i3, i4), j < b.ne0 = dst.ne1.
            let s = unsafe {
                if quantized {
                    dequantize_into(a, src, arow);
                } else {
                    a.read_row(src, arow);
                }
                b.get(b.row([k, i2, i3, i4]), j)
            };
            for (o, &x) in acc.iter_mut().zip(arow.iter()) {
                *o += x * s;
            }
        }
        // SAFETY: a row of dst with M elements; the scratch does not overlap it.
        unsafe { d.write_row(d.row([j, i2, i3, i4]), acc) };
    }
}
