//! GLU: `dst = act(x)·g` per element, `x` and `g` from the halves of each row of `a` (fused)
//! or from `a` and `b` (split). Computed in f32 for every float type, as GGML's F16 kernels;
//! GEGLU and GEGLU_QUICK of F32 and F16 through GGML's F16 tables ([`GeluTable`]).

use super::vec::exp_f32;
use super::vec::GeluTable;
use super::{is_float, ld, operand, st, unsupported, vec, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{GluOp, GluParams, UnaryOp};
use crate::tensor::Tensor;
use crate::types::Type;

/// One kernel per op, so the activation is inlined.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let a = operand(t, 0)?;
    let b_ok = t.src(1).is_none_or(|b| b.ty() == a.ty());
    if !is_float(t.ty()) || !is_float(a.ty()) || !b_ok {
        return Err(unsupported(t));
    }
    let kernel: super::KernelFn = match GluOp::from_i32(t.op_params()[0]) {
        Some(GluOp::Reglu) => |n, p| gated(n, p, |x, g| if x > 0.0 { x * g } else { 0.0 }),
        // GGML's F32 and F16 kernels read F16 tables (F32 GEGLU with GELU's clamps: 0 at
        // or below −10, whatever the gate; x·g at or above 10); its BF16 ones compute.
        Some(GluOp::Geglu) => match a.ty() {
            // SAFETY: forwarded to the kernel.
            Type::F32 => {
                |n, p| unsafe { gated_lookup::<true>(n, p, GeluTable::get().gelu_table()) }
            }
            Type::F16 => |n, p| {
                let t = GeluTable::get();
                gated(n, p, |x, g| t.gelu_f16(x) * g)
            },
            _ => |n, p| gated(n, p, |x, g| vec::gelu(x) * g),
        },
        Some(GluOp::Swiglu) => swiglu,
        Some(GluOp::GegluErf) => |n, p| gated(n, p, |x, g| UnaryOp::GeluErf.eval(x) * g),
        Some(GluOp::GegluQuick) => match a.ty() {
            // SAFETY: forwarded to the kernel.
            Type::F32 => {
                |n, p| unsafe { gated_lookup::<false>(n, p, GeluTable::get().quick_table()) }
            }
            Type::F16 => |n, p| {
                let t = GeluTable::get();
                gated(n, p, |x, g| t.quick(x) * g)
            },
            _ => |n, p| gated(n, p, |x, g| vec::gelu_quick(x) * g),
        },
        Some(GluOp::SwigluOai) => swiglu_oai,
        Some(GluOp::SwigluClamp) => swiglu_clamp,
        None => return Err(unsupported(t)),
    };
    Ok(Planned::new(kernel, 0))
}

/// SWIGLU, `silu(x)·g`, through [`vec::act_row`] (the SIMD exp).
unsafe fn swiglu(n: &NodePtrs, p: &Params) {
    let row = |x, g, y, len| {
        // SAFETY: as f32_rows promises.
        unsafe { vec::act_row::<false, true>(x, g, y, len) }
    };
    // SAFETY: forwarded; act_row takes any packed F32 values, dst being an operand exactly
    // or apart from both.
    unsafe { f32_rows(n, p, row, |x, g| vec::silu(x) * g) }
}

/// `table(x)·g` ([`vec::lookup_row`], `CLAMP` as there: GEGLU's clamps) for F32 operands.
unsafe fn gated_lookup<const CLAMP: bool>(n: &NodePtrs, p: &Params, table: &'static [f32; 65536]) {
    let row = |x, g, y, len| {
        // SAFETY: as f32_rows promises.
        unsafe { vec::lookup_row::<CLAMP, true>(table, x, g, y, len) }
    };
    // SAFETY: forwarded; lookup_row takes any packed F32 values, dst being an operand
    // exactly or apart from both.
    unsafe { f32_rows(n, p, row, |x, g| vec::lookup::<CLAMP, true>(table, x, g)) }
}

/// `dst = f(x, g)` with `row(x, g, y, len)` computing `f` over packed F32 values: packed F32
/// rows in pieces of rows, any other layout element by element ([`gated`]).
///
/// # Safety
/// As [`KernelFn`](super::KernelFn); `row` must accept `len` packed F32 values at `x`, `g`
/// and `y`, `y` being `x` or `g` exactly or apart from both.
unsafe fn f32_rows(
    n: &NodePtrs,
    p: &Params,
    row: impl Fn(*const f32, *const f32, *mut f32, usize),
    f: impl Fn(f32, f32) -> f32,
) {
    let (d, a) = (&n.dst, &n.src[0]);
    let (xo, go, gt) = operands(n);
    if !(d.f32_rows() && a.f32_rows() && gt.f32_rows()) {
        return gated(n, p, f);
    }
    for (r, span) in p.row_pieces(d.nrows(), d.ne[0] as usize) {
        let idx = d.unravel_row(r);
        // SAFETY: packed F32 rows; x and g are the span of the ne0 values from xo / go
        // within their rows (as in `gated_rows`); dst is either operand's memory exactly or
        // none of it.
        unsafe {
            let x = (a.row(idx) as *const f32).add(xo + span.start);
            let g = (gt.row(idx) as *const f32).add(go + span.start);
            row(x, g, (d.row(idx) as *mut f32).add(span.start), span.len());
        }
    }
}

/// SWIGLU_OAI: `min(x, limit)·σ(alpha·min(x, limit))·(clamp(g, −limit, limit) + 1)`.
unsafe fn swiglu_oai(n: &NodePtrs, p: &Params) {
    let GluParams { alpha, limit, .. } = n.params();
    gated(n, p, |x, g| {
        let x = x.min(limit);
        // GGML's std::clamp; written as max/min so a NaN limit cannot panic.
        let g = g.max(-limit).min(limit);
        x / (1.0 + exp_f32(alpha * -x)) * (g + 1.0)
    })
}

/// SWIGLU_CLAMP: `silu(min(x, limit))·clamp(g, −limit, limit)`.
unsafe fn swiglu_clamp(n: &NodePtrs, p: &Params) {
    let GluParams { limit, .. } = n.params();
    gated(n, p, |x, g| {
        let x = x.min(limit);
        let g = g.max(-limit).min(limit);
        vec::silu(x) * g
    })
}

/// Where x and g start within their rows, and which tensor g comes from (`a` itself in the
/// fused form, `b` in the split form).
fn operands(n: &NodePtrs) -> (usize, usize, &super::TensorPtr) {
    let nc = n.dst.ne[0] as usize;
    let split = !n.src[1].data.is_null();
    match (split, n.params::<GluParams>().swapped != 0) {
        (true, _) => (0, 0, &n.src[1]),
        (false, false) => (0, nc, &n.src[0]),
        (false, true) => (nc, 0, &n.src[0]),
    }
}

vec::wide_fn!(
    /// [`gated_rows`] compiled for the CPU's ISA path.
    fn gated<F: Fn(f32, f32) -> f32>(n: &NodePtrs, p: &Params, f: F) = gated_rows
);

/// `dst[j] = f(x[j], g[j])` over every row; threads split the rows (packed F32 rows through
/// plain loops the compiler vectorises).
#[inline(always)]
fn gated_rows(n: &NodePtrs, p: &Params, f: impl Fn(f32, f32) -> f32) {
    let d = &n.dst;
    let a = &n.src[0];
    let nc = d.ne[0] as usize;
    let (xo, go, gt) = operands(n);
    let fast = d.f32_rows() && a.f32_rows() && gt.f32_rows();
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow, grow) = (d.row(idx), a.row(idx), gt.row(idx));
        if fast {
            for j in 0..nc {
                // SAFETY: as below, packed F32 rows.
                unsafe { st(drow, j, f(ld(arow, xo + j), ld(grow, go + j))) }
            }
            continue;
        }
        for j in 0..nc {
            // SAFETY: the shape rule gives dst a's rows (halved in the fused form, where
            // xo + j and go + j stay below a.ne0); in the split form b has a's shape.
            unsafe { d.set(drow, j, f(a.get(arow, xo + j), gt.get(grow, go + j))) }
        }
    }
}
