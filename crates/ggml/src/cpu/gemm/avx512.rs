//! The AVX-512 F micro-kernel: a 48 × 8 tile (three vectors of `a` times eight broadcast
//! values of `b`: 24 of the 32 registers accumulate, 11 loads per 24 FMAs; measured ahead of
//! 32 × 12 and 64 × 6 on an Emerald Rapids Xeon, and 32-column batches take whole tiles), and
//! widening with `vcvtph2ps`.

// AVX-512 target features and intrinsics are stable since Rust 1.89, so this path needs 1.89
// while the workspace still declares 1.85 (as quant_dot's AVX-512 path).
#![allow(clippy::incompatible_msrv)]

use super::Kernel;
use crate::types::Type;
use std::arch::x86_64::*;

/// Vectors of sixteen rows of `a` per tile.
const MV: usize = 3;
/// Columns of `b` per tile.
const NR: usize = 8;

/// The AVX-512 path.
pub(super) const KERNEL: Kernel = Kernel {
    mr: 16 * MV,
    nr: NR,
    micro,
    pack_panel,
};

/// The micro-kernel ([`MicroFn`](super::MicroFn)).
///
/// # Safety
/// As `MicroFn`; the CPU must have AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn micro(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    let mut sum = [[_mm512_setzero_ps(); MV]; NR];
    for p in 0..kc {
        // SAFETY: p < kc, and the panels hold kc · 16·MV and kc · NR values.
        unsafe {
            let av: [__m512; MV] =
                std::array::from_fn(|v| _mm512_loadu_ps(a.add(p * 16 * MV + 16 * v)));
            for (j, s) in sum.iter_mut().enumerate() {
                let bv = _mm512_set1_ps(*b.add(p * NR + j));
                for v in 0..MV {
                    s[v] = _mm512_fmadd_ps(av[v], bv, s[v]);
                }
            }
        }
    }
    for (j, s) in sum.iter().enumerate() {
        for (v, &x) in s.iter().enumerate() {
            // SAFETY: row j of the caller's tile holds 16·MV values.
            unsafe {
                let o = c.add(j * ldc + 16 * v);
                let x = if acc {
                    _mm512_add_ps(_mm512_loadu_ps(o), x)
                } else {
                    x
                };
                _mm512_storeu_ps(o, x);
            }
        }
    }
}

/// Sixteen values of `ty` (F32, F16 or BF16) at `p`, widened.
///
/// # Safety
/// Sixteen values must be readable at `p`; the CPU must have AVX-512 F.
#[inline(always)]
unsafe fn load16(ty: Type, p: *const u8) -> __m512 {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ty {
            Type::F32 => _mm512_loadu_ps(p as *const f32),
            Type::F16 => _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i)),
            _ => {
                let h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p as *const __m256i));
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(h))
            }
        }
    }
}

/// The 16 × 16 transpose of `r` (row `i` of the result holds element `i` of every `r`).
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline(always)]
unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // SAFETY: register shuffles only (the caller guarantees the features).
    unsafe {
        // pairs of rows interleaved: t[2i], t[2i + 1] from r[2i], r[2i + 1]
        let t: [__m512; 16] = std::array::from_fn(|x| {
            let (lo, hi) = (r[x & !1], r[x | 1]);
            if x % 2 == 0 {
                _mm512_unpacklo_ps(lo, hi)
            } else {
                _mm512_unpackhi_ps(lo, hi)
            }
        });
        // u[4g + c], 128-bit lane l: rows 4g..4g + 4 of column 4l + c
        let u: [__m512; 16] = std::array::from_fn(|x| {
            let (g, c) = (x / 4, x % 4);
            let (a, b) = (
                _mm512_castps_pd(t[4 * g + c / 2]),
                _mm512_castps_pd(t[4 * g + 2 + c / 2]),
            );
            _mm512_castpd_ps(if c % 2 == 0 {
                _mm512_unpacklo_pd(a, b)
            } else {
                _mm512_unpackhi_pd(a, b)
            })
        });
        let mut out = [_mm512_setzero_ps(); 16];
        for c in 0..4 {
            let v0 = _mm512_shuffle_f32x4::<0x44>(u[c], u[4 + c]);
            let v1 = _mm512_shuffle_f32x4::<0xEE>(u[c], u[4 + c]);
            let w0 = _mm512_shuffle_f32x4::<0x44>(u[8 + c], u[12 + c]);
            let w1 = _mm512_shuffle_f32x4::<0xEE>(u[8 + c], u[12 + c]);
            out[c] = _mm512_shuffle_f32x4::<0x88>(v0, w0);
            out[4 + c] = _mm512_shuffle_f32x4::<0xDD>(v0, w0);
            out[8 + c] = _mm512_shuffle_f32x4::<0x88>(v1, w1);
            out[12 + c] = _mm512_shuffle_f32x4::<0xDD>(v1, w1);
        }
        out
    }
}

/// A [`PanelFn`](super::PanelFn) for 32-row panels: 16 × 16 blocks transposed in registers.
///
/// # Safety
/// As `PanelFn`; the CPU must have AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn pack_panel(ty: Type, base: *const u8, rs: usize, kc: usize, out: *mut f32) {
    let ts = ty.type_size();
    let k16 = kc / 16 * 16;
    for h in 0..MV {
        for p in (0..k16).step_by(16) {
            // SAFETY: rows 16h..16h + 16 of the panel, elements p..p + 16 < kc (caller).
            unsafe {
                let r: [__m512; 16] =
                    std::array::from_fn(|i| load16(ty, base.add((16 * h + i) * rs + p * ts)));
                for (q, v) in transpose16(r).into_iter().enumerate() {
                    _mm512_storeu_ps(out.add((p + q) * 16 * MV + 16 * h), v);
                }
            }
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { super::pack_panel_tail(ty, base, rs, k16..kc, 16 * MV, out) };
}
