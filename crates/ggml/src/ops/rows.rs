//! Row gathering and tiling: GET_ROWS, REPEAT, CONCAT.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, Meta, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// GET_ROWS: rows of `a` picked by I32 indices `b` `[n, B1, B2]`: `[a.ne0, n, B1, B2]` with
/// `a.ne2 == B1`, `a.ne3 == B2`; F32 (I32 when `a` is I32).
pub(crate) struct GetRows;

impl OpSpec for GetRows {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_type(1, &[Type::I32])?;
        // GGML: a.ne2 == b.ne1, a.ne3 == b.ne2, b.ne3 == 1 (and, with five dimensions here,
        // neither has a fifth).
        if a.ne[2] != b.ne[1] || a.ne[3] != b.ne[2] || b.ne[3] != 1 || a.ne[4] != 1 || b.ne[4] != 1
        {
            return Err(src.bad(
                1,
                format!(
                    "it does not fit a's shape {:?}: a.ne2 must equal b.ne1, a.ne3 must equal \
                     b.ne2, b.ne3 and both ne4 must be 1",
                    a.ne
                ),
            ));
        }
        let ty = if a.ty == Type::I32 {
            Type::I32
        } else {
            Type::F32
        };
        Ok(Shape::New {
            ty,
            ne: [a.ne[0], b.ne[0], b.ne[1], b.ne[2], 1],
        })
    }
}

/// REPEAT: `a` tiled to the requested shape (each dimension a multiple of `a`'s).
pub(crate) struct Repeat;

impl OpSpec for Repeat {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        let ne = src.requested()?;
        if !a.can_repeat(&Meta::contiguous(a.ty, ne)) {
            return Err(src.bad(0, format!("it does not tile the shape {ne:?}")));
        }
        Ok(Shape::New { ty: a.ty, ne })
    }
}

/// CONCAT's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ConcatParams {
    /// The dimension along which `b` follows `a`.
    pub dim: i32,
}

/// CONCAT: `a` followed by `b` along `dim`; all other dimensions and the types equal.
pub(crate) struct Concat;

impl OpSpec for Concat {
    type Params = ConcatParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &ConcatParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        let Some(dim) = usize::try_from(p.dim).ok().filter(|&d| d < MAX_DIMS) else {
            return Err(src.err(format!("dim = {}; it must be 0 to {}", p.dim, MAX_DIMS - 1)));
        };
        if a.ty != b.ty {
            return Err(src.bad(1, format!("its type must be a's {}", a.ty)));
        }
        if let Some(d) = (0..MAX_DIMS).find(|&d| d != dim && a.ne[d] != b.ne[d]) {
            return Err(src.bad(1, format!("its ne[{d}] must be a's {}", a.ne[d])));
        }
        let mut ne = a.ne;
        ne[dim] += b.ne[dim];
        Ok(Shape::New { ty: a.ty, ne })
    }
}

impl Context {
    /// `ggml_get_rows`: rows of `a` picked by the I32 indices `b`: the result is
    /// `[a.ne0, b.ne0, b.ne1, b.ne2]` with `result[:, i, j, k] = a[:, b[i, j, k], j, k]`; F32
    /// (I32 when `a` is I32). An index outside `0..a.ne1` makes the computation fail with
    /// an error naming the node, the index and its position (GGML asserts there).
    pub fn get_rows(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<GetRows>(Op::GetRows, &[Some(a), Some(b)], NoParams {}, false)
    }

    /// `ggml_repeat`: `a` tiled to `b`'s shape (every dimension of `b` a multiple of `a`'s).
    pub fn repeat(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build_shaped::<Repeat>(Op::Repeat, &[Some(a)], NoParams {}, b.ne())
    }

    /// `ggml_concat`: `a` followed by `b` along dimension `dim`; all other dimensions equal.
    pub fn concat(&self, a: &Tensor, b: &Tensor, dim: usize) -> Result<Tensor> {
        let dim = i32::try_from(dim).unwrap_or(i32::MAX);
        self.build::<Concat>(Op::Concat, &[Some(a), Some(b)], ConcatParams { dim }, false)
    }
}
