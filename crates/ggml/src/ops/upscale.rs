//! UPSCALE: resizing to a given shape by nearest, bilinear (optionally antialiased) or bicubic
//! interpolation (`ggml_upscale`, `ggml_upscale_ext`, `ggml_interpolate`).

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::spec::{req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// The interpolation of UPSCALE (`enum ggml_scale_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ScaleMode {
    /// The nearest source element (`GGML_SCALE_MODE_NEAREST`).
    Nearest = 0,
    /// Linear in dimensions 0 and 1 (`GGML_SCALE_MODE_BILINEAR`).
    Bilinear = 1,
    /// Cubic convolution (a = −0.75) in dimensions 0 and 1 (`GGML_SCALE_MODE_BICUBIC`).
    Bicubic = 2,
}

/// Flag of [`Context::interpolate`]'s mode: sample so the corner pixels of source and result
/// line up (`GGML_SCALE_FLAG_ALIGN_CORNERS`).
pub const SCALE_FLAG_ALIGN_CORNERS: u32 = 1 << 8;
/// Flag of [`Context::interpolate`]'s mode, bilinear only: a triangle filter as wide as the
/// scale when shrinking (`GGML_SCALE_FLAG_ANTIALIAS`).
pub const SCALE_FLAG_ANTIALIAS: u32 = 1 << 9;

/// UPSCALE's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct UpscaleParams {
    /// [`ScaleMode`] in the low 8 bits, `SCALE_FLAG_*` above.
    pub mode: i32,
}

/// UPSCALE: F32 `a` (at most 4-D) resized to the requested shape.
pub(crate) struct Upscale;

impl OpSpec for Upscale {
    type Params = UpscaleParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &UpscaleParams) -> Result<Shape> {
        let a = src.get(0);
        let ne = src.requested()?;
        src.want_type(0, &[Type::F32])?;
        crate::ops::conv::want_4d(src, 0)?;
        let mode = p.mode as u32;
        let known = 0xFF | SCALE_FLAG_ALIGN_CORNERS | SCALE_FLAG_ANTIALIAS;
        if mode & 0xFF > ScaleMode::Bicubic as u32 || mode & !known != 0 {
            return Err(src.err(format!(
                "mode = {mode:#x}; the low byte must be 0 (nearest), 1 (bilinear) or 2 \
                 (bicubic), with only the ALIGN_CORNERS and ANTIALIAS flags above"
            )));
        }
        if mode & SCALE_FLAG_ANTIALIAS != 0 && mode & 0xFF != ScaleMode::Bilinear as u32 {
            return Err(src.err("ANTIALIAS is only available with bilinear interpolation"));
        }
        if ne[4] != 1 || ne.iter().any(|&n| n < 0) {
            return Err(src.err(format!(
                "the result shape {ne:?} must have at most 4 non-negative dimensions"
            )));
        }
        let empty_result = ne.contains(&0);
        if a.nelements() == 0 && !empty_result {
            return Err(src.bad(0, "it is empty; only an empty result can come from it"));
        }
        Ok(Shape::New { ty: Type::F32, ne })
    }
}

impl Context {
    /// `ggml_upscale`: `a` (F32) enlarged `scale_factor` times (> 1) in dimensions 0 and 1
    /// by `mode`.
    pub fn upscale(&self, a: &Tensor, scale_factor: i32, mode: ScaleMode) -> Result<Tensor> {
        if scale_factor <= 1 {
            return Err(Error::invalid(format!(
                "UPSCALE: scale_factor = {scale_factor}; it must be greater than 1"
            )));
        }
        let ne = a.ne();
        let grow = |n: i64| {
            n.checked_mul(scale_factor as i64)
                .ok_or_else(|| Error::invalid(format!("UPSCALE: {n} × {scale_factor} overflows")))
        };
        self.interpolate(a, grow(ne[0])?, grow(ne[1])?, ne[2], ne[3], mode as u32)
    }

    /// `ggml_upscale_ext`: `a` (F32) resized to `[ne0, ne1, ne2, ne3]` by `mode`
    /// (dimensions 2 and 3 always by nearest).
    #[allow(clippy::too_many_arguments)]
    pub fn upscale_ext(
        &self,
        a: &Tensor,
        ne0: i32,
        ne1: i32,
        ne2: i32,
        ne3: i32,
        mode: ScaleMode,
    ) -> Result<Tensor> {
        self.interpolate(
            a,
            ne0 as i64,
            ne1 as i64,
            ne2 as i64,
            ne3 as i64,
            mode as u32,
        )
    }

    /// `ggml_interpolate`: `a` (F32) resized to F32 `[ne0, ne1, ne2, ne3]`. `mode` is a
    /// [`ScaleMode`] value, optionally or-ed with [`SCALE_FLAG_ALIGN_CORNERS`] and (bilinear
    /// only) [`SCALE_FLAG_ANTIALIAS`]. With scale `sf = ne_out / ne_in` per dimension, the
    /// result element `i` samples the source at `(i + ½)/sf − ½` (at `i·(in − 1)/(out − 1)`
    /// with ALIGN_CORNERS, in dimensions 0 and 1 when both sizes exceed 1); nearest takes
    /// element `⌊i / sf⌋`, bilinear and bicubic interpolate in dimensions 0 and 1 with the
    /// source indices clamped to the edges; dimensions 2 and 3 always use nearest.
    #[allow(clippy::too_many_arguments)]
    pub fn interpolate(
        &self,
        a: &Tensor,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        ne3: i64,
        mode: u32,
    ) -> Result<Tensor> {
        let p = UpscaleParams { mode: mode as i32 };
        self.build_shaped::<Upscale>(Op::Upscale, &[Some(a)], p, [ne0, ne1, ne2, ne3, 1])
    }
}
