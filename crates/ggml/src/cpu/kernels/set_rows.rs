//! SET_ROWS: rows of `b` written into the destination at indices `c`, converted to its type
//! (quantized destinations as GGML's CPU quantizes them: [`quantize_row_cpu`]).
//!
//! Threads split the destination's rows, not `b`'s: each thread scans every index and writes
//! only the rows it owns, so rows sent twice to one place are written by one thread, in `b`'s
//! order (the last wins), whatever the thread count.

use super::copy::quantize_row_cpu;
use super::{is_float, operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::error::Result;
use crate::quants;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// Float destinations, or quantized ones with a reference quantizer; one f32 row of scratch.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (b, c) = (operand(t, 0)?.ty(), operand(t, 1)?.ty());
    let d = t.ty();
    let dst_ok = is_float(d) || (d.is_quantized() && quants::has_from_float_ref(d));
    if !is_float(b) || !matches!(c, Type::I32 | Type::I64) || !dst_ok {
        return Err(unsupported(t));
    }
    Ok(Planned::new(set_rows, t.ne()[0] as usize * 4))
}

/// The index `c[i, j, k]`, if it lies in `0..n`; one outside is reported to `p` as a fault
/// (by thread 0 alone: every thread reads every index).
///
/// # Safety
/// `(i, j, k)` must index an element of `c` (I32 or I64).
unsafe fn index(c: &TensorPtr, [i, j, k]: [usize; 3], n: i64, p: &Params) -> Option<usize> {
    let at = c.row([j, k, 0, 0]).wrapping_add(i * c.nb[0]);
    // SAFETY: forwarded from the caller.
    let v = unsafe {
        if c.ty == Type::I64 {
            (at as *const i64).read_unaligned()
        } else {
            i64::from((at as *const i32).read_unaligned())
        }
    };
    let inside = (0..n).contains(&v);
    if !inside && p.ith == 0 {
        p.index_fault(1, [i, j, k], v, n);
    }
    inside.then_some(v as usize)
}

/// Writes the rows of `b` into the destination rows this thread owns.
pub(super) unsafe fn set_rows(n: &NodePtrs, p: &Params) {
    let (d, b, c) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    let mine = p.range(d.ne[1] as usize);
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values.
    let buf = unsafe { p.scratch_f32(ne0) };
    let row_bytes = ne0 / d.ty.blck_size() * d.ty.type_size();
    let planes = [b.ne[2], b.ne[3], b.ne[4]].map(|x| x as usize);
    for i4 in 0..planes[2] {
        for i3 in 0..planes[1] {
            for i2 in 0..planes[0] {
                let (j, k) = (i2 % c.ne[1] as usize, i3 % c.ne[2] as usize);
                for i in 0..b.ne[1] as usize {
                    // SAFETY: i < c.ne0 (= b.ne1), j < c.ne1, k < c.ne2.
                    let Some(row) = (unsafe { index(c, [i, j, k], d.ne[1], p) }) else {
                        continue;
                    };
                    if !mine.contains(&row) {
                        continue;
                    }
                    let bi: [usize; MAX_DIMS - 1] = [i, i2, i3, i4];
                    let di: [usize; MAX_DIMS - 1] = [row, i2, i3, i4];
                    // SAFETY: bi indexes a row of b and di one of the destination (same ne0,
                    // ne2..ne4); the source row is read into scratch before the destination
                    // row is written, and a quantized row is `row_bytes` packed bytes that
                    // only this thread writes.
                    unsafe {
                        b.read_row(b.row(bi), buf);
                        let out = d.row(di);
                        if d.ty.is_quantized() {
                            let out = std::slice::from_raw_parts_mut(out, row_bytes);
                            // The planner checked the quantizer; rows are whole blocks.
                            quantize_row_cpu(d.ty, buf, out);
                        } else {
                            d.write_row(out, buf);
                        }
                    }
                }
            }
        }
    }
}
