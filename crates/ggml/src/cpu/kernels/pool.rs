//! POOL_1D and POOL_2D over float inputs with any strides, F32 results. GGML computes these
//! on one thread; here threads split the rows (planes), each output computed in GGML's order.

use super::{is_float, operand, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{Pool1dParams, Pool2dParams, PoolOp};
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel for float inputs and an F32 result.
pub(super) fn plan(t: &Tensor, two_d: bool) -> Result<Planned> {
    if !is_float(operand(t, 0)?.ty()) || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    Ok(Planned::new(if two_d { pool_2d } else { pool_1d }, 0))
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
        self.acc = if self.max {
            v.max(self.acc)
        } else {
            self.acc + v
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

/// Each row's windows; Avg divides by the elements inside the row.
unsafe fn pool_1d(n: &NodePtrs, p: &Params) {
    let Pool1dParams { op, k0, s0, p0 } = n.params();
    let (a, d) = (&n.src[0], &n.dst);
    let iw = a.ne[0];
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (arow, drow) = (a.row(idx), d.row(idx));
        for ow in 0..d.ne[0] as usize {
            let mut w = Window::new(op);
            let base = ow as i64 * s0 as i64 - p0 as i64;
            for j in base..base + k0 as i64 {
                if (0..iw).contains(&j) {
                    // SAFETY: j < ne0 of a row of a (a has d's rows).
                    w.push(unsafe { a.get(arow, j as usize) });
                }
            }
            // SAFETY: ow < ne0 of a row of the result owned by this thread.
            unsafe { d.set(drow, ow, w.finish(None)) };
        }
    }
}

/// Each plane's windows; Avg divides by `k0·k1` whatever the padding.
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
    let planes = d.ne[2] as usize * d.ne[3] as usize;
    let area = (k0 as i64 * k1 as i64) as f32;
    for plane in p.range(planes) {
        let (i2, i3) = (plane % d.ne[2] as usize, plane / d.ne[2] as usize);
        for oy in 0..d.ne[1] as usize {
            let drow = d.row([oy, i2, i3, 0]);
            let iy = oy as i64 * s1 as i64 - p1 as i64;
            for ox in 0..d.ne[0] as usize {
                let ix = ox as i64 * s0 as i64 - p0 as i64;
                let mut w = Window::new(op);
                for y in (iy..iy + k1 as i64).filter(|y| (0..a.ne[1]).contains(y)) {
                    let arow = a.row([y as usize, i2, i3, 0]);
                    for x in (ix..ix + k0 as i64).filter(|x| (0..a.ne[0]).contains(x)) {
                        // SAFETY: (x, y, i2, i3) is an element of a.
                        w.push(unsafe { a.get(arow, x as usize) });
                    }
                }
                // SAFETY: ox < ne0 of a row of this thread's plane.
                unsafe { d.set(drow, ox, w.finish(Some(area))) };
            }
        }
    }
}
