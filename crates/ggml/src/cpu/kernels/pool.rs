//! POOL_1D and POOL_2D over float inputs with any strides, F32 results. GGML computes these
//! on one thread; here threads split the rows (planes), each output computed in GGML's order.

use super::{is_float, operand, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{Pool1dParams, Pool2dParams, PoolOp};
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel for float inputs and an F32 result, with scratch for one row (plane) of the
/// input.
pub(super) fn plan(t: &Tensor, two_d: bool) -> Result<Planned> {
    if !is_float(operand(t, 0)?.ty()) || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    let ne = operand(t, 0)?.ne();
    let (kernel, scratch): (super::KernelFn, i64) = if two_d {
        (pool_2d, ne[0] * ne[1])
    } else {
        (pool_1d, ne[0])
    };
    Ok(Planned::new(kernel, scratch as usize * 4))
}

/// A running max or sum over a window.
struct Window {
    max: bool,
    acc: f32,
    count: u32,
}

impl Window {
    fn new(op: i32) -> Window {
        let max = PoolOp::from_i32(op) == Some(PoolOp::Max);
        let acc = if max { -f32::MAX } else { 0.0 };
        Window { max, acc, count: 0 }
    }

    #[inline(always)]
    fn push(&mut self, v: f32) {
        // GGML's std::max(v, acc): v unless v < acc, so a NaN stays until a later value.
        self.acc = if !self.max {
            self.acc + v
        } else if v < self.acc {
            self.acc
        } else {
            v
        };
        self.count += 1;
    }

    /// The max, or the sum divided by `divisor` (the count of elements pushed when `None`;
    /// 0 for an empty window).
    fn finish(&self, divisor: Option<f32>) -> f32 {
        match (self.max, divisor) {
            (true, _) => self.acc,
            (false, Some(n)) => self.acc / n,
            (false, None) if self.count > 0 => self.acc / self.count as f32,
            (false, None) => 0.0,
        }
    }
}

/// The inputs `o·s − p .. o·s − p + k` that lie in `0..len`.
#[inline(always)]
fn window(o: usize, k: i32, s: i32, p: i32, len: usize) -> std::ops::Range<usize> {
    let start = o as i64 * s as i64 - p as i64;
    let lo = start.clamp(0, len as i64) as usize;
    let hi = (start + k as i64).clamp(0, len as i64) as usize;
    lo..hi.max(lo)
}

/// Each row's windows (the row read into the scratch as f32 first); Avg divides by the
/// elements inside the row.
unsafe fn pool_1d(n: &NodePtrs, p: &Params) {
    let Pool1dParams { op, k0, s0, p0 } = n.params();
    let (a, d) = (&n.src[0], &n.dst);
    let iw = a.ne[0] as usize;
    // SAFETY: the plan sized the scratch for one row of a.
    let buf = unsafe { p.scratch_f32(iw) };
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        // SAFETY: a has d's rows, each of iw elements.
        unsafe { a.read_row(a.row(idx), buf) };
        let drow = d.row(idx);
        for ow in 0..d.ne[0] as usize {
            let mut w = Window::new(op);
            for &v in &buf[window(ow, k0, s0, p0, iw)] {
                w.push(v);
            }
            // SAFETY: ow < ne0 of a row of the result owned by this thread.
            unsafe { d.set(drow, ow, w.finish(None)) };
        }
    }
}

/// Each plane's windows (the plane read into the scratch as f32 first); Avg divides by
/// `k0·k1` whatever the padding.
unsafe fn pool_2d(n: &NodePtrs, p: &Params) {
    let Pool2dParams {
        op,
        k0,
        k1,
        s0,
        s1,
        p0,
        p1,
    } = n.params();
    let (a, d) = (&n.src[0], &n.dst);
    let (iw, ih) = (a.ne[0] as usize, a.ne[1] as usize);
    let planes = d.ne[2] as usize * d.ne[3] as usize;
    let area = (k0 as i64 * k1 as i64) as f32;
    // SAFETY: the plan sized the scratch for one plane of a.
    let buf = unsafe { p.scratch_f32(iw * ih) };
    for plane in p.range(planes) {
        let (i2, i3) = (plane % d.ne[2] as usize, plane / d.ne[2] as usize);
        for y in 0..ih {
            // SAFETY: row (y, i2, i3) of a holds iw elements.
            unsafe { a.read_row(a.row([y, i2, i3, 0]), &mut buf[y * iw..][..iw]) };
        }
        for oy in 0..d.ne[1] as usize {
            let drow = d.row([oy, i2, i3, 0]);
            let rows = window(oy, k1, s1, p1, ih);
            for ox in 0..d.ne[0] as usize {
                let cols = window(ox, k0, s0, p0, iw);
                let mut w = Window::new(op);
                for y in rows.clone() {
                    for &v in &buf[y * iw..][cols.clone()] {
                        w.push(v);
                    }
                }
                // SAFETY: ox < ne0 of a row of this thread's plane.
                unsafe { d.set(drow, ox, w.finish(Some(area))) };
            }
        }
    }
}
