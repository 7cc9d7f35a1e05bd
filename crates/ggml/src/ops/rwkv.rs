//! Linear-attention recurrences: RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 and
//! GATED_DELTA_NET. Each carries an `S × S` state per head and sequence through the tokens
//! and returns the outputs and the final state(s) concatenated in one F32 tensor.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// GATED_LINEAR_ATTN's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GlaParams {
    /// Factor applied to the queries.
    pub scale: f32,
}

/// GATED_DELTA_NET's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GatedDeltaNetParams {
    /// State snapshots kept per head and sequence: slot 0 the final state, slot `j` the state
    /// `j` tokens before the end.
    pub k: i32,
}

/// The rule shared by the three RWKV-style recurrences: every slot of `per_token` is F32,
/// contiguous, `[S, H, T]` (taken from slot `key`); slot `state` is F32, contiguous, with
/// `S·S·H·n_seqs` elements (`n_seqs = state.ne1`, dividing `T`); slot `per_head`, when given,
/// has `S·H` elements. The result is F32 `[S·H, T + S·n_seqs]`: the outputs, then the states.
fn recurrence(
    src: &Srcs<'_>,
    key: usize,
    per_token: &[usize],
    per_head: Option<usize>,
    state: usize,
) -> Result<Shape> {
    let last = [state];
    for &i in per_token.iter().chain(&per_head).chain(&last) {
        src.want_type(i, &[Type::F32])?;
        if !src.get(i).is_contiguous() {
            return Err(src.bad(i, "it must be contiguous"));
        }
    }
    let ne = src.get(key).ne;
    let (s, h, t) = (ne[0], ne[1], ne[2]);
    for &i in per_token {
        if src.get(i).ne != [s, h, t, 1, 1] {
            return Err(src.bad(i, format!("it must be [S, H, T] = [{s}, {h}, {t}]")));
        }
    }
    if let Some(i) = per_head {
        if src.get(i).nelements() != s * h {
            return Err(src.bad(i, format!("it must have S·H = {} elements", s * h)));
        }
    }
    let st = src.get(state);
    let n_seqs = st.ne[1];
    if n_seqs < 1 || st.nelements() != s * s * h * n_seqs || t % n_seqs != 0 {
        return Err(src.bad(
            state,
            format!(
                "it must be [S·S·H = {}, n_seqs] with n_seqs >= 1 dividing T = {t}",
                s * s * h
            ),
        ));
    }
    Ok(Shape::New {
        ty: Type::F32,
        ne: [s * h, t + s * n_seqs, 1, 1, 1],
    })
}

/// RWKV_WKV6: `k`, `v`, `r`, `td` `[S, H, T]`, `tf` (S·H elements), `state`
/// `[S·S·H, n_seqs]`.
pub(crate) struct Wkv6;

impl OpSpec for Wkv6 {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[
        req("k"),
        req("v"),
        req("r"),
        req("tf"),
        req("td"),
        req("state"),
    ];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        recurrence(src, 0, &[0, 1, 2, 4], Some(3), 5)
    }
}

/// GATED_LINEAR_ATTN: `k`, `v`, `q`, `g` `[S, H, T]`, `state` `[S·S·H, n_seqs]`.
pub(crate) struct Gla;

impl OpSpec for Gla {
    type Params = GlaParams;
    const SLOTS: &'static [Slot] = &[req("k"), req("v"), req("q"), req("g"), req("state")];
    fn shape(src: &Srcs<'_>, p: &GlaParams) -> Result<Shape> {
        if !p.scale.is_finite() {
            return Err(src.err(format!("scale = {}; it must be finite", p.scale)));
        }
        recurrence(src, 0, &[0, 1, 2, 3], None, 4)
    }
}

/// RWKV_WKV7: `r`, `w`, `k`, `v`, `a`, `b` `[S, H, T]`, `state` `[S·S·H, n_seqs]`.
pub(crate) struct Wkv7;

impl OpSpec for Wkv7 {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[
        req("r"),
        req("w"),
        req("k"),
        req("v"),
        req("a"),
        req("b"),
        req("state"),
    ];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        recurrence(src, 2, &[0, 1, 2, 3, 4, 5], None, 6)
    }
}

/// GATED_DELTA_NET: `v` `[S, H, T, n_seqs]`, `q`, `k` `[S, Hq, T, nq]` with `Hq` dividing
/// `H` and `nq` dividing `n_seqs` (rows packed), `g` `[1 or S, H, T, n_seqs]`, `beta`
/// `[1, H, T, n_seqs]`, `state` `[S, S, H, n_seqs]` (contiguous; all F32). The result is
/// F32 `[S·H, T·n_seqs + K·S·n_seqs]`.
pub(crate) struct GatedDeltaNet;

impl OpSpec for GatedDeltaNet {
    type Params = GatedDeltaNetParams;
    const SLOTS: &'static [Slot] = &[
        req("q"),
        req("k"),
        req("v"),
        req("g"),
        req("beta"),
        req("state"),
    ];
    fn shape(src: &Srcs<'_>, p: &GatedDeltaNetParams) -> Result<Shape> {
        for i in 0..6 {
            src.want_type(i, &[Type::F32])?;
            let m = src.get(i);
            let ok = if i < 3 {
                m.rows_packed()
            } else {
                m.is_contiguous()
            };
            if !ok {
                return Err(src.bad(
                    i,
                    if i < 3 {
                        "its rows must be packed"
                    } else {
                        "it must be contiguous"
                    },
                ));
            }
            if m.ne[4] != 1 {
                return Err(src.bad(i, "it must have at most 4 dimensions"));
            }
        }
        if p.k < 1 {
            return Err(src.err(format!("K = {}; it must be at least 1", p.k)));
        }
        let [sv, h, t, n_seqs, _] = src.get(2).ne;
        for i in [0, 1] {
            let m = src.get(i);
            let fits = m.ne[0] == sv
                && m.ne[2] == t
                && m.ne[1] >= 1
                && h % m.ne[1] == 0
                && m.ne[3] >= 1
                && n_seqs % m.ne[3] == 0;
            if !fits {
                return Err(src.bad(
                    i,
                    format!("it must be [S = {sv}, a divisor of H = {h}, T = {t}, a divisor of n_seqs = {n_seqs}]"),
                ));
            }
        }
        let g = src.get(3);
        if (g.ne[0] != 1 && g.ne[0] != sv) || g.ne[1..4] != [h, t, n_seqs] {
            return Err(src.bad(3, format!("it must be [1 or {sv}, {h}, {t}, {n_seqs}]")));
        }
        if src.get(4).ne[..4] != [1, h, t, n_seqs] {
            return Err(src.bad(4, format!("it must be [1, {h}, {t}, {n_seqs}]")));
        }
        if src.get(5).ne[..4] != [sv, sv, h, n_seqs] {
            return Err(src.bad(5, format!("it must be [{sv}, {sv}, {h}, {n_seqs}]")));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [sv * h, t * n_seqs + p.k as i64 * sv * n_seqs, 1, 1, 1],
        })
    }
}

impl Context {
    /// `ggml_rwkv_wkv6`: RWKV-6's time mixing. Per head and sequence (of `T / n_seqs`
    /// tokens each, starting from `state`), with `kv[i][j] = k[i]·v[j]`:
    /// `out[j] = Σ_i r[i]·(tf[i]·kv[i][j] + S[i][j])`, then `S[i][j] = S[i][j]·td[i] +
    /// kv[i][j]`. `k`, `v`, `r`, `td` are `[S, H, T]`, `tf` has `S·H` elements, `state` is
    /// `[S·S·H, n_seqs]` (all F32, contiguous). The result is F32 `[S·H, T + S·n_seqs]`: the
    /// outputs, then the final states.
    pub fn rwkv_wkv6(
        &self,
        k: &Tensor,
        v: &Tensor,
        r: &Tensor,
        tf: &Tensor,
        td: &Tensor,
        state: &Tensor,
    ) -> Result<Tensor> {
        let srcs = [k, v, r, tf, td, state].map(Some);
        self.build::<Wkv6>(Op::RwkvWkv6, &srcs, NoParams {}, false)
    }

    /// `ggml_gated_linear_attn`: gated linear attention. Per head and sequence:
    /// `S[i][j] = S[i][j]·g[i] + k[i]·v[j]`, `out[j] = Σ_i S[i][j]·q[i]·scale`. `k`, `v`, `q`,
    /// `g` are `[S, H, T]`, `state` `[S·S·H, n_seqs]` (F32, contiguous); the result is F32
    /// `[S·H, T + S·n_seqs]`: the outputs, then the final states.
    pub fn gated_linear_attn(
        &self,
        k: &Tensor,
        v: &Tensor,
        q: &Tensor,
        g: &Tensor,
        state: &Tensor,
        scale: f32,
    ) -> Result<Tensor> {
        let srcs = [k, v, q, g, state].map(Some);
        self.build::<Gla>(Op::GatedLinearAttn, &srcs, GlaParams { scale }, false)
    }

    /// `ggml_rwkv_wkv7`: RWKV-7's time mixing. Per head and sequence, for each state row `i`:
    /// `sa = Σ_j a[j]·S[i][j]`, `S[i][j] = S[i][j]·w[j] + v[i]·k[j] + sa·b[j]`,
    /// `out[i] = Σ_j S[i][j]·r[j]`. `r`, `w`, `k`, `v`, `a`, `b` are `[S, H, T]`, `state`
    /// `[S·S·H, n_seqs]` (F32, contiguous); the result is F32 `[S·H, T + S·n_seqs]`.
    ///
    /// Deliberate difference: GGML's x86 SIMD kernel steps through a head `GGML_F32_STEP`
    /// (32 with AVX2) floats at a time with no tail, so for head sizes that are not a multiple
    /// of it GGML reads past the head and gives garbage; this kernel is exact for every head
    /// size and agrees with GGML where GGML is correct (checked at S = 64).
    #[allow(clippy::too_many_arguments)]
    pub fn rwkv_wkv7(
        &self,
        r: &Tensor,
        w: &Tensor,
        k: &Tensor,
        v: &Tensor,
        a: &Tensor,
        b: &Tensor,
        state: &Tensor,
    ) -> Result<Tensor> {
        let srcs = [r, w, k, v, a, b, state].map(Some);
        self.build::<Wkv7>(Op::RwkvWkv7, &srcs, NoParams {}, false)
    }

    /// `ggml_gated_delta_net`: the gated delta rule. Per head `h` and sequence, with the state
    /// `M` stored as `state[:, :, h, seq]` (`M[j][i]` at `[i, j]`), for each token: `M[j][i]
    /// *= exp(g[i])` (or `exp(g[0])` for a scalar gate), `δ[j] = (v[j] − Σ_i M[j][i]·k[i])·β`,
    /// `M[j][i] += k[i]·δ[j]`, `out[j] = Σ_i M[j][i]·q[i] / √S`. `q`, `k` `[S, Hq, T, nq]`
    /// broadcast over heads (head `h` uses `h mod Hq`) and sequences (`seq / (n_seqs/nq)`);
    /// `v` `[S, H, T, n_seqs]`; `g` `[1 or S, H, T, n_seqs]`; `beta` `[1, H, T, n_seqs]`;
    /// `state` `[S, S, H, n_seqs]`. The F32 result `[S·H, T·n_seqs + K·S·n_seqs]` holds the
    /// outputs then `K` state slots: slot `j` the state `j` tokens before the end (slots
    /// `j >= T` are left unwritten, as in GGML).
    #[allow(clippy::too_many_arguments)]
    pub fn gated_delta_net(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        g: &Tensor,
        beta: &Tensor,
        state: &Tensor,
        big_k: i64,
    ) -> Result<Tensor> {
        let k_slots = i32::try_from(big_k).map_err(|_| {
            Error::invalid(format!(
                "GATED_DELTA_NET: K = {big_k}; it must be 1 to {}",
                i32::MAX
            ))
        })?;
        let srcs = [q, k, v, g, beta, state].map(Some);
        let p = GatedDeltaNetParams { k: k_slots };
        self.build::<GatedDeltaNet>(Op::GatedDeltaNet, &srcs, p, false)
    }
}
