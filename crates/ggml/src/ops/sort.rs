//! Sorting: ARGSORT (the permutation that sorts each row) and TOP_K (the indices of each row's
//! `k` largest elements).

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// The order ARGSORT sorts in (`enum ggml_sort_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum SortOrder {
    /// Smallest first (`GGML_SORT_ORDER_ASC`).
    #[default]
    Asc = 0,
    /// Largest first (`GGML_SORT_ORDER_DESC`).
    Desc = 1,
}

impl SortOrder {
    /// The order with GGML id `v`.
    pub fn from_i32(v: i32) -> Option<SortOrder> {
        match v {
            0 => Some(SortOrder::Asc),
            1 => Some(SortOrder::Desc),
            _ => None,
        }
    }
}

/// ARGSORT's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ArgsortParams {
    /// The order ([`SortOrder`] as its GGML value).
    pub order: i32,
}

/// `Err` unless `a` is a float tensor whose rows an I32 index can address.
fn check_sortable(src: &Srcs<'_>) -> Result<()> {
    src.want_float(0)?;
    let n = src.get(0).ne[0];
    if n > i32::MAX as i64 {
        return Err(src.bad(0, format!("its rows have {n} elements; at most 2^31 − 1")));
    }
    Ok(())
}

/// ARGSORT: float `a`; I32 result of `a`'s shape.
pub(crate) struct Argsort;

impl OpSpec for Argsort {
    type Params = ArgsortParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &ArgsortParams) -> Result<Shape> {
        if SortOrder::from_i32(p.order).is_none() {
            return Err(src.err(format!(
                "op_params[0] (order) = {}; it must be 0 (ascending) or 1 (descending)",
                p.order
            )));
        }
        check_sortable(src)?;
        Ok(Shape::New {
            ty: Type::I32,
            ne: src.get(0).ne,
        })
    }
}

/// TOP_K: float `a`; I32 result `[k, a.ne1, …]` with `0 <= k <= a.ne0` (`k` is the result's
/// `ne0`: GGML keeps it nowhere else).
pub(crate) struct TopK;

impl OpSpec for TopK {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        check_sortable(src)?;
        let a = src.get(0);
        let ne = src.requested()?;
        let k = ne[0];
        if !(0..=a.ne[0]).contains(&k) {
            return Err(src.bad(0, format!("k = {k}; it must be in 0..={}", a.ne[0])));
        }
        if ne[1..] != a.ne[1..] {
            return Err(src.err(format!(
                "the result's dimensions 1.. are {:?}; they must be a's {:?}",
                &ne[1..],
                &a.ne[1..]
            )));
        }
        Ok(Shape::New { ty: Type::I32, ne })
    }
}

impl Context {
    /// `ggml_argsort`: for each row of `a` (F32, F16 or BF16), the indices that sort it in
    /// `order`, as I32 of `a`'s shape. Equal elements keep their index order (a stable sort);
    /// NaN counts as larger than every number.
    pub fn argsort(&self, a: &Tensor, order: SortOrder) -> Result<Tensor> {
        let p = ArgsortParams {
            order: order as i32,
        };
        self.build::<Argsort>(Op::Argsort, &[Some(a)], p, false)
    }

    /// `ggml_top_k`: for each row of `a` (F32, F16 or BF16), the indices of its `k` largest
    /// elements, as I32 `[k, a.ne1, …]` (`0 <= k <= a.ne0`). GGML leaves their order open; as
    /// its CPU kernel, this gives them largest first (ties in index order) with the first two
    /// swapped.
    pub fn top_k(&self, a: &Tensor, k: i32) -> Result<Tensor> {
        let mut ne: [i64; MAX_DIMS] = a.ne();
        ne[0] = k as i64;
        self.build_shaped::<TopK>(Op::TopK, &[Some(a)], NoParams {}, ne)
    }
}
