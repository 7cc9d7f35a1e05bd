//! DeepSeek-V4's ops: LIGHTNING_INDEXER (the sparse-attention key scorer) and the three
//! hyper-connection ops DSV4_HC_COMB, DSV4_HC_PRE and DSV4_HC_POST. All compute in F32.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{opt, req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// The number of hyper-connection streams the ops support (GGML asserts 4).
pub const HC_STREAMS: i64 = 4;

/// DSV4_HC_COMB's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct HcCombParams {
    /// Added to every weight after the softmax and to each normalising sum.
    pub eps: f32,
    /// Sinkhorn iterations (column normalisation first, then `n_iter − 1` row/column rounds).
    pub n_iter: i32,
}

/// DSV4_HC_PRE's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct HcPreParams {
    /// Factor applied to the mixed sum.
    pub scale: f32,
    /// 1 when the weights are per-element gates passed through a sigmoid, 0 for plain
    /// per-stream weights (GGML's bool as an i32).
    pub gated: i32,
}

/// `Err` unless operand `i` has shape `want` in its first four dimensions and ne4 == 1.
fn want_ne(src: &Srcs<'_>, i: usize, want: [i64; 4], what: &str) -> Result<()> {
    let ne = src.get(i).ne;
    if ne[..4] != want || ne[4] != 1 {
        return Err(src.bad(i, format!("it must be {what} = {want:?}")));
    }
    Ok(())
}

/// LIGHTNING_INDEXER: `q` `[D, H, T, S]` F32, `k` `[D, 1, n_kv, S]` (F32, F16, BF16 or
/// quantized), `weights` `[H, T, 1, S]` F32, `mask` `[n_kv, T, 1, Sm]` F16 with `Sm`
/// dividing `S`; rows packed. Result F32 `[n_kv, T, 1, S]`.
pub(crate) struct LightningIndexer;

impl OpSpec for LightningIndexer {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("q"), req("k"), req("weights"), req("mask")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        src.want_type(2, &[Type::F32])?;
        src.want_type(3, &[Type::F16])?;
        let (q, k, m) = (src.get(0), src.get(1), src.get(3));
        if !crate::quants::has_to_float(k.ty) {
            return Err(src.bad(1, "its type has no conversion to f32"));
        }
        for i in 0..4 {
            if !src.get(i).rows_packed() || src.get(i).ne[4] != 1 {
                return Err(src.bad(i, "its rows must be packed and it must be at most 4-D"));
            }
        }
        let [d, h, t, s, _] = q.ne;
        let n_kv = k.ne[2];
        if k.ne[0] != d || k.ne[1] != 1 || k.ne[3] != s {
            return Err(src.bad(1, format!("it must be [{d}, 1, n_kv, {s}]")));
        }
        want_ne(src, 2, [h, t, 1, s], "[n_head, n_tokens, 1, n_stream]")?;
        if m.ne[0] != n_kv || m.ne[1] != t || m.ne[2] != 1 || m.ne[3] < 1 || s % m.ne[3] != 0 {
            return Err(src.bad(
                3,
                format!("it must be [n_kv = {n_kv}, {t}, 1, a divisor of {s}]"),
            ));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [n_kv, t, 1, s, 1],
        })
    }
}

/// DSV4_HC_COMB: `mixes` `[(2 + 4)·4, T]`, `scale` `[>= 3]`, `base` `[24]` (F32) give the
/// F32 mixing matrices `[4, 4, T]`.
pub(crate) struct HcComb;

impl OpSpec for HcComb {
    type Params = HcCombParams;
    const SLOTS: &'static [Slot] = &[req("mixes"), req("scale"), req("base")];
    fn shape(src: &Srcs<'_>, p: &HcCombParams) -> Result<Shape> {
        for i in 0..3 {
            src.want_type(i, &[Type::F32])?;
        }
        if p.n_iter < 1 {
            return Err(src.err(format!("n_iter = {}; it must be at least 1", p.n_iter)));
        }
        if !p.eps.is_finite() {
            return Err(src.err(format!("eps = {}; it must be finite", p.eps)));
        }
        let dim = (2 + HC_STREAMS) * HC_STREAMS;
        let mixes = src.get(0);
        let t = mixes.ne[1];
        want_ne(
            src,
            0,
            [dim, t, 1, 1],
            "[(2 + hc)·hc with hc = 4, n_tokens]",
        )?;
        let scale = src.get(1);
        if scale.ne[0] < 3 || scale.ne[1..].iter().any(|&n| n != 1) {
            return Err(src.bad(1, "it must be a vector of at least 3"));
        }
        want_ne(src, 2, [dim, 1, 1, 1], "[(2 + hc)·hc]")?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [HC_STREAMS, HC_STREAMS, t, 1, 1],
        })
    }
}

/// DSV4_HC_PRE: `x` `[E, hc, T]` F32 with weights `[hc, T]` (or gates `[E, hc, T]`): F32
/// `[E, T]`.
pub(crate) struct HcPre;

impl OpSpec for HcPre {
    type Params = HcPreParams;
    const SLOTS: &'static [Slot] = &[req("x"), req("weights")];
    fn shape(src: &Srcs<'_>, p: &HcPreParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        src.want_type(1, &[Type::F32])?;
        let [e, hc, t, x3, x4] = src.get(0).ne;
        if hc < 1 || x3 != 1 || x4 != 1 {
            return Err(src.bad(0, "it must be [n_embd, hc >= 1, n_tokens]"));
        }
        if p.gated != 0 {
            want_ne(src, 1, [e, hc, t, 1], "the gates [n_embd, hc, n_tokens]")?;
        } else {
            want_ne(src, 1, [hc, t, 1, 1], "the weights [hc, n_tokens]")?;
        }
        if !p.scale.is_finite() {
            return Err(src.err(format!("scale = {}; it must be finite", p.scale)));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [e, t, 1, 1, 1],
        })
    }
}

/// DSV4_HC_POST: `x` `[E, T]`, `residual` `[E, hc, T]`, `post` `[hc, T]`, optional `comb`
/// `[hc, hc, T]` (F32): F32 `[E, hc, T]`.
pub(crate) struct HcPost;

impl OpSpec for HcPost {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("x"), req("residual"), req("post"), opt("comb")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        for i in 0..3 {
            src.want_type(i, &[Type::F32])?;
        }
        let [e, t, ..] = src.get(0).ne;
        want_ne(src, 0, [e, t, 1, 1], "[n_embd, n_tokens]")?;
        let hc = src.get(1).ne[1];
        if hc < 1 {
            return Err(src.bad(1, "its ne1 (hc) must be at least 1"));
        }
        want_ne(src, 1, [e, hc, t, 1], "[n_embd, hc, n_tokens]")?;
        want_ne(src, 2, [hc, t, 1, 1], "[hc, n_tokens]")?;
        if src.opt(3).is_some() {
            src.want_type(3, &[Type::F32])?;
            want_ne(src, 3, [hc, hc, t, 1], "[hc, hc, n_tokens]")?;
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [e, hc, t, 1, 1],
        })
    }
}

impl Context {
    /// `ggml_lightning_indexer`: DeepSeek's indexer scores. For stream `s`, token `t` and key
    /// `j`: `result[j, t, 0, s] = Σ_h relu(q[:, h, t, s] · k[:, 0, j, s])·weights[h, t, 0, s]
    /// + mask[j, t, 0, s mod Sm]`. `q` `[D, H, T, S]` F32, `k` `[D, 1, n_kv, S]` (F32, F16,
    /// BF16 or a quantized type), `weights` `[H, T, 1, S]` F32, `mask` `[n_kv, T, 1, Sm]` F16
    /// with `Sm` dividing `S`; result F32 `[n_kv, T, 1, S]`.
    pub fn lightning_indexer(
        &self,
        q: &Tensor,
        k: &Tensor,
        weights: &Tensor,
        mask: &Tensor,
    ) -> Result<Tensor> {
        let srcs = [q, k, weights, mask].map(Some);
        self.build::<LightningIndexer>(Op::LightningIndexer, &srcs, NoParams {}, false)
    }

    /// `ggml_dsv4_hc_comb`: the hyper-connection mixing matrices. For each token, entries
    /// `8..24` of `mixes` (as `[4, 4]`, `[dst, src]`) times `scale[2]` plus `base`, softmax over
    /// `dst` for each `src`, plus `eps`; then Sinkhorn: columns normalised (each sum `eps +
    /// Σ`), and `n_iter − 1` more rounds of rows then columns. `mixes` `[24, T]`, `scale`
    /// `[>= 3]`, `base` `[24]` (F32; 4 streams only, as GGML); result F32 `[4, 4, T]`.
    pub fn dsv4_hc_comb(
        &self,
        mixes: &Tensor,
        scale: &Tensor,
        base: &Tensor,
        eps: f32,
        n_iter: i32,
    ) -> Result<Tensor> {
        let srcs = [mixes, scale, base].map(Some);
        let p = HcCombParams { eps, n_iter };
        self.build::<HcComb>(Op::Dsv4HcComb, &srcs, p, false)
    }

    /// `ggml_dsv4_hc_pre`: mixes the `hc` streams of `x` `[E, hc, T]` into one with
    /// per-stream weights `[hc, T]`: `result[e, t] = Σ_h x[e, h, t]·weights[h, t]`, F32
    /// `[E, T]`.
    pub fn dsv4_hc_pre(&self, x: &Tensor, weights: &Tensor) -> Result<Tensor> {
        self.hc_pre(x, weights, 1.0, false)
    }

    /// `ggml_dsv4_hc_pre_gated`: as [`Context::dsv4_hc_pre`] with per-element gates `[E, hc,
    /// T]`: `result[e, t] = scale·Σ_h x[e, h, t]·sigmoid(gate[e, h, t])`.
    pub fn dsv4_hc_pre_gated(&self, x: &Tensor, gate: &Tensor, scale: f32) -> Result<Tensor> {
        self.hc_pre(x, gate, scale, true)
    }

    fn hc_pre(&self, x: &Tensor, w: &Tensor, scale: f32, gated: bool) -> Result<Tensor> {
        let p = HcPreParams {
            scale,
            gated: gated as i32,
        };
        self.build::<HcPre>(Op::Dsv4HcPre, &[Some(x), Some(w)], p, false)
    }

    /// `ggml_dsv4_hc_post`: spreads the layer output back over the streams:
    /// `result[e, d, t] = x[e, t]·post[d, t] + Σ_s residual[e, s, t]·comb[d, s, t]`, or
    /// `+ residual[e, d, t]` without `comb`. `x` `[E, T]`, `residual` `[E, hc, T]`, `post`
    /// `[hc, T]`, `comb` `[hc, hc, T]` (F32); result F32 `[E, hc, T]`.
    pub fn dsv4_hc_post(
        &self,
        x: &Tensor,
        residual: &Tensor,
        post: &Tensor,
        comb: Option<&Tensor>,
    ) -> Result<Tensor> {
        let srcs = [Some(x), Some(residual), Some(post), comb];
        self.build::<HcPost>(Op::Dsv4HcPost, &srcs, NoParams {}, false)
    }
}
