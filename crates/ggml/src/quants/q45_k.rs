//! Q4_K and Q5_K: 4- or 5-bit levels in 8 groups of 32, each group with a 6-bit scale and a
//! 6-bit minimum relative to the super-block's f16 `d` and `dmin`. The two formats share their
//! scale searches and scale layout and differ only in the level width.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, forward_kernels, with_weights, Block};
use super::common::{imatrix_weights, nearest_int, sum_squares, PackedF16};
use super::kquants::sigma2;
use super::search::{make_qkx_quants, make_qp_quants, ScaleSteps, QKX3_STEPS};
use crate::QK_K;

/// Bytes of the packed 6-bit scales and minimums (GGML's `K_SCALE_SIZE`).
const K_SCALE_SIZE: usize = 12;

/// One Q4_K super-block: value = `d·scale·level − dmin·min` per group of 32.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4K {
    /// Super-block scale of the group scales.
    pub d: PackedF16,
    /// Super-block scale of the group minimums.
    pub dmin: PackedF16,
    /// Eight 6-bit scales and eight 6-bit minimums (see `scale_min`).
    pub scales: [u8; K_SCALE_SIZE],
    /// Levels: in each run of 64 values, byte `l` holds value `l` (low nibble) and `l + 32`.
    pub qs: [u8; QK_K / 2],
}

/// One Q5_K super-block: as Q4_K, with a fifth level bit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5K {
    /// Super-block scale of the group scales.
    pub d: PackedF16,
    /// Super-block scale of the group minimums.
    pub dmin: PackedF16,
    /// Eight 6-bit scales and eight 6-bit minimums, as in Q4_K.
    pub scales: [u8; K_SCALE_SIZE],
    /// Fifth bits: for the n-th run of 64 values, bit `2n` of byte `l` belongs to value `l`
    /// and bit `2n + 1` to value `l + 32`.
    pub qh: [u8; QK_K / 8],
    /// Low four bits, laid out as Q4_K's `qs`.
    pub qs: [u8; QK_K / 2],
}

block_layout!(BlockQ4K, values: QK_K, bytes: 144);
block_layout!(BlockQ5K, values: QK_K, bytes: 176);

/// Scale and minimum of group `j` (GGML's `get_scale_min_k4`).
#[inline(always)]
pub(crate) fn scale_min(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Stores eight scales and minimums in the 12-byte layout read by [`scale_min`].
fn pack_scales(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; K_SCALE_SIZE] {
    let mut sc = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        if j < 4 {
            sc[j] = ls[j];
            sc[j + 4] = lm[j];
        } else {
            sc[j + 4] = (ls[j] & 0xf) | ((lm[j] & 0xf) << 4);
            sc[j - 4] |= (ls[j] >> 4) << 6;
            sc[j] |= (lm[j] >> 4) << 6;
        }
    }
    sc
}

/// What distinguishes Q4_K from Q5_K.
trait Format: Block {
    /// Largest level.
    const NMAX: i32;
    /// Trial scales of the reference quantizer.
    const REF_STEPS: ScaleSteps;
    /// Whether the imatrix quantizer caps the searched scale levels at 63 before packing (Q5_K
    /// does, Q4_K stores them as they come).
    const CAP_IMATRIX_LEVELS: bool;
    fn header(&mut self) -> (&mut PackedF16, &mut PackedF16, &mut [u8; K_SCALE_SIZE]);
    fn pack_levels(&mut self, levels: &[u8; QK_K]);
    fn levels(&self) -> [u8; QK_K];
}

impl Format for BlockQ4K {
    const NMAX: i32 = 15;
    const REF_STEPS: ScaleSteps = ScaleSteps {
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    const CAP_IMATRIX_LEVELS: bool = false;

    fn header(&mut self) -> (&mut PackedF16, &mut PackedF16, &mut [u8; K_SCALE_SIZE]) {
        (&mut self.d, &mut self.dmin, &mut self.scales)
    }

    fn pack_levels(&mut self, levels: &[u8; QK_K]) {
        for (run, q) in levels.chunks_exact(64).zip(self.qs.chunks_exact_mut(32)) {
            for (l, q) in q.iter_mut().enumerate() {
                *q = run[l] | (run[l + 32] << 4);
            }
        }
    }

    #[inline(always)]
    fn levels(&self) -> [u8; QK_K] {
        let mut levels = [0u8; QK_K];
        for (run, q) in levels.chunks_exact_mut(64).zip(self.qs.chunks_exact(32)) {
            for (l, &b) in q.iter().enumerate() {
                run[l] = b & 0xf;
                run[l + 32] = b >> 4;
            }
        }
        levels
    }
}

impl Format for BlockQ5K {
    const NMAX: i32 = 31;
    const REF_STEPS: ScaleSteps = ScaleSteps {
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    const CAP_IMATRIX_LEVELS: bool = true;

    fn header(&mut self) -> (&mut PackedF16, &mut PackedF16, &mut [u8; K_SCALE_SIZE]) {
        (&mut self.d, &mut self.dmin, &mut self.scales)
    }

    fn pack_levels(&mut self, levels: &[u8; QK_K]) {
        self.qh = [0; QK_K / 8];
        let runs = levels.chunks_exact(64).zip(self.qs.chunks_exact_mut(32));
        for (n, (run, ql)) in runs.enumerate() {
            let (m1, m2) = (1u8 << (2 * n), 2u8 << (2 * n));
            for (j, q) in ql.iter_mut().enumerate() {
                let (mut l1, mut l2) = (run[j], run[j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    self.qh[j] |= m1;
                }
                if l2 > 15 {
                    l2 -= 16;
                    self.qh[j] |= m2;
                }
                *q = l1 | (l2 << 4);
            }
        }
    }

    #[inline(always)]
    fn levels(&self) -> [u8; QK_K] {
        let mut levels = [0u8; QK_K];
        let runs = levels.chunks_exact_mut(64).zip(self.qs.chunks_exact(32));
        for (n, (run, ql)) in runs.enumerate() {
            let (lo, hi) = run.split_at_mut(32);
            let bits = ql.iter().zip(&self.qh);
            for ((lo, hi), (&b, &h)) in lo.iter_mut().zip(hi.iter_mut()).zip(bits) {
                let h = h >> (2 * n);
                *lo = (b & 0xf) | ((h & 1) << 4);
                *hi = (b >> 4) | ((h & 2) << 3);
            }
        }
        levels
    }
}

/// The levels (0..16) of a Q4_K super-block in value order, for the CPU's integer dot products.
pub(crate) fn q4k_levels(b: &BlockQ4K) -> [u8; QK_K] {
    b.levels()
}

/// The levels (0..32) of a Q5_K super-block in value order, for the CPU's integer dot products.
pub(crate) fn q5k_levels(b: &BlockQ5K) -> [u8; QK_K] {
    b.levels()
}

/// Sets `d`, `dmin` and the packed scales, requantizes every group whose stored scale is not
/// zero (the others keep the levels of the search), and packs the levels.
fn finish_block<B: Format>(
    x: &[f32],
    y: &mut B,
    (d, dmin): (f32, f32),
    ls: &[u8; 8],
    lm: &[u8; 8],
    levels: &mut [u8; QK_K],
) {
    let (yd, ydmin, ysc) = y.header();
    *ysc = pack_scales(ls, lm);
    *yd = PackedF16::from_f32(d);
    *ydmin = PackedF16::from_f32(dmin);
    let (dall, mall, sc) = (yd.to_f32(), ydmin.to_f32(), *ysc);
    for (j, (xg, lg)) in x
        .chunks_exact(32)
        .zip(levels.chunks_exact_mut(32))
        .enumerate()
    {
        let (s, m) = scale_min(j, &sc);
        let d = dall * s as f32;
        if d == 0.0 {
            continue;
        }
        let dm = mall * m as f32;
        for (l, &v) in lg.iter_mut().zip(xg) {
            *l = nearest_int((v + dm) / d).clamp(0, B::NMAX) as u8;
        }
    }
    y.pack_levels(levels);
}

/// The kernels of both formats.
mod kernels {
    use super::*;

    pub(super) fn quantize_ref<B: Format>(x: &[f32], y: &mut B) {
        let mut levels = [0u8; QK_K];
        let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for (j, (xg, lg)) in x
            .chunks_exact(32)
            .zip(levels.chunks_exact_mut(32))
            .enumerate()
        {
            let av_x = (sum_squares(xg) / 32.0).sqrt();
            let mut weights = [0.0f32; 32];
            for (w, &v) in weights.iter_mut().zip(xg) {
                *w = av_x + v.abs();
            }
            (scales[j], mins[j]) = make_qkx_quants::<32>(B::NMAX, xg, &weights, lg, B::REF_STEPS);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let inv_scale = if max_scale > 0.0 {
            63.0 / max_scale
        } else {
            0.0
        };
        let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
        let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
        for j in 0..8 {
            ls[j] = (nearest_int(inv_scale * scales[j]) as u8).min(63);
            lm[j] = (nearest_int(inv_min * mins[j]) as u8).min(63);
        }
        finish_block(
            x,
            y,
            (max_scale / 63.0, max_min / 63.0),
            &ls,
            &lm,
            &mut levels,
        );
    }

    pub(super) fn quantize_row_imatrix<B: Format>(row: &[f32], out: &mut [B], qw: &[f32]) {
        let mut levels = [0u8; QK_K];
        for (x, qw, y) in with_weights(row, qw, out) {
            let sigma2 = sigma2(x, 2.0);
            let (mut scales, mut mins, mut sw) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
            let groups = x.chunks_exact(32).zip(qw.chunks_exact(32));
            for (j, ((xg, qg), lg)) in groups.zip(levels.chunks_exact_mut(32)).enumerate() {
                let weights: [f32; 32] = imatrix_weights(xg, qg, sigma2);
                sw[j] = weights.iter().fold(0.0, |s, &w| s + w);
                (scales[j], mins[j]) = make_qkx_quants::<32>(B::NMAX, xg, &weights, lg, QKX3_STEPS);
            }
            let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
            let d_block = make_qp_quants(63, &scales, &mut ls, &sw);
            let m_block = make_qp_quants(63, &mins, &mut lm, &sw);
            if B::CAP_IMATRIX_LEVELS {
                for l in ls.iter_mut().chain(lm.iter_mut()) {
                    *l = (*l).min(63);
                }
            }
            finish_block(x, y, (d_block, m_block), &ls, &lm, &mut levels);
        }
    }

    pub(super) fn dequantize<B: Format>(b: &B, y: &mut [f32]) {
        let levels = b.levels();
        let mut b = *b;
        let (d, min, sc) = b.header();
        let (d, min) = (d.to_f32(), min.to_f32());
        for (j, (yg, lg)) in y
            .chunks_exact_mut(32)
            .zip(levels.chunks_exact(32))
            .enumerate()
        {
            let (s, m) = scale_min(j, sc);
            let (d1, m1) = (d * s as f32, min * m as f32);
            for (y, &l) in yg.iter_mut().zip(lg) {
                *y = d1 * l as f32 - m1;
            }
        }
    }
}

forward_kernels!(kernels => BlockQ4K, BlockQ5K);
