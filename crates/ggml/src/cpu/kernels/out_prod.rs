//! OUT_PROD: `dst[:, j, …] = Σₖ b[j, k, …] · a[:, k, …]`, with `a` broadcast over `b`'s batch
//! dimensions. Float `a` against 5 or more columns of the result (`b.ne0`) goes through the
//! packed GEMM ([`gemm`]), both operands read with their rows side by side; otherwise (and for
//! quantized `a`) each thread takes result rows and accumulates in f32 in order of `k` (as
//! GGML's `ggml_vec_mad_f32`), converting the rows of `a` it needs to f32 in its scratch.

use super::matmul::gemm_batches;
use super::Planned;
use super::{dequantizable, dequantize_into, is_float, operand, unsupported, NodePtrs, Params};
use crate::cpu::gemm;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// Result columns (`b.ne0`) from which float `a` goes through the GEMM: as MUL_MAT's
/// threshold, below which packing costs more than it saves.
const GEMM_MIN_COLS: usize = 5;

/// The kernel, with scratch for the GEMM's panels, or for one row of `a` and one result row
/// as f32.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    let a_ok = is_float(a.ty()) || dequantizable(a.ty());
    if t.ty() != Type::F32 || !a_ok || !is_float(b.ty()) {
        return Err(unsupported(t));
    }
    let rows_work = 2 * a.ne()[0] as usize * 4;
    let n = b.ne()[0] as usize;
    if is_float(a.ty()) && n >= GEMM_MIN_COLS && t.nb()[0] == 4 && t.nb()[1] % 4 == 0 {
        // the row path's scratch too: the kernel falls back to it for a result that is not
        // 4-byte aligned or that overlaps an operand
        let work = (gemm::scratch_len(n) * 4).max(rows_work);
        return Ok(Planned::new(out_prod_gemm, work));
    }
    Ok(Planned::new(out_prod, rows_work))
}

/// OUT_PROD through the packed GEMM ([`gemm_batches`]): `c[j][i] = Σₖ a[i][k] · b[j][k]`
/// with the rows `i` of `a` and `j` of `b` along their `nb0`, the elements `k` along `nb1`.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan`] made for the node.
unsafe fn out_prod_gemm(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    if d.overlaps(a) || d.overlaps(b) || d.data as usize % 4 != 0 {
        // SAFETY: forwarded; the plan reserved the row path's scratch too.
        return unsafe { out_prod(n, p) };
    }
    let dims = [a.ne[0] as usize, b.ne[0] as usize, a.ne[1] as usize];
    // SAFETY: forwarded; a holds ne0 rows and b ne0 rows of ne1 elements, as the GEMM reads
    // them with `RowsAlong::Nb0`; dst is [a.ne0, b.ne0, …] of packed f32 rows (checked by the
    // plan), aligned and overlapping neither operand (checked above).
    unsafe { gemm_batches(n, p, dims, gemm::RowsAlong::Nb0, gemm::Round::F32) }
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
