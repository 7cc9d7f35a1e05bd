//! The backward and optimizer ops GGML's CPU computes for training, in F32: SILU_BACK,
//! RMS_NORM_BACK, SOFT_MAX_BACK and CROSS_ENTROPY_LOSS_BACK row by row (two operands' rows
//! read into scratch, the result written to the destination row in any layout),
//! GET_ROWS_BACK (rows of the gradient summed into the rows they were gathered from), and the
//! OPT_STEP_ADAMW / OPT_STEP_SGD updates in place. ROPE_BACK is ROPE's kernel.

use super::{operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::error::Result;
use crate::ops::{NormParams, Op, SoftMaxParams};
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel for one of the backward ops; three rows of scratch (two for GET_ROWS_BACK's
/// one).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?.ty(), operand(t, 1)?.ty());
    let ne0 = t.ne()[0] as usize;
    let f32_rows = a == Type::F32 && b == Type::F32 && t.ty() == Type::F32;
    let kernel: super::KernelFn = match t.op() {
        Op::SiluBack if f32_rows => silu_back,
        Op::RmsNormBack if f32_rows => rms_norm_back,
        Op::SoftMaxBack if f32_rows => soft_max_back,
        Op::CrossEntropyLossBack if f32_rows => cross_entropy_loss_back,
        // The shape rules made every operand F32.
        Op::OptStepAdamw => return Ok(Planned::new(opt_step_adamw, 0)),
        Op::OptStepSgd => return Ok(Planned::new(opt_step_sgd, 0)),
        Op::GetRowsBack if t.ty() == Type::F32 && b == Type::I32 => {
            return Ok(Planned::new(get_rows_back, ne0 * 4));
        }
        _ => return Err(unsupported(t)),
    };
    Ok(Planned::new(kernel, 3 * ne0 * 4))
}

/// For each of this thread's rows: `f(row of operand i, row of operand j, result row)` on f32
/// copies of the operands' rows (the shape rule gave the three tensors one shape), the result
/// written to the destination's row.
///
/// # Safety
/// The kernel preconditions; the plan sized the scratch for three rows.
unsafe fn pair_rows(
    n: &NodePtrs,
    p: &Params,
    [i, j]: [usize; 2],
    mut f: impl FnMut(&[f32], &[f32], &mut [f32]),
) {
    let (d, a, b) = (&n.dst, &n.src[i], &n.src[j]);
    let ne0 = d.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for three rows of ne0 f32 values.
    let scratch = unsafe { p.scratch_f32(3 * ne0) };
    let (ra, rest) = scratch.split_at_mut(ne0);
    let (rb, out) = rest.split_at_mut(ne0);
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        // SAFETY: idx indexes a row of each of the three tensors (one shape), each holding
        // ne0 elements; the scratch rows are this thread's, not the tensors' memory.
        unsafe {
            a.read_row(a.row(idx), ra);
            b.read_row(b.row(idx), rb);
            f(ra, rb, out);
            d.write_row(d.row(idx), out);
        }
    }
}

/// SILU_BACK: `dy · s · (1 + x · (1 − s))`, `s = 1 / (1 + e^(−x))` (GGML's
/// `ggml_silu_backward_f32`), `dy` in slot 0 and `x` in slot 1.
unsafe fn silu_back(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe {
        pair_rows(n, p, [0, 1], |dy, x, out| {
            for ((o, &dy), &x) in out.iter_mut().zip(dy).zip(x) {
                let s = 1.0 / (1.0 + (-x).exp());
                *o = dy * s * (1.0 + x * (1.0 - s));
            }
        })
    }
}

/// RMS_NORM_BACK in GGML's arithmetic: `Σx²` and `Σx·dz` of f32 products summed in f64,
/// `rrms = 1/√(Σx²/n + eps)`, `dx = (dz + x · (−Σx·dz / (Σx² + eps·n))) · rrms` in f32.
unsafe fn rms_norm_back(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps;
    // SAFETY: forwarded from the caller.
    unsafe {
        pair_rows(n, p, [0, 1], |dz, x, out| {
            let (mut sum_xx, mut sum_xdz) = (0f64, 0f64);
            for (&x, &dz) in x.iter().zip(dz) {
                sum_xx += f64::from(x * x);
                sum_xdz += f64::from(x * dz);
            }
            let ne0 = x.len() as f32;
            let mean_eps = sum_xx as f32 / ne0 + eps;
            let sum_eps = sum_xx as f32 + eps * ne0;
            let rrms = 1.0 / mean_eps.sqrt();
            let scale_x = (-sum_xdz) as f32 / sum_eps;
            for ((o, &dz), &x) in out.iter_mut().zip(dz).zip(x) {
                *o = (dz + x * scale_x) * rrms;
            }
        })
    }
}

/// SOFT_MAX_BACK: `scale · (dy − y·dy) · y` per row, the dot product summed in f64, `dy` in
/// slot 0 and the soft max's result `y` in slot 1.
unsafe fn soft_max_back(n: &NodePtrs, p: &Params) {
    let scale = n.params::<SoftMaxParams>().scale;
    // SAFETY: forwarded from the caller.
    unsafe {
        pair_rows(n, p, [0, 1], |dy, y, out| {
            let dot = y
                .iter()
                .zip(dy)
                .map(|(&y, &dy)| f64::from(y) * f64::from(dy))
                .sum::<f64>() as f32;
            for ((o, &dy), &y) in out.iter_mut().zip(dy).zip(y) {
                *o = scale * (dy - dot) * y;
            }
        })
    }
}

/// CROSS_ENTROPY_LOSS_BACK: per row of the logits (slot 1) `(softmax − targets) · g / rows`
/// with `g` the loss's gradient (slot 0), in GGML's arithmetic: `e^(x − max)` in f32 summed in
/// f64, the row scaled by the f32 `1/sum`, the targets (slot 2) subtracted, scaled by
/// `g / rows`.
unsafe fn cross_entropy_loss_back(n: &NodePtrs, p: &Params) {
    let g = &n.src[0];
    // SAFETY: slot 0 is one F32 element (the shape rule).
    let d_by_nr = unsafe { g.get(g.data, 0) } / n.src[1].nrows() as f32;
    // SAFETY: forwarded from the caller.
    unsafe {
        pair_rows(n, p, [1, 2], |x, c, out| {
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f64;
            for (o, &x) in out.iter_mut().zip(x) {
                *o = (x - max).exp();
                sum += f64::from(*o);
            }
            let inv = (1.0 / sum) as f32;
            for (o, &c) in out.iter_mut().zip(c) {
                *o = (*o * inv - c) * d_by_nr;
            }
        })
    }
}

/// The F32 hyper-parameters of an optimizer step (its last operand, `N` packed values).
///
/// # Safety
/// `h` holds at least `N` packed F32 values (the shape rule).
unsafe fn hyper<const N: usize>(h: &TensorPtr) -> [f32; N] {
    // SAFETY: forwarded from the caller.
    std::array::from_fn(|k| unsafe { (h.data.add(4 * k) as *const f32).read_unaligned() })
}

/// OPT_STEP_ADAMW over this thread's rows, in GGML's f32 arithmetic, `a` (the destination's
/// memory), `m` and `v` updated in place.
unsafe fn opt_step_adamw(n: &NodePtrs, p: &Params) {
    let [w, g, m, v, h] = [0, 1, 2, 3, 4].map(|i| &n.src[i]);
    // SAFETY: slot 4 holds seven F32 values (the shape rule).
    let [alpha, beta1, beta2, eps, wd, beta1h, beta2h] = unsafe { hyper::<7>(h) };
    let keep = 1.0 - alpha * wd;
    for r in p.range(w.nrows()) {
        let idx = w.unravel_row(r);
        let rows = [w, g, m, v].map(|t| t.row(idx) as *mut f32);
        for k in 0..w.ne[0] as usize {
            // SAFETY: four F32 tensors of one shape with packed rows (the shape rule): row
            // `idx` of each holds ne0 values; this thread owns the row in the three it writes.
            unsafe {
                let [w, g, m, v] = rows.map(|row| row.add(k));
                let gk = *g;
                *m = *m * beta1 + gk * (1.0 - beta1);
                *v = *v * beta2 + gk * gk * (1.0 - beta2);
                let mh = *m * beta1h;
                let vh = (*v * beta2h).sqrt() + eps;
                *w = *w * keep - alpha * mh / vh;
            }
        }
    }
}

/// OPT_STEP_SGD over this thread's rows: `a ← a·(1 − alpha·wd) − alpha·grad` in f32, in
/// place.
unsafe fn opt_step_sgd(n: &NodePtrs, p: &Params) {
    let (w, g) = (&n.src[0], &n.src[1]);
    // SAFETY: slot 2 holds two F32 values (the shape rule).
    let [alpha, wd] = unsafe { hyper::<2>(&n.src[2]) };
    let keep = 1.0 - alpha * wd;
    for r in p.range(w.nrows()) {
        let idx = w.unravel_row(r);
        let (wr, gr) = (w.row(idx) as *mut f32, g.row(idx) as *const f32);
        for k in 0..w.ne[0] as usize {
            // SAFETY: as in `opt_step_adamw`, for two tensors.
            unsafe { *wr.add(k) = *wr.add(k) * keep - alpha * *gr.add(k) };
        }
    }
}

/// The I32 index `b[i]` if it lies in `0..n`; one outside is reported to `p` as a fault (by
/// thread 0 alone: every thread reads every index).
///
/// # Safety
/// `i < b.ne[0]`, `b` an I32 vector.
unsafe fn row_index(b: &TensorPtr, i: usize, n: i64, p: &Params) -> Option<usize> {
    // SAFETY: forwarded from the caller.
    let v = i64::from(unsafe { (b.data.add(i * b.nb[0]) as *const i32).read_unaligned() });
    let inside = (0..n).contains(&v);
    if !inside && p.ith == 0 {
        p.index_fault(1, [i, 0, 0], v, n);
    }
    inside.then_some(v as usize)
}

/// GET_ROWS_BACK: the destination rows this thread owns set to zero, then row `i` of the
/// gradient added to row `b[i]` for every index in order (the additions of a row in GGML's
/// order, whatever the thread count); an index outside the destination's rows adds nothing
/// and fails the computation after this node.
unsafe fn get_rows_back(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    let rows = d.ne[1];
    let mine = p.range(rows as usize);
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values.
    let buf = unsafe { p.scratch_f32(ne0) };
    for r in mine.clone() {
        let drow = d.row([r, 0, 0, 0]);
        // SAFETY: r < d.ne1 (a matrix: the shape rule), elements below ne0.
        unsafe { (0..ne0).for_each(|k| d.set(drow, k, 0.0)) }
    }
    for i in 0..b.ne[0] as usize {
        // SAFETY: i < b.ne0.
        let Some(r) = (unsafe { row_index(b, i, rows, p) }) else {
            continue;
        };
        if !mine.contains(&r) {
            continue;
        }
        let drow = d.row([r, 0, 0, 0]);
        // SAFETY: i < b.ne0 <= a.ne1 (the shape rule), so row i of a holds ne0 elements (the
        // result's ne0); r is a row of the destination this thread owns.
        unsafe {
            a.read_row(a.row([i, 0, 0, 0]), buf);
            for (k, &v) in buf.iter().enumerate() {
                d.set(drow, k, d.get(drow, k) + v);
            }
        }
    }
}
