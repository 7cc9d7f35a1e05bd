//! Convolutions: IM2COL, IM2COL_3D, COL2IM_1D, CONV_TRANSPOSE_1D, CONV_2D, CONV_3D,
//! CONV_2D_DW, CONV_TRANSPOSE_2D, and the builders GGML composes from IM2COL, MUL_MAT and
//! reshapes (`conv_1d`, `conv_2d`, `conv_2d_dw`, `conv_3d`, …), which make the same nodes in
//! the same order as GGML's.
//!
//! Shapes follow GGML: widths in `ne0`, then heights, channels, batch (`[W, H, C, N]`), and
//! kernels `[KW, KH, IC, OC]`. Every operand is at most 4-D (`ne4 == 1`). The output size of
//! an axis is `(in + 2·p − d·(k − 1) − 1) / s + 1` (integer division toward zero), which must
//! be positive; strides and dilations must be positive (GGML divides by them unchecked).

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::spec::{req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// IM2COL's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Im2colParams {
    /// Stride along the width.
    pub s0: i32,
    /// Stride along the height (2-D only).
    pub s1: i32,
    /// Padding along the width.
    pub p0: i32,
    /// Padding along the height (2-D only).
    pub p1: i32,
    /// Dilation along the width.
    pub d0: i32,
    /// Dilation along the height (2-D only).
    pub d1: i32,
    /// 1 for the 2-D form, 0 for the 1-D form.
    pub is_2d: i32,
}

/// IM2COL_3D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Im2col3dParams {
    /// Stride along the width.
    pub s0: i32,
    /// Stride along the height.
    pub s1: i32,
    /// Stride along the depth.
    pub s2: i32,
    /// Padding along the width.
    pub p0: i32,
    /// Padding along the height.
    pub p1: i32,
    /// Padding along the depth.
    pub p2: i32,
    /// Dilation along the width.
    pub d0: i32,
    /// Dilation along the height.
    pub d1: i32,
    /// Dilation along the depth.
    pub d2: i32,
    /// Input channels (dimension 3 of both operands is `N·IC` and `OC·IC`).
    pub ic: i32,
}

/// COL2IM_1D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Col2im1dParams {
    /// Stride.
    pub s0: i32,
    /// Output channels.
    pub oc: i32,
    /// Padding cropped from each end.
    pub p0: i32,
}

/// CONV_TRANSPOSE_1D's parameters (GGML only accepts `p0 == 0`, `d0 == 1`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ConvTranspose1dParams {
    /// Stride.
    pub s0: i32,
    /// Padding (must be 0).
    pub p0: i32,
    /// Dilation (must be 1).
    pub d0: i32,
}

/// The parameters of CONV_2D and CONV_2D_DW.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Conv2dParams {
    /// Stride along the width.
    pub s0: i32,
    /// Stride along the height.
    pub s1: i32,
    /// Padding along the width.
    pub p0: i32,
    /// Padding along the height.
    pub p1: i32,
    /// Dilation along the width.
    pub d0: i32,
    /// Dilation along the height.
    pub d1: i32,
}

/// CONV_3D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Conv3dParams {
    /// Stride along the width.
    pub s0: i32,
    /// Stride along the height.
    pub s1: i32,
    /// Stride along the depth.
    pub s2: i32,
    /// Padding along the width.
    pub p0: i32,
    /// Padding along the height.
    pub p1: i32,
    /// Padding along the depth.
    pub p2: i32,
    /// Dilation along the width.
    pub d0: i32,
    /// Dilation along the height.
    pub d1: i32,
    /// Dilation along the depth.
    pub d2: i32,
    /// Input channels.
    pub c: i32,
    /// Batch size.
    pub n: i32,
    /// Output channels.
    pub oc: i32,
}

/// CONV_TRANSPOSE_2D's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ConvTranspose2dParams {
    /// Stride along both axes.
    pub stride: i32,
}

/// `Err` unless operand `i` is at most 4-D.
pub(crate) fn want_4d(src: &Srcs<'_>, i: usize) -> Result<()> {
    if src.get(i).ne[4] != 1 {
        return Err(src.bad(i, "it must have at most 4 dimensions (ne4 = 1)"));
    }
    Ok(())
}

/// `Err` unless parameter `name` is positive.
pub(crate) fn want_positive(src: &Srcs<'_>, name: &str, v: i32) -> Result<()> {
    if v <= 0 {
        return Err(src.err(format!("{name} = {v}; it must be positive")));
    }
    Ok(())
}

/// The output size of a convolution axis (GGML's `ggml_calc_conv_output_size`), which must be
/// positive: input `ins` along `axis`, kernel `ks`, stride `s`, padding `p`, dilation `d`.
fn conv_out(src: &Srcs<'_>, axis: usize, ins: i64, ks: i64, s: i32, p: i32, d: i32) -> Result<i64> {
    want_positive(src, &format!("s{axis}"), s)?;
    want_positive(src, &format!("d{axis}"), d)?;
    let out = (ins as i128 + 2 * p as i128 - d as i128 * (ks as i128 - 1) - 1) / s as i128 + 1;
    match i64::try_from(out) {
        Ok(o) if o > 0 => Ok(o),
        _ => Err(src.bad(
            1,
            format!(
                "it is too small for the kernel along axis {axis}: input {ins}, kernel {ks}, \
                 stride {s}, padding {p}, dilation {d} give {out} outputs"
            ),
        )),
    }
}

/// The product of `dims`, `Err` when it overflows.
fn product(src: &Srcs<'_>, dims: &[i64]) -> Result<i64> {
    dims.iter()
        .try_fold(1i64, |acc, &x| acc.checked_mul(x))
        .ok_or_else(|| src.err(format!("the patch size {dims:?} overflows")))
}

/// IM2COL's result types.
const IM2COL_TYPES: &[Type] = &[Type::F16, Type::F32];

/// IM2COL: the patches of image `b` under kernel `a` (only its shape is used) laid out as
/// rows. 2-D: `a [KW, KH, IC, OC]`, `b [W, H, IC, N]` give `[IC·KH·KW, OW, OH, N]`; 1-D:
/// `a [K, IC, OC]`, `b [W, IC, N]` give `[IC·K, OW, N]`. F16 or F32, as the caller asks.
pub(crate) struct Im2col;

impl OpSpec for Im2col {
    type Params = Im2colParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &Im2colParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(1)?;
        want_4d(src, 0)?;
        want_4d(src, 1)?;
        let is_2d = match p.is_2d {
            0 => false,
            1 => true,
            v => return Err(src.err(format!("is_2D = {v}; it must be 0 or 1"))),
        };
        if is_2d && a.ne[2] != b.ne[2] {
            return Err(src.bad(1, format!("its ne2 (channels) must be a's {}", a.ne[2])));
        }
        if !is_2d && (b.ne[1] != a.ne[1] || b.ne[3] != 1) {
            return Err(src.bad(
                1,
                format!(
                    "in 1-D its ne1 (channels) must be a's {} and its ne3 must be 1",
                    a.ne[1]
                ),
            ));
        }
        let ow = conv_out(src, 0, b.ne[0], a.ne[0], p.s0, p.p0, p.d0)?;
        let ne = if is_2d {
            let oh = conv_out(src, 1, b.ne[1], a.ne[1], p.s1, p.p1, p.d1)?;
            [product(src, &a.ne[..3])?, ow, oh, b.ne[3], 1]
        } else {
            [product(src, &a.ne[..2])?, ow, b.ne[2], 1, 1]
        };
        Ok(Shape::Typed {
            types: IM2COL_TYPES,
            ne,
        })
    }
}

/// IM2COL_3D: `a [KW, KH, KD, OC·IC]` (its shape only), `b [W, H, D, N·IC]` give the patches
/// `[IC·KD·KH·KW, OW, OH, OD·N]`, F16 or F32 as the caller asks.
pub(crate) struct Im2col3d;

impl OpSpec for Im2col3d {
    type Params = Im2col3dParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &Im2col3dParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(1)?;
        want_4d(src, 0)?;
        want_4d(src, 1)?;
        want_positive(src, "IC", p.ic)?;
        // GGML takes N = ne3 / IC, rounding down: channels past N·IC are not read, and an
        // input with fewer than IC channels gives an empty result.
        let ic = p.ic as i64;
        let ow = conv_out(src, 0, b.ne[0], a.ne[0], p.s0, p.p0, p.d0)?;
        let oh = conv_out(src, 1, b.ne[1], a.ne[1], p.s1, p.p1, p.d1)?;
        let od = conv_out(src, 2, b.ne[2], a.ne[2], p.s2, p.p2, p.d2)?;
        let n = b.ne[3] / ic;
        let ne = [
            product(src, &[a.ne[0], a.ne[1], a.ne[2], ic])?,
            ow,
            oh,
            product(src, &[od, n])?,
            1,
        ];
        Ok(Shape::Typed {
            types: IM2COL_TYPES,
            ne,
        })
    }
}

/// COL2IM_1D: columns `a [K·OC, T]` (contiguous F32/F16/BF16 matrix) scatter-added into the
/// signal `[(T − 1)·s0 + K − 2·p0, OC]` of `a`'s type.
pub(crate) struct Col2im1d;

impl OpSpec for Col2im1d {
    type Params = Col2im1dParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &Col2im1dParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_float(0)?;
        if a.ne[2..].iter().any(|&n| n != 1) || !a.is_contiguous() {
            return Err(src.bad(0, "it must be a contiguous matrix"));
        }
        want_positive(src, "s0", p.s0)?;
        want_positive(src, "oc", p.oc)?;
        if p.p0 < 0 {
            return Err(src.err(format!("p0 = {}; it must not be negative", p.p0)));
        }
        let oc = p.oc as i64;
        let k = a.ne[0] / oc;
        let t_out = (a.ne[1] as i128 - 1) * p.s0 as i128 + k as i128 - 2 * p.p0 as i128;
        if a.ne[0] % oc != 0 || k == 0 {
            return Err(src.bad(
                0,
                format!("its ne0 must be a positive multiple of oc = {oc}"),
            ));
        }
        let Some(t_out) = i64::try_from(t_out).ok().filter(|&t| t > 0) else {
            return Err(src.bad(0, format!("it gives {t_out} output samples")));
        };
        Ok(Shape::New {
            ty: a.ty,
            ne: [t_out, oc, 1, 1, 1],
        })
    }
}

/// CONV_TRANSPOSE_1D: kernel `a [K, OC, IC]`, signal `b [L, IC]` (a matrix) give F32
/// `[(L − 1)·s0 + K, OC]`.
pub(crate) struct ConvTranspose1d;

impl OpSpec for ConvTranspose1d {
    type Params = ConvTranspose1dParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &ConvTranspose1dParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(0)?;
        src.want_float(1)?;
        want_4d(src, 0)?;
        if b.ne[2..].iter().any(|&n| n != 1) {
            return Err(src.bad(1, "it must be a matrix"));
        }
        if a.ne[2] != b.ne[1] || a.ne[3] != 1 {
            return Err(src.bad(
                1,
                format!(
                    "its ne1 (channels) must be a's ne2 {}, and a's ne3 must be 1",
                    a.ne[2]
                ),
            ));
        }
        want_positive(src, "s0", p.s0)?;
        if p.p0 != 0 || p.d0 != 1 {
            return Err(src.err(format!(
                "p0 = {}, d0 = {}; only p0 = 0 and d0 = 1 are supported (as in GGML)",
                p.p0, p.d0
            )));
        }
        let len = (b.ne[0] as i128 - 1) * p.s0 as i128 + a.ne[0] as i128;
        let Some(len) = i64::try_from(len).ok().filter(|&l| l >= 0) else {
            return Err(src.bad(1, format!("it gives {len} output samples")));
        };
        Ok(Shape::New {
            ty: Type::F32,
            ne: [len, a.ne[1], 1, 1, 1],
        })
    }
}

/// CONV_2D: kernel `a [KW, KH, IC, OC]`, input `b [W, H, IC, N]` give `[OW, OH, OC, N]` of
/// `b`'s type.
pub(crate) struct Conv2d;

impl OpSpec for Conv2d {
    type Params = Conv2dParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &Conv2dParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(0)?;
        src.want_float(1)?;
        want_4d(src, 0)?;
        want_4d(src, 1)?;
        if a.ne[2] != b.ne[2] {
            return Err(src.bad(1, format!("its ne2 (channels) must be a's {}", a.ne[2])));
        }
        let ow = conv_out(src, 0, b.ne[0], a.ne[0], p.s0, p.p0, p.d0)?;
        let oh = conv_out(src, 1, b.ne[1], a.ne[1], p.s1, p.p1, p.d1)?;
        Ok(Shape::New {
            ty: b.ty,
            ne: [ow, oh, a.ne[3], b.ne[3], 1],
        })
    }
}

/// CONV_3D: kernel `a [KW, KH, KD, OC·C]`, input `b [W, H, D, N·C]` give F32
/// `[OW, OH, OD, OC·N]`.
pub(crate) struct Conv3d;

impl OpSpec for Conv3d {
    type Params = Conv3dParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &Conv3dParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(0)?;
        src.want_float(1)?;
        want_4d(src, 0)?;
        want_4d(src, 1)?;
        want_positive(src, "c", p.c)?;
        want_positive(src, "n", p.n)?;
        want_positive(src, "oc", p.oc)?;
        let (c, n, oc) = (p.c as i64, p.n as i64, p.oc as i64);
        if a.ne[3] != c * oc {
            return Err(src.bad(0, format!("its ne3 must be c·oc = {}", c * oc)));
        }
        if b.ne[3] != c * n {
            return Err(src.bad(1, format!("its ne3 must be c·n = {}", c * n)));
        }
        let ow = conv_out(src, 0, b.ne[0], a.ne[0], p.s0, p.p0, p.d0)?;
        let oh = conv_out(src, 1, b.ne[1], a.ne[1], p.s1, p.p1, p.d1)?;
        let od = conv_out(src, 2, b.ne[2], a.ne[2], p.s2, p.p2, p.d2)?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [ow, oh, od, oc * n, 1],
        })
    }
}

/// Whether `m` has its channels (dimension 2) innermost: a permutation of a contiguous
/// `[C, W, H, N]` tensor (`ggml_is_contiguous_channels`).
pub(crate) fn channels_innermost(m: &crate::ops::Meta) -> bool {
    m.nb[0] > m.nb[2] && m.nb[1] > m.nb[0] && m.nb[2] == m.ty.type_size()
}

/// CONV_2D_DW: depthwise kernel `a [KW, KH, 1, C]`, input `b [W, H, C, N]` give
/// `[OW, OH, C, N]` of `b`'s type; when `b` has its channels innermost the result has the
/// same layout (channels innermost), else it is contiguous.
pub(crate) struct Conv2dDw;

impl OpSpec for Conv2dDw {
    type Params = Conv2dParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &Conv2dParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(0)?;
        src.want_float(1)?;
        want_4d(src, 0)?;
        want_4d(src, 1)?;
        if a.ne[2] != 1 || a.ne[3] != b.ne[2] {
            return Err(src.bad(
                0,
                format!("it must be [KW, KH, 1, C] with C = b's ne2 {}", b.ne[2]),
            ));
        }
        let ow = conv_out(src, 0, b.ne[0], a.ne[0], p.s0, p.p0, p.d0)?;
        let oh = conv_out(src, 1, b.ne[1], a.ne[1], p.s1, p.p1, p.d1)?;
        let ne = [ow, oh, b.ne[2], b.ne[3], 1];
        if !channels_innermost(b) {
            return Ok(Shape::New { ty: b.ty, ne });
        }
        let ts = b.ty.type_size();
        let mut nb = [0usize; MAX_DIMS];
        nb[2] = ts;
        nb[0] = ne[2] as usize * ts;
        nb[1] = ne[0] as usize * nb[0];
        nb[3] = nb[1] * ne[1] as usize;
        nb[4] = nb[3] * ne[3] as usize;
        Ok(Shape::Strided { ty: b.ty, ne, nb })
    }
}

/// CONV_TRANSPOSE_2D: kernel `a [KW, KH, OC, IC]`, input `b [W, H, IC, N]` give F32
/// `[(W − 1)·s + KW, (H − 1)·s + KH, OC, N]`.
pub(crate) struct ConvTranspose2d;

impl OpSpec for ConvTranspose2d {
    type Params = ConvTranspose2dParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &ConvTranspose2dParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_float(0)?;
        src.want_float(1)?;
        want_4d(src, 0)?;
        want_4d(src, 1)?;
        if a.ne[3] != b.ne[2] {
            return Err(src.bad(1, format!("its ne2 (channels) must be a's ne3 {}", a.ne[3])));
        }
        want_positive(src, "stride", p.stride)?;
        let out = |ins: i64, ks: i64| {
            let o = (ins as i128 - 1) * p.stride as i128 + ks as i128;
            i64::try_from(o).ok().filter(|&o| o >= 0)
        };
        let (Some(w), Some(h)) = (out(b.ne[0], a.ne[0]), out(b.ne[1], a.ne[1])) else {
            return Err(src.bad(1, "it gives no output"));
        };
        Ok(Shape::New {
            ty: Type::F32,
            ne: [w, h, a.ne[2], b.ne[3], 1],
        })
    }
}

/// IM2COL's result type in GGML's composite convolutions: F32 for BF16 kernels, else F16.
fn im2col_type(a: &Tensor) -> Type {
    if a.ty() == Type::BF16 {
        Type::F32
    } else {
        Type::F16
    }
}

/// An i32 parameter from an i64 argument, `Err` naming it when it does not fit.
fn param_i32(op: &str, name: &str, v: i64) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid(format!("{op}: {name} = {v} does not fit in i32")))
}

impl Context {
    /// `ggml_im2col`: the patches of `b` under a kernel of `a`'s shape, one row per output
    /// position, for a convolution as a matrix product. 2-D (`is_2d`): `a [KW, KH, IC, OC]`,
    /// `b [W, H, IC, N]` give `[IC·KH·KW, OW, OH, N]` with
    /// `result[(ic·KH + ky)·KW + kx, ox, oy, n] = b[ox·s0 + kx·d0 − p0, oy·s1 + ky·d1 − p1, ic, n]`
    /// (0 outside `b`). 1-D: `a [K, IC, OC]`, `b [W, IC, N]` give `[IC·K, OW, N]` (`s1`, `p1`,
    /// `d1` unused). `OW = (W + 2·p0 − d0·(KW − 1) − 1) / s0 + 1`, likewise `OH`; both must be
    /// positive. `dst_type` is F16 or F32; `b` is F32, F16 or BF16.
    #[allow(clippy::too_many_arguments)]
    pub fn im2col(
        &self,
        a: &Tensor,
        b: &Tensor,
        s0: i32,
        s1: i32,
        p0: i32,
        p1: i32,
        d0: i32,
        d1: i32,
        is_2d: bool,
        dst_type: Type,
    ) -> Result<Tensor> {
        let p = Im2colParams {
            s0,
            s1,
            p0,
            p1,
            d0,
            d1,
            is_2d: is_2d as i32,
        };
        self.build_typed::<Im2col>(Op::Im2col, &[Some(a), Some(b)], p, dst_type)
    }

    /// `ggml_im2col_3d`: the 3-D patches of `b [W, H, D, N·IC]` under a kernel of the shape
    /// of `a [KW, KH, KD, OC·IC]`: `[IC·KD·KH·KW, OW, OH, OD·N]`, row `(ox, oy, n·OD + oz)`
    /// holding `b[ox·s0 + kx·d0 − p0, oy·s1 + ky·d1 − p1, oz·s2 + kz·d2 − p2, n·IC + ic]` at
    /// `((ic·KD + kz)·KH + ky)·KW + kx` (0 outside `b`). `dst_type` is F16 or F32.
    #[allow(clippy::too_many_arguments)]
    pub fn im2col_3d(
        &self,
        a: &Tensor,
        b: &Tensor,
        ic: i64,
        s0: i32,
        s1: i32,
        s2: i32,
        p0: i32,
        p1: i32,
        p2: i32,
        d0: i32,
        d1: i32,
        d2: i32,
        dst_type: Type,
    ) -> Result<Tensor> {
        let p = Im2col3dParams {
            s0,
            s1,
            s2,
            p0,
            p1,
            p2,
            d0,
            d1,
            d2,
            ic: param_i32("IM2COL_3D", "IC", ic)?,
        };
        self.build_typed::<Im2col3d>(Op::Im2col3d, &[Some(a), Some(b)], p, dst_type)
    }

    /// `ggml_col2im_1d`: the inverse of 1-D im2col for transposed convolutions: columns
    /// `a [K·OC, T]` (a contiguous F32/F16/BF16 matrix) summed into the signal
    /// `result[t, oc] = Σ a[oc·K + k, j]` over `j·s0 + k = t + p0`, `0 ≤ k < K`; the result
    /// is `[(T − 1)·s0 + K − 2·p0, OC]` of `a`'s type (accumulated in f32).
    pub fn col2im_1d(&self, a: &Tensor, s0: i32, oc: i32, p0: i32) -> Result<Tensor> {
        self.build::<Col2im1d>(
            Op::Col2im1d,
            &[Some(a)],
            Col2im1dParams { s0, oc, p0 },
            false,
        )
    }

    /// `ggml_conv_1d`: 1-D convolution of `b [W, IC, N]` with kernel `a [K, IC, OC]` as GGML
    /// builds it: `im2col` (F16, F32 for a BF16 kernel), `mul_mat` of the patches with the
    /// kernel reshaped to `[IC·K, OC]`, reshaped to `[OW, OC, N]`. As in GGML, the product is
    /// `[N·OW, OC]` reinterpreted, so for `N > 1` the batches come out interleaved.
    pub fn conv_1d(&self, a: &Tensor, b: &Tensor, s0: i32, p0: i32, d0: i32) -> Result<Tensor> {
        let cols = self.im2col(a, b, s0, 0, p0, 0, d0, 0, false, im2col_type(a))?;
        let (c, an) = (cols.ne(), a.ne());
        let cols2 = self.reshape_2d(&cols, c[0], c[2] * c[1])?;
        let a2 = self.reshape_2d(a, an[0] * an[1], an[2])?;
        let r = self.mul_mat(&cols2, &a2)?;
        self.reshape_3d(&r, c[1], an[2], c[2])
    }

    /// `ggml_conv_1d_ph`: [`Context::conv_1d`] with "half" padding `K / 2`.
    pub fn conv_1d_ph(&self, a: &Tensor, b: &Tensor, s: i32, d: i32) -> Result<Tensor> {
        self.conv_1d(a, b, s, half(a, 0)?, d)
    }

    /// `ggml_conv_1d_dw`: depthwise 1-D convolution of `b [W, C]` with kernels `a [K, 1, C]`
    /// as GGML builds it (`b` reshaped to `[W, 1, C]`, `im2col`, `mul_mat` with `a`): the
    /// result is `[OW, C]`, `result[ox, c] = Σₖ a[k, 0, c]·b[ox·s0 + k·d0 − p0, c]`.
    pub fn conv_1d_dw(&self, a: &Tensor, b: &Tensor, s0: i32, p0: i32, d0: i32) -> Result<Tensor> {
        let bn = b.ne();
        let nb = self.reshape_4d(b, bn[0], 1, bn[1], bn[2])?;
        let cols = self.im2col(a, &nb, s0, 0, p0, 0, d0, 0, false, im2col_type(a))?;
        let r = self.mul_mat(&cols, a)?;
        let rn = r.ne();
        self.reshape_3d(&r, rn[0], rn[2], 1)
    }

    /// `ggml_conv_1d_dw_ph`: [`Context::conv_1d_dw`] with padding `K / 2`.
    pub fn conv_1d_dw_ph(&self, a: &Tensor, b: &Tensor, s0: i32, d0: i32) -> Result<Tensor> {
        self.conv_1d_dw(a, b, s0, half(a, 0)?, d0)
    }

    /// `ggml_conv_transpose_1d`: transposed 1-D convolution of `b [L, IC]` (a matrix) with
    /// kernel `a [K, OC, IC]` (F32 or F16): F32 `[(L − 1)·s0 + K, OC]` with
    /// `result[t, oc] = Σ_{l, ic} b[l, ic]·a[t − l·s0, oc, ic]`. GGML only has `p0 = 0`,
    /// `d0 = 1`; other values are refused.
    pub fn conv_transpose_1d(
        &self,
        a: &Tensor,
        b: &Tensor,
        s0: i32,
        p0: i32,
        d0: i32,
    ) -> Result<Tensor> {
        self.build::<ConvTranspose1d>(
            Op::ConvTranspose1d,
            &[Some(a), Some(b)],
            ConvTranspose1dParams { s0, p0, d0 },
            false,
        )
    }

    /// `ggml_conv_2d`: 2-D convolution of `b [W, H, IC, N]` with kernel `a [KW, KH, IC, OC]`
    /// as GGML builds it: `im2col` (F16, F32 for a BF16 kernel), `mul_mat` with the kernel
    /// reshaped to `[IC·KH·KW, OC]`, reshape to `[OW, OH, N, OC]`, `permute(0, 1, 3, 2)` and
    /// `cont`: F32 `[OW, OH, OC, N]` with
    /// `result[ox, oy, oc, n] = Σ a[kx, ky, ic, oc]·b[ox·s0 + kx·d0 − p0, oy·s1 + ky·d1 − p1, ic, n]`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_2d(
        &self,
        a: &Tensor,
        b: &Tensor,
        s0: i32,
        s1: i32,
        p0: i32,
        p1: i32,
        d0: i32,
        d1: i32,
    ) -> Result<Tensor> {
        let cols = self.im2col(a, b, s0, s1, p0, p1, d0, d1, true, im2col_type(a))?;
        let (c, an) = (cols.ne(), a.ne());
        let cols2 = self.reshape_2d(&cols, c[0], c[3] * c[2] * c[1])?;
        let a2 = self.reshape_2d(a, an[0] * an[1] * an[2], an[3])?;
        let r = self.mul_mat(&cols2, &a2)?;
        let r = self.reshape_4d(&r, c[1], c[2], c[3], an[3])?;
        self.cont(&self.permute(&r, 0, 1, 3, 2)?)
    }

    /// `ggml_conv_2d_sk_p0`: [`Context::conv_2d`] with the stride equal to the kernel size
    /// and no padding (non-overlapping patches).
    pub fn conv_2d_sk_p0(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let s0 = param_i32("CONV_2D", "KW", a.ne()[0])?;
        let s1 = param_i32("CONV_2D", "KH", a.ne()[1])?;
        self.conv_2d(a, b, s0, s1, 0, 0, 1, 1)
    }

    /// `ggml_conv_2d_s1_ph`: [`Context::conv_2d`] with stride 1 and padding `K / 2`.
    pub fn conv_2d_s1_ph(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.conv_2d(a, b, 1, 1, half(a, 0)?, half(a, 1)?, 1, 1)
    }

    /// `ggml_conv_2d_dw`: depthwise 2-D convolution of `b [W, H, C, N]` with kernels
    /// `a [KW, KH, 1, C]` as GGML builds it (reshapes, `im2col` over `C·N` one-channel
    /// images, `mul_mat`, reshape): F32 `[OW, OH, C, N]`,
    /// `result[ox, oy, c, n] = Σ a[kx, ky, 0, c]·b[ox·s0 + kx·d0 − p0, oy·s1 + ky·d1 − p1, c, n]`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_2d_dw(
        &self,
        a: &Tensor,
        b: &Tensor,
        s0: i32,
        s1: i32,
        p0: i32,
        p1: i32,
        d0: i32,
        d1: i32,
    ) -> Result<Tensor> {
        let (an, bn) = (a.ne(), b.ne());
        let new_a = self.reshape_4d(a, an[0], an[1], 1, an[2] * an[3])?;
        let new_b_in = self.reshape_4d(b, bn[0], bn[1], 1, bn[2] * bn[3])?;
        let cols = self.im2col(
            &new_a,
            &new_b_in,
            s0,
            s1,
            p0,
            p1,
            d0,
            d1,
            true,
            im2col_type(a),
        )?;
        let c = cols.ne();
        let new_b = self.reshape_4d(&cols, c[0], c[2] * c[1], bn[2], bn[3])?;
        let na = new_a.ne();
        let new_a = self.reshape_4d(&new_a, na[0] * na[1], na[2], na[3], 1)?;
        let r = self.mul_mat(&new_a, &new_b)?;
        self.reshape_4d(&r, c[1], c[2], bn[2], bn[3])
    }

    /// `ggml_conv_2d_dw_direct` (op CONV_2D_DW): the depthwise convolution of
    /// [`Context::conv_2d_dw`] computed directly: kernels `a [KW, KH, 1, C]` (F32/F16),
    /// input `b [W, H, C, N]`, result `[OW, OH, C, N]` of `b`'s type. When `b` has its
    /// channels innermost (a permutation of a contiguous `[C, W, H, N]`), so has the result.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_2d_dw_direct(
        &self,
        a: &Tensor,
        b: &Tensor,
        stride0: i32,
        stride1: i32,
        pad0: i32,
        pad1: i32,
        dilation0: i32,
        dilation1: i32,
    ) -> Result<Tensor> {
        let p = Conv2dParams {
            s0: stride0,
            s1: stride1,
            p0: pad0,
            p1: pad1,
            d0: dilation0,
            d1: dilation1,
        };
        self.build::<Conv2dDw>(Op::Conv2dDw, &[Some(a), Some(b)], p, false)
    }

    /// `ggml_conv_2d_direct` (op CONV_2D): the convolution of [`Context::conv_2d`] computed
    /// without an im2col node: kernel `a [KW, KH, IC, OC]` (contiguous F32 or F16; with F16 the
    /// input patches are rounded to F16 as GGML does), input `b [W, H, IC, N]`, result
    /// `[OW, OH, OC, N]` of `b`'s type.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_2d_direct(
        &self,
        a: &Tensor,
        b: &Tensor,
        s0: i32,
        s1: i32,
        p0: i32,
        p1: i32,
        d0: i32,
        d1: i32,
    ) -> Result<Tensor> {
        let p = Conv2dParams {
            s0,
            s1,
            p0,
            p1,
            d0,
            d1,
        };
        self.build::<Conv2d>(Op::Conv2d, &[Some(a), Some(b)], p, false)
    }

    /// `ggml_conv_3d`: 3-D convolution of `b [W, H, D, N·IC]` with kernel
    /// `a [KW, KH, KD, OC·IC]` as GGML builds it: `im2col_3d`, `mul_mat` with the kernel
    /// reshaped to `[IC·KD·KH·KW, OC]`, reshape, `permute(0, 1, 3, 2)`, `cont`, reshape: F32
    /// `[OW, OH, OD, N·OC]` with channel `n·OC + oc` holding
    /// `Σ a[kx, ky, kz, oc·IC + ic]·b[ox·s0 + kx·d0 − p0, …, n·IC + ic]`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_3d(
        &self,
        a: &Tensor,
        b: &Tensor,
        ic: i64,
        s0: i32,
        s1: i32,
        s2: i32,
        p0: i32,
        p1: i32,
        p2: i32,
        d0: i32,
        d1: i32,
        d2: i32,
    ) -> Result<Tensor> {
        let (an, bn) = (a.ne(), b.ne());
        if ic <= 0 || an[3] % ic != 0 {
            return Err(Error::invalid(format!(
                "CONV_3D: IC = {ic} must be positive and divide a's ne3 {}",
                an[3]
            )));
        }
        let cols = self.im2col_3d(a, b, ic, s0, s1, s2, p0, p1, p2, d0, d1, d2, im2col_type(a))?;
        let c = cols.ne();
        let (oc, n) = (an[3] / ic, bn[3] / ic);
        let cols2 = self.reshape_2d(&cols, c[0], c[3] * c[2] * c[1])?;
        let a2 = self.reshape_2d(a, an[0] * an[1] * an[2] * ic, oc)?;
        let r = self.mul_mat(&cols2, &a2)?;
        let od = c[3] / n;
        let r = self.reshape_4d(&r, c[1] * c[2], od, n, oc)?;
        let r = self.cont(&self.permute(&r, 0, 1, 3, 2)?)?;
        self.reshape_4d(&r, c[1], c[2], od, oc * n)
    }

    /// `ggml_conv_3d_direct` (op CONV_3D): 3-D convolution computed directly: kernel
    /// `a [KW, KH, KD, OC·C]` (contiguous F32 or F16), input `b [W, H, D, N·C]`, F32 result
    /// `[OW, OH, OD, OC·N]` whose channel `n·OC + oc` holds
    /// `Σ a[kx, ky, kz, oc·C + ic]·b[ox·s0 + kx·d0 − p0, oy·s1 + ky·d1 − p1, oz·s2 + kz·d2 − p2, n·C + ic]`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_3d_direct(
        &self,
        a: &Tensor,
        b: &Tensor,
        s0: i32,
        s1: i32,
        s2: i32,
        p0: i32,
        p1: i32,
        p2: i32,
        d0: i32,
        d1: i32,
        d2: i32,
        c: i32,
        n: i32,
        oc: i32,
    ) -> Result<Tensor> {
        let p = Conv3dParams {
            s0,
            s1,
            s2,
            p0,
            p1,
            p2,
            d0,
            d1,
            d2,
            c,
            n,
            oc,
        };
        self.build::<Conv3d>(Op::Conv3d, &[Some(a), Some(b)], p, false)
    }

    /// `ggml_conv_transpose_2d_p0`: transposed 2-D convolution without padding of
    /// `b [W, H, IC, N]` with kernel `a [KW, KH, OC, IC]` (F32 or F16): F32
    /// `[(W − 1)·s + KW, (H − 1)·s + KH, OC, N]` with
    /// `result[x, y, oc, n] = Σ b[ix, iy, ic, n]·a[x − ix·s, y − iy·s, oc, ic]`. GGML's CPU
    /// computes only batch 0 (later batches stay zero); here every batch is computed.
    pub fn conv_transpose_2d_p0(&self, a: &Tensor, b: &Tensor, stride: i32) -> Result<Tensor> {
        self.build::<ConvTranspose2d>(
            Op::ConvTranspose2d,
            &[Some(a), Some(b)],
            ConvTranspose2dParams { stride },
            false,
        )
    }
}

/// Half of `a`'s kernel size along `dim` ("same" padding), as an i32 parameter.
fn half(a: &Tensor, dim: usize) -> Result<i32> {
    param_i32("CONV", "the kernel size", a.ne()[dim] / 2)
}
