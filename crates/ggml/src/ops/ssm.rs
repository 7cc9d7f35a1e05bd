//! State-space models (Mamba): SSM_CONV, the causal depthwise convolution of the sequence, and
//! SSM_SCAN, the selective scan in its Mamba-1 (per-state decay) and Mamba-2 (per-head
//! decay, state snapshots) forms.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, Meta, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// SSM_SCAN's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SsmScanParams {
    /// How many states the result keeps per sequence: the final one and, for `k > 1`, the
    /// states 1 to `k − 1` tokens before the end (Mamba-2 only).
    pub k: i32,
}

/// SSM_CONV: `sx` `[d_conv − 1 + n_t, d_inner, n_s]` convolved with `c` `[d_conv, d_inner]`
/// (both F32): `[d_inner, n_t, n_s]` F32.
pub(crate) struct SsmConv;

impl OpSpec for SsmConv {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("sx"), req("c")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (sx, c) = (src.get(0), src.get(1));
        src.want_type(0, &[Type::F32])?;
        src.want_type(1, &[Type::F32])?;
        if sx.ne[3] != 1 || sx.ne[4] != 1 {
            return Err(src.bad(0, "it must be 3-D"));
        }
        if c.ne[2..].iter().any(|&n| n != 1) || c.ne[0] < 1 {
            return Err(src.bad(1, "it must be a matrix [d_conv >= 1, d_inner]"));
        }
        let n_t = sx.ne[0] - c.ne[0] + 1;
        if sx.ne[1] != c.ne[1] || n_t < 0 {
            return Err(src.bad(
                0,
                format!(
                    "it must be [d_conv − 1 + n_t, d_inner, n_s] for c {:?} (n_t >= 0)",
                    c.ne
                ),
            ));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [c.ne[1], n_t, sx.ne[2], 1, 1],
        })
    }
}

/// SSM_SCAN: the selective scan. Operands (F32 but `ids`): `s` `[d_state, head_dim, n_head,
/// n_rs]` initial states (contiguous), `x` `[head_dim, n_head, n_t, n_seqs]`, `dt` `[n_head,
/// n_t, n_seqs]` (contiguous), `A` `[d_state or 1, n_head]` (contiguous), `B`, `C` `[d_state,
/// n_group, n_t, n_seqs]`, `ids` I32 `[n_seqs]` (which state of `s` each sequence starts
/// from). The result is F32 1-D: `y` (x's element count) followed by `k` blocks of
/// `d_state·head_dim·n_head·n_seqs` states.
pub(crate) struct SsmScan;

impl OpSpec for SsmScan {
    type Params = SsmScanParams;
    const SLOTS: &'static [Slot] = &[
        req("s"),
        req("x"),
        req("dt"),
        req("A"),
        req("B"),
        req("C"),
        req("ids"),
    ];
    fn shape(src: &Srcs<'_>, p: &SsmScanParams) -> Result<Shape> {
        for i in 0..6 {
            src.want_type(i, &[Type::F32])?;
        }
        src.want_type(6, &[Type::I32])?;
        if p.k < 1 {
            return Err(src.err(format!("K = {}; it must be at least 1", p.k)));
        }
        let [s, x, dt, a, b, c, ids] = std::array::from_fn(|i| *src.get(i));
        for (i, m) in [(0, &s), (2, &dt), (3, &a)] {
            if !m.is_contiguous() {
                return Err(src.bad(i, "it must be contiguous"));
            }
        }
        for (i, m) in [(1, &x), (4, &b), (5, &c)] {
            if m.nb[0] != 4 || m.nb[1] != m.ne[0] as usize * 4 {
                return Err(src.bad(i, "its first two dimensions must be packed"));
            }
        }
        src.want_same_shape(4, 5)?;
        let (d_state, head_dim, n_head, n_t, n_seqs) =
            (s.ne[0], x.ne[0], x.ne[1], x.ne[2], x.ne[3]);
        let five_d = [s, x, dt, a, b, ids].iter().any(|m| m.ne[4] != 1);
        if five_d {
            return Err(src.err("the operands must have at most 4 dimensions"));
        }
        if dt.ne[..3] != [n_head, n_t, n_seqs] || dt.ne[3] != 1 {
            return Err(src.bad(
                2,
                format!("it must be [n_head, n_t, n_seqs] = [{n_head}, {n_t}, {n_seqs}]"),
            ));
        }
        if s.ne[1] != head_dim || s.ne[2] != n_head {
            return Err(src.bad(
                0,
                format!("it must be [d_state, {head_dim}, {n_head}, n_rs]"),
            ));
        }
        let groups_fit = b.ne[1] >= 1 && n_head % b.ne[1] == 0;
        if b.ne[0] != d_state || b.ne[2] != n_t || b.ne[3] != n_seqs || !groups_fit {
            return Err(src.bad(
                4,
                format!(
                    "it must be [d_state = {d_state}, n_group dividing {n_head}, {n_t}, {n_seqs}]"
                ),
            ));
        }
        if ids.ne[0] != n_seqs || ids.ne[1..].iter().any(|&n| n != 1) {
            return Err(src.bad(6, format!("it must be a vector of n_seqs = {n_seqs}")));
        }
        let mamba1 = a.ne[0] != 1;
        if a.ne[1] != n_head || a.ne[2..].iter().any(|&n| n != 1) || (mamba1 && a.ne[0] != d_state)
        {
            return Err(src.bad(3, format!("it must be [{d_state} or 1, n_head = {n_head}]")));
        }
        if mamba1 && p.k != 1 {
            return Err(src.err(format!(
                "K = {}; the Mamba-1 form (A per state) keeps only the final state (K = 1)",
                p.k
            )));
        }
        let states = p.k as i64 * d_state * head_dim * n_head * n_seqs;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [Meta::nelements(&x) + states, 1, 1, 1, 1],
        })
    }
}

impl Context {
    /// `ggml_ssm_conv`: the causal depthwise convolution of Mamba. `sx` `[d_conv − 1 + n_t,
    /// d_inner, n_s]` (the previous `d_conv − 1` inputs followed by the sequence) and the
    /// kernel `c` `[d_conv, d_inner]` (both F32) give `[d_inner, n_t, n_s]` F32:
    /// `result[i, t, s] = Σ_j sx[t + j, i, s]·c[j, i]`.
    pub fn ssm_conv(&self, sx: &Tensor, c: &Tensor) -> Result<Tensor> {
        self.build::<SsmConv>(Op::SsmConv, &[Some(sx), Some(c)], NoParams {}, false)
    }

    /// `ggml_ssm_scan`: Mamba's selective scan over the tokens of each sequence, per head `h`
    /// (group `g = h / (n_head / n_group)`), dimension `i` and state `n`:
    /// `Δ = softplus(dt[h])`, `state = state·exp(Δ·A) + B[n, g]·x[i, h]·Δ`,
    /// `y[i, h] = Σ_n state·C[n, g]`, with `A = A[n, h]` (Mamba-1) or `A[0, h]` (Mamba-2).
    /// Sequence `q` starts from state `ids[q]` of `s` (an out-of-range id makes the
    /// computation fail with an error naming it; GGML reads out of bounds). Shapes: see the op's operands
    /// (`s` `[d_state, head_dim, n_head, n_rs]`, `x` `[head_dim, n_head, n_t, n_seqs]`, `dt`
    /// `[n_head, n_t, n_seqs]`, `A` `[d_state or 1, n_head]`, `B`, `C` `[d_state, n_group,
    /// n_t, n_seqs]`, `ids` I32 `[n_seqs]`). The F32 1-D result holds `y` (shaped as `x`)
    /// then `k` blocks of `n_seqs` states: block 0 the final ones, block `j` (Mamba-2, `k > 1`)
    /// those `j` tokens before the end (left unwritten when the sequence is shorter).
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_scan(
        &self,
        s: &Tensor,
        x: &Tensor,
        dt: &Tensor,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        ids: &Tensor,
        k: i64,
    ) -> Result<Tensor> {
        let k = i32::try_from(k).map_err(|_| {
            crate::error::Error::invalid(format!("SSM_SCAN: K = {k}; it must be 1 to {}", i32::MAX))
        })?;
        let srcs = [s, x, dt, a, b, c, ids].map(Some);
        self.build::<SsmScan>(Op::SsmScan, &srcs, SsmScanParams { k }, false)
    }
}
