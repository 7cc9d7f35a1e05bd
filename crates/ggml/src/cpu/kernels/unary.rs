//! Element-wise unary ops: SCALE, SQR, SQRT, LOG, SIN, COS and every UNARY sub-op.

use super::vec::GeluTable;
use super::{is_float, ld, st, unsupported, vec, KernelFn, NodePtrs, Params};
use super::{operand, Planned};
use crate::error::Result;
use crate::ops::{ScaleParams, UnaryOp, UnaryParams};
use crate::tensor::Tensor;
use crate::types::Type;

/// `kernel` for a float operand and result.
pub(super) fn plan(t: &Tensor, kernel: KernelFn) -> Result<Planned> {
    if !is_float(t.ty()) || !is_float(operand(t, 0)?.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, 0))
}

pub(super) unsafe fn sqr(n: &NodePtrs, p: &Params) {
    map(n, p, |x| x * x)
}
pub(super) unsafe fn sqrt(n: &NodePtrs, p: &Params) {
    map(n, p, f32::sqrt)
}
pub(super) unsafe fn log(n: &NodePtrs, p: &Params) {
    map(n, p, f32::ln)
}
pub(super) unsafe fn sin(n: &NodePtrs, p: &Params) {
    map(n, p, f32::sin)
}
pub(super) unsafe fn cos(n: &NodePtrs, p: &Params) {
    map(n, p, f32::cos)
}

/// UNARY: one monomorphised kernel per sub-op, so the per-element function is inlined; the
/// exponential ones use [`vec`]'s libm-free forms, so their loops vectorise; GELU and
/// GELU_QUICK read GGML's F16 tables ([`GeluTable`]) for F32 and F16, as GGML's CPU does.
pub(super) fn plan_unary(t: &Tensor) -> Result<Planned> {
    macro_rules! table {
        ($($op:ident),*) => {
            match UnaryOp::from_i32(t.op_params()[0]) {
                $(Some(UnaryOp::$op) => plan(t, |n, p| map(n, p, |x| UnaryOp::$op.eval(x))),)*
                Some(UnaryOp::Sigmoid) => plan(t, act::<true>),
                // GGML's F32 and F16 kernels read F16 tables; its BF16 ones compute.
                Some(UnaryOp::Gelu) => plan(t, match operand(t, 0)?.ty() {
                    // SAFETY: forwarded to the kernel.
                    Type::F32 => |n, p| unsafe { lookup::<true>(n, p, GeluTable::get().gelu_table()) },
                    Type::F16 => |n, p| {
                        let g = GeluTable::get();
                        map(n, p, |x| g.gelu_f16(x))
                    },
                    _ => |n, p| map(n, p, vec::gelu),
                }),
                Some(UnaryOp::GeluQuick) => plan(t, match operand(t, 0)?.ty() {
                    // SAFETY: forwarded to the kernel.
                    Type::F32 => |n, p| unsafe { lookup::<false>(n, p, GeluTable::get().quick_table()) },
                    Type::F16 => |n, p| {
                        let g = GeluTable::get();
                        map(n, p, |x| g.quick(x))
                    },
                    _ => |n, p| map(n, p, vec::gelu_quick),
                }),
                Some(UnaryOp::Silu) => plan(t, act::<false>),
                Some(UnaryOp::Xielu) => plan(t, xielu),
                None => Err(unsupported(t)),
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

/// SIGMOID (`SIGMOID`) or SILU through [`vec::act_row`] (the SIMD exp).
unsafe fn act<const SIGMOID: bool>(n: &NodePtrs, p: &Params) {
    let f = if SIGMOID { vec::sigmoid } else { vec::silu };
    // SAFETY: forwarded; act_row takes any packed F32 values, dst being x exactly or apart.
    unsafe {
        f32_rows(
            n,
            p,
            |x, y, len| vec::act_row::<SIGMOID, false>(x, x, y, len),
            f,
        )
    }
}

/// A table's function ([`vec::lookup_row`], `CLAMP` as there) for F32 operands.
unsafe fn lookup<const CLAMP: bool>(n: &NodePtrs, p: &Params, table: &'static [f32; 65536]) {
    let f = |x| vec::lookup::<CLAMP, false>(table, x, 1.0);
    // SAFETY: forwarded; lookup_row takes any packed F32 values, dst being x exactly or apart.
    unsafe {
        f32_rows(
            n,
            p,
            |x, y, len| vec::lookup_row::<CLAMP, false>(table, x, x, y, len),
            f,
        )
    }
}

/// `dst = f(a)` with `row(x, y, len)` computing `f` over packed F32 values: packed F32
/// tensors in contiguous pieces of the flattened tensor ([`Params::flat_pieces`]), other
/// packed F32 rows in pieces of rows, any other layout element by element ([`map`]).
///
/// # Safety
/// As [`KernelFn`](super::KernelFn); `row` must accept `len` packed F32 values at `x` and
/// `y`, `y` being `x` exactly or apart from it.
unsafe fn f32_rows(
    n: &NodePtrs,
    p: &Params,
    row: impl Fn(*const f32, *mut f32, usize),
    f: impl Fn(f32) -> f32,
) {
    let (d, a) = (&n.dst, &n.src[0]);
    if d.f32_packed() && a.f32_packed() {
        for piece in p.flat_pieces(d.nelements()) {
            // SAFETY: packed F32 tensors holding every index of the piece; dst is a's memory
            // exactly or none of it.
            unsafe {
                let x = (a.data as *const f32).add(piece.start);
                row(x, (d.data as *mut f32).add(piece.start), piece.len());
            }
        }
        return;
    }
    if !(d.f32_rows() && a.f32_rows()) {
        return map(n, p, f);
    }
    for (r, span) in p.row_pieces(d.nrows(), d.ne[0] as usize) {
        let idx = d.unravel_row(r);
        // SAFETY: packed F32 rows, span within ne0; dst is a's memory exactly or none of it.
        unsafe {
            let x = (a.row(idx) as *const f32).add(span.start);
            row(x, (d.row(idx) as *mut f32).add(span.start), span.len());
        }
    }
}

/// XIELU with the constants of [`UnaryParams`] (as GGML stores them): `αₚ·x² + β·x` for
/// `x > 0`, else `(expm1(min(x, eps)) − x)·αₙ + β·x`.
unsafe fn xielu(n: &NodePtrs, p: &Params) {
    let UnaryParams {
        alpha_n,
        alpha_p,
        beta,
        eps,
        ..
    } = n.params();
    map(n, p, |x| {
        if x > 0.0 {
            alpha_p * x * x + beta * x
        } else {
            (x.min(eps).exp_m1() - x) * alpha_n + beta * x
        }
    })
}

/// `dst = x * s + b` ([`ScaleParams`]).
pub(super) unsafe fn scale(n: &NodePtrs, p: &Params) {
    let ScaleParams { s, b } = n.params();
    map(n, p, |x| x * s + b)
}

vec::wide_fn!(
    /// [`map_rows`] compiled for the CPU's ISA path.
    fn map<F: Fn(f32) -> f32>(n: &NodePtrs, p: &Params, f: F) = map_rows
);

/// `dst = f(a)` element-wise; threads claim contiguous pieces of the flattened tensors when
/// both are packed F32 ([`Params::flat_pieces`]), else pieces of the rows
/// ([`Params::row_pieces`]).
#[inline(always)]
fn map_rows(n: &NodePtrs, p: &Params, f: impl Fn(f32) -> f32) {
    let (d, a) = (&n.dst, &n.src[0]);
    if d.f32_packed() && a.f32_packed() {
        let (dp, ap) = (d.data, a.data as *const u8);
        for piece in p.flat_pieces(d.nelements()) {
            // SAFETY: packed F32 tensors holding every index of the piece; dst may be a
            // (each element is read before it is written).
            unsafe {
                for i in piece {
                    st(dp, i, f(ld(ap, i)));
                }
            }
        }
        return;
    }
    let fast = d.f32_rows() && a.f32_rows();
    for (r, span) in p.row_pieces(d.nrows(), d.ne[0] as usize) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        // SAFETY: rows of their tensors, indices below ne[0]; dst may alias a (each element
        // is read before it is written).
        unsafe {
            if fast {
                for i in span {
                    st(drow, i, f(ld(arow, i)));
                }
            } else {
                for i in span {
                    d.set(drow, i, f(a.get(arow, i)));
                }
            }
        }
    }
}
