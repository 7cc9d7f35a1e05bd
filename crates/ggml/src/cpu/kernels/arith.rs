//! Arithmetic, windows, masks, padding and generators (see `ops/arith.rs` for what each
//! computes). Element access goes through [`TensorPtr::get`]/[`TensorPtr::set`], so any
//! layout the shape rules accept is followed; ops whose GGML kernel copies its operand
//! before writing a window (ACC, SET) or reduces over all rows (CROSS_ENTROPY_LOSS) run on
//! the first thread only, which needs no barrier inside the node.

use super::{operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::error::Result;
use crate::ops::{
    ArangeParams, ClampParams, DiagMaskParams, FillParams, LeakyReluParams, PadParams,
    PadReflectParams, RollParams, TimestepParams, TriParams, TriType, WindowParams,
};
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// `kernel` for a node whose operands in `slots` have one of `types` (the shape rules check
/// the rest), with `work` scratch bytes per thread.
pub(super) fn plan(
    t: &Tensor,
    kernel: super::KernelFn,
    slots: usize,
    types: &[Type],
    work: usize,
) -> Result<Planned> {
    for i in 0..slots {
        let ty = operand(t, i)?.ty();
        if !types.contains(&ty) {
            return Err(unsupported(t));
        }
    }
    Ok(Planned::new(kernel, work))
}

/// SET: the operand and result types are equal and not quantized.
pub(super) fn plan_set(t: &Tensor) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?.ty(), operand(t, 1)?.ty());
    if a.is_quantized() || a != b || t.ty() != a {
        return Err(unsupported(t));
    }
    Ok(Planned::new(set, 0))
}

/// Copies element `i` of row `srow` of `s` into element `i` of row `drow` of `d` (same type).
///
/// # Safety
/// Both rows must belong to their tensors and `i` be below their `ne[0]`.
#[inline(always)]
unsafe fn copy_elem(d: &TensorPtr, drow: *mut u8, s: &TensorPtr, srow: *const u8, i: usize) {
    // SAFETY: forwarded from the caller; an element's bytes of the common type.
    unsafe {
        std::ptr::copy(
            srow.add(i * s.nb[0]),
            drow.add(i * d.nb[0]),
            d.ty.type_size(),
        )
    }
}

/// Copies `a` into `dst` element by element when they are not the same memory (the
/// non-in-place forms of ACC and SET).
///
/// # Safety
/// `dst` and `a` must have the same type and shape.
unsafe fn copy_unless_same(d: &TensorPtr, a: &TensorPtr) {
    if d.data == a.data {
        return;
    }
    for r in 0..d.nrows() {
        let idx = d.unravel_row(r);
        for i in 0..d.ne[0] as usize {
            // SAFETY: same shape and type; row `idx` and index `i` are in range for both.
            unsafe { copy_elem(d, d.row(idx), a, a.row(idx), i) };
        }
    }
}

/// The window of ACC/SET as a tensor over `base` (strides from the parameters, shape of `b`).
fn window(base: &TensorPtr, b: &TensorPtr, p: &WindowParams) -> TensorPtr {
    TensorPtr {
        data: base.data.wrapping_add(p.offset as usize),
        ty: base.ty,
        ne: b.ne,
        nb: [
            base.ty.type_size(),
            p.nb1 as usize,
            p.nb2 as usize,
            p.nb3 as usize,
            0,
        ],
    }
}

/// ACC: `dst = a`, then `dst[window] = a[window] + b`.
pub(super) unsafe fn acc(n: &NodePtrs, p: &Params) {
    if p.ith != 0 {
        return;
    }
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let w: WindowParams = n.params();
    // SAFETY: dst has a's type and shape (the rule's `like_a`).
    unsafe { copy_unless_same(d, a) };
    let (dw, aw) = (window(d, b, &w), window(a, b, &w));
    for r in 0..b.nrows() {
        let idx = b.unravel_row(r);
        let (drow, arow, brow) = (dw.row(idx), aw.row(idx), b.row(idx));
        for i in 0..b.ne[0] as usize {
            // SAFETY: the rule checked that the window, shaped as b, lies inside a (and so
            // inside dst, of a's size); i < b.ne0.
            unsafe { dw.set(drow, i, aw.get(arow, i) + b.get(brow, i)) };
        }
    }
}

/// SET: `dst = a`, then `dst[window] = b`.
pub(super) unsafe fn set(n: &NodePtrs, p: &Params) {
    if p.ith != 0 {
        return;
    }
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let w: WindowParams = n.params();
    // SAFETY: dst has a's type and shape.
    unsafe { copy_unless_same(d, a) };
    let dw = window(d, b, &w);
    for r in 0..b.nrows() {
        let idx = b.unravel_row(r);
        let (drow, brow) = (dw.row(idx), b.row(idx));
        for i in 0..b.ne[0] as usize {
            // SAFETY: the window lies inside dst (checked by the rule); b has dst's type.
            unsafe { copy_elem(&dw, drow, b, brow, i) };
        }
    }
}

/// ADD_ID: `dst[:, i1, i2, i3] = a[:, i1, i2, i3] + b[:, ids[i1, i2]]`; an id outside
/// `0..b.ne1` gives a row of NaN and fails the run after this node.
pub(super) unsafe fn add_id(n: &NodePtrs, p: &Params) {
    let (d, a, b, ids) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        // SAFETY: ids is [a.ne1, a.ne2] I32 (the rule), idx[0] < a.ne1 and idx[1] < a.ne2.
        let id = unsafe {
            (ids.row([idx[1], 0, 0, 0]).add(idx[0] * ids.nb[0]) as *const i32).read_unaligned()
        };
        let (drow, arow) = (d.row(idx), a.row(idx));
        let inside = id >= 0 && i64::from(id) < b.ne[1];
        if !inside {
            p.index_fault(2, [idx[0], idx[1], 0], id.into(), b.ne[1]);
        }
        let brow = inside.then(|| b.row([id as usize, 0, 0, 0]));
        for i in 0..d.ne[0] as usize {
            // SAFETY: rows of their tensors; b's rows have a's length (the rule).
            unsafe {
                let v = match brow {
                    Some(brow) => a.get(arow, i) + b.get(brow, i),
                    None => f32::NAN,
                };
                d.set(drow, i, v);
            }
        }
    }
}

/// REPEAT_BACK: each result element the f32 sum of its copies in `a`, tiles taken in GGML's
/// order (dimension 3 outermost), so the sums round as GGML's do.
pub(super) unsafe fn repeat_back(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let nr: [usize; 4] = std::array::from_fn(|k| (a.ne[k] / d.ne[k].max(1)) as usize);
    let ne: [usize; 4] = std::array::from_fn(|k| d.ne[k] as usize);
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let drow = d.row(idx);
        for i in 0..ne[0] {
            let mut sum = 0f32;
            for t3 in 0..nr[3] {
                for t2 in 0..nr[2] {
                    for t1 in 0..nr[1] {
                        let arow = a.row([
                            t1 * ne[1] + idx[0],
                            t2 * ne[2] + idx[1],
                            t3 * ne[3] + idx[2],
                            0,
                        ]);
                        for t0 in 0..nr[0] {
                            // SAFETY: every tile index is below a's dimension (a tiles dst).
                            sum += unsafe { a.get(arow, t0 * ne[0] + i) };
                        }
                    }
                }
            }
            // SAFETY: a row of dst, i < its ne0.
            unsafe { d.set(drow, i, sum) };
        }
    }
}

/// DIAG: `dst[i0, i1, …] = a[i0, 0, …]` where `i0 == i1`, else 0.
pub(super) unsafe fn diag(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let drow = d.row(idx);
        let arow = a.row([0, idx[1], idx[2], idx[3]]);
        for i in 0..d.ne[0] as usize {
            // SAFETY: dst is [n, n, ne2, ne3, ne4] and a [n, 1, ne2, ne3, ne4] (the rule).
            unsafe {
                let v = if i == idx[0] { a.get(arow, i) } else { 0.0 };
                d.set(drow, i, v);
            }
        }
    }
}

/// DIAG_MASK_*: each row copied, with `value` where column `i > n_past + row`.
#[inline(always)]
fn diag_mask(n: &NodePtrs, p: &Params, value: f32) {
    let (d, a) = (&n.dst, &n.src[0]);
    let n_past = n.params::<DiagMaskParams>().n_past as usize;
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        for i in 0..d.ne[0] as usize {
            // SAFETY: rows of their tensors (same shape), i < ne0; each element is read before
            // it is written, so in place is fine.
            unsafe {
                let v = if i > n_past + idx[0] {
                    value
                } else {
                    a.get(arow, i)
                };
                d.set(drow, i, v);
            }
        }
    }
}

pub(super) unsafe fn diag_mask_inf(n: &NodePtrs, p: &Params) {
    diag_mask(n, p, f32::NEG_INFINITY)
}

pub(super) unsafe fn diag_mask_zero(n: &NodePtrs, p: &Params) {
    diag_mask(n, p, 0.0)
}

/// `dst = f(a)` element-wise over rows of the same shape.
#[inline(always)]
fn map(n: &NodePtrs, p: &Params, f: impl Fn(f32) -> f32) {
    let (d, a) = (&n.dst, &n.src[0]);
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        for i in 0..d.ne[0] as usize {
            // SAFETY: rows of their tensors (same shape), i < ne0; in place reads first.
            unsafe { d.set(drow, i, f(a.get(arow, i))) };
        }
    }
}

/// CLAMP as GGML's `MAX(MIN(x, max), min)` (so NaN gives `max`).
pub(super) unsafe fn clamp(n: &NodePtrs, p: &Params) {
    let ClampParams { min, max } = n.params();
    map(n, p, |x| {
        let t = if x < max { x } else { max };
        if t > min {
            t
        } else {
            min
        }
    })
}

pub(super) unsafe fn leaky_relu(n: &NodePtrs, p: &Params) {
    let s = n.params::<LeakyReluParams>().negative_slope;
    map(n, p, |x| x.max(0.0) + s * x.min(0.0))
}

pub(super) unsafe fn fill(n: &NodePtrs, p: &Params) {
    let c = n.params::<FillParams>().c;
    let d = &n.dst;
    for r in p.range(d.nrows()) {
        let drow = d.row_at(r);
        for i in 0..d.ne[0] as usize {
            // SAFETY: a row of dst, i < ne0.
            unsafe { d.set(drow, i, c) };
        }
    }
}

/// TRI: keeps `a[i, r, …]` where the triangle holds (column `i`, row `r`), else 0.
pub(super) unsafe fn tri(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let Some(tri) = TriType::from_i32(n.params::<TriParams>().tri_type) else {
        return;
    };
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        for i in 0..d.ne[0] as usize {
            // SAFETY: rows of their tensors (same shape), i < ne0.
            unsafe {
                let v = if tri.keeps(i, idx[0]) {
                    a.get(arow, i)
                } else {
                    0.0
                };
                d.set(drow, i, v);
            }
        }
    }
}

/// The source index along a padded dimension: `None` in zero padding.
#[inline(always)]
fn padded_source(i: usize, before: i32, len: i64, circular: bool) -> Option<usize> {
    let j = i as i64 - before as i64;
    if circular {
        Some(j.rem_euclid(len.max(1)) as usize)
    } else {
        (0..len).contains(&j).then_some(j as usize)
    }
}

/// PAD: zeros (or the periodic continuation) around `a`.
pub(super) unsafe fn pad(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let pp: PadParams = n.params();
    let pads = pp.pads();
    let circular = pp.circular != 0;
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let drow = d.row(idx);
        let mut src_idx = Some([0usize; 3]);
        for k in 0..3 {
            match (
                padded_source(idx[k], pads[k + 1].0, a.ne[k + 1], circular),
                &mut src_idx,
            ) {
                (Some(j), Some(s)) => s[k] = j,
                _ => src_idx = None,
            }
        }
        for i in 0..d.ne[0] as usize {
            let v = match (src_idx, padded_source(i, pads[0].0, a.ne[0], circular)) {
                (Some(s), Some(j)) => {
                    let arow = a.row([s[0], s[1], s[2], 0]);
                    // SAFETY: every source index is below a's dimension (zero padding checks
                    // the range; circular wraps modulo it).
                    unsafe { a.get(arow, j) }
                }
                _ => 0.0,
            };
            // SAFETY: a row of dst, i < ne0.
            unsafe { d.set(drow, i, v) };
        }
    }
}

/// PAD_REFLECT_1D: each row `[x_p0 … x_1, x_0 … x_{n−1}, x_{n−2} … x_{n−1−p1}]`.
pub(super) unsafe fn pad_reflect_1d(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let PadReflectParams { p0, p1: _ } = n.params();
    let (p0, len) = (p0 as i64, a.ne[0]);
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        for i in 0..d.ne[0] {
            let j = i - p0;
            let j = if j < 0 {
                -j
            } else if j >= len {
                2 * (len - 1) - j
            } else {
                j
            };
            // SAFETY: 0 <= p0, p1 < len (the rule), so the reflected j is in 0..len.
            unsafe { d.set(drow, i as usize, a.get(arow, j as usize)) };
        }
    }
}

/// ROLL: `dst[i] = a[(i − shift) mod ne]` per dimension.
pub(super) unsafe fn roll(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let s = n.params::<RollParams>().shift;
    let wrap =
        |i: usize, shift: i32, len: i64| (i as i64 - shift as i64).rem_euclid(len.max(1)) as usize;
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let mut sidx = [0usize; MAX_DIMS - 1];
        for k in 0..MAX_DIMS - 1 {
            sidx[k] = if k < 3 {
                wrap(idx[k], s[k + 1], a.ne[k + 1])
            } else {
                idx[k]
            };
        }
        let (drow, arow) = (d.row(idx), a.row(sidx));
        for i in 0..d.ne[0] as usize {
            // SAFETY: wrapped indices are below a's dimensions (same shape as dst).
            unsafe { d.set(drow, i, a.get(arow, wrap(i, s[0], a.ne[0]))) };
        }
    }
}

pub(super) unsafe fn arange(n: &NodePtrs, p: &Params) {
    let ArangeParams { start, step, .. } = n.params();
    let d = &n.dst;
    for i in p.range(d.nelements()) {
        // SAFETY: dst is an F32 vector and i < its length.
        unsafe { d.set(d.data, i, start + step * i as f32) };
    }
}

/// TIMESTEP_EMBEDDING, as GGML computes it in f32.
pub(super) unsafe fn timestep_embedding(n: &NodePtrs, p: &Params) {
    let (d, t) = (&n.dst, &n.src[0]);
    let TimestepParams { dim, max_period } = n.params();
    let half = (dim / 2) as usize;
    let log_period = (max_period as f32).ln();
    for row in p.range(d.ne[1] as usize) {
        // SAFETY: t is a packed vector of d.ne1 timesteps (the rule).
        let ts = unsafe { t.get(t.data, row) };
        let drow = d.row([row, 0, 0, 0]);
        for j in 0..half {
            let freq = (-log_period * j as f32 / half as f32).exp();
            let arg = ts * freq;
            // SAFETY: j + half < dim = d.ne0.
            unsafe {
                d.set(drow, j, arg.cos());
                d.set(drow, j + half, arg.sin());
            }
        }
        if dim % 2 != 0 {
            // SAFETY: 2·half = dim − 1 < dim.
            unsafe { d.set(drow, 2 * half, 0.0) };
        }
    }
}

/// CROSS_ENTROPY_LOSS on the first thread: the log-softmax of each row in f32 with the row
/// sum of exponentials in f64 (GGML's `ggml_float`), the products summed per row in f32.
pub(super) unsafe fn cross_entropy_loss(n: &NodePtrs, p: &Params) {
    if p.ith != 0 {
        return;
    }
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let nc = a.ne[0] as usize;
    // SAFETY: the plan gave each thread a row of f32 scratch; taken once.
    let st = unsafe { p.scratch_f32(nc) };
    let mut total = 0f32;
    for r in 0..a.nrows() {
        let idx = a.unravel_row(r);
        let (arow, brow) = (a.row(idx), b.row(idx));
        // SAFETY (this block): rows of a and b (same shape), indices below nc.
        unsafe {
            let max = (0..nc)
                .map(|i| a.get(arow, i))
                .fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f64;
            for (i, s) in st.iter_mut().enumerate() {
                *s = a.get(arow, i) - max;
                sum += s.exp() as f64;
            }
            let log_sum = (sum.ln()) as f32;
            let mut row_sum = 0f32;
            for (i, s) in st.iter().enumerate() {
                row_sum += (s - log_sum) * b.get(brow, i);
            }
            total += row_sum;
        }
    }
    // SAFETY: dst is one F32 element.
    unsafe { d.set(d.data, 0, -total / a.nrows() as f32) };
}
