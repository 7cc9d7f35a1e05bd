//! How each op is described once: its parameters as a typed struct laid out as GGML lays out
//! `op_params`, its operand slots, and its shape rule as a pure function of the operands'
//! descriptions ([`Meta`]) and the parameters.
//!
//! The builders on [`Context`] call the rule through [`Context::build`]; a node that no builder
//! made (one received over the wire) is checked with [`Op::validate`], which runs the same rule.
//! Every op names its spec in the op table of `ops/mod.rs`, so an op without one does not
//! compile.

use bytemuck::{Pod, Zeroable};

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{contiguous_strides, span_bytes, Tensor, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC};
use crate::types::Type;

/// An operand or a result as a shape rule sees it: element type, shape and byte strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Element type.
    pub ty: Type,
    /// Elements per dimension (unused dimensions are 1).
    pub ne: [i64; MAX_DIMS],
    /// Byte stride per dimension.
    pub nb: [usize; MAX_DIMS],
}

impl Meta {
    /// The description of tensor `t`.
    pub fn of(t: &Tensor) -> Meta {
        Meta {
            ty: t.ty(),
            ne: t.ne(),
            nb: t.nb(),
        }
    }

    /// A contiguous tensor of `ty` and shape `ne`.
    pub fn contiguous(ty: Type, ne: [i64; MAX_DIMS]) -> Meta {
        Meta {
            ty,
            ne,
            nb: contiguous_strides(ty, &ne),
        }
    }

    /// Number of elements (0 when any dimension is 0 or negative).
    pub fn nelements(&self) -> i64 {
        if self.ne.iter().any(|&n| n <= 0) {
            return 0;
        }
        self.ne.iter().product()
    }

    /// Bytes the tensor spans (`ggml_nbytes`); `None` when the count overflows.
    pub fn nbytes(&self) -> Option<usize> {
        span_bytes(self.ty, &self.ne, &self.nb)
    }

    /// Number of rows: the product of dimensions 1 and up.
    pub fn nrows(&self) -> i64 {
        self.ne[1..].iter().product()
    }

    /// Whether every dimension of `other` is a whole multiple of this one's (`ggml_can_repeat`:
    /// this tensor tiles `other`). An empty tensor only tiles an empty one.
    pub fn can_repeat(&self, other: &Meta) -> bool {
        if self.nelements() == 0 {
            return other.nelements() == 0;
        }
        (0..MAX_DIMS).all(|d| other.ne[d] % self.ne[d] == 0)
    }

    /// Whether the elements are packed in order with no gaps (`ggml_is_contiguous`).
    pub fn is_contiguous(&self) -> bool {
        self.nb == contiguous_strides(self.ty, &self.ne) || self.nelements() <= 1
    }

    /// Whether each row's elements are packed (`nb[0]` is the type size), whatever the row
    /// strides (GGML's `ggml_is_contiguous_rows`).
    pub fn rows_packed(&self) -> bool {
        self.nb[0] == self.ty.type_size() || self.ne[0] <= 1
    }

    /// Whether dimensions 0 and 1 are swapped in memory (`nb[0] > nb[1]`).
    pub fn is_transposed(&self) -> bool {
        self.nb[0] > self.nb[1]
    }

    /// Whether the tensor has one element.
    pub fn is_scalar(&self) -> bool {
        self.ne.iter().all(|&n| n == 1)
    }

    /// Number of dimensions up to the last one above 1 (at least 1).
    pub fn n_dims(&self) -> usize {
        (1..MAX_DIMS)
            .rev()
            .find(|&d| self.ne[d] > 1)
            .map_or(1, |d| d + 1)
    }

    /// Whether `other` has this type and shape and lies in memory the same way: equal strides
    /// in every dimension of more than one element (a stride of a dimension of one element is
    /// never used; a 4-dimensional wire format cannot carry the fifth's).
    pub fn same_layout(&self, other: &Meta) -> bool {
        self.ty == other.ty
            && self.ne == other.ne
            && (0..MAX_DIMS).all(|d| self.ne[d] <= 1 || self.nb[d] == other.nb[d])
    }

    /// Whether the shape equals `other`'s.
    pub fn same_shape(&self, other: &Meta) -> bool {
        self.ne == other.ne
    }
}

/// What a shape rule gives for a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A result of this type and shape: a new contiguous tensor, or (for the `_inplace` forms
    /// of ops that allow it) a view of operand 0 with its strides.
    New {
        /// Element type.
        ty: Type,
        /// Elements per dimension.
        ne: [i64; MAX_DIMS],
    },
    /// A new contiguous tensor of this type whose shape the builder chooses among those with
    /// this many elements (CONT's reshaping forms).
    Reshaped {
        /// Element type.
        ty: Type,
        /// The element count.
        elements: i64,
    },
    /// The result is written into the memory of operand `slot` and has its type, shape and
    /// strides (CPY writes into its second operand, SET_ROWS into its third).
    Into {
        /// The operand slot whose memory the result is.
        slot: usize,
    },
    /// The result is a view of operand 0 with this shape and these strides, computing nothing
    /// (PERMUTE, TRANSPOSE).
    View {
        /// Elements per dimension.
        ne: [i64; MAX_DIMS],
        /// Byte strides.
        nb: [usize; MAX_DIMS],
    },
    /// The result is a view of operand 0 whose shape and strides the builder chooses (VIEW,
    /// RESHAPE): [`Op::validate`] checks that it stays inside the operand's memory and, when
    /// given, has this many elements.
    FreeView {
        /// The element count the view must have, if the op fixes it.
        elements: Option<i64>,
    },
    /// A new contiguous tensor of this shape whose type the builder chooses among `types`
    /// (IM2COL's result type is an argument of the builder, not an op parameter).
    Typed {
        /// The types the result may have.
        types: &'static [Type],
        /// Elements per dimension.
        ne: [i64; MAX_DIMS],
    },
    /// A new tensor (not a view) of this type and shape laid out with these strides
    /// (CONV_2D_DW keeps the channels-innermost layout of its input).
    Strided {
        /// Element type.
        ty: Type,
        /// Elements per dimension.
        ne: [i64; MAX_DIMS],
        /// Byte strides.
        nb: [usize; MAX_DIMS],
    },
    /// A leaf: no operands, no rule.
    Leaf,
}

/// An operand slot of an op: its name (for errors) and whether it must be present.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// GGML's name for the operand (`a`, `b`, `mask`, …).
    pub name: &'static str,
    /// Whether the slot must hold a tensor.
    pub required: bool,
}

/// A required operand slot.
pub(crate) const fn req(name: &'static str) -> Slot {
    Slot {
        name,
        required: true,
    }
}

/// An optional operand slot (a nullable tensor in GGML).
pub(crate) const fn opt(name: &'static str) -> Slot {
    Slot {
        name,
        required: false,
    }
}

/// The operands handed to a shape rule, by GGML slot.
pub struct Srcs<'a> {
    op: Op,
    slots: &'static [Slot],
    metas: &'a [Option<Meta>],
    /// The operands' tensor names, for errors (empty when validating a node from outside).
    names: &'a [String],
    requested: Option<[i64; MAX_DIMS]>,
}

impl Srcs<'_> {
    /// The result shape the caller asks for, for ops whose shape is an argument of the builder
    /// rather than a function of the operands (REPEAT's target shape, say); for a node being
    /// validated, the node's own shape. `Err` when none was given.
    pub fn requested(&self) -> Result<[i64; MAX_DIMS]> {
        self.requested
            .ok_or_else(|| self.err("the result's shape must be given"))
    }

    /// The operand in slot `i`, which the spec declares required.
    pub fn get(&self, i: usize) -> &Meta {
        self.metas[i]
            .as_ref()
            .expect("required slots were checked before the rule ran")
    }

    /// The operand in optional slot `i`, if given.
    pub fn opt(&self, i: usize) -> Option<&Meta> {
        self.metas.get(i).and_then(Option::as_ref)
    }

    /// Operand `i` for a message: its slot name, tensor name (when it has one), type and
    /// shape, e.g. `b "bias" (f32 [3, 3, 1, 1, 1])`.
    pub fn describe(&self, i: usize) -> String {
        let name = match self.names.get(i) {
            Some(n) if !n.is_empty() => format!(" {n:?}"),
            _ => String::new(),
        };
        let what = self.metas.get(i).and_then(Option::as_ref).map_or_else(
            || "no tensor".to_string(),
            |m| format!("{} {:?}", m.ty, m.ne),
        );
        format!("{}{name} ({what})", self.slots[i].name)
    }

    /// GGML's name for operand slot `i` (`a`, `b`, `mask`, …).
    pub fn slot_name(&self, i: usize) -> &'static str {
        self.slots[i].name
    }

    /// An `Err` naming the op and operand `i`: "OP: a "name" (f32 [..]): WHY".
    pub fn bad(&self, i: usize, why: impl std::fmt::Display) -> Error {
        Error::invalid(format!("{}: {}: {why}", self.op.name(), self.describe(i)))
    }

    /// An `Err` naming the op: "OP: WHY".
    pub fn err(&self, why: impl std::fmt::Display) -> Error {
        Error::invalid(format!("{}: {why}", self.op.name()))
    }

    /// `Err` unless operand `i` has one of `types`.
    pub fn want_type(&self, i: usize, types: &[Type]) -> Result<()> {
        let t = self.get(i).ty;
        if types.contains(&t) {
            return Ok(());
        }
        let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
        Err(self.bad(i, format!("its type must be {}", names.join(" or "))))
    }

    /// `Err` unless operand `i` is F32, F16 or BF16.
    pub fn want_float(&self, i: usize) -> Result<()> {
        self.want_type(i, &[Type::F32, Type::F16, Type::BF16])
    }

    /// `Err` unless operand `j` has the shape of operand `i`.
    pub fn want_same_shape(&self, i: usize, j: usize) -> Result<()> {
        if self.get(i).ne == self.get(j).ne {
            return Ok(());
        }
        Err(self.bad(
            j,
            format!("it must have the shape of {}", self.slots[i].name),
        ))
    }
}

/// One op's description: parameters, operand slots and shape rule.
pub(crate) trait OpSpec {
    /// The parameters, laid out exactly as GGML's `op_params` for this op.
    type Params: Pod + Zeroable + Copy + std::fmt::Debug;
    /// The operand slots in GGML's order.
    const SLOTS: &'static [Slot];
    /// Whether the `_inplace` form exists (the result may be a view of operand 0).
    const INPLACE: bool = false;
    /// The result for these operands and parameters, or an `Err` naming the operand and value
    /// that do not fit. The operands of required slots are present when it runs.
    fn shape(src: &Srcs<'_>, p: &Self::Params) -> Result<Shape>;
}

/// A spec for ops that take no parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct NoParams {}

/// The parameters of type `P` read from a node's `op_params` (GGML's layout: `P`'s bytes from
/// the start of the 64-byte array).
pub fn read_params<P: Pod>(op_params: &[i32; MAX_OP_PARAMS / 4]) -> P {
    const { assert!(std::mem::size_of::<P>() <= MAX_OP_PARAMS) };
    let bytes: &[u8] = bytemuck::cast_slice(op_params);
    bytemuck::pod_read_unaligned(&bytes[..std::mem::size_of::<P>()])
}

/// `p`'s bytes as `op_params` (the remaining slots zero).
pub fn write_params<P: Pod>(p: &P) -> [i32; MAX_OP_PARAMS / 4] {
    const { assert!(std::mem::size_of::<P>() <= MAX_OP_PARAMS) };
    let mut out = [0i32; MAX_OP_PARAMS / 4];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    bytes[..std::mem::size_of::<P>()].copy_from_slice(bytemuck::bytes_of(p));
    out
}

/// Checks the slots against the spec, then runs its rule.
fn run_rule<S: OpSpec>(
    op: Op,
    metas: &[Option<Meta>],
    p: &S::Params,
    names: &[String],
    requested: Option<[i64; MAX_DIMS]>,
) -> Result<Shape> {
    if metas.len() > S::SLOTS.len() {
        return Err(Error::invalid(format!(
            "{}: {} operand slots given; the op has {}",
            op.name(),
            metas.len(),
            S::SLOTS.len()
        )));
    }
    let src = Srcs {
        op,
        slots: S::SLOTS,
        metas,
        names,
        requested,
    };
    for (i, slot) in S::SLOTS.iter().enumerate() {
        if slot.required && src.opt(i).is_none() {
            return Err(src.bad(i, "the operand is required"));
        }
    }
    S::shape(&src, p)
}

/// The result a spec gives for `op_params` and operands, for [`Op::validate`].
pub(crate) fn shape_of<S: OpSpec>(
    op: Op,
    metas: &[Option<Meta>],
    op_params: &[i32; MAX_OP_PARAMS / 4],
    requested: Option<[i64; MAX_DIMS]>,
) -> Result<Shape> {
    run_rule::<S>(
        op,
        metas,
        &read_params::<S::Params>(op_params),
        &[],
        requested,
    )
}

/// Whether `S` has an in-place form, for [`Op::validate`].
pub(crate) fn inplace_of<S: OpSpec>() -> bool {
    S::INPLACE
}

/// A node as it arrives from outside: its own description, whether it is a view and at which
/// offset of its root, and its operands' descriptions by slot.
#[derive(Clone, Copy, Debug)]
pub struct NodeMeta<'a> {
    /// The node's own type, shape and strides.
    pub dst: Meta,
    /// `Some(offset)` when the node is a view (it has a `view_src`) at that byte offset.
    pub view_offs: Option<usize>,
    /// The operands by slot.
    pub src: &'a [Option<Meta>],
    /// The raw parameters.
    pub op_params: &'a [i32; MAX_OP_PARAMS / 4],
}

/// The check behind [`Op::validate`], for one rule's outcome.
pub(crate) fn check_node(op: Op, node: &NodeMeta<'_>, shape: Shape, inplace: bool) -> Result<()> {
    let d = &node.dst;
    let mismatch = |what: String| {
        Err(Error::invalid(format!(
            "{}: the node is {} {:?} (strides {:?}); {what}",
            op.name(),
            d.ty,
            d.ne,
            d.nb
        )))
    };
    let span = span_bytes(d.ty, &d.ne, &d.nb);
    if span.is_none() {
        return mismatch("its strides span more bytes than memory can address".into());
    }
    match shape {
        Shape::Leaf => Ok(()),
        Shape::New { ty, ne } => {
            if d.ty != ty || d.ne != ne {
                return mismatch(format!("the operands give {ty} {ne:?}"));
            }
            let contiguous = d.nb == contiguous_strides(ty, &ne);
            let in_place_over_a = node.view_offs.is_some()
                && inplace
                && node
                    .src
                    .first()
                    .copied()
                    .flatten()
                    .is_some_and(|a| a.same_layout(d));
            let fresh = contiguous && node.view_offs.is_none();
            if !(fresh || in_place_over_a) {
                return mismatch(
                    "a result must be contiguous, or, for an in-place form, a view of operand 0 \
                     with its layout"
                        .into(),
                );
            }
            Ok(())
        }
        Shape::Reshaped { ty, elements } => {
            if d.ty != ty || d.nelements() != elements {
                return mismatch(format!("the operands give {elements} elements of {ty}"));
            }
            if d.nb != contiguous_strides(ty, &d.ne) || node.view_offs.is_some() {
                return mismatch("a result must be contiguous".into());
            }
            Ok(())
        }
        Shape::Typed { types, ne } => {
            if !types.contains(&d.ty) || d.ne != ne {
                let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
                return mismatch(format!("the operands give {} {ne:?}", names.join(" or ")));
            }
            if d.nb != contiguous_strides(d.ty, &ne) || node.view_offs.is_some() {
                return mismatch("a result must be contiguous".into());
            }
            Ok(())
        }
        Shape::Strided { ty, ne, nb } => {
            if d.ty != ty || d.ne != ne || d.nb != nb || node.view_offs.is_some() {
                return mismatch(format!(
                    "the operands give {ty} {ne:?} with strides {nb:?}, not a view"
                ));
            }
            Ok(())
        }
        Shape::Into { slot } => {
            let target = node.src.get(slot).copied().flatten();
            if !target.is_some_and(|t| t.same_layout(d)) || node.view_offs.is_none() {
                return mismatch(format!(
                    "it must be a view of operand {slot} with its layout"
                ));
            }
            Ok(())
        }
        Shape::View { ne, nb } => {
            if !d.same_layout(&Meta { ty: d.ty, ne, nb }) || node.view_offs.is_none() {
                return mismatch(format!(
                    "it must be a view of operand 0 with shape {ne:?} and strides {nb:?}"
                ));
            }
            Ok(())
        }
        Shape::FreeView { elements } => {
            let a = node.src.first().copied().flatten();
            if node.view_offs.is_none() || a.map(|a| a.ty) != Some(d.ty) {
                return mismatch("it must be a view of operand 0, of its type".into());
            }
            match elements {
                Some(n) if Meta::nelements(d) != n => {
                    mismatch(format!("it must have {n} elements"))
                }
                _ => Ok(()),
            }
        }
    }
}

impl Context {
    /// Creates the node of `op` described by spec `S`: runs the shape rule on the operands
    /// (slot by slot, `None` for an empty slot) and the parameters, then makes the result as
    /// the rule says. With `inplace` (only for specs with an in-place form) the result is a view
    /// of operand 0 with its strides, so the kernel writes into its memory.
    pub(crate) fn build<S: OpSpec>(
        &self,
        op: Op,
        srcs: &[Option<&Tensor>],
        p: S::Params,
        inplace: bool,
    ) -> Result<Tensor> {
        self.build_impl::<S>(op, srcs, p, inplace, None, None)
    }

    /// As [`Context::build`], for ops whose result type the caller chooses among those the
    /// rule allows ([`Shape::Typed`]).
    pub(crate) fn build_typed<S: OpSpec>(
        &self,
        op: Op,
        srcs: &[Option<&Tensor>],
        p: S::Params,
        ty: Type,
    ) -> Result<Tensor> {
        self.build_impl::<S>(op, srcs, p, false, None, Some(ty))
    }

    /// As [`Context::build`], for ops whose result shape the caller chooses (see
    /// [`Srcs::requested`]).
    pub(crate) fn build_shaped<S: OpSpec>(
        &self,
        op: Op,
        srcs: &[Option<&Tensor>],
        p: S::Params,
        ne: [i64; MAX_DIMS],
    ) -> Result<Tensor> {
        self.build_impl::<S>(op, srcs, p, false, Some(ne), None)
    }

    /// A node like `node` (computed by `op`, described by `S`) with operand slot `slot` set to
    /// `t` (`None` empties it): GGML's `*_add_sinks` setters change the node itself; nodes here
    /// are fixed once built, so the result is a new node with `node`'s other operands and
    /// parameters, in place when `node` is. `Err` when `node` is computed by another op, when
    /// the slot is already filled and `t` is given, or when the shape rule refuses `t`.
    pub(crate) fn with_operand<S: OpSpec>(
        &self,
        node: &Tensor,
        op: Op,
        slot: usize,
        t: Option<&Tensor>,
    ) -> Result<Tensor> {
        let setter = format!("{}_add_{}", op.name().to_lowercase(), S::SLOTS[slot].name);
        if node.op() != op {
            return Err(Error::invalid(format!(
                "{setter}: tensor {:?} is computed by {}, not {}",
                node.name(),
                node.op().name(),
                op.name()
            )));
        }
        if t.is_some() && node.src(slot).is_some() {
            return Err(Error::invalid(format!(
                "{setter}: tensor {:?} already has its {} operand",
                node.name(),
                S::SLOTS[slot].name
            )));
        }
        let mut srcs: Vec<Option<&Tensor>> = (0..S::SLOTS.len()).map(|i| node.src(i)).collect();
        srcs[slot] = t;
        let p = read_params::<S::Params>(&node.op_params());
        self.build::<S>(op, &srcs, p, node.view_src().is_some())
    }

    fn build_impl<S: OpSpec>(
        &self,
        op: Op,
        srcs: &[Option<&Tensor>],
        p: S::Params,
        inplace: bool,
        requested: Option<[i64; MAX_DIMS]>,
        ty: Option<Type>,
    ) -> Result<Tensor> {
        debug_assert!(srcs.len() <= MAX_SRC);
        let metas: Vec<Option<Meta>> = srcs.iter().map(|s| s.map(Meta::of)).collect();
        let names: Vec<String> = srcs
            .iter()
            .map(|s| s.map(Tensor::name).unwrap_or_default())
            .collect();
        let shape = run_rule::<S>(op, &metas, &p, &names, requested)?;
        let params = write_params(&p);
        let mut slots: Vec<Option<Tensor>> = srcs.iter().map(|s| s.cloned()).collect();
        while slots.last().is_some_and(Option::is_none) {
            slots.pop();
        }
        let a = srcs.first().copied().flatten();
        match shape {
            Shape::New { ty, ne } => {
                let n = NewTensor::op_slots(ty, &ne, op, slots).params(&params);
                match (inplace, a) {
                    (true, Some(a)) if S::INPLACE => {
                        if a.ty() != ty || a.ne() != ne {
                            return Err(Error::invalid(format!(
                                "{}: in place, the result ({ty} {ne:?}) must have the type and \
                                 shape of a ({} {:?})",
                                op.name(),
                                a.ty(),
                                a.ne()
                            )));
                        }
                        self.new_tensor_impl(n.view_of(a, 0).strides(a.nb()))
                    }
                    (false, _) => self.new_tensor_impl(n),
                    _ => Err(Error::invalid(format!(
                        "{}: the op has no in-place form",
                        op.name()
                    ))),
                }
            }
            Shape::Typed { types, ne } => match ty {
                Some(ty) if types.contains(&ty) => {
                    self.new_tensor_impl(NewTensor::op_slots(ty, &ne, op, slots).params(&params))
                }
                _ => {
                    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
                    Err(Error::invalid(format!(
                        "{}: the result type {} must be {}",
                        op.name(),
                        ty.map_or("(none given)", Type::name),
                        names.join(" or ")
                    )))
                }
            },
            Shape::Strided { ty, ne, nb } => self.new_tensor_impl(
                NewTensor::op_slots(ty, &ne, op, slots)
                    .params(&params)
                    .strides(nb),
            ),
            Shape::Into { slot } => {
                let target = srcs[slot].expect("the rule names a present slot");
                self.new_tensor_impl(
                    NewTensor::op_slots(target.ty(), &target.ne(), op, slots)
                        .params(&params)
                        .view_of(target, 0)
                        .strides(target.nb()),
                )
            }
            Shape::View { ne, nb } => {
                let a = a.expect("view ops have operand 0");
                self.new_tensor_impl(
                    NewTensor::op_slots(a.ty(), &ne, op, slots)
                        .params(&params)
                        .view_of(a, 0)
                        .strides(nb),
                )
            }
            Shape::Reshaped { .. } | Shape::FreeView { .. } | Shape::Leaf => {
                Err(Error::invalid(format!(
                    "{}: made by its own builder, not by a shape rule",
                    op.name()
                )))
            }
        }
    }
}

/// Ten optional slots: what a spec accepts when it does not know its operands.
const ANY_SLOTS: [Slot; MAX_SRC] = [opt("src"); MAX_SRC];

/// The spec of leaves (op NONE): no operands, no rule.
pub(crate) struct Leaf;

impl OpSpec for Leaf {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[];
    fn shape(_: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        Ok(Shape::Leaf)
    }
}

/// The spec of an op that has no builder here yet: [`Op::validate`] refuses its nodes.
pub(crate) struct Unbuilt;

impl OpSpec for Unbuilt {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &ANY_SLOTS;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        Err(Error::unsupported(format!(
            "{}: this op is not available in this version of the library",
            src.op.name()
        )))
    }
}
