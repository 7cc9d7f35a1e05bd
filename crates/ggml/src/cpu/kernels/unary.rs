//! Element-wise unary ops: SCALE, SQR, SQRT, LOG, SIN, COS and every UNARY sub-op but XIELU.

use super::{is_float, ld, st, unsupported, KernelFn, NodePtrs, Params};
use crate::error::Result;
use crate::ops::{Op, UnaryOp};
use crate::tensor::Tensor;

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    if !is_float(t.ty()) || !is_float(t.srcs()[0].ty()) {
        return Err(unsupported(t));
    }
    Ok(match t.op() {
        Op::Scale => scale,
        Op::Sqr => |n, p| map(n, p, |x| x * x),
        Op::Sqrt => |n, p| map(n, p, f32::sqrt),
        Op::Log => |n, p| map(n, p, f32::ln),
        Op::Sin => |n, p| map(n, p, f32::sin),
        Op::Cos => |n, p| map(n, p, f32::cos),
        Op::Unary => select_unary(t)?,
        _ => return Err(unsupported(t)),
    })
}

/// One monomorphised kernel per sub-op, so the per-element function is inlined.
fn select_unary(t: &Tensor) -> Result<KernelFn> {
    macro_rules! table {
        ($($op:ident),*) => {
            match UnaryOp::from_i32(t.op_params()[0]) {
                $(Some(UnaryOp::$op) => Ok(|n, p| map(n, p, |x| UnaryOp::$op.eval(x))),)*
                _ => Err(unsupported(t)),
            }
        };
    }
    table!(
        Abs,
        Sgn,
        Neg,
        Step,
        Tanh,
        Elu,
        Relu,
        Sigmoid,
        Gelu,
        GeluQuick,
        Silu,
        Hardswish,
        Hardsigmoid,
        Exp,
        Expm1,
        Softplus,
        GeluErf,
        Floor,
        Ceil,
        Round,
        Trunc
    )
}

/// `dst = x * s + b` with `s`, `b` in op_params 0 and 1.
fn scale(n: &NodePtrs, p: &Params) {
    let (s, b) = (n.param_f32(0), n.param_f32(1));
    map(n, p, |x| x * s + b)
}

/// `dst = f(a)` element-wise; threads split the rows.
#[inline(always)]
fn map(n: &NodePtrs, p: &Params, f: impl Fn(f32) -> f32) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = d.ne[0] as usize;
    let fast = d.f32_rows() && a.f32_rows();
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        // SAFETY: rows of their tensors, indices below ne[0]; dst may alias a (each element
        // is read before it is written).
        unsafe {
            if fast {
                for i in 0..ne0 {
                    st(drow, i, f(ld(arow, i)));
                }
            } else {
                for i in 0..ne0 {
                    d.set(drow, i, f(a.get(arow, i)));
                }
            }
        }
    }
}
