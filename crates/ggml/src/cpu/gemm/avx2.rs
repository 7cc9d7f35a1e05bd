//! The AVX2 + FMA micro-kernel: a 16 × 6 tile (two vectors of `a` times six broadcast values
//! of `b`: twelve accumulators), and F16C widening.

use super::Kernel;
use crate::types::Type;
use std::arch::x86_64::*;

/// Vectors of eight rows of `a` per tile.
const MV: usize = 2;
/// Columns of `b` per tile.
const NR: usize = 6;

/// The AVX2 path.
pub(super) const KERNEL: Kernel = Kernel {
    mr: 8 * MV,
    nr: NR,
    micro,
    pack_panel,
};

/// The micro-kernel ([`MicroFn`](super::MicroFn)).
///
/// # Safety
/// As `MicroFn`; the CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn micro(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    let mut sum = [[_mm256_setzero_ps(); MV]; NR];
    for p in 0..kc {
        // SAFETY: p < kc, and the panels hold kc · 8·MV and kc · NR values.
        unsafe {
            let av: [__m256; MV] =
                std::array::from_fn(|v| _mm256_loadu_ps(a.add(p * 8 * MV + 8 * v)));
            for (j, s) in sum.iter_mut().enumerate() {
                let bv = _mm256_broadcast_ss(&*b.add(p * NR + j));
                for v in 0..MV {
                    s[v] = _mm256_fmadd_ps(av[v], bv, s[v]);
                }
            }
        }
    }
    for (j, s) in sum.iter().enumerate() {
        for (v, &x) in s.iter().enumerate() {
            // SAFETY: row j of the caller's tile holds 8·MV values.
            unsafe {
                let o = c.add(j * ldc + 8 * v);
                let x = if acc {
                    _mm256_add_ps(_mm256_loadu_ps(o), x)
                } else {
                    x
                };
                _mm256_storeu_ps(o, x);
            }
        }
    }
}

/// Eight values of `ty` (F32, F16 or BF16) at `p`, widened.
///
/// # Safety
/// Eight values must be readable at `p`; the CPU must have AVX2 and F16C.
#[inline(always)]
unsafe fn load8(ty: Type, p: *const u8) -> __m256 {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ty {
            Type::F32 => _mm256_loadu_ps(p as *const f32),
            Type::F16 => _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
            _ => {
                let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(h))
            }
        }
    }
}

/// The 8 × 8 transpose of `r` (row `i` of the result holds element `i` of every `r`).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // SAFETY: register shuffles only (the caller guarantees the features).
    unsafe {
        let t: [__m256; 8] = std::array::from_fn(|x| {
            let (lo, hi) = (r[x & !1], r[x | 1]);
            if x % 2 == 0 {
                _mm256_unpacklo_ps(lo, hi)
            } else {
                _mm256_unpackhi_ps(lo, hi)
            }
        });
        // u[4g + c], 128-bit lane l: rows 4g..4g + 4 of column 4l + c
        let u: [__m256; 8] = std::array::from_fn(|x| {
            let (g, c) = (x / 4, x % 4);
            let (a, b) = (t[4 * g + c / 2], t[4 * g + 2 + c / 2]);
            if c % 2 == 0 {
                _mm256_shuffle_ps::<0x44>(a, b)
            } else {
                _mm256_shuffle_ps::<0xEE>(a, b)
            }
        });
        std::array::from_fn(|x| {
            let c = x % 4;
            if x < 4 {
                _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c])
            } else {
                _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c])
            }
        })
    }
}

/// A [`PanelFn`](super::PanelFn) for 16-row panels: 8 × 8 blocks transposed in registers.
///
/// # Safety
/// As `PanelFn`; the CPU must have AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_panel(ty: Type, base: *const u8, rs: usize, kc: usize, out: *mut f32) {
    let ts = ty.type_size();
    let k8 = kc / 8 * 8;
    for h in 0..MV {
        for p in (0..k8).step_by(8) {
            // SAFETY: rows 8h..8h + 8 of the panel, elements p..p + 8 < kc (caller).
            unsafe {
                let r: [__m256; 8] =
                    std::array::from_fn(|i| load8(ty, base.add((8 * h + i) * rs + p * ts)));
                for (q, v) in transpose8(r).into_iter().enumerate() {
                    _mm256_storeu_ps(out.add((p + q) * 8 * MV + 8 * h), v);
                }
            }
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { super::pack_panel_tail(ty, base, rs, k8..kc, 8 * MV, out) };
}
