//! Pooling: POOL_1D and POOL_2D (max or average over windows of each row or plane).

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::conv::{want_4d, want_positive};
use crate::ops::spec::{req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// The pooling operation (`enum ggml_op_pool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum PoolOp {
    /// The largest value of the window (`GGML_OP_POOL_MAX`).
    Max = 0,
    /// The mean of the window (`GGML_OP_POOL_AVG`).
    Avg = 1,
}

impl PoolOp {
    /// The operation with GGML value `v`.
    pub fn from_i32(v: i32) -> Option<PoolOp> {
        match v {
            0 => Some(PoolOp::Max),
            1 => Some(PoolOp::Avg),
            _ => None,
        }
    }
}

/// POOL_1D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Pool1dParams {
    /// The operation ([`PoolOp`] as its GGML value).
    pub op: i32,
    /// Window size.
    pub k0: i32,
    /// Stride.
    pub s0: i32,
    /// Padding.
    pub p0: i32,
}

/// POOL_2D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Pool2dParams {
    /// The operation ([`PoolOp`] as its GGML value).
    pub op: i32,
    /// Window width.
    pub k0: i32,
    /// Window height.
    pub k1: i32,
    /// Stride along the width.
    pub s0: i32,
    /// Stride along the height.
    pub s1: i32,
    /// Padding along the width.
    pub p0: i32,
    /// Padding along the height.
    pub p1: i32,
}

/// The pooled size of an axis as GGML computes it, in f32: `(in + 2·p − k) / s + 1`
/// truncated toward zero; `Err` unless positive.
fn pool_out(src: &Srcs<'_>, axis: usize, ins: i64, k: i32, s: i32, p: i32) -> Result<i64> {
    want_positive(src, &format!("k{axis}"), k)?;
    want_positive(src, &format!("s{axis}"), s)?;
    let out = ((ins as f32 + 2.0 * p as f32 - k as f32) / s as f32 + 1.0) as i64;
    if out <= 0 {
        return Err(src.bad(
            0,
            format!(
                "it is too small along axis {axis} for window {k}, stride {s}, padding {p} \
                 ({out} outputs)"
            ),
        ));
    }
    Ok(out)
}

/// `Err` unless `op` is a [`PoolOp`] value.
fn want_op(src: &Srcs<'_>, op: i32) -> Result<()> {
    match PoolOp::from_i32(op) {
        Some(_) => Ok(()),
        None => Err(src.err(format!("op = {op}; it must be 0 (max) or 1 (avg)"))),
    }
}

/// POOL_1D: each row of `a` (float, at most 4-D) pooled to `(ne0 + 2·p0 − k0) / s0 + 1`
/// values; F32.
pub(crate) struct Pool1d;

impl OpSpec for Pool1d {
    type Params = Pool1dParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &Pool1dParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_float(0)?;
        want_4d(src, 0)?;
        want_op(src, p.op)?;
        let ow = pool_out(src, 0, a.ne[0], p.k0, p.s0, p.p0)?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [ow, a.ne[1], a.ne[2], a.ne[3], 1],
        })
    }
}

/// POOL_2D: each plane (dimensions 0 and 1) of `a` (float, at most 4-D) pooled; F32.
pub(crate) struct Pool2d;

impl OpSpec for Pool2d {
    type Params = Pool2dParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &Pool2dParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_float(0)?;
        want_4d(src, 0)?;
        want_op(src, p.op)?;
        let ow = pool_out(src, 0, a.ne[0], p.k0, p.s0, p.p0)?;
        let oh = pool_out(src, 1, a.ne[1], p.k1, p.s1, p.p1)?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [ow, oh, a.ne[2], a.ne[3], 1],
        })
    }
}

/// A padding given as f32 (GGML's `pool_2d` signature) as the integer GGML stores; `Err`
/// unless it is a whole number.
fn pad_i32(name: &str, p: f32) -> Result<i32> {
    if p.fract() != 0.0 || !(i32::MIN as f32..=i32::MAX as f32).contains(&p) {
        return Err(Error::invalid(format!(
            "POOL_2D: {name} = {p}; it must be a whole number (GGML stores it as an integer)"
        )));
    }
    Ok(p as i32)
}

impl Context {
    /// `ggml_pool_1d`: pools each row of `a` (F32/F16/BF16) with windows of `k0` every `s0`
    /// elements, padded by `p0` on both sides: F32 `[(ne0 + 2·p0 − k0) / s0 + 1, ne1, ne2,
    /// ne3]`. Max takes the largest element inside the row (−f32::MAX when the window holds
    /// none); Avg divides the sum by the number of elements inside the row.
    pub fn pool_1d(&self, a: &Tensor, op: PoolOp, k0: i32, s0: i32, p0: i32) -> Result<Tensor> {
        let p = Pool1dParams {
            op: op as i32,
            k0,
            s0,
            p0,
        };
        self.build::<Pool1d>(Op::Pool1d, &[Some(a)], p, false)
    }

    /// `ggml_pool_2d`: pools each plane of `a` (F32/F16/BF16) with `k0 × k1` windows every
    /// `s0`, `s1` elements, padded by `p0`, `p1`: F32 `[OW, OH, ne2, ne3]` with
    /// `OW = (ne0 + 2·p0 − k0) / s0 + 1`. Max as in [`Context::pool_1d`]; Avg divides the sum of
    /// the elements inside the plane by `k0·k1` (padding counts, as in GGML). The paddings
    /// must be whole numbers.
    #[allow(clippy::too_many_arguments)]
    pub fn pool_2d(
        &self,
        a: &Tensor,
        op: PoolOp,
        k0: i32,
        k1: i32,
        s0: i32,
        s1: i32,
        p0: f32,
        p1: f32,
    ) -> Result<Tensor> {
        let p = Pool2dParams {
            op: op as i32,
            k0,
            k1,
            s0,
            s1,
            p0: pad_i32("p0", p0)?,
            p1: pad_i32("p1", p1)?,
        };
        self.build::<Pool2d>(Op::Pool2d, &[Some(a)], p, false)
    }
}
