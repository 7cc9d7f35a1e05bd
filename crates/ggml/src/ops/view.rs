//! Views and copies: VIEW, RESHAPE, PERMUTE, TRANSPOSE (no computation: the result shares its
//! source's memory), and CONT, CPY, DUP (which copy).

use bytemuck::{Pod, Zeroable};

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::spec::{opt, req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// DUP: a copy of `a`, of its type and shape.
pub(crate) struct Dup;

impl OpSpec for Dup {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

/// CONT: a contiguous copy of `a`, of any shape with `a`'s element count.
pub(crate) struct Cont;

impl OpSpec for Cont {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        Ok(Shape::Reshaped {
            ty: a.ty,
            elements: a.nelements(),
        })
    }
}

/// CPY: `a` written into `b` (same element count), the result being `b`'s memory. A cast
/// (`ggml_cast`) is a CPY whose destination is the result itself: GGML puts the result in slot
/// 1; here the slot is empty and [`Context::cast`] makes the node.
pub(crate) struct Cpy;

impl OpSpec for Cpy {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), opt("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        let Some(b) = src.opt(1) else {
            return Err(src.bad(1, "a CPY node needs its destination"));
        };
        if a.nelements() != b.nelements() {
            return Err(src.bad(1, format!("it must have a's {} elements", a.nelements())));
        }
        Ok(Shape::Into { slot: 1 })
    }
}

/// RESHAPE: a view of contiguous `a` with a new shape of the same element count.
pub(crate) struct Reshape;

impl OpSpec for Reshape {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        if !a.is_contiguous() {
            return Err(src.bad(0, "it must be contiguous; use cont() first"));
        }
        Ok(Shape::FreeView {
            elements: Some(a.nelements()),
        })
    }
}

/// VIEW's parameters: the byte offset into the viewed tensor (GGML's `size_t` in slots 0–1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ViewParams {
    /// Byte offset of the view from the start of its source.
    pub offset: u64,
}

/// VIEW: a view of `a` whose shape, strides and offset the builder chooses.
pub(crate) struct ViewOp;

impl OpSpec for ViewOp {
    type Params = ViewParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(_: &Srcs<'_>, _: &ViewParams) -> Result<Shape> {
        Ok(Shape::FreeView { elements: None })
    }
}

/// PERMUTE's parameters: where each source dimension goes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PermuteParams {
    /// Source dimension `i` moves to position `axes[i]`.
    pub axes: [i32; 4],
}

/// PERMUTE: a view of `a` with dimensions reordered (four distinct axes below 4).
pub(crate) struct Permute;

impl OpSpec for Permute {
    type Params = PermuteParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &PermuteParams) -> Result<Shape> {
        let axes = p.axes;
        let distinct = (0..4).all(|i| (0..i).all(|j| axes[i] != axes[j]));
        if !distinct || axes.iter().any(|&x| !(0..4).contains(&x)) {
            return Err(src.err(format!("axes {axes:?} must be a permutation of 0..4")));
        }
        let a = src.get(0);
        let (mut ne, mut nb) = (a.ne, a.nb);
        for (i, &ax) in axes.iter().enumerate() {
            ne[ax as usize] = a.ne[i];
            nb[ax as usize] = a.nb[i];
        }
        Ok(Shape::View { ne, nb })
    }
}

/// TRANSPOSE: a view of `a` with dimensions 0 and 1 swapped.
pub(crate) struct Transpose;

impl OpSpec for Transpose {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        let (mut ne, mut nb) = (a.ne, a.nb);
        ne.swap(0, 1);
        nb.swap(0, 1);
        Ok(Shape::View { ne, nb })
    }
}

/// Checks a shape given to RESHAPE, VIEW or CONT (1 to 5 dimensions, none negative) and
/// returns its element count (an error when the count overflows).
fn shape_count(op: &str, ne: &[i64]) -> Result<i64> {
    if ne.is_empty() || ne.len() > MAX_DIMS {
        return Err(Error::invalid(format!(
            "{op}: {} dimensions given ({ne:?}); a tensor has 1 to {MAX_DIMS}",
            ne.len()
        )));
    }
    if let Some(d) = ne.iter().position(|&x| x < 0) {
        return Err(Error::invalid(format!(
            "{op}: ne[{d}] = {} is negative (shape {ne:?})",
            ne[d]
        )));
    }
    ne.iter()
        .try_fold(1i64, |acc, &x| acc.checked_mul(x))
        .ok_or_else(|| Error::invalid(format!("{op}: shape {ne:?} has too many elements")))
}

impl Context {
    /// A view of `a` with shape `ne` and strides `nb[1..]` (`nb[0]` is the type size, missing
    /// higher strides follow GGML: packed over the given ones), at byte `offset`.
    ///
    /// GGML only checks that the *contiguous* size fits after `offset`; here every byte the
    /// view can reach with its strides must lie inside `a`'s memory (its root tensor), so a
    /// view can never read or write out of bounds.
    fn view_impl(
        &self,
        a: &Tensor,
        ne: &[i64],
        nb_given: &[usize],
        offset: usize,
    ) -> Result<Tensor> {
        shape_count("VIEW", ne)?;
        let mut full = [1i64; MAX_DIMS];
        full[..ne.len()].copy_from_slice(ne);
        let mut nb = [0usize; MAX_DIMS];
        nb[0] = a.ty().type_size();
        nb[1] = nb[0] * (full[0] as usize / a.ty().blck_size());
        nb[1..=nb_given.len()].copy_from_slice(nb_given);
        for i in (nb_given.len() + 1).max(2)..MAX_DIMS {
            nb[i] = nb[i - 1]
                .checked_mul(full[i - 1] as usize)
                .ok_or_else(|| Error::invalid(format!("VIEW: strides of shape {ne:?} overflow")))?;
        }
        let span = crate::tensor::span_bytes(a.ty(), &full, &nb).ok_or_else(|| {
            Error::invalid(format!(
                "VIEW: shape {ne:?} with strides {nb:?} spans more bytes than memory can address"
            ))
        })?;
        let (root_bytes, base) = match a.view_src() {
            Some(root) => (root.nbytes(), a.view_offs()),
            None => (a.nbytes(), 0),
        };
        let end = base.checked_add(offset).and_then(|o| o.checked_add(span));
        if span > 0 && end.is_none_or(|e| e > root_bytes) {
            return Err(Error::invalid(format!(
                "VIEW: offset {offset} + {span} bytes (shape {ne:?}, strides {nb:?}) is out of \
                 bounds of {:?} ({root_bytes} bytes from its memory's start, view at {base})",
                a.name()
            )));
        }
        let params = crate::ops::write_params(&ViewParams {
            offset: offset as u64,
        });
        let v = self.new_tensor_impl(
            NewTensor::op(a.ty(), ne, Op::View, vec![a.clone()])
                .params(&params)
                .view_of(a, offset)
                .strides(nb),
        )?;
        v.set_name(&format!("{} (view)", a.name()));
        Ok(v)
    }

    /// `ggml_view_1d`: `ne0` elements of `a` from byte `offset`.
    pub fn view_1d(&self, a: &Tensor, ne0: i64, offset: usize) -> Result<Tensor> {
        self.view_impl(a, &[ne0], &[], offset)
    }

    /// `ggml_view_2d`: `ne1` rows of `ne0` elements, `nb1` bytes apart, from byte `offset`.
    pub fn view_2d(
        &self,
        a: &Tensor,
        ne0: i64,
        ne1: i64,
        nb1: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.view_impl(a, &[ne0, ne1], &[nb1], offset)
    }

    /// `ggml_view_3d`.
    #[allow(clippy::too_many_arguments)]
    pub fn view_3d(
        &self,
        a: &Tensor,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        nb1: usize,
        nb2: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.view_impl(a, &[ne0, ne1, ne2], &[nb1, nb2], offset)
    }

    /// `ggml_view_4d`.
    #[allow(clippy::too_many_arguments)]
    pub fn view_4d(
        &self,
        a: &Tensor,
        ne: [i64; 4],
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.view_impl(a, &ne, &[nb1, nb2, nb3], offset)
    }

    /// `ggml_reshape_*`: a view of contiguous `a` with a new shape of the same element count.
    pub fn reshape_nd(&self, a: &Tensor, ne: &[i64]) -> Result<Tensor> {
        if !a.is_contiguous() {
            return Err(Error::invalid(format!(
                "RESHAPE: a {:?} (shape {:?}, strides {:?}) is not contiguous; use cont() first",
                a.name(),
                a.ne(),
                a.nb()
            )));
        }
        let n = shape_count("RESHAPE", ne)?;
        if n != a.nelements() {
            return Err(Error::invalid(format!(
                "RESHAPE: new shape {ne:?} has {n} elements, a {:?} has {}",
                a.name(),
                a.nelements()
            )));
        }
        let v = self.new_tensor_impl(
            NewTensor::op(a.ty(), ne, Op::Reshape, vec![a.clone()]).view_of(a, 0),
        )?;
        v.set_name(&format!("{} (reshaped)", a.name()));
        Ok(v)
    }

    /// `ggml_reshape`: `a` with `b`'s shape.
    pub fn reshape(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.reshape_nd(a, &b.ne())
    }

    /// `ggml_reshape_1d`.
    pub fn reshape_1d(&self, a: &Tensor, ne0: i64) -> Result<Tensor> {
        self.reshape_nd(a, &[ne0])
    }

    /// `ggml_reshape_2d`.
    pub fn reshape_2d(&self, a: &Tensor, ne0: i64, ne1: i64) -> Result<Tensor> {
        self.reshape_nd(a, &[ne0, ne1])
    }

    /// `ggml_reshape_3d`.
    pub fn reshape_3d(&self, a: &Tensor, ne0: i64, ne1: i64, ne2: i64) -> Result<Tensor> {
        self.reshape_nd(a, &[ne0, ne1, ne2])
    }

    /// `ggml_reshape_4d`.
    pub fn reshape_4d(&self, a: &Tensor, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> Result<Tensor> {
        self.reshape_nd(a, &[ne0, ne1, ne2, ne3])
    }

    /// `ggml_permute`: source dimension `i` moves to position `axes[i]` (four distinct axes
    /// below 4; dimension 4 stays).
    pub fn permute(
        &self,
        a: &Tensor,
        ax0: usize,
        ax1: usize,
        ax2: usize,
        ax3: usize,
    ) -> Result<Tensor> {
        let axes = [ax0, ax1, ax2, ax3].map(|x| i32::try_from(x).unwrap_or(i32::MAX));
        let p = PermuteParams { axes };
        let v = self.build::<Permute>(Op::Permute, &[Some(a)], p, false)?;
        v.set_name(&format!("{} (permuted)", a.name()));
        Ok(v)
    }

    /// `ggml_transpose`: swaps dimensions 0 and 1 (a view).
    pub fn transpose(&self, a: &Tensor) -> Result<Tensor> {
        let v = self.build::<Transpose>(Op::Transpose, &[Some(a)], NoParams {}, false)?;
        v.set_name(&format!("{} (transposed)", a.name()));
        Ok(v)
    }

    /// `ggml_cont`: a contiguous copy of `a`.
    pub fn cont(&self, a: &Tensor) -> Result<Tensor> {
        self.cont_nd(a, &a.ne())
    }

    /// `ggml_cont_4d` generalised: a contiguous copy of `a` with a new shape of the same
    /// element count ("make contiguous and reshape").
    pub fn cont_nd(&self, a: &Tensor, ne: &[i64]) -> Result<Tensor> {
        let n = shape_count("CONT", ne)?;
        if n != a.nelements() {
            return Err(Error::invalid(format!(
                "CONT: shape {ne:?} has {n} elements, a {:?} has {}",
                a.name(),
                a.nelements()
            )));
        }
        let t = self.new_tensor_impl(NewTensor::op(a.ty(), ne, Op::Cont, vec![a.clone()]))?;
        t.set_name(&format!("{} (cont)", a.name()));
        Ok(t)
    }

    /// `ggml_cont_1d`.
    pub fn cont_1d(&self, a: &Tensor, ne0: i64) -> Result<Tensor> {
        self.cont_nd(a, &[ne0])
    }

    /// `ggml_cont_2d`.
    pub fn cont_2d(&self, a: &Tensor, ne0: i64, ne1: i64) -> Result<Tensor> {
        self.cont_nd(a, &[ne0, ne1])
    }

    /// `ggml_cont_3d`.
    pub fn cont_3d(&self, a: &Tensor, ne0: i64, ne1: i64, ne2: i64) -> Result<Tensor> {
        self.cont_nd(a, &[ne0, ne1, ne2])
    }

    /// `ggml_cont_4d`.
    pub fn cont_4d(&self, a: &Tensor, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> Result<Tensor> {
        self.cont_nd(a, &[ne0, ne1, ne2, ne3])
    }

    /// `ggml_cpy`: writes `a` into `b` (converting to `b`'s type, in logical element order);
    /// the result is a view of `b`. Element counts must match.
    pub fn cpy(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let t = self.build::<Cpy>(Op::Cpy, &[Some(a), Some(b)], NoParams {}, false)?;
        t.set_name(&format!("{} (copy of {})", b.name(), a.name()));
        Ok(t)
    }

    /// `ggml_cast`: a new tensor of type `ty` holding `a`'s values.
    pub fn cast(&self, a: &Tensor, ty: Type) -> Result<Tensor> {
        let ne = a.ne();
        let t = self.new_tensor_impl(NewTensor::op(ty, &ne, Op::Cpy, vec![a.clone()]))?;
        t.set_name(&format!("{} (copy)", a.name()));
        Ok(t)
    }

    /// `ggml_dup`: a new tensor holding a copy of `a`.
    pub fn dup(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Dup>(Op::Dup, &[Some(a)], NoParams {}, false)
    }

    /// `ggml_dup_inplace`: a DUP node that is a view of `a` (copying `a` onto itself).
    pub fn dup_inplace(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Dup>(Op::Dup, &[Some(a)], NoParams {}, true)
    }
}
