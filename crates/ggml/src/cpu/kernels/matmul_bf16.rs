//! MUL_MAT with BF16 weights on the AVX-512 path of a CPU with AVX-512 BF16, in the float
//! order of GGML's CPU backend built for such a CPU (`__AVX512BF16__`): `b` is rounded to
//! BF16 once per node (BF16 is GGML's dot type for BF16 weights; round to nearest even, NaN
//! kept quiet, subnormals kept, as `GGML_FP32_TO_BF16`) and every sum goes through
//! `vdpbf16ps` as GGML's kernels make it:
//!
//! - against two columns of `b` or more per batch, weights with a multiple of 4 rows, and
//!   `b` in F32 or contiguous BF16 (where GGML hands the product to llamafile's tinyBLAS,
//!   `tinyBLAS<32, __m512, __m512bh, …>`): one accumulator of 16 lanes per output over steps
//!   of 32 values, the last `k % 32` as one masked step (zeros past `k`), the lanes reduced
//!   by GCC's `_mm512_reduce_add_ps` order ([`hsum`](super::matmul_f16::avx512::hsum));
//! - otherwise (matrix-vector products, where `ggml_vec_dot_bf16` runs): two accumulators of
//!   16 lanes over steps of 64 values (values 0..32 of a step into the first, 32..64 into the
//!   second), each reduced by `hsum` and added to an f64 sum (first, then second), then the
//!   last `k % 64` products (in f32, subnormals kept) added one by one in f64, the sum
//!   rounded to f32 last.
//!
//! `vdpbf16ps` (Intel SDM) adds to each f32 lane the products of its two bf16 pairs, the odd
//! element's first, each as a fused multiply-add rounded to nearest even, with subnormal
//! inputs (the bf16 values and the accumulator) read as zero and subnormal results written
//! as zero whatever MXCSR says: so outputs can differ from a plain f32 sum of the products,
//! and the unit tests hold the tiles to a lane-by-lane model of the instruction.
//!
//! The driver (rounding `b` into the node's area, chunks claimed from an atomic counter,
//! tiles of 4 weight rows × 6 columns) is [`matmul_f16`](super::matmul_f16)'s. On the AVX2
//! path, BF16 weights take that driver with the tiles of [`half_avx2`](super::half_avx2)
//! (GGML's AVX2 order: both operands widened to f32). On the AVX-512 path without AVX-512
//! BF16, and on the portable path, they keep the packed GEMM and dot products of
//! [`matmul`](super::matmul) (GGML's AVX-512 F build widens to f32 and sums in steps of 32:
//! not reproduced).

use super::half_avx2::Bf16Avx2;
use super::matmul_f16::{half_tiles, plan_for, BOf, HalfTiles, HalfWeights, RN};
use super::{Planned, TensorPtr};
use crate::cpu::quant_dot::{isa, Isa};
use crate::tensor::Tensor;
use crate::types::{f32_to_bf16, Type};

/// BF16 weights: `b` as bf16 bits, the tiles of [`avx512bf16`].
pub(super) struct Bf16Weights;

impl HalfWeights for Bf16Weights {
    const TY: Type = Type::BF16;
    type B = u16;

    unsafe fn round_row(b: &TensorPtr, row: *const u8, out: &mut [u16]) {
        let packed = b.rows_packed();
        if packed && b.ty == Type::BF16 {
            // SAFETY: a packed row of out.len() bf16 values (any alignment: bytes copied).
            unsafe {
                std::ptr::copy_nonoverlapping(row, out.as_mut_ptr() as *mut u8, 2 * out.len())
            };
        } else if packed && b.ty == Type::F32 && row as usize % 4 == 0 {
            // SAFETY: a packed, aligned f32 row of out.len() values, not written meanwhile.
            let src = unsafe { std::slice::from_raw_parts(row as *const f32, out.len()) };
            round_f32(src, out);
        } else {
            for (i, v) in out.iter_mut().enumerate() {
                // SAFETY: forwarded from the caller (element i of the row).
                *v = f32_to_bf16(unsafe { b.get(row, i) }).to_bits();
            }
        }
    }
}

half_tiles!(Bf16Weights: Self, RN, avx512_bf16(), avx512bf16);

/// Whether the AVX-512 path is selected and the CPU has AVX-512 BF16 (`vdpbf16ps`).
fn avx512_bf16() -> bool {
    isa() == Isa::Avx512 && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// `src` rounded to bf16 bits into `out` as [`f32_to_bf16`] rounds (to nearest even, NaN
/// kept quiet), without branches so that the loop is vectorised.
fn round_f32(src: &[f32], out: &mut [u16]) {
    for (v, x) in out.iter_mut().zip(src) {
        let u = x.to_bits();
        let nan = (u & 0x7fff_ffff) > 0x7f80_0000;
        let rounded = u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16;
        *v = if nan { (u >> 16) | 64 } else { rounded } as u16;
    }
}

/// The plan of MUL_MAT node `t` (weights `a`, activations `b`) through this module, where it
/// applies: BF16 weights with packed rows, the AVX-512 path on a CPU with AVX-512 BF16, a
/// result with packed f32 rows.
pub(super) fn plan(t: &Tensor, a: &Tensor, b: &Tensor) -> Option<Planned> {
    plan_for::<Bf16Weights>(t, a, b).or_else(|| plan_for::<Bf16Avx2>(t, a, b))
}

#[allow(clippy::incompatible_msrv)]
mod avx512bf16 {
    //! The tiles with `vdpbf16ps` (AVX-512 BF16 intrinsics, stable since Rust 1.89, above
    //! the workspace's declared 1.85, as in `quant_dot::x86`).
    use super::super::matmul_f16::avx512::{hsum, prefetch};
    use super::super::matmul_f16::tiny_tile_fn;
    use std::arch::x86_64::*;

    /// Thirty-two bf16 values at `p`.
    ///
    /// # Safety
    /// 64 readable bytes at `p`; the caller has AVX-512 F.
    #[inline(always)]
    unsafe fn load32(p: *const u16) -> __m512bh {
        // SAFETY: forwarded; both types are 64 bytes of plain lanes.
        unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const _)) }
    }

    /// The first `n` (< 32) bf16 values at `p`, zeros after them (only those `n` are read).
    ///
    /// # Safety
    /// `2 · n` readable bytes at `p`; the caller has AVX-512 F and BW.
    #[inline(always)]
    unsafe fn load_partial(p: *const u16, n: usize) -> __m512bh {
        let mask: __mmask32 = (1u32 << n) - 1;
        // SAFETY: forwarded (masked-off elements are neither read nor faulted on).
        unsafe {
            std::mem::transmute::<__m512i, __m512bh>(_mm512_maskz_loadu_epi16(
                mask,
                p as *const i16,
            ))
        }
    }

    // `vdpbf16ps` over steps of 32 bf16 values, then one step of partial loads
    tiny_tile_fn!(
        /// The products of `R` weight rows with `C` rows of `b` in tinyBLAS's order; see
        /// `tiny_tile_fn`.
        ///
        /// # Safety
        /// The CPU must have AVX-512 F, BW, VL and BF16; every row must hold `k` values.
        #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")]
        u16, _mm512_setzero_ps(), 32, load32, load32, load_partial, load_partial,
        |c: __m512, x: __m512bh, y: __m512bh| _mm512_dpbf16_ps(c, x, y)
    );

    /// `out[t] = Σ a[t][l] · b[l]` for `l < k` in `ggml_vec_dot_bf16`'s order: two
    /// accumulators of 16 lanes over steps of 64 (`vdpbf16ps` on values 0..32 and 32..64),
    /// each reduced by [`hsum`] into an f64 sum, then the last `k % 64` products one by one
    /// in f64.
    ///
    /// # Safety
    /// As [`tiny_tile`], with one row `b` of `k` bf16 values.
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")]
    pub(super) unsafe fn vec_rows<const R: usize>(
        a: [*const u16; R],
        b: *const u16,
        k: usize,
        out: &mut [f32; R],
    ) {
        let (mut c1, mut c2) = ([_mm512_setzero_ps(); R], [_mm512_setzero_ps(); R]);
        let whole = k / 64 * 64;
        // SAFETY: l + 64 <= whole <= k in the loop, and every row holds k values.
        unsafe {
            for l in (0..whole).step_by(64) {
                prefetch(a, l);
                let (b1, b2) = (load32(b.add(l)), load32(b.add(l + 32)));
                for (t, row) in a.iter().enumerate() {
                    c1[t] = _mm512_dpbf16_ps(c1[t], load32(row.add(l)), b1);
                    c2[t] = _mm512_dpbf16_ps(c2[t], load32(row.add(l + 32)), b2);
                }
            }
            let widen = |p: *const u16| f32::from_bits((p.read_unaligned() as u32) << 16);
            for (t, (o, row)) in out.iter_mut().zip(a).enumerate() {
                let mut sum = 0f64;
                sum += hsum(c1[t]) as f64;
                sum += hsum(c2[t]) as f64;
                for e in whole..k {
                    sum += (widen(row.add(e)) * widen(b.add(e))) as f64;
                }
                *o = sum as f32;
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::computed_on;
    use super::super::matmul_f16::tests::{check_tiles, hsum_model};
    use super::super::matmul_f16::{order, Order, RM, RN};
    use super::*;
    use crate::Context;

    /// `x` as f32.
    fn f(x: u16) -> f32 {
        f32::from_bits((x as u32) << 16)
    }

    /// `x`, or a zero of its sign where it is subnormal (the instruction's flush).
    fn flush(x: f32) -> f32 {
        if x.is_subnormal() {
            f32::from_bits(x.to_bits() & 0x8000_0000)
        } else {
            x
        }
    }

    /// One lane of `vdpbf16ps`: `acc` plus the products of the pairs `a`, `b` (the odd
    /// element's first), each a fused multiply-add, subnormal inputs and results flushed.
    fn dp_lane(acc: f32, a: [u16; 2], b: [u16; 2]) -> f32 {
        let mut s = flush(acc);
        for e in [1, 0] {
            s = flush(flush(f(a[e])).mul_add(flush(f(b[e])), s));
        }
        s
    }

    /// One `vdpbf16ps` over the 32 values of `a` and `b` from `l` on (zeros past their end).
    fn dp(acc: &mut [f32; 16], a: &[u16], b: &[u16], l: usize) {
        let at = |v: &[u16], i: usize| v.get(l + i).copied().unwrap_or(0);
        for (lane, s) in acc.iter_mut().enumerate() {
            let (i0, i1) = (2 * lane, 2 * lane + 1);
            *s = dp_lane(*s, [at(a, i0), at(a, i1)], [at(b, i0), at(b, i1)]);
        }
    }

    /// tinyBLAS's sum, scalar: one accumulator, steps of 32, the tail zero-padded.
    fn tiny_model(a: &[u16], b: &[u16]) -> f32 {
        let mut acc = [0f32; 16];
        for l in (0..a.len()).step_by(32) {
            dp(&mut acc, a, b, l);
        }
        hsum_model(&acc)
    }

    /// `ggml_vec_dot_bf16`'s sum, scalar.
    fn vec_model(a: &[u16], b: &[u16]) -> f32 {
        let np = a.len() / 64 * 64;
        let (mut c1, mut c2) = ([0f32; 16], [0f32; 16]);
        for l in (0..np).step_by(64) {
            dp(&mut c1, &a[..np], &b[..np], l);
            dp(&mut c2, &a[..np], &b[..np], l + 32);
        }
        let mut sum = 0f64;
        sum += hsum_model(&c1) as f64;
        sum += hsum_model(&c2) as f64;
        for l in np..a.len() {
            sum += (f(a[l]) * f(b[l])) as f64;
        }
        sum as f32
    }

    /// Whether this CPU runs the module's kernels.
    fn runs() -> bool {
        Isa::Avx512.available() && std::arch::is_x86_feature_detected!("avx512bf16")
    }

    /// A generator of bf16 values: mostly in ±4, some subnormal and some tiny normals (whose
    /// products are subnormal), so that the instruction's flushes are exercised.
    pub(in super::super) fn values(seed: u32) -> impl FnMut() -> u16 {
        let mut state = seed;
        move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let r = state >> 8;
            let x = (r & 0xffff) as f32 / 16384.0 - 2.0;
            match r >> 16 & 15 {
                0 => (r & 0x807f) as u16, // subnormal (or zero)
                1 => (r & 0x807f) as u16 | (40 + (r >> 10 & 31) as u16) << 7, // tiny normal
                _ => f32_to_bf16(2.0 * x).to_bits(),
            }
        }
    }

    /// The branchless rounding gives [`f32_to_bf16`]'s bits, specials and ties included.
    #[test]
    fn round_f32_as_ggml() {
        let mut x: Vec<f32> = [
            0x7f80_0001,
            0xffc0_0000,
            0x7f80_0000,
            0x0000_8000,
            0x0001_8000,
        ]
        .iter()
        .map(|&u: &u32| f32::from_bits(u))
        .collect();
        x.extend([
            0.0,
            -0.0,
            1.0 + 1.0 / 256.0,
            f32::MAX,
            f32::MIN_POSITIVE / 3.0,
        ]);
        let mut state = 5u32;
        x.extend((0..10_000).map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            f32::from_bits(state)
        }));
        let mut got = vec![0u16; x.len()];
        round_f32(&x, &mut got);
        for (g, v) in got.iter().zip(&x) {
            assert_eq!(*g, f32_to_bf16(*v).to_bits(), "{:#x}", v.to_bits());
        }
    }

    /// The model of the instruction matches the hardware lane by lane, flushes included:
    /// three steps of 32 (so the later ones start from accumulated sums), many operands.
    #[test]
    fn lane_model_matches_vdpbf16ps() {
        if !runs() {
            return;
        }
        let mut next = values(42);
        for _ in 0..2000 {
            let a: Vec<u16> = (0..96).map(|_| next()).collect();
            let b: Vec<u16> = (0..96).map(|_| next()).collect();
            let mut got = [[0f32; 1]; 1];
            // SAFETY: the CPU runs the kernels; both rows hold 96 values.
            unsafe {
                avx512bf16::tiny_tile::<1, 1>([a.as_ptr()], [b.as_ptr()], None, 96, &mut got)
            };
            assert_eq!(got[0][0].to_bits(), tiny_model(&a, &b).to_bits());
        }
    }

    /// Both tiles give every output the scalar model's bits, for every tile shape and tail
    /// length, with subnormal values among the operands.
    #[test]
    fn tiles_follow_ggml_order_bit_for_bit() {
        if !runs() {
            return;
        }
        let mut next = values(987_654_321);
        for k in [0usize, 1, 2, 31, 32, 33, 63, 64, 65, 100, 127, 257, 1000] {
            let a: Vec<Vec<u16>> = (0..RM).map(|_| (0..k).map(|_| next()).collect()).collect();
            let b: Vec<Vec<u16>> = (0..RN).map(|_| (0..k).map(|_| next()).collect()).collect();
            // SAFETY: the CPU runs the tiles; every row holds k values.
            unsafe { check_tiles::<Bf16Weights, _>(&a, &b, tiny_model, vec_model) };
        }
    }

    /// One MUL_MAT case: weights `[k, m, wb2, wb3]`, activations `[k, n, b2, b3]` (`wb2`
    /// dividing `b2`, `wb3` dividing `b3`: broadcast batches), `b` in `bty` (BF16 `b`
    /// optionally a view with padded rows: not contiguous).
    struct Case {
        m: i64,
        k: i64,
        n: i64,
        w: [i64; 2],
        b: [i64; 2],
        bty: Type,
        padded: bool,
    }

    /// MUL_MAT through the graph on 1 and 2 threads gives every output the bits of the
    /// scalar model in the order GGML would take (tinyBLAS's or `ggml_vec_dot_bf16`'s).
    #[test]
    fn mul_mat_matches_model_bit_for_bit() {
        if !runs() || isa() != Isa::Avx512 {
            return;
        }
        let case = |m, k, n, w, b| Case {
            m,
            k,
            n,
            w,
            b,
            bty: Type::F32,
            padded: false,
        };
        let mut cases = Vec::new();
        for n in [1, 2, 5, 32, 33] {
            cases.push(case(64, 100, n, [1, 1], [1, 1]));
            cases.push(case(38, 77, n, [1, 1], [1, 1]));
        }
        cases.push(case(100, 257, 7, [2, 1], [4, 3]));
        cases.push(case(20, 130, 2, [3, 2], [3, 2]));
        cases.push(case(8, 64, 1, [1, 1], [2, 2]));
        cases.push(case(200, 1000, 50, [1, 1], [1, 1]));
        for padded in [false, true] {
            for n in [1, 6] {
                cases.push(Case {
                    bty: Type::BF16,
                    padded,
                    ..case(44, 95, n, [1, 1], [2, 1])
                });
            }
        }
        let mut next = values(7);
        for c in &cases {
            let ctx = Context::init(64 << 20, false).unwrap();
            let a = ctx
                .new_tensor(Type::BF16, &[c.k, c.m, c.w[0], c.w[1]])
                .unwrap();
            let a_bits: Vec<u16> = (0..a.nelements()).map(|_| next()).collect();
            let bytes = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            a.set_bytes(&bytes(&a_bits), 0).unwrap();
            let pad = if c.padded { 3 } else { 0 };
            let full = ctx
                .new_tensor(c.bty, &[c.k + pad, c.n, c.b[0], c.b[1]])
                .unwrap();
            let b_vals: Vec<f32> = (0..full.nelements()).map(|_| f(next()) * 1.01).collect();
            full.set_f32(&b_vals).unwrap();
            let nb = full.nb();
            let b = if c.padded {
                ctx.view_4d(&full, [c.k, c.n, c.b[0], c.b[1]], nb[1], nb[2], nb[3], 0)
                    .unwrap()
            } else {
                full.clone()
            };
            let d = ctx.mul_mat(&a, &b).unwrap();
            let graph = ctx.build_forward_expand(&d).unwrap();
            let (m, k, n) = (c.m as usize, c.k as usize, c.n as usize);
            let kp = k + pad as usize;
            let b_dot = c.bty == Type::BF16;
            let ord = order(m, n, b_dot, !c.padded);
            for threads in [1, 2] {
                let got = computed_on(&graph, &d, threads);
                for (bi, got) in got.chunks_exact(m * n).enumerate() {
                    let (i2, i3) = (bi % c.b[0] as usize, bi / c.b[0] as usize);
                    let wb = i2 / (c.b[0] / c.w[0]) as usize
                        + c.w[0] as usize * (i3 / (c.b[1] / c.w[1]) as usize);
                    for j in 0..n {
                        let brow = &b_vals[(bi * n + j) * kp..][..k];
                        let bb: Vec<u16> = brow.iter().map(|&x| f32_to_bf16(x).to_bits()).collect();
                        for i in 0..m {
                            let arow = &a_bits[(wb * m + i) * k..][..k];
                            let want = match ord {
                                Order::Tiny => tiny_model(arow, &bb),
                                Order::VecDot => vec_model(arow, &bb),
                            };
                            assert_eq!(
                                got[j * m + i].to_bits(),
                                want.to_bits(),
                                "m {m} k {k} n {n} batch {bi} ({i}, {j}) {threads} threads"
                            );
                        }
                    }
                }
            }
        }
    }
}
