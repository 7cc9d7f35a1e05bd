//! ROPE: rotary position embedding (`ggml_rope`, `ggml_rope_ext`, `ggml_rope_multi` and their
//! in-place forms), with YaRN scaling and frequency factors.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::spec::{opt, req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// Rotation of consecutive pairs `(x[2i], x[2i+1])` (`GGML_ROPE_TYPE_NORMAL`).
pub const ROPE_TYPE_NORMAL: i32 = 0;
/// GPT-NeoX rotation: pairs `(x[i], x[i + n_dims/2])` (`GGML_ROPE_TYPE_NEOX`).
pub const ROPE_TYPE_NEOX: i32 = 2;
/// Multi-section rotation (Qwen2-VL), NeoX pairs, four positions per token
/// (`GGML_ROPE_TYPE_MROPE`).
pub const ROPE_TYPE_MROPE: i32 = 8;
/// Vision rotation (Qwen2-VL's encoder): pairs `(x[i], x[i + n_dims])` over the whole row,
/// with `n_dims = ne0 / 2` and each section's angle restarting (`GGML_ROPE_TYPE_VISION`).
pub const ROPE_TYPE_VISION: i32 = 24;
/// Interleaved multi-section rotation (Qwen3-VL) (`GGML_ROPE_TYPE_IMROPE`).
pub const ROPE_TYPE_IMROPE: i32 = 40;
/// Number of sections of the multi-section modes (`GGML_MROPE_SECTIONS`).
pub const MROPE_SECTIONS: usize = 4;

/// ROPE's parameters, GGML's 16 `op_params` slots.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct RopeParams {
    /// Unused (GGML stores 0).
    pub n_past: i32,
    /// Number of rotated elements of each row (even, at most `ne0`).
    pub n_dims: i32,
    /// One of the `ROPE_TYPE_*` constants.
    pub mode: i32,
    /// Unused (GGML stores 0).
    pub n_ctx: i32,
    /// The context length the model was trained with (YaRN's correction dimensions).
    pub n_ctx_orig: i32,
    /// Base of the rotation frequencies.
    pub freq_base: f32,
    /// Position interpolation factor.
    pub freq_scale: f32,
    /// YaRN's extrapolation mix; 0 disables YaRN.
    pub ext_factor: f32,
    /// Magnitude factor applied to cos and sin.
    pub attn_factor: f32,
    /// YaRN's fast correction boundary (rotations).
    pub beta_fast: f32,
    /// YaRN's slow correction boundary (rotations).
    pub beta_slow: f32,
    /// Pairs per section for the multi-section modes (zeros otherwise).
    pub sections: [i32; MROPE_SECTIONS],
    /// First rotated element of each row (`ggml_rope_set_offset`; even).
    pub n_offs: i32,
}

/// ROPE: `a` (F32 or F16, packed rows `[ne0, n_head, n_tokens, …]`) rotated by the I32
/// positions `b` (one per token, four per token for the multi-section modes), optional F32
/// frequency factors `c`; the result has `a`'s type and shape.
pub(crate) struct Rope;

impl OpSpec for Rope {
    type Params = RopeParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b"), opt("c")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &RopeParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_type(0, &[Type::F32, Type::F16])?;
        if !a.rows_packed() {
            return Err(src.bad(0, "its rows must be packed (nb0 = element size)"));
        }
        let modes = [
            ROPE_TYPE_NORMAL,
            ROPE_TYPE_NEOX,
            ROPE_TYPE_MROPE,
            ROPE_TYPE_VISION,
            ROPE_TYPE_IMROPE,
        ];
        if !modes.contains(&p.mode) {
            return Err(src.err(format!(
                "mode = {}; it must be one of {modes:?} (NORMAL, NEOX, MROPE, VISION, IMROPE)",
                p.mode
            )));
        }
        src.want_type(1, &[Type::I32])?;
        let sections = p.mode & ROPE_TYPE_MROPE != 0;
        let per_token = if sections { 4 } else { 1 };
        if b.ne[1..].iter().any(|&n| n != 1) || b.ne[0] != a.ne[2] * per_token {
            return Err(src.bad(
                1,
                format!(
                    "it must be a vector of {per_token} × a.ne2 = {} positions",
                    a.ne[2] * per_token
                ),
            ));
        }
        let ne0 = a.ne[0];
        let n_dims = i64::from(p.n_dims);
        if n_dims < 0 || n_dims % 2 != 0 || n_dims > ne0 {
            return Err(src.err(format!(
                "n_dims = {}; it must be even, >= 0 and at most a.ne0 = {ne0}",
                p.n_dims
            )));
        }
        let n_offs = i64::from(p.n_offs);
        if n_offs < 0 || n_offs % 2 != 0 || n_offs + n_dims > ne0 {
            return Err(src.err(format!(
                "n_offs = {}; it must be even, >= 0, and n_offs + n_dims at most a.ne0 = {ne0}",
                p.n_offs
            )));
        }
        let vision = p.mode == ROPE_TYPE_VISION;
        if vision && (2 * n_dims != ne0 || n_offs != 0) {
            return Err(src.err(format!(
                "VISION mode needs n_dims = a.ne0 / 2 (n_dims = {}, a.ne0 = {ne0}) and no offset \
                 (n_offs = {})",
                p.n_dims, p.n_offs
            )));
        }
        if sections {
            let s = p.sections;
            let total: i64 = s.iter().map(|&x| i64::from(x)).sum();
            if s.iter().any(|&x| x < 0) || s[..3].iter().all(|&x| x == 0) || total > ne0 {
                return Err(src.err(format!(
                    "sections = {s:?}; they must be >= 0, one of the first three above 0, and \
                     their sum at most a.ne0 = {ne0}"
                )));
            }
        } else if p.sections != [0; MROPE_SECTIONS] {
            return Err(src.err(format!(
                "sections = {:?}; only the multi-section modes take sections",
                p.sections
            )));
        }
        if let Some(c) = src.opt(2) {
            src.want_type(2, &[Type::F32])?;
            // The vision mode rotates every pair of the row, each with its own factor.
            let need = if vision { n_dims } else { n_dims / 2 };
            if c.ne[0] < need {
                return Err(src.bad(2, format!("it must hold at least {need} frequency factors")));
            }
        }
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

/// YaRN's correction dimensions (`ggml_rope_yarn_corr_dims`): the range of rotated dimensions
/// between the one that turns `beta_fast` times and the one that turns `beta_slow` times over
/// `n_ctx_orig` positions, `[max(0, ⌊start⌋), min(n_dims − 1, ⌈end⌉)]`, in f32 as GGML.
pub fn rope_yarn_corr_dims(
    n_dims: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let corr_dim = |n_rot: f32| {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
            / (2.0 * freq_base.ln())
    };
    let start = corr_dim(beta_fast).floor();
    let end = corr_dim(beta_slow).ceil();
    // GGML's MAX/MIN macros: a NaN bound stays NaN.
    let last = (n_dims - 1) as f32;
    [
        if 0.0 > start { 0.0 } else { start },
        if last < end { last } else { end },
    ]
}

/// GGML's defaults of `ggml_rope`: base 10000, no scaling, no YaRN (freq_base, freq_scale,
/// ext_factor, attn_factor, beta_fast, beta_slow).
const PLAIN: [f32; 6] = [10000.0, 1.0, 0.0, 1.0, 0.0, 0.0];

impl Context {
    /// The node of every ROPE builder; `yarn` is freq_base, freq_scale, ext_factor,
    /// attn_factor, beta_fast, beta_slow.
    #[allow(clippy::too_many_arguments)]
    fn rope_impl(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        sections: Option<[i32; MROPE_SECTIONS]>,
        mode: i32,
        n_ctx_orig: i32,
        yarn: [f32; 6],
        op: Op,
        inplace: bool,
    ) -> Result<Tensor> {
        if mode & 1 != 0 {
            return Err(Error::invalid(format!(
                "ROPE: mode = {mode}; mode & 1 (skipping n_past) is no longer supported"
            )));
        }
        // GGML stores the sections only for the multi-section modes.
        let sections = match sections {
            Some(s) if mode & ROPE_TYPE_MROPE != 0 => s,
            _ => [0; MROPE_SECTIONS],
        };
        let [freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow] = yarn;
        let p = RopeParams {
            n_past: 0,
            n_dims,
            mode,
            n_ctx: 0,
            n_ctx_orig,
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
            sections,
            n_offs: 0,
        };
        self.build::<Rope>(op, &[Some(a), Some(b), c], p, inplace)
    }

    /// `ggml_rope`: rotary position embedding of `a` (`[ne0, n_head, n_tokens, …]`, F32 or
    /// F16) by the I32 positions `b` (`[n_tokens]`), the first `n_dims` elements of each row
    /// rotated, with base 10000 and no scaling. `mode` is [`ROPE_TYPE_NORMAL`] or
    /// [`ROPE_TYPE_NEOX`] (see [`Context::rope_ext`]). The result has `a`'s type and shape.
    pub fn rope(&self, a: &Tensor, b: &Tensor, n_dims: i32, mode: i32) -> Result<Tensor> {
        self.rope_impl(a, b, None, n_dims, None, mode, 0, PLAIN, Op::Rope, false)
    }

    /// `ggml_rope_inplace`: as [`Context::rope`], writing into `a`'s memory.
    pub fn rope_inplace(&self, a: &Tensor, b: &Tensor, n_dims: i32, mode: i32) -> Result<Tensor> {
        self.rope_impl(a, b, None, n_dims, None, mode, 0, PLAIN, Op::Rope, true)
    }

    /// `ggml_rope_ext`: rotary position embedding with YaRN scaling and frequency factors.
    ///
    /// `a` is `[ne0, n_head, n_tokens, …]` (F32 or F16, packed rows), `b` the I32 positions
    /// `[n_tokens]`, `c` optional F32 frequency factors (at least `n_dims / 2`). For pair `i`
    /// of the `n_dims` rotated elements of token `t`, the angle is
    /// `θ = b[t] · freq_base^(−2i/n_dims) / c[i]`, scaled by `freq_scale` and, with
    /// `ext_factor ≠ 0`, mixed with the unscaled angle by YaRN's ramp between the correction
    /// dimensions of [`rope_yarn_corr_dims`] (the magnitude then gains
    /// `1 + 0.1·ln(1/freq_scale)`); cos and sin are multiplied by `attn_factor`. `mode`
    /// [`ROPE_TYPE_NORMAL`] rotates pairs `(x[2i], x[2i+1])`, [`ROPE_TYPE_NEOX`] pairs
    /// `(x[i], x[i + n_dims/2])`; the other elements are copied. The result has `a`'s type
    /// and shape.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_ext(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            c,
            n_dims,
            None,
            mode,
            n_ctx_orig,
            yarn,
            Op::Rope,
            false,
        )
    }

    /// `ggml_rope_ext_inplace`: as [`Context::rope_ext`], writing into `a`'s memory.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_ext_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            c,
            n_dims,
            None,
            mode,
            n_ctx_orig,
            yarn,
            Op::Rope,
            true,
        )
    }

    /// `ggml_rope_multi`: multi-section rotary embedding (Qwen-VL) with the options of
    /// [`Context::rope_ext`].
    ///
    /// `mode` is [`ROPE_TYPE_MROPE`], [`ROPE_TYPE_IMROPE`] or [`ROPE_TYPE_VISION`]; `b` holds
    /// four I32 positions per token (`[4 · n_tokens]`: all first positions, then all second,
    /// …). `sections` gives the pairs of each section (their sum at most `ne0`). MROPE rotates
    /// NeoX pairs, pair `i` taking the position of the section `i mod Σsections` falls in
    /// (IMROPE interleaves the first three sections: t, h, w, t, h, w, …) with the angle
    /// exponent of `i`; VISION (`n_dims = ne0 / 2`) rotates pairs `(x[i], x[i + n_dims])` of
    /// the whole row, the exponent restarting in each section. The result has `a`'s type and
    /// shape.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_multi(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        sections: [i32; MROPE_SECTIONS],
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            c,
            n_dims,
            Some(sections),
            mode,
            n_ctx_orig,
            yarn,
            Op::Rope,
            false,
        )
    }

    /// `ggml_rope_multi_inplace`: as [`Context::rope_multi`], writing into `a`'s memory.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_multi_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        sections: [i32; MROPE_SECTIONS],
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            c,
            n_dims,
            Some(sections),
            mode,
            n_ctx_orig,
            yarn,
            Op::Rope,
            true,
        )
    }

    /// `ggml_rope_custom` (deprecated in GGML): [`Context::rope_ext`] without frequency
    /// factors.
    #[deprecated(note = "use rope_ext instead")]
    #[allow(clippy::too_many_arguments)]
    pub fn rope_custom(
        &self,
        a: &Tensor,
        b: &Tensor,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            None,
            n_dims,
            None,
            mode,
            n_ctx_orig,
            yarn,
            Op::Rope,
            false,
        )
    }

    /// `ggml_rope_custom_inplace` (deprecated in GGML): [`Context::rope_ext_inplace`] without
    /// frequency factors.
    #[deprecated(note = "use rope_ext_inplace instead")]
    #[allow(clippy::too_many_arguments)]
    pub fn rope_custom_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            None,
            n_dims,
            None,
            mode,
            n_ctx_orig,
            yarn,
            Op::Rope,
            true,
        )
    }
}

impl Context {
    /// `ggml_rope_ext_back`: the gradient of [`Context::rope_ext`] with respect to its input,
    /// given the gradient `a` of its result: `a` rotated by the opposite angles (a ROPE_BACK
    /// node, computed as ROPE with every sine negated, as GGML's CPU does), with the same
    /// arguments and shape rules as [`Context::rope_ext`].
    #[allow(clippy::too_many_arguments)]
    pub fn rope_ext_back(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        self.rope_impl(
            a,
            b,
            c,
            n_dims,
            None,
            mode,
            n_ctx_orig,
            yarn,
            Op::RopeBack,
            false,
        )
    }

    /// `ggml_rope_multi_back`: the gradient of [`Context::rope_multi`], as
    /// [`Context::rope_ext_back`] is of [`Context::rope_ext`].
    #[allow(clippy::too_many_arguments)]
    pub fn rope_multi_back(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        n_dims: i32,
        sections: [i32; MROPE_SECTIONS],
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> Result<Tensor> {
        let yarn = [
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
        ];
        let sections = Some(sections);
        self.rope_impl(
            a,
            b,
            c,
            n_dims,
            sections,
            mode,
            n_ctx_orig,
            yarn,
            Op::RopeBack,
            false,
        )
    }
}

impl Tensor {
    /// `ggml_rope_set_offset`: rotates the `n_dims` elements from `n_offs` of each row of this
    /// ROPE (or ROPE_BACK) node instead of those from 0 (parameter slot 15). `Err` for another
    /// op, the VISION mode, or an offset that is odd, negative or puts the rotated range past
    /// `ne0`.
    pub fn rope_set_offset(&self, n_offs: i32) -> Result<()> {
        if !matches!(self.op(), Op::Rope | Op::RopeBack) {
            return Err(Error::invalid(format!(
                "rope_set_offset: tensor {:?} is computed by {}, not ROPE or ROPE_BACK",
                self.name(),
                self.op().name()
            )));
        }
        self.set_op_params_i32(15, n_offs)
    }
}
