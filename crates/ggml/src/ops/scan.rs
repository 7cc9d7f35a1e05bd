//! Scans and small solvers: CUMSUM (running sums along rows), COUNT_EQUAL (how many elements
//! of two tensors are equal) and SOLVE_TRI (a triangular system solved for many right-hand
//! sides).

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// CUMSUM: F32 `a`; a result of its type and shape.
pub(crate) struct Cumsum;

impl OpSpec for Cumsum {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        let a = src.get(0);
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

/// COUNT_EQUAL: I32 `a` and `b` of the same shape; an I64 `[1]` result.
pub(crate) struct CountEqual;

impl OpSpec for CountEqual {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::I32])?;
        src.want_type(1, &[Type::I32])?;
        src.want_same_shape(0, 1)?;
        Ok(Shape::New {
            ty: Type::I64,
            ne: [1; 5],
        })
    }
}

/// SOLVE_TRI: F32 `a` `[n, n, B2, B3, B4]` (row `i` holds the coefficients of unknown `i`,
/// lower triangular) and F32 `b` `[k, n, B2, B3, B4]`; an F32 result of `b`'s shape.
pub(crate) struct SolveTri;

impl OpSpec for SolveTri {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        src.want_type(1, &[Type::F32])?;
        let (a, b) = (src.get(0), src.get(1));
        if a.ne[0] != a.ne[1] {
            return Err(src.bad(0, "it must be square (ne0 == ne1)"));
        }
        if b.ne[1] != a.ne[1] {
            return Err(src.bad(1, format!("its ne1 must be a's ne1 = {}", a.ne[1])));
        }
        if b.ne[2..] != a.ne[2..] {
            return Err(src.bad(1, "its batch dimensions (2..) must be a's"));
        }
        Ok(Shape::New { ty: b.ty, ne: b.ne })
    }
}

impl Context {
    /// `ggml_cumsum`: the running sums of each row of F32 `a`,
    /// `out[i, …] = Σ_{j ≤ i} a[j, …]`; `a`'s type and shape.
    pub fn cumsum(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Cumsum>(Op::Cumsum, &[Some(a)], NoParams {}, false)
    }

    /// `ggml_count_equal`: the number of positions where I32 tensors `a` and `b` (of the same
    /// shape) hold equal values, as an I64 tensor of one element.
    pub fn count_equal(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<CountEqual>(Op::CountEqual, &[Some(a), Some(b)], NoParams {}, false)
    }

    /// `ggml_solve_tri`: solves `A·X = B` by forward substitution for every column `c` of
    /// `b` and batch: `x[c, i] = (b[c, i] − Σ_{t<i} a[t, i]·x[c, t]) / a[i, i]`, where row `i`
    /// of `a` (`[n, n, …]`, F32) holds the coefficients of equation `i` and `b` is F32
    /// `[k, n, …]` with `a`'s batch dimensions; the result has `b`'s shape. Elements of `a`
    /// above the diagonal are not read; a zero diagonal gives infinities or NaN. As in GGML,
    /// only `left`, `lower`, non-unit-diagonal systems exist: other flags are an `Err`.
    pub fn solve_tri(
        &self,
        a: &Tensor,
        b: &Tensor,
        left: bool,
        lower: bool,
        uni: bool,
    ) -> Result<Tensor> {
        if !(left && lower && !uni) {
            return Err(Error::unsupported(format!(
                "SOLVE_TRI: left = {left}, lower = {lower}, uni = {uni}; only left = true, \
                 lower = true, uni = false is defined (as in GGML)"
            )));
        }
        self.build::<SolveTri>(Op::SolveTri, &[Some(a), Some(b)], NoParams {}, false)
    }
}
