//! Arithmetic, windows, masks, padding and generators: ADD_ID, ACC, SET, DIAG, DIAG_MASK_INF,
//! DIAG_MASK_ZERO, CLAMP, LEAKY_RELU, PAD (and circular), PAD_REFLECT_1D, ROLL, ARANGE,
//! TIMESTEP_EMBEDDING, TRI, FILL, CROSS_ENTROPY_LOSS.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{span_bytes, Tensor};
use crate::types::Type;

/// The result of an op on `a` alone: `a`'s type and shape.
fn like_a(src: &Srcs<'_>) -> Result<Shape> {
    let a = src.get(0);
    Ok(Shape::New { ty: a.ty, ne: a.ne })
}

/// `Err` unless `a` has at most four dimensions (the op is GGML's, defined on four).
fn four_dims(src: &Srcs<'_>, i: usize) -> Result<()> {
    if src.get(i).ne[4] != 1 {
        return Err(src.bad(i, "this op takes at most four dimensions"));
    }
    Ok(())
}

/// ADD_ID: `result[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]` — a bias row per expert
/// slot. `a` F32 `[n, n_used, n_tokens]`, `b` F32 `[n, n_expert]`, `ids` I32
/// `[n_used, n_tokens]`; the result has `a`'s shape.
pub(crate) struct AddId;

impl OpSpec for AddId {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b"), req("ids")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (a, b, ids) = (src.get(0), src.get(1), src.get(2));
        src.want_type(0, &[Type::F32])?;
        src.want_type(1, &[Type::F32])?;
        src.want_type(2, &[Type::I32])?;
        four_dims(src, 0)?;
        if b.ne[0] != a.ne[0] {
            return Err(src.bad(1, format!("its rows must have a's {} elements", a.ne[0])));
        }
        if ids.ne[0] != a.ne[1] || ids.ne[1] != a.ne[2] {
            return Err(src.bad(
                2,
                format!("it must be [a.ne1, a.ne2] = [{}, {}]", a.ne[1], a.ne[2]),
            ));
        }
        if !a.rows_packed() || !b.rows_packed() {
            return Err(src.err("rows of a and b must be packed (nb0 = 4)"));
        }
        like_a(src)
    }
}

/// The window of ACC and SET: `b` is written over the view of `a` with byte strides
/// `nb1, nb2, nb3` (element stride `a`'s type size) starting at byte `offset`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct WindowParams {
    /// Byte stride of the window's dimension 1.
    pub nb1: i32,
    /// Byte stride of the window's dimension 2.
    pub nb2: i32,
    /// Byte stride of the window's dimension 3.
    pub nb3: i32,
    /// Byte offset of the window in `a`.
    pub offset: i32,
    /// 1 for the `_inplace` forms.
    pub inplace: i32,
}

/// Checks that `b` seen through the window fits inside `a` (every byte of every element).
fn check_window(src: &Srcs<'_>, p: &WindowParams) -> Result<()> {
    let (a, b) = (src.get(0), src.get(1));
    let fields = [p.nb1, p.nb2, p.nb3, p.offset];
    if fields.iter().any(|&x| x < 0) {
        return Err(src.err(format!(
            "window strides and offset {fields:?} must not be negative"
        )));
    }
    if !a.is_contiguous() {
        return Err(src.bad(0, "it must be contiguous"));
    }
    if !b.rows_packed() {
        return Err(src.bad(1, "its rows must be packed"));
    }
    if b.ne[4] != 1 {
        return Err(src.bad(1, "the window has at most four dimensions"));
    }
    let nb = [
        a.ty.type_size(),
        p.nb1 as usize,
        p.nb2 as usize,
        p.nb3 as usize,
        0,
    ];
    let span = span_bytes(a.ty, &b.ne, &nb).unwrap_or(usize::MAX);
    let nbytes = span_bytes(a.ty, &a.ne, &a.nb).unwrap_or(0);
    if b.nelements() > 0 && (p.offset as usize).saturating_add(span) > nbytes {
        return Err(src.bad(
            1,
            format!(
                "seen through strides [{}, {}, {}] at offset {} it reaches byte {}, past the end \
                 of a ({nbytes} bytes)",
                p.nb1,
                p.nb2,
                p.nb3,
                p.offset,
                p.offset as usize + span
            ),
        ));
    }
    Ok(())
}

/// ACC: a copy of `a` (F32, contiguous) with `b` (F32) added over the window.
pub(crate) struct Acc;

impl OpSpec for Acc {
    type Params = WindowParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &WindowParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        src.want_type(1, &[Type::F32])?;
        check_window(src, p)?;
        like_a(src)
    }
}

/// SET: a copy of `a` (contiguous, not quantized) with `b` (same type) written over the window.
pub(crate) struct Set;

impl OpSpec for Set {
    type Params = WindowParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &WindowParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        if a.ty.is_quantized() {
            return Err(src.bad(0, "its type must not be quantized"));
        }
        if b.ty != a.ty {
            return Err(src.bad(1, format!("its type must be a's {}", a.ty)));
        }
        if p.offset >= 1 << 30 {
            return Err(src.err(format!("offset = {}; it must be below 2^30", p.offset)));
        }
        check_window(src, p)?;
        like_a(src)
    }
}

/// REPEAT_BACK: `a` (F32, packed rows, at most 4-D) summed over the tiles of the requested shape
/// (every dimension of `a` a multiple of it): the inverse of REPEAT's broadcast.
pub(crate) struct RepeatBack;

impl OpSpec for RepeatBack {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        four_dims(src, 0)?;
        let a = src.get(0);
        let ne = src.requested()?;
        let tiles = (0..5).all(|d| {
            if ne[d] == 0 {
                a.ne[d] == 0
            } else {
                a.ne[d] % ne[d] == 0
            }
        });
        if !tiles || ne[4] != 1 {
            return Err(src.bad(0, format!("it is not a whole tiling of the shape {ne:?}")));
        }
        if !a.rows_packed() {
            return Err(src.bad(0, "its rows must be packed"));
        }
        Ok(Shape::New { ty: a.ty, ne })
    }
}

/// DIAG: a row vector `a` `[n, 1, ne2, ne3]` (F32) as diagonal matrices `[n, n, ne2, ne3]`.
pub(crate) struct Diag;

impl OpSpec for Diag {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_type(0, &[Type::F32])?;
        if a.ne[1] != 1 {
            return Err(src.bad(0, "its ne1 must be 1"));
        }
        Ok(Shape::New {
            ty: a.ty,
            ne: [a.ne[0], a.ne[0], a.ne[2], a.ne[3], a.ne[4]],
        })
    }
}

/// DIAG_MASK_INF and DIAG_MASK_ZERO's parameter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct DiagMaskParams {
    /// Columns `i > n_past + row` are masked.
    pub n_past: i32,
}

/// DIAG_MASK_INF / DIAG_MASK_ZERO: `a` (F32, packed rows) with `a[i, j, …]` replaced by −∞ or
/// 0 where `i > n_past + j`.
pub(crate) struct DiagMask;

impl OpSpec for DiagMask {
    type Params = DiagMaskParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &DiagMaskParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        if p.n_past < 0 {
            return Err(src.err(format!("n_past = {}; it must be >= 0", p.n_past)));
        }
        if !src.get(0).rows_packed() {
            return Err(src.bad(0, "its rows must be packed"));
        }
        like_a(src)
    }
}

/// CLAMP's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ClampParams {
    /// Lower bound.
    pub min: f32,
    /// Upper bound.
    pub max: f32,
}

/// CLAMP: `max(min(x, hi), lo)` element-wise on F32 or F16 with packed rows.
pub(crate) struct Clamp;

impl OpSpec for Clamp {
    type Params = ClampParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &ClampParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32, Type::F16])?;
        if !src.get(0).rows_packed() {
            return Err(src.bad(0, "its rows must be packed"));
        }
        like_a(src)
    }
}

/// LEAKY_RELU's parameter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct LeakyReluParams {
    /// The slope for negative inputs.
    pub negative_slope: f32,
}

/// LEAKY_RELU: `max(x, 0) + slope·min(x, 0)` element-wise on F32 or F16 with packed rows.
pub(crate) struct LeakyRelu;

impl OpSpec for LeakyRelu {
    type Params = LeakyReluParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &LeakyReluParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32, Type::F16])?;
        if !src.get(0).rows_packed() {
            return Err(src.bad(0, "its rows must be packed"));
        }
        like_a(src)
    }
}

/// PAD's parameters: padding before (`lp`) and after (`rp`) each of the four dimensions, and
/// whether the padding wraps around (circular) instead of being zeros.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PadParams {
    /// Elements before dimension 0.
    pub lp0: i32,
    /// Elements after dimension 0.
    pub rp0: i32,
    /// Elements before dimension 1.
    pub lp1: i32,
    /// Elements after dimension 1.
    pub rp1: i32,
    /// Elements before dimension 2.
    pub lp2: i32,
    /// Elements after dimension 2.
    pub rp2: i32,
    /// Elements before dimension 3.
    pub lp3: i32,
    /// Elements after dimension 3.
    pub rp3: i32,
    /// 1: the padding repeats the tensor periodically; 0: zeros.
    pub circular: i32,
}

impl PadParams {
    /// (before, after) per dimension.
    pub fn pads(&self) -> [(i32, i32); 4] {
        [
            (self.lp0, self.rp0),
            (self.lp1, self.rp1),
            (self.lp2, self.rp2),
            (self.lp3, self.rp3),
        ]
    }
}

/// PAD: `a` (F32, at most 4-D) padded with zeros (or periodically, circular) on each side of
/// each dimension: the result's `ne[d] = a.ne[d] + lp_d + rp_d`.
pub(crate) struct Pad;

impl OpSpec for Pad {
    type Params = PadParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &PadParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        four_dims(src, 0)?;
        let a = src.get(0);
        let mut ne = a.ne;
        for (d, (l, r)) in p.pads().into_iter().enumerate() {
            if l < 0 || r < 0 {
                return Err(src.err(format!(
                    "padding ({l}, {r}) of dimension {d} must not be negative"
                )));
            }
            if p.circular != 0 && (l > 0 || r > 0) && a.ne[d] == 0 {
                return Err(src.bad(0, format!("circular padding of its empty dimension {d}")));
            }
            ne[d] += l as i64 + r as i64;
        }
        Ok(Shape::New { ty: a.ty, ne })
    }
}

/// PAD_REFLECT_1D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PadReflectParams {
    /// Elements mirrored before each row.
    pub p0: i32,
    /// Elements mirrored after each row.
    pub p1: i32,
}

/// PAD_REFLECT_1D: each row of `a` (F32, contiguous) extended by its mirror image (without
/// repeating the edge): `[a.ne0 + p0 + p1, …]`, `0 <= p0, p1 < a.ne0`.
pub(crate) struct PadReflect1d;

impl OpSpec for PadReflect1d {
    type Params = PadReflectParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &PadReflectParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        let a = src.get(0);
        if !a.is_contiguous() {
            return Err(src.bad(0, "it must be contiguous"));
        }
        for (name, v) in [("p0", p.p0), ("p1", p.p1)] {
            if v < 0 || v as i64 >= a.ne[0] {
                return Err(src.err(format!(
                    "{name} = {v}; it must be 0 to a.ne0 - 1 = {}",
                    a.ne[0] - 1
                )));
            }
        }
        let mut ne = a.ne;
        ne[0] += p.p0 as i64 + p.p1 as i64;
        Ok(Shape::New { ty: a.ty, ne })
    }
}

/// ROLL's parameters: the shift of each dimension.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct RollParams {
    /// Elements each dimension is rotated by (`result[i] = a[i − shift]`, wrapping).
    pub shift: [i32; 4],
}

/// ROLL: `a` (F32, packed rows, at most 4-D) rotated along each dimension, `|shift_d| <
/// a.ne_d`.
pub(crate) struct Roll;

impl OpSpec for Roll {
    type Params = RollParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &RollParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        four_dims(src, 0)?;
        let a = src.get(0);
        if !a.rows_packed() {
            return Err(src.bad(0, "its rows must be packed"));
        }
        for (d, &s) in p.shift.iter().enumerate() {
            if (s as i64).abs() >= a.ne[d].max(1) && s != 0 {
                return Err(src.err(format!(
                    "shift{d} = {s}; its magnitude must be below a.ne{d} = {}",
                    a.ne[d]
                )));
            }
        }
        like_a(src)
    }
}

/// ARANGE's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ArangeParams {
    /// The first value.
    pub start: f32,
    /// The bound (not reached).
    pub stop: f32,
    /// The increment.
    pub step: f32,
}

impl ArangeParams {
    /// The number of values, `ceil((stop − start) / step)` (GGML's count, in f32).
    pub fn steps(&self) -> Option<i64> {
        let n = ((self.stop - self.start) / self.step).ceil();
        (n.is_finite() && n >= 0.0 && n < (1u64 << 40) as f32).then_some(n as i64)
    }
}

/// ARANGE: `start + step·i` for `i` in `0..ceil((stop − start)/step)`, F32 (no operands).
pub(crate) struct Arange;

impl OpSpec for Arange {
    type Params = ArangeParams;
    const SLOTS: &'static [Slot] = &[];
    fn shape(src: &Srcs<'_>, p: &ArangeParams) -> Result<Shape> {
        let finite = p.start.is_finite() && p.stop.is_finite() && p.step.is_finite();
        if !finite || p.stop <= p.start || p.step <= 0.0 {
            return Err(src.err(format!(
                "start = {}, stop = {}, step = {}: they must be finite with stop > start and \
                 step > 0",
                p.start, p.stop, p.step
            )));
        }
        let n = p
            .steps()
            .ok_or_else(|| src.err("the range has too many values"))?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [n, 1, 1, 1, 1],
        })
    }
}

/// TIMESTEP_EMBEDDING's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct TimestepParams {
    /// Length of each embedding.
    pub dim: i32,
    /// The longest period of the sinusoids.
    pub max_period: i32,
}

/// TIMESTEP_EMBEDDING: for each of the `n` timesteps `t` (F32 vector), `[cos(t·f_j)…,
/// sin(t·f_j)…]` with `f_j = exp(−ln(max_period)·j/half)`, `half = dim/2` (a last 0 when
/// `dim` is odd): F32 `[dim, n]`.
pub(crate) struct TimestepEmbedding;

impl OpSpec for TimestepEmbedding {
    type Params = TimestepParams;
    const SLOTS: &'static [Slot] = &[req("timesteps")];
    fn shape(src: &Srcs<'_>, p: &TimestepParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        let t = src.get(0);
        if t.ne[1..].iter().any(|&n| n != 1) || !t.rows_packed() {
            return Err(src.bad(0, "it must be a packed vector"));
        }
        if p.dim < 0 || p.max_period <= 0 {
            return Err(src.err(format!(
                "dim = {}, max_period = {}: dim must be >= 0 and max_period > 0",
                p.dim, p.max_period
            )));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [p.dim as i64, t.ne[0], 1, 1, 1],
        })
    }
}

/// Which triangle TRI keeps (`enum ggml_tri_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TriType {
    /// Column ≥ row: the upper triangle with the diagonal.
    UpperDiag = 0,
    /// Column > row.
    Upper = 1,
    /// Column ≤ row: the lower triangle with the diagonal.
    LowerDiag = 2,
    /// Column < row.
    Lower = 3,
}

impl TriType {
    /// The type with GGML value `v`.
    pub fn from_i32(v: i32) -> Option<TriType> {
        [
            TriType::UpperDiag,
            TriType::Upper,
            TriType::LowerDiag,
            TriType::Lower,
        ]
        .into_iter()
        .find(|t| *t as i32 == v)
    }

    /// Whether element (column `i`, row `r`) is kept.
    pub fn keeps(self, i: usize, r: usize) -> bool {
        match self {
            TriType::UpperDiag => i >= r,
            TriType::Upper => i > r,
            TriType::LowerDiag => i <= r,
            TriType::Lower => i < r,
        }
    }
}

/// TRI's parameter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct TriParams {
    /// The [`TriType`] as its GGML value.
    pub tri_type: i32,
}

/// TRI: square matrices `a` (F32, contiguous) with the elements outside the chosen triangle set
/// to 0.
pub(crate) struct Tri;

impl OpSpec for Tri {
    type Params = TriParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &TriParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        let a = src.get(0);
        if !a.is_contiguous() || a.ne[0] != a.ne[1] {
            return Err(src.bad(0, "it must be contiguous square matrices (ne0 = ne1)"));
        }
        if TriType::from_i32(p.tri_type).is_none() {
            return Err(src.err(format!("type = {}; it must be 0 to 3", p.tri_type)));
        }
        like_a(src)
    }
}

/// FILL's parameter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct FillParams {
    /// The value every element gets.
    pub c: f32,
}

/// FILL: a tensor of `a`'s type (F32 or F16, contiguous) and shape with every element `c`.
pub(crate) struct Fill;

impl OpSpec for Fill {
    type Params = FillParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &FillParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32, Type::F16])?;
        if !src.get(0).is_contiguous() {
            return Err(src.bad(0, "it must be contiguous"));
        }
        like_a(src)
    }
}

/// CROSS_ENTROPY_LOSS: `−(1/rows)·Σ_rows Σ_i b_i·log softmax(a)_i` for logits `a` and
/// target probabilities `b` (F32, same shape, packed rows): one F32 element.
pub(crate) struct CrossEntropyLoss;

impl OpSpec for CrossEntropyLoss {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        src.want_type(1, &[Type::F32])?;
        src.want_same_shape(0, 1)?;
        if !src.get(0).rows_packed() || !src.get(1).rows_packed() {
            return Err(src.err("rows of a and b must be packed"));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [1; 5],
        })
    }
}

/// Converts a byte stride or offset to the `i32` GGML stores, or an `Err` naming it.
fn window_field(op: &str, name: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        crate::Error::invalid(format!(
            "{op}: {name} = {v}; it must fit an i32 (GGML's storage)"
        ))
    })
}

impl Context {
    /// `ggml_add_id`: `a[:, i1, i2] + b[:, ids[i1, i2]]` (a bias row per selected expert).
    /// `a` F32 `[n, n_used, n_tokens]`, `b` F32 `[n, n_expert]`, `ids` I32
    /// `[n_used, n_tokens]`; the result has `a`'s shape. An id outside `0..n_expert` makes the
    /// computation fail with an error naming the node and the id (GGML asserts).
    pub fn add_id(&self, a: &Tensor, b: &Tensor, ids: &Tensor) -> Result<Tensor> {
        self.build::<AddId>(
            Op::AddId,
            &[Some(a), Some(b), Some(ids)],
            NoParams {},
            false,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn window_op<S: OpSpec<Params = WindowParams>>(
        &self,
        op: Op,
        a: &Tensor,
        b: &Tensor,
        nb: [usize; 3],
        offset: usize,
        inplace: bool,
    ) -> Result<Tensor> {
        let name = op.name();
        let p = WindowParams {
            nb1: window_field(name, "nb1", nb[0])?,
            nb2: window_field(name, "nb2", nb[1])?,
            nb3: window_field(name, "nb3", nb[2])?,
            offset: window_field(name, "offset", offset)?,
            inplace: inplace as i32,
        };
        self.build::<S>(op, &[Some(a), Some(b)], p, inplace)
    }

    /// `ggml_acc`: a copy of `a` (F32, contiguous) with `b` (F32) added to the window of `a`
    /// seen with byte strides `nb1, nb2, nb3` from byte `offset`; `a`'s shape. The window must
    /// lie inside `a`.
    pub fn acc(
        &self,
        a: &Tensor,
        b: &Tensor,
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.window_op::<Acc>(Op::Acc, a, b, [nb1, nb2, nb3], offset, false)
    }

    /// `ggml_acc_inplace`: as [`Context::acc`], adding into `a`'s memory.
    pub fn acc_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.window_op::<Acc>(Op::Acc, a, b, [nb1, nb2, nb3], offset, true)
    }

    /// `ggml_set`: a copy of `a` (contiguous, not quantized) with `b` (same type) written into
    /// the window of `a` seen with byte strides `nb1, nb2, nb3` from byte `offset`
    /// (`offset < 2^30`); `a`'s shape. The window must lie inside `a`.
    pub fn set(
        &self,
        a: &Tensor,
        b: &Tensor,
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.window_op::<Set>(Op::Set, a, b, [nb1, nb2, nb3], offset, false)
    }

    /// `ggml_set_inplace`: as [`Context::set`], writing into `a`'s memory.
    pub fn set_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<Tensor> {
        self.window_op::<Set>(Op::Set, a, b, [nb1, nb2, nb3], offset, true)
    }

    /// `ggml_set_1d`: [`Context::set`] with `a`'s own strides (`b` written from byte `offset`).
    pub fn set_1d(&self, a: &Tensor, b: &Tensor, offset: usize) -> Result<Tensor> {
        let nb = a.nb();
        self.set(a, b, nb[1], nb[2], nb[3], offset)
    }

    /// `ggml_set_1d_inplace`.
    pub fn set_1d_inplace(&self, a: &Tensor, b: &Tensor, offset: usize) -> Result<Tensor> {
        let nb = a.nb();
        self.set_inplace(a, b, nb[1], nb[2], nb[3], offset)
    }

    /// `ggml_set_2d`: [`Context::set`] with row stride `nb1` and `a`'s higher strides.
    pub fn set_2d(&self, a: &Tensor, b: &Tensor, nb1: usize, offset: usize) -> Result<Tensor> {
        let nb = a.nb();
        self.set(a, b, nb1, nb[2], nb[3], offset)
    }

    /// `ggml_set_2d_inplace`.
    pub fn set_2d_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        nb1: usize,
        offset: usize,
    ) -> Result<Tensor> {
        let nb = a.nb();
        self.set_inplace(a, b, nb1, nb[2], nb[3], offset)
    }

    /// `ggml_repeat_back`: `a` summed back onto `b`'s shape — `result[k] = Σ a[k + t·b.ne]`
    /// over every tile `t` (each dimension of `a` a multiple of `b`'s); F32, at most 4-D.
    pub fn repeat_back(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build_shaped::<RepeatBack>(Op::RepeatBack, &[Some(a)], NoParams {}, b.ne())
    }

    /// `ggml_diag`: each row vector of `a` (F32 `[n, 1, ne2, ne3]`) as a diagonal matrix:
    /// `[n, n, ne2, ne3]`, zeros off the diagonal.
    pub fn diag(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Diag>(Op::Diag, &[Some(a)], NoParams {}, false)
    }

    fn diag_mask(&self, op: Op, a: &Tensor, n_past: i32, inplace: bool) -> Result<Tensor> {
        self.build::<DiagMask>(op, &[Some(a)], DiagMaskParams { n_past }, inplace)
    }

    /// `ggml_diag_mask_inf`: `a` (F32) with `a[i, j, …] = −∞` where column `i > n_past + j`
    /// (the causal mask); `a`'s shape.
    pub fn diag_mask_inf(&self, a: &Tensor, n_past: i32) -> Result<Tensor> {
        self.diag_mask(Op::DiagMaskInf, a, n_past, false)
    }

    /// `ggml_diag_mask_inf_inplace`.
    pub fn diag_mask_inf_inplace(&self, a: &Tensor, n_past: i32) -> Result<Tensor> {
        self.diag_mask(Op::DiagMaskInf, a, n_past, true)
    }

    /// `ggml_diag_mask_zero`: as [`Context::diag_mask_inf`] with 0 instead of −∞.
    pub fn diag_mask_zero(&self, a: &Tensor, n_past: i32) -> Result<Tensor> {
        self.diag_mask(Op::DiagMaskZero, a, n_past, false)
    }

    /// `ggml_diag_mask_zero_inplace`.
    pub fn diag_mask_zero_inplace(&self, a: &Tensor, n_past: i32) -> Result<Tensor> {
        self.diag_mask(Op::DiagMaskZero, a, n_past, true)
    }

    /// `ggml_clamp`: `max(min(x, max), min)` element-wise (a NaN becomes `max`, as GGML's
    /// kernel gives); F32 or F16 with packed rows, `a`'s shape.
    pub fn clamp(&self, a: &Tensor, min: f32, max: f32) -> Result<Tensor> {
        self.build::<Clamp>(Op::Clamp, &[Some(a)], ClampParams { min, max }, false)
    }

    /// `ggml_clamp_inplace`: as [`Context::clamp`], writing into `a`'s memory.
    pub fn clamp_inplace(&self, a: &Tensor, min: f32, max: f32) -> Result<Tensor> {
        self.build::<Clamp>(Op::Clamp, &[Some(a)], ClampParams { min, max }, true)
    }

    /// `ggml_leaky_relu`: `x` where positive, `negative_slope·x` where negative (F32, F16);
    /// with `inplace` the result is written into `a`'s memory (GGML's signature).
    pub fn leaky_relu(&self, a: &Tensor, negative_slope: f32, inplace: bool) -> Result<Tensor> {
        let p = LeakyReluParams { negative_slope };
        self.build::<LeakyRelu>(Op::LeakyRelu, &[Some(a)], p, inplace)
    }

    /// `ggml_pad`: `a` (F32) padded with zeros after each dimension: `[ne0 + p0, ne1 + p1,
    /// ne2 + p2, ne3 + p3]`.
    pub fn pad(&self, a: &Tensor, p0: i32, p1: i32, p2: i32, p3: i32) -> Result<Tensor> {
        self.pad_ext(a, 0, p0, 0, p1, 0, p2, 0, p3)
    }

    /// `ggml_pad_circular`: as [`Context::pad`], the padding repeating `a` periodically.
    pub fn pad_circular(&self, a: &Tensor, p0: i32, p1: i32, p2: i32, p3: i32) -> Result<Tensor> {
        self.pad_ext_circular(a, 0, p0, 0, p1, 0, p2, 0, p3)
    }

    #[allow(clippy::too_many_arguments)]
    fn pad_impl(&self, a: &Tensor, pads: [i32; 8], circular: bool) -> Result<Tensor> {
        let [lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3] = pads;
        let p = PadParams {
            lp0,
            rp0,
            lp1,
            rp1,
            lp2,
            rp2,
            lp3,
            rp3,
            circular: circular as i32,
        };
        self.build::<Pad>(Op::Pad, &[Some(a)], p, false)
    }

    /// `ggml_pad_ext`: `a` (F32) with `lp_d` zeros before and `rp_d` after dimension `d`:
    /// `ne[d] + lp_d + rp_d`. Paddings must not be negative.
    #[allow(clippy::too_many_arguments)]
    pub fn pad_ext(
        &self,
        a: &Tensor,
        lp0: i32,
        rp0: i32,
        lp1: i32,
        rp1: i32,
        lp2: i32,
        rp2: i32,
        lp3: i32,
        rp3: i32,
    ) -> Result<Tensor> {
        self.pad_impl(a, [lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3], false)
    }

    /// `ggml_pad_ext_circular`: as [`Context::pad_ext`], the padding repeating `a`
    /// periodically (any padding length: indices wrap modulo the dimension, where GGML's
    /// kernel only handles paddings up to the dimension's length).
    #[allow(clippy::too_many_arguments)]
    pub fn pad_ext_circular(
        &self,
        a: &Tensor,
        lp0: i32,
        rp0: i32,
        lp1: i32,
        rp1: i32,
        lp2: i32,
        rp2: i32,
        lp3: i32,
        rp3: i32,
    ) -> Result<Tensor> {
        self.pad_impl(a, [lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3], true)
    }

    /// `ggml_pad_reflect_1d`: each row of `a` (F32, contiguous) extended by `p0` mirrored
    /// elements before and `p1` after (the edge element not repeated): `ne0 + p0 + p1`;
    /// `0 <= p0, p1 < ne0`.
    pub fn pad_reflect_1d(&self, a: &Tensor, p0: i32, p1: i32) -> Result<Tensor> {
        let p = PadReflectParams { p0, p1 };
        self.build::<PadReflect1d>(Op::PadReflect1d, &[Some(a)], p, false)
    }

    /// `ggml_roll`: `a` (F32, packed rows) rotated: `result[i0 + s0, i1 + s1, …] = a[i0, i1,
    /// …]` with indices wrapping; `|s_d| < ne_d`.
    pub fn roll(
        &self,
        a: &Tensor,
        shift0: i32,
        shift1: i32,
        shift2: i32,
        shift3: i32,
    ) -> Result<Tensor> {
        let p = RollParams {
            shift: [shift0, shift1, shift2, shift3],
        };
        self.build::<Roll>(Op::Roll, &[Some(a)], p, false)
    }

    /// `ggml_arange`: the F32 vector `start, start + step, …` below `stop`
    /// (`ceil((stop − start)/step)` values; `stop > start`, `step > 0`).
    pub fn arange(&self, start: f32, stop: f32, step: f32) -> Result<Tensor> {
        let p = ArangeParams { start, stop, step };
        self.build::<Arange>(Op::Arange, &[], p, false)
    }

    /// `ggml_timestep_embedding`: sinusoidal embeddings of the timesteps (F32 vector of `n`):
    /// F32 `[dim, n]`, row `t` = `[cos(t·f_0), …, cos(t·f_{h−1}), sin(t·f_0), …]` with
    /// `h = dim/2`, `f_j = exp(−ln(max_period)·j/h)`, and a trailing 0 when `dim` is odd.
    pub fn timestep_embedding(
        &self,
        timesteps: &Tensor,
        dim: i32,
        max_period: i32,
    ) -> Result<Tensor> {
        let p = TimestepParams { dim, max_period };
        self.build::<TimestepEmbedding>(Op::TimestepEmbedding, &[Some(timesteps)], p, false)
    }

    /// `ggml_tri`: square matrices `a` (F32, contiguous) keeping the triangle `tri_type` names
    /// (column vs row index) and zeros elsewhere.
    pub fn tri(&self, a: &Tensor, tri_type: TriType) -> Result<Tensor> {
        let p = TriParams {
            tri_type: tri_type as i32,
        };
        self.build::<Tri>(Op::Tri, &[Some(a)], p, false)
    }

    /// `ggml_fill`: a tensor of `a`'s type (F32, F16; contiguous) and shape with every element
    /// `c` (`a`'s values are not read).
    pub fn fill(&self, a: &Tensor, c: f32) -> Result<Tensor> {
        self.build::<Fill>(Op::Fill, &[Some(a)], FillParams { c }, false)
    }

    /// `ggml_fill_inplace`: as [`Context::fill`], writing into `a`'s memory.
    pub fn fill_inplace(&self, a: &Tensor, c: f32) -> Result<Tensor> {
        self.build::<Fill>(Op::Fill, &[Some(a)], FillParams { c }, true)
    }

    /// `ggml_cross_entropy_loss`: `−(1/rows)·Σ_rows Σ_i b_i·log softmax(a)_i` for logits `a`
    /// and target probabilities `b` (F32, same shape): one F32 element.
    pub fn cross_entropy_loss(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<CrossEntropyLoss>(
            Op::CrossEntropyLoss,
            &[Some(a), Some(b)],
            NoParams {},
            false,
        )
    }
}
