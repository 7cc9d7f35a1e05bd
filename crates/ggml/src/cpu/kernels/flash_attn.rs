//! FLASH_ATTN_EXT: one pass over the keys per query row with GGML's online softmax (a running
//! maximum `M` and sum `S`; when a key raises the maximum, the accumulated values and sum are
//! scaled by `e^(M_old − M_new)`), accumulating in f32. K and V rows of any float or
//! dequantizable type are read into f32 scratch first.

use super::softmax::alibi_slope;
use super::{dequantize_into, operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::error::Result;
use crate::ops::FlashAttnExtParams;
use crate::tensor::Tensor;
use crate::types::Type;

/// Whether the kernel reads rows of `t` (float, or quantized with a dequantizer).
fn readable(t: Type) -> bool {
    super::is_float(t) || super::dequantizable(t)
}

/// F32 queries, float or dequantizable K and V; scratch: q and k rows (DK each), the
/// accumulator and a v row (DV each).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (q, k, v) = (operand(t, 0)?, operand(t, 1)?, operand(t, 2)?);
    let mask_ok = t.src(3).is_none_or(|m| m.ty() == Type::F16);
    if q.ty() != Type::F32 || !readable(k.ty()) || !readable(v.ty()) || !mask_ok {
        return Err(unsupported(t));
    }
    let (dk, dv) = (k.ne()[0] as usize, v.ne()[0] as usize);
    Ok(Planned::new(flash_attn_ext, (2 * dk + 2 * dv) * 4))
}

/// Reads the row at `row` of `t` into `out` as f32.
///
/// # Safety
/// `row` must be a row of `t` (packed, as the shape rule requires) and `out.len() == ne[0]`.
unsafe fn load_row(t: &TensorPtr, row: *const u8, out: &mut [f32]) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if t.ty.is_quantized() {
            dequantize_into(t, row, out);
        } else {
            t.read_row(row, out);
        }
    }
}

pub(super) unsafe fn flash_attn_ext(n: &NodePtrs, p: &Params) {
    let prm: FlashAttnExtParams = n.params();
    let (d, q, k, v, m, sk) = (
        &n.dst, &n.src[0], &n.src[1], &n.src[2], &n.src[3], &n.src[4],
    );
    let (dk, dv) = (k.ne[0] as usize, v.ne[0] as usize);
    let (n_q, n_head) = (q.ne[1] as usize, q.ne[2] as usize);
    let (rk, rv) = (n_head / k.ne[2] as usize, n_head / v.ne[2] as usize);
    let softcap = prm.logit_softcap;
    let scale = if softcap != 0.0 {
        prm.scale / softcap
    } else {
        prm.scale
    };
    // SAFETY: the plan sized each thread's scratch for 2·DK + 2·DV f32 values.
    let scratch = unsafe { p.scratch_f32(2 * dk + 2 * dv) };
    let (qbuf, rest) = scratch.split_at_mut(dk);
    let (kbuf, rest) = rest.split_at_mut(dk);
    let (acc, vbuf) = rest.split_at_mut(dv);
    for r in p.range(n_q * n_head * q.ne[3] as usize) {
        let (iq1, iq2, iq3) = (r % n_q, (r / n_q) % n_head, r / (n_q * n_head));
        let slope = alibi_slope(prm.max_bias, iq2, n_head);
        // SAFETY: (iq1, iq2, iq3) indexes a row of q.
        unsafe { q.read_row(q.row([iq1, iq2, iq3, 0]), qbuf) };
        acc.fill(0.0);
        let (mut big_m, mut big_s) = (f32::NEG_INFINITY, 0f32);
        let mrow = (!m.data.is_null())
            .then(|| m.row([iq1, iq2 % m.ne[2] as usize, iq3 % m.ne[3] as usize, 0]));
        for ic in 0..k.ne[1] as usize {
            // SAFETY: the mask has at least n_kv elements per row and n_q rows.
            let mv = mrow.map_or(0.0, |row| slope * unsafe { m.get(row, ic) });
            if mv == f32::NEG_INFINITY {
                continue;
            }
            // SAFETY: key ic of kv head iq2 / rk, sequence iq3, is a row of k.
            unsafe { load_row(k, k.row([ic, iq2 / rk, iq3, 0]), kbuf) };
            let dot: f32 = qbuf.iter().zip(kbuf.iter()).map(|(a, b)| a * b).sum();
            let mut s = dot * scale;
            if softcap != 0.0 {
                s = softcap * s.tanh();
            }
            s += mv;
            let (mut ms, mut vs) = (1f32, 1f32);
            if s > big_m {
                ms = (big_m - s).exp();
                big_m = s;
                acc.iter_mut().for_each(|x| *x *= ms);
            } else {
                vs = (s - big_m).exp();
            }
            // SAFETY: value ic of kv head iq2 / rv, sequence iq3, is a row of v.
            unsafe { load_row(v, v.row([ic, iq2 / rv, iq3, 0]), vbuf) };
            for (x, &y) in acc.iter_mut().zip(vbuf.iter()) {
                *x += y * vs;
            }
            big_s = big_s * ms + vs;
        }
        if !sk.data.is_null() {
            // SAFETY: the sinks hold one F32 value per head.
            let s = unsafe { (sk.data.add(iq2 * sk.nb[0]) as *const f32).read_unaligned() };
            let (mut ms, mut vs) = (1f32, 1f32);
            if s > big_m {
                ms = (big_m - s).exp();
                acc.iter_mut().for_each(|x| *x *= ms);
            } else {
                vs = (s - big_m).exp();
            }
            big_s = big_s * ms + vs;
        }
        let inv = if big_s == 0.0 { 0.0 } else { 1.0 / big_s };
        acc.iter_mut().for_each(|x| *x *= inv);
        // SAFETY: the result row of head iq2, query iq1, sequence iq3 (heads and queries
        // swapped); acc is scratch.
        unsafe { d.write_row(d.row([iq2, iq1, iq3, 0]), acc) };
    }
}
