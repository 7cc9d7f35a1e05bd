//! Quantized dot products in block format, as GGML's `vec_dot_<type>_<vec_dot_type>`: a row of
//! quantized weights times a row of activations quantized to the weight type's dot type (Q8_0
//! for Q4_0, Q5_0, Q8_0 and IQ4_NL; Q8_1 for Q4_1 and Q5_1; Q8_K for the k-quants and IQ4_XS),
//! summed in integers per block (per group of 16 or 32 values for the super-block types) and
//! scaled in f32 once per block.
//!
//! Three paths: portable, AVX2+FMA+F16C, and AVX-512 (F, BW, VL, VNNI); [`isa`] picks the
//! widest the CPU has once per process (or the one `GGML_CPU_FORCE=scalar|avx2|avx512` names,
//! when the CPU has it). On the AVX-512 path, where the process may use AMX int8 tiles
//! ([`amx()`], `amx.rs`; not with `GGML_CPU_FORCE=avx512`), k-quant batches of 8 columns or
//! more take them, in GGML's float order; with `GGML_CPU_FORCE=amx` the other types with an
//! AMX kernel do too, from 5 columns, in another order. Otherwise batches take the VNNI band
//! products, which follow GGML's float order. Each kernel takes one weight row and several
//! activation rows, so a weight block is unpacked once per group of up to four activation
//! rows (GGML's 32-column batches); the 32-value types and the k-quants also have tile kernels
//! on AVX2 and AVX-512 that take four weight rows at once, bit for bit the row dots, which
//! token generation takes (four streams of weights from memory, the rows after them
//! prefetched: from DRAM 1.2–1.6× the one-row kernels' rate). On x86 the 32-value types (`x86.rs`) and the k-quants (`kquant_x86.rs`) have
//! intrinsics kernels, which sum in eight f32 lanes and so differ from the portable path by
//! f32 rounding only; the i-quants' (`iquant_x86.rs`, through the k-quants' loops) give the bits of
//! GGML's AVX2 dots (but IQ1_S's and IQ1_M's, which round once less). A unit test holds every path to both.

/// Runs a multi-row kernel over every activation row: `by_fours!(a, stride, out, |N, a, o|
/// kernel::<.., N>(..))` calls the kernel instantiated for `N` = 4 rows (then 3, 2 or 1 for
/// the rest) with the rows' bytes `a` (from the group's first row on, rows `stride` bytes
/// apart) and their `n` outputs `o`. `by_fours!(8; …)` takes up to eight rows per call
/// (8, then 4, 2, 1), for the AVX-512 paths, which have registers for eight accumulators.
#[cfg(target_arch = "x86_64")]
macro_rules! by_fours {
    (8; $a:expr, $stride:expr, $out:expr, |$n:ident, $ra:ident, $ro:ident| $call:expr) => {
        by_fours!(@loop 8, $a, $stride, $out, |rows, $n, $ra, $ro| match rows {
            8 => by_fours!(@call 8, $n, $call),
            4 => by_fours!(@call 4, $n, $call),
            2 => by_fours!(@call 2, $n, $call),
            _ => by_fours!(@call 1, $n, $call),
        })
    };
    ($a:expr, $stride:expr, $out:expr, |$n:ident, $ra:ident, $ro:ident| $call:expr) => {
        by_fours!(@loop 4, $a, $stride, $out, |rows, $n, $ra, $ro| match rows {
            4 => by_fours!(@call 4, $n, $call),
            3 => by_fours!(@call 3, $n, $call),
            2 => by_fours!(@call 2, $n, $call),
            _ => by_fours!(@call 1, $n, $call),
        })
    };
    (@loop $max:literal, $a:expr, $stride:expr, $out:expr,
     |$rows:ident, $n:ident, $ra:ident, $ro:ident| $dispatch:expr) => {{
        let (all, stride, out): (&[u8], usize, &mut [f32]) = ($a, $stride, $out);
        let mut r0 = 0;
        while r0 < out.len() {
            // the widest kernel that fits: $max, then halves (or 3 for the four-row form)
            let $rows = match out.len() - r0 {
                r if r >= $max => $max,
                r if $max == 8 && r >= 4 => 4,
                r if $max == 4 && r == 3 => 3,
                r if r >= 2 => 2,
                _ => 1,
            };
            let ($ra, $ro) = (&all[r0 * stride..], &mut out[r0..r0 + $rows]);
            // SAFETY: `$rows` activation rows from row r0 on and as many outputs; the
            // kernel's other requirements are forwarded from the caller.
            unsafe { $dispatch }
            r0 += $rows;
        }
    }};
    (@call $k:literal, $n:ident, $call:expr) => {{
        const $n: usize = $k;
        $call
    }};
}

/// Runs a tile kernel ([`TileDot`]) over every activation row: `by_tiles!(n, |N, r0|
/// kernel::<.., N>(.., r0))` calls the kernel instantiated for `N` = 4 activation rows (then
/// 3, 2 or 1 for the rest) with the group's first row `r0`, until the `n` rows are done.
#[cfg(target_arch = "x86_64")]
macro_rules! by_tiles {
    ($n:expr, |$k:ident, $r0:ident| $call:expr) => {{
        let n: usize = $n;
        let mut $r0 = 0;
        while $r0 < n {
            let rows = (n - $r0).min(4);
            // SAFETY: rows r0..r0 + rows exist (forwarded from the caller), as do their
            // outputs; the kernel's other requirements are forwarded too.
            unsafe {
                match rows {
                    4 => by_fours!(@call 4, $k, $call),
                    3 => by_fours!(@call 3, $k, $call),
                    2 => by_fours!(@call 2, $k, $call),
                    _ => by_fours!(@call 1, $k, $call),
                }
            }
            $r0 += rows;
        }
    }};
}

mod act;
#[cfg(target_arch = "x86_64")]
pub(crate) mod amx;
#[cfg(target_arch = "x86_64")]
mod band32;
#[cfg(target_arch = "x86_64")]
mod band_avx2;
#[cfg(target_arch = "x86_64")]
mod iquant_vbmi;
#[cfg(target_arch = "x86_64")]
mod iquant_x86;
#[cfg(target_arch = "x86_64")]
mod kquant_avx512;
#[cfg(target_arch = "x86_64")]
mod kquant_tile;
#[cfg(target_arch = "x86_64")]
mod kquant_x86;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

pub(crate) use act::quantize_act;

use bytemuck::Pod;

use crate::quants::{q3k_scale, q4k_levels, q5k_levels, scale_min, unpack_2bit, GridGroups};
use crate::quants::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S};
use crate::quants::{BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs, IQ4_NL_VALUES};
use crate::quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K};
use crate::quants::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::types::Type;
use crate::QK_K;

/// The instruction-set paths of the CPU kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Isa {
    /// Portable code (whatever the compile target has).
    Scalar,
    /// AVX2, FMA and F16C.
    Avx2,
    /// AVX-512 F, BW, VL and VNNI (with AVX2, FMA and F16C).
    Avx512,
}

impl Isa {
    /// Whether this CPU runs the path.
    pub(crate) fn available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.available()
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
        }
    }

    /// Every path this CPU runs, narrowest first.
    pub(crate) fn all_available() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.available())
            .collect()
    }
}

/// What `GGML_CPU_FORCE` names: a path (`scalar`, `avx2`, `avx512`, or `amx`, which is the
/// AVX-512 path with AMX tiles), and whether AMX tiles may be used with it.
fn forced() -> Option<(Isa, bool)> {
    match std::env::var("GGML_CPU_FORCE").as_deref() {
        Ok("scalar") => Some((Isa::Scalar, false)),
        Ok("avx2") => Some((Isa::Avx2, false)),
        Ok("avx512") => Some((Isa::Avx512, false)),
        Ok("amx") => Some((Isa::Avx512, true)),
        _ => None,
    }
}

/// The path the CPU kernels take: the widest this CPU has, or the one `GGML_CPU_FORCE` names
/// (`scalar`, `avx2`, `avx512`; `amx` names AVX-512's) when the CPU has it. Decided once per
/// process.
pub(crate) fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let best = *Isa::all_available().last().unwrap_or(&Isa::Scalar);
        forced()
            .map(|(f, _)| f)
            .filter(|f| f.available())
            .unwrap_or(best)
    })
}

/// Whether quantized MUL_MAT may use AMX int8 tiles for batches: the selected path is
/// AVX-512 and not forced to be plain AVX-512 (`GGML_CPU_FORCE` unset or `amx`), the CPU has
/// AMX-TILE and AMX-INT8, and the OS granted this process the tile state ([`amx::granted`]).
/// By default only the k-quants take them ([`amx_kernel`]): their AMX kernel gives GGML's
/// bits (those of its tiled MUL_MAT, as the VNNI band products do); the 32-value types'
/// kernel sums each block in another float order than GGML's tinyBLAS, so they take it only
/// with `GGML_CPU_FORCE=amx`. Decided once per process.
pub(crate) fn amx() -> bool {
    static AMX: OnceLock<bool> = OnceLock::new();
    *AMX.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            isa() == Isa::Avx512 && forced().is_none_or(|(_, amx)| amx) && amx::granted()
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// The AMX kernel MUL_MAT takes for weight type `ty` against `cols` activation columns per
/// batch: where [`amx`] allows it and the type has one, the k-quants' (GGML's bits) from
/// [`amx::EXACT_MIN_COLS`] columns on, where GGML's tiled MUL_MAT starts; the other types'
/// (another float order) only with `GGML_CPU_FORCE=amx`, from [`amx::MIN_COLS`] columns on,
/// where the tiles beat the VNNI kernels.
#[cfg(target_arch = "x86_64")]
pub(crate) fn amx_kernel(ty: Type, cols: usize) -> Option<amx::AmxKernel> {
    let kernel = amx::kernel(ty).filter(|_| amx())?;
    let forced = forced().is_some_and(|(_, amx)| amx);
    let min_cols = if kernel.exact {
        amx::EXACT_MIN_COLS
    } else {
        amx::MIN_COLS
    };
    (cols >= min_cols && (kernel.exact || forced)).then_some(kernel)
}

/// Σ x·y over two runs of levels of the same length.
#[inline(always)]
fn isum(x: &[i8], y: &[i8]) -> i32 {
    x.iter().zip(y).map(|(&a, &b)| a as i32 * b as i32).sum()
}

/// Levels below 128 (as every decoder here gives) as signed bytes.
#[inline(always)]
fn signed<const N: usize>(levels: [u8; N]) -> [i8; N] {
    levels.map(|l| l as i8)
}

/// The 32 levels of a legacy block minus `offset`: value j in the low nibble of byte j, value
/// j + 16 in the high one, with bit j of `high` (when given) as the level's fifth bit.
#[inline(always)]
fn legacy_levels(qs: &[u8; 16], high: Option<[u8; 4]>, offset: i8) -> [i8; 32] {
    let h = high.map_or(0, u32::from_le_bytes);
    let mut q = [0i8; 32];
    for (j, &b) in qs.iter().enumerate() {
        let h0 = (((h >> j) & 1) << 4) as u8;
        let h1 = (((h >> (j + 16)) & 1) << 4) as u8;
        q[j] = ((b & 0xf) | h0) as i8 - offset;
        q[j + 16] = ((b >> 4) | h1) as i8 - offset;
    }
    q
}

/// IQ4_NL's non-linear levels of 32 values laid out as in a legacy block.
#[inline(always)]
fn iq4_levels(qs: &[u8]) -> [i8; 32] {
    let mut q = [0i8; 32];
    for (j, &b) in qs.iter().enumerate().take(16) {
        q[j] = IQ4_NL_VALUES[(b & 0xf) as usize];
        q[j + 16] = IQ4_NL_VALUES[(b >> 4) as usize];
    }
    q
}

/// The type whose blocks a weight of type `ty` is stored as in the CPU repack buffer type
/// (`cpu/repack.rs`), or `None` where `ty` has no repacked layout. Q4_0, Q5_0 and IQ4_NL are
/// stored with their levels unpacked to bytes: as Q8_0 blocks with the same scale, so every
/// path's Q8_0 kernels (row dots, tiles, band products, AMX) compute on them without
/// decoding nibbles and fifth bits, and give what the type's own kernels give bit for bit
/// (they share one integer sum and one `sum · (d · yd)` per block: [`DotBlock`] and
/// `x86::Simd32`, which differ between these types only in how the levels are decoded).
pub(crate) fn repack_layout(ty: Type) -> Option<Type> {
    matches!(ty, Type::Q4_0 | Type::Q5_0 | Type::IQ4_NL).then_some(Type::Q8_0)
}

/// Repacks `src` (whole blocks of `ty`, which has a [`repack_layout`]) into `dst`, as many
/// blocks of the layout: each block's levels decoded to bytes, its scale kept bit for bit.
/// `Err` naming the lengths when `dst` does not hold exactly as many blocks.
pub(crate) fn repack_blocks(ty: Type, src: &[u8], dst: &mut [u8]) -> crate::error::Result<()> {
    fn each<B: Pod>(src: &[u8], dst: &mut [u8], f: impl Fn(&B) -> BlockQ8_0) -> bool {
        let n = src.len() / size_of::<B>();
        if src.len() % size_of::<B>() != 0 || dst.len() != n * size_of::<BlockQ8_0>() {
            return false;
        }
        let (src, dst): (&[B], &mut [BlockQ8_0]) =
            (bytemuck::cast_slice(src), bytemuck::cast_slice_mut(dst));
        dst.iter_mut().zip(src).for_each(|(o, b)| *o = f(b));
        true
    }
    let ok = match ty {
        Type::Q4_0 => each(src, dst, |b: &BlockQ4_0| BlockQ8_0 {
            d: b.d,
            qs: legacy_levels(&b.qs, None, 8),
        }),
        Type::Q5_0 => each(src, dst, |b: &BlockQ5_0| BlockQ8_0 {
            d: b.d,
            qs: legacy_levels(&b.qs, Some(b.qh), 16),
        }),
        Type::IQ4_NL => each(src, dst, |b: &BlockIq4Nl| BlockQ8_0 {
            d: b.d,
            qs: iq4_levels(&b.qs),
        }),
        _ => {
            return Err(crate::error::Error::invalid(format!(
                "repack: type {ty} has no repacked layout"
            )))
        }
    };
    if !ok {
        return Err(crate::error::Error::invalid(format!(
            "repack: {} bytes of {ty} blocks into {} bytes of Q8_0 blocks",
            src.len(),
            dst.len()
        )));
    }
    Ok(())
}

/// A weight block with an integer dot product against its activation block.
pub(crate) trait DotBlock: Pod {
    /// The activation block type (GGML's `vec_dot_type`).
    type Act: Pod;
    /// The dot product of this block with `y`.
    fn dot(&self, y: &Self::Act) -> f32;
}

impl DotBlock for BlockQ4_0 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8_0) -> f32 {
        let s = isum(&legacy_levels(&self.qs, None, 8), &y.qs);
        s as f32 * (self.d.to_f32() * y.d.to_f32())
    }
}

impl DotBlock for BlockQ4_1 {
    type Act = BlockQ8_1;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8_1) -> f32 {
        let s = isum(&legacy_levels(&self.qs, None, 0), &y.qs);
        s as f32 * (self.d.to_f32() * y.d.to_f32()) + self.m.to_f32() * y.s.to_f32()
    }
}

impl DotBlock for BlockQ5_0 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8_0) -> f32 {
        let s = isum(&legacy_levels(&self.qs, Some(self.qh), 16), &y.qs);
        s as f32 * (self.d.to_f32() * y.d.to_f32())
    }
}

impl DotBlock for BlockQ5_1 {
    type Act = BlockQ8_1;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8_1) -> f32 {
        let s = isum(&legacy_levels(&self.qs, Some(self.qh), 0), &y.qs);
        s as f32 * (self.d.to_f32() * y.d.to_f32()) + self.m.to_f32() * y.s.to_f32()
    }
}

impl DotBlock for BlockQ8_0 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8_0) -> f32 {
        isum(&self.qs, &y.qs) as f32 * (self.d.to_f32() * y.d.to_f32())
    }
}

impl DotBlock for BlockIq4Nl {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8_0) -> f32 {
        isum(&iq4_levels(&self.qs), &y.qs) as f32 * (self.d.to_f32() * y.d.to_f32())
    }
}

/// Σ over groups of `G` values of `scale(g) · Σ levels·y` for a super-block.
#[inline(always)]
fn grouped<const G: usize>(
    levels: &[i8; QK_K],
    y: &[i8; QK_K],
    scale: impl Fn(usize) -> i32,
) -> i32 {
    levels
        .chunks_exact(G)
        .zip(y.chunks_exact(G))
        .enumerate()
        .map(|(g, (l, q))| scale(g) * isum(l, q))
        .sum()
}

/// A k-quant super-block decoded for the integer dot: the value of element e is
/// `d · scales[e / 16] · (levels[e] − offset) − dmin · mins[e / 16]`, with levels in 0..64.
pub(crate) struct Decoded {
    levels: [u8; QK_K],
    scales: [i16; QK_K / 16],
    mins: [i16; QK_K / 16],
    offset: i32,
    d: f32,
    dmin: f32,
}

/// A k-quant block type with its decoder.
pub(crate) trait KBlock: Pod {
    /// The block decoded.
    fn decode(&self) -> Decoded;
}

/// Group scales of 32 values (as Q4_K and Q5_K have) as scales of 16.
#[inline(always)]
fn per_16(f: impl Fn(usize) -> i16) -> [i16; QK_K / 16] {
    std::array::from_fn(|g| f(g / 2))
}

/// Q4_K's and Q5_K's decoding from their levels, scales and minimums.
#[inline(always)]
fn scale_min_decoded(levels: [u8; QK_K], sc: &[u8; 12], d: f32, dmin: f32) -> Decoded {
    Decoded {
        levels,
        scales: per_16(|j| scale_min(j, sc).0 as i16),
        mins: per_16(|j| scale_min(j, sc).1 as i16),
        offset: 0,
        d,
        dmin,
    }
}

impl KBlock for BlockQ4K {
    #[inline(always)]
    fn decode(&self) -> Decoded {
        let (d, dmin) = (self.d.to_f32(), self.dmin.to_f32());
        scale_min_decoded(q4k_levels(self), &self.scales, d, dmin)
    }
}

impl KBlock for BlockQ5K {
    #[inline(always)]
    fn decode(&self) -> Decoded {
        let (d, dmin) = (self.d.to_f32(), self.dmin.to_f32());
        scale_min_decoded(q5k_levels(self), &self.scales, d, dmin)
    }
}

impl KBlock for BlockQ2K {
    #[inline(always)]
    fn decode(&self) -> Decoded {
        Decoded {
            levels: unpack_2bit(&self.qs),
            scales: self.scales.map(|s| (s & 0xf) as i16),
            mins: self.scales.map(|s| (s >> 4) as i16),
            offset: 0,
            d: self.d.to_f32(),
            dmin: self.dmin.to_f32(),
        }
    }
}

impl KBlock for BlockQ3K {
    #[inline(always)]
    fn decode(&self) -> Decoded {
        // the level is low − 4 unless the high bit is set: stored as low + 4·high, offset 4
        let mut levels = unpack_2bit(&self.qs);
        for (c, run) in levels.chunks_exact_mut(32).enumerate() {
            for (l, &h) in run.iter_mut().zip(&self.hmask) {
                *l |= ((h >> c) & 1) << 2;
            }
        }
        Decoded {
            levels,
            scales: std::array::from_fn(|g| q3k_scale(&self.scales, g) as i16),
            mins: [0; QK_K / 16],
            offset: 4,
            d: self.d.to_f32(),
            dmin: 0.0,
        }
    }
}

impl KBlock for BlockQ6K {
    #[inline(always)]
    fn decode(&self) -> Decoded {
        let mut levels = [0u8; QK_K];
        let halves = levels.chunks_exact_mut(128).zip(self.ql.chunks_exact(64));
        for ((half, ql), qh) in halves.zip(self.qh.chunks_exact(32)) {
            for l in 0..32 {
                let h = qh[l];
                half[l] = (ql[l] & 0xf) | ((h & 3) << 4);
                half[l + 32] = (ql[l + 32] & 0xf) | (((h >> 2) & 3) << 4);
                half[l + 64] = (ql[l] >> 4) | (((h >> 4) & 3) << 4);
                half[l + 96] = (ql[l + 32] >> 4) | (((h >> 6) & 3) << 4);
            }
        }
        Decoded {
            levels,
            scales: self.scales.map(|s| s as i16),
            mins: [0; QK_K / 16],
            offset: 32,
            d: self.d.to_f32(),
            dmin: 0.0,
        }
    }
}

/// The dot product of a decoded k-quant block with `y`: `d·yd·(Σ scale·level·y − offset·Σ
/// scale·Σy) − dmin·yd·Σ min·Σy`, the sums of y from Q8_K's `bsums`.
#[inline(always)]
fn k_dot(x: &Decoded, y: &BlockQ8K) -> f32 {
    let sumi = grouped::<16>(&signed(x.levels), &y.qs, |g| x.scales[g] as i32);
    let (mut so, mut sm) = (0i32, 0i32);
    for ((b, &sc), &m) in y.bsums.iter().zip(&x.scales).zip(&x.mins) {
        let b = b.get() as i32;
        so += sc as i32 * b;
        sm += m as i32 * b;
    }
    let yd = y.d.get();
    yd * x.d * (sumi - x.offset * so) as f32 - yd * x.dmin * sm as f32
}

/// The k-quants' portable dot: decoded, then [`k_dot`].
macro_rules! k_dot_block {
    ($($t:ty),*) => {$(
        impl DotBlock for $t {
            type Act = BlockQ8K;
            #[inline(always)]
            fn dot(&self, y: &BlockQ8K) -> f32 {
                k_dot(&self.decode(), y)
            }
        }
    )*};
}
k_dot_block!(BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K);

impl DotBlock for BlockIq4Xs {
    type Act = BlockQ8K;
    #[inline(always)]
    fn dot(&self, y: &BlockQ8K) -> f32 {
        let mut levels = [0i8; QK_K];
        for (l, qs) in levels.chunks_exact_mut(32).zip(self.qs.chunks_exact(16)) {
            l.copy_from_slice(&iq4_levels(qs));
        }
        let scales = self.group_scales();
        let sumi = grouped::<32>(&levels, &y.qs, |g| scales[g] as i32);
        y.d.get() * self.d.to_f32() * sumi as f32
    }
}

/// A grid i-quant's portable dot: its levels and scales per 16 values ([`GridGroups`]),
/// summed in integers, the super-block's factors applied once.
#[inline(always)]
fn grid_dot<B: GridGroups>(x: &B, y: &BlockQ8K) -> f32 {
    let mut levels = [0i8; QK_K];
    for (g, l) in levels.chunks_exact_mut(32).enumerate() {
        l.copy_from_slice(&x.group(g).levels());
    }
    let scales = x.scales16();
    let sumi = grouped::<16>(&levels, &y.qs, |h| scales[h] as i32);
    y.d.get() * x.d().to_f32() * sumi as f32 * B::FACTOR
}

/// `impl DotBlock` for grid i-quants: [`grid_dot`].
macro_rules! grid_dot_block {
    ($($t:ty),*) => {$(
        impl DotBlock for $t {
            type Act = BlockQ8K;
            #[inline(always)]
            fn dot(&self, y: &BlockQ8K) -> f32 {
                grid_dot(self, y)
            }
        }
    )*};
}
grid_dot_block!(
    BlockIq2Xxs,
    BlockIq2Xs,
    BlockIq2S,
    BlockIq3Xxs,
    BlockIq3S,
    BlockIq1S,
    BlockIq1M
);

/// The dot product of whole blocks of weights `w` with as many activation blocks `a`.
#[inline(always)]
fn row_dot<B: DotBlock>(w: &[u8], a: &[u8]) -> f32 {
    let w: &[B] = bytemuck::cast_slice(w);
    let a: &[B::Act] = bytemuck::cast_slice(a);
    w.iter()
        .zip(a)
        .map(|(x, y)| x.dot(y))
        .fold(0.0, |s, v| s + v)
}

/// [`row_dot`] of `w` with each of the `out.len()` activation rows in `a`.
#[inline(always)]
fn row_dots<B: DotBlock>(w: &[u8], a: &[u8], out: &mut [f32]) {
    let stride = w.len() / std::mem::size_of::<B>() * std::mem::size_of::<B::Act>();
    for (o, y) in out.iter_mut().zip(a.chunks_exact(stride.max(1))) {
        *o = row_dot::<B>(w, y);
    }
}

/// [`row_dots`] compiled portably.
///
/// # Safety
/// Always safe (the signature matches the other paths').
unsafe fn row_dots_scalar<B: DotBlock>(w: &[u8], a: &[u8], out: &mut [f32]) {
    row_dots::<B>(w, a, out)
}

/// Row dot products: `(w, a, out)` sets `out[r]` to the dot product of the weight row `w`
/// (whole blocks) with activation row `r` of `a`, which holds `out.len()` rows back to back,
/// each as many activation blocks as `w` has weight blocks.
///
/// # Safety
/// The CPU must have the features of the path it was resolved for.
pub(crate) type RowDot = unsafe fn(&[u8], &[u8], &mut [f32]);

/// Asks for the cache lines of the `len` bytes at `p` to be brought into L2 (a hint; nothing
/// on targets without one here). Never faults: the address is only computed, so any address
/// is harmless.
#[inline(always)]
pub(crate) fn prefetch_l2(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    x86::prefetch_into::<{ std::arch::x86_64::_MM_HINT_T1 }>(p, len);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Weight rows a [`TileDot`] takes at once.
pub(crate) const TILE_ROWS: usize = 4;

/// Tile dot products: `(w, a, out)` sets `out[t][r]` to the dot product of weight row `w[t]`
/// with activation row `r` of `a` (laid out as for [`RowDot`], `out[t].len()` rows), bit for
/// bit what the path's [`RowDot`] gives each weight row, so a caller may mix the two freely.
///
/// # Safety
/// The CPU must have the features of the path it was resolved for; the weight rows must have
/// equal lengths.
pub(crate) type TileDot = unsafe fn([&[u8]; TILE_ROWS], &[u8], &mut [&mut [f32]; TILE_ROWS]);

/// Weight rows a [`BandDot`] takes at once.
pub(crate) const BAND_ROWS: usize = 8;

/// Band products of a batch: weight rows by [`BAND_ROWS`], activation columns laid out once
/// (per thread and block of columns) in a tile by `pack`, then dotted with every band of
/// weight rows by `dots` (the k-quants and the signed 32-value types, on AVX-512 VNNI and on
/// AVX2: `kquant_tile.rs`, `band32.rs`, `band_avx2.rs`). An output's value does not depend on
/// the other rows of its band nor on the other columns of its tile (a unit test holds the
/// kernels to that); it differs from the [`RowDot`]'s by f32 rounding, so a MUL_MAT uses one
/// or the other for all of its outputs.
#[derive(Clone, Copy)]
pub(crate) struct BandDot {
    /// `(a, cols, tile)`: lays out the `cols` activation rows `a` (back to back, whole rows)
    /// in `tile`, which must hold `tile_bytes(k, cols)`.
    pub pack: PackFn,
    /// `(k, cols)`: the bytes of the tile of `cols` activation rows of `k` values.
    pub tile_bytes: fn(usize, usize) -> usize,
    /// `k`: the bytes of scratch `dots` needs for rows of `k` values.
    pub scratch_bytes: fn(usize) -> usize,
    /// The products.
    pub dots: BandFn,
}

/// [`BandDot::pack`]'s function.
pub(crate) type PackFn = fn(&[u8], usize, &mut [u8]);

/// Band products: `(w, tile, scratch, out)` sets `out[t][j]` to the dot product of weight
/// row `w[t]` with activation column `j` of `tile` (packed for `out[t].len()` columns).
///
/// # Safety
/// The CPU must have the features of the path it was resolved for; the weight rows have equal
/// lengths, `tile` and `scratch` the sizes [`BandDot`]'s functions give for that length.
pub(crate) type BandFn = unsafe fn([&[u8]; BAND_ROWS], &[u8], &mut [u8], &mut BandOut<'_>);

/// The outputs of a [`BandFn`]: a row of results per weight row.
pub(crate) type BandOut<'a> = [&'a mut [f32]; BAND_ROWS];

/// A weight type's dot kernel: the activation type and the row dot of one path, with a tile
/// dot where the path has one (the 32-value types and the k-quants on AVX2 and AVX-512
/// VNNI; the k-quants' takes four weight rows at once for one activation row only) and band
/// products for batches where it has them (the k-quants and the signed 32-value types on
/// AVX-512 VNNI and AVX2).
#[derive(Clone, Copy)]
pub(crate) struct QuantDot {
    /// The type activations are quantized to (GGML's `vec_dot_type`).
    pub act: Type,
    /// The row dot products.
    pub dot: RowDot,
    /// Dot products of [`TILE_ROWS`] weight rows at once.
    pub tile: Option<TileDot>,
    /// Band products for batches of columns.
    pub band: Option<BandDot>,
}

/// `B`'s kernel: the portable row dots (no intrinsics kernels on this architecture).
#[cfg(not(target_arch = "x86_64"))]
fn kernel<B: DotBlock>(act: Type, _isa: Isa) -> QuantDot {
    QuantDot {
        act,
        dot: row_dots_scalar::<B>,
        tile: None,
        band: None,
    }
}

/// `B`'s kernel on path `isa`, with the intrinsics kernels on x86.
#[cfg(target_arch = "x86_64")]
fn kernel32<B: x86::Simd32>(act: Type, isa: Isa) -> QuantDot {
    const _: () = assert!(x86::TILE_ROWS == TILE_ROWS);
    let (dot, tile): (RowDot, Option<TileDot>) = match isa {
        Isa::Avx512 => (x86::row_dots_vnni::<B>, Some(x86::row_tiles_vnni::<B>)),
        Isa::Avx2 => (x86::row_dots_avx2::<B>, Some(x86::row_tiles_avx2::<B>)),
        Isa::Scalar => (row_dots_scalar::<B>, None),
    };
    // band products for the signed types (those with a minimum keep the row or tile dots)
    let band = |pack: PackFn, scratch_bytes: fn(usize) -> usize, dots: BandFn| {
        (!B::UNSIGNED).then_some(BandDot {
            pack,
            tile_bytes: band32::act_tile_bytes,
            scratch_bytes,
            dots,
        })
    };
    let band = match isa {
        Isa::Avx512 => band(
            band32::pack_act_biased::<B::Act>,
            band32::band_bytes,
            band32::band_dots::<B>,
        ),
        Isa::Avx2 => band(
            band32::pack_act::<B::Act>,
            band_avx2::band32_bytes,
            band_avx2::band32_dots::<B>,
        ),
        Isa::Scalar => None,
    };
    QuantDot {
        act,
        dot,
        tile,
        band,
    }
}

/// `B`'s kernel on path `isa` (no intrinsics kernels on this architecture).
#[cfg(not(target_arch = "x86_64"))]
fn kernel32<B: DotBlock>(act: Type, isa: Isa) -> QuantDot {
    kernel::<B>(act, isa)
}

/// k-quant `B`'s kernel on path `isa` (Q8_K activations), with the intrinsics kernels on
/// x86.
#[cfg(target_arch = "x86_64")]
fn kernel_k<B: kquant_x86::KUnpack + DotBlock>(isa: Isa) -> QuantDot {
    kernel_q8k::<B, kquant_x86::Ymm>(isa)
}

/// The kernel on path `isa` of `B`, a type with Q8_K activations that the k-quants' loops
/// take through `K`: `B::AVX512`'s row and tile dots on AVX-512, `K`'s compiled for AVX2 on
/// AVX2, and the k-quants' band products on AVX-512 VNNI and on AVX2.
#[cfg(target_arch = "x86_64")]
fn kernel_q8k<B, K>(isa: Isa) -> QuantDot
where
    B: kquant_x86::KUnpack + DotBlock,
    K: kquant_x86::KDecode<B>,
{
    const _: () = assert!(kquant_tile::BAND == BAND_ROWS);
    let (dot, tile): (RowDot, Option<TileDot>) = match isa {
        Isa::Avx512 => match B::AVX512_GFNI {
            Some((dot, tile)) if iquant_vbmi::available() => (dot, Some(tile)),
            _ => (B::AVX512.0, Some(B::AVX512.1)),
        },
        Isa::Avx2 => (
            kquant_x86::k_dots_avx2::<B, K>,
            Some(kquant_x86::k_tiles_avx2::<B, K>),
        ),
        Isa::Scalar => (row_dots_scalar::<B>, None),
    };
    let band = |pack: PackFn, scratch_bytes: fn(usize) -> usize, dots: BandFn| {
        Some(BandDot {
            pack,
            tile_bytes: kquant_tile::act_tile_bytes,
            scratch_bytes,
            dots,
        })
    };
    let band = match isa {
        Isa::Avx512 => band(
            if B::LEVEL_OFFSET != 0 {
                kquant_tile::pack_act_biased
            } else {
                kquant_tile::pack_act
            },
            kquant_tile::band_bytes,
            kquant_tile::band_dots::<B>,
        ),
        Isa::Avx2 => band(
            kquant_tile::pack_act,
            band_avx2::k_band_bytes,
            band_avx2::k_band_dots::<B>,
        ),
        Isa::Scalar => None,
    };
    QuantDot {
        act: Type::Q8_K,
        dot,
        tile,
        band,
    }
}

/// k-quant `B`'s kernel on path `isa` (no intrinsics kernels on this architecture).
#[cfg(not(target_arch = "x86_64"))]
fn kernel_k<B: DotBlock>(isa: Isa) -> QuantDot {
    kernel::<B>(Type::Q8_K, isa)
}

/// The kernel of i-quant `B` on path `isa` (Q8_K activations), with the intrinsics row and
/// tile dots on x86 (`iquant_x86.rs`, through the k-quants' loops) and the k-quants' band
/// products on AVX-512 VNNI and AVX2.
#[cfg(target_arch = "x86_64")]
fn kernel_signed<B: iquant_x86::SignedGroups + kquant_x86::KUnpack + DotBlock>(
    isa: Isa,
) -> QuantDot {
    kernel_q8k::<B, iquant_x86::SignedYmm>(isa)
}

/// [`kernel_signed`] for an i-quant whose AVX-512 row and tile dots decode in 512-bit
/// registers where the CPU also has VBMI and GFNI ([`iquant_vbmi`]).
#[cfg(target_arch = "x86_64")]
fn kernel_signed_zmm<B>(isa: Isa) -> QuantDot
where
    B: iquant_vbmi::ZmmSigned + kquant_x86::KUnpack + DotBlock,
{
    type K = iquant_vbmi::SignedZmm;
    let mut kernel = kernel_signed::<B>(isa);
    if isa == Isa::Avx512 && iquant_vbmi::available() {
        kernel.dot = kquant_x86::k_dots_avx512_vbmi::<B, K>;
        kernel.tile = Some(kquant_x86::k_tiles_avx512_vbmi::<B, K>);
    }
    kernel
}

/// [`kernel_signed`] (no intrinsics kernels on this architecture).
#[cfg(not(target_arch = "x86_64"))]
fn kernel_signed_zmm<B: DotBlock<Act = BlockQ8K>>(isa: Isa) -> QuantDot {
    kernel_signed::<B>(isa)
}

/// The kernel of i-quant `B` on path `isa` (no intrinsics kernels on this architecture).
#[cfg(not(target_arch = "x86_64"))]
fn kernel_signed<B: DotBlock<Act = BlockQ8K>>(isa: Isa) -> QuantDot {
    kernel::<B>(Type::Q8_K, isa)
}

/// The integer dot kernel of weight type `ty` on path `isa`, or `None` for the types without
/// one (which MUL_MAT dequantizes instead).
pub(crate) fn quant_dot(ty: Type, isa: Isa) -> Option<QuantDot> {
    use Type::*;
    Some(match ty {
        Q4_0 => kernel32::<BlockQ4_0>(Q8_0, isa),
        Q4_1 => kernel32::<BlockQ4_1>(Q8_1, isa),
        Q5_0 => kernel32::<BlockQ5_0>(Q8_0, isa),
        Q5_1 => kernel32::<BlockQ5_1>(Q8_1, isa),
        Q8_0 => kernel32::<BlockQ8_0>(Q8_0, isa),
        IQ4_NL => kernel32::<BlockIq4Nl>(Q8_0, isa),
        Q2_K => kernel_k::<BlockQ2K>(isa),
        Q3_K => kernel_k::<BlockQ3K>(isa),
        Q4_K => kernel_k::<BlockQ4K>(isa),
        Q5_K => kernel_k::<BlockQ5K>(isa),
        Q6_K => kernel_k::<BlockQ6K>(isa),
        IQ4_XS => kernel_signed_zmm::<BlockIq4Xs>(isa),
        IQ3_S => kernel_signed_zmm::<BlockIq3S>(isa),
        IQ3_XXS => kernel_signed_zmm::<BlockIq3Xxs>(isa),
        IQ2_XXS => kernel_signed_zmm::<BlockIq2Xxs>(isa),
        IQ2_XS => kernel_signed_zmm::<BlockIq2Xs>(isa),
        IQ2_S => kernel_signed::<BlockIq2S>(isa),
        IQ1_S => kernel_signed::<BlockIq1S>(isa),
        IQ1_M => kernel_signed::<BlockIq1M>(isa),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quants::{dequantize_row, quantize_row_ref};

    /// `x` quantized to `ty` as one row (with an importance matrix of ones for the types that
    /// need one).
    pub(super) fn quantize_weights(ty: Type, x: &[f32]) -> Vec<u8> {
        let k = x.len();
        let mut q = vec![0u8; ty.row_size(k as i64).unwrap()];
        let ones = vec![1.0f32; k];
        let imatrix = crate::quants::quantize_requires_imatrix(ty).then_some(&ones[..]);
        crate::quants::quantize_chunk(ty, x, &mut q, 0, 1, k, imatrix).unwrap();
        q
    }

    /// Every type with an integer dot.
    const DOT_TYPES: [Type; 19] = {
        use Type::*;
        [
            Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ3_S,
            IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M,
        ]
    };

    /// `n` pseudo-random values in [-0.5, 0.5).
    pub(super) fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// For every covered type: the integer dot is within the activations' 8-bit rounding of
    /// the f64 dot of the dequantized weights with the unquantized activations; every path
    /// agrees with the portable one (bit for bit where it compiles the same source, to f32
    /// rounding of the block sums where it has intrinsics); and a call with several
    /// activation rows gives each row what a call with that row alone gives.
    #[test]
    fn every_path_agrees_and_matches_the_dequantized_dot() {
        let k = 4 * QK_K;
        for ty in DOT_TYPES {
            let wq = quantize_weights(ty, &values(k, 7));
            let mut wd = vec![0f32; k];
            dequantize_row(ty, &wq, &mut wd).unwrap();
            let norm: f64 = wd.iter().map(|a| (*a as f64).abs()).sum::<f64>() / 127.0;
            let scalar = quant_dot(ty, Isa::Scalar).unwrap();
            let qbytes = scalar.act.row_size(k as i64).unwrap();
            // fifteen activation rows: every multi-row kernel width (8, 4, 3, 2, 1)
            let rows = 15;
            let mut xq = vec![0u8; rows * qbytes];
            let mut want = Vec::new();
            for (r, q) in xq.chunks_exact_mut(qbytes).enumerate() {
                let x = values(k, 99 + r as u32);
                want.push(
                    wd.iter()
                        .zip(&x)
                        .map(|(a, b)| *a as f64 * *b as f64)
                        .sum::<f64>(),
                );
                quantize_row_ref(scalar.act, &x, q).unwrap();
            }
            let mut got = vec![0f32; rows];
            // SAFETY: the scalar path needs no CPU feature; every row holds k values.
            unsafe { (scalar.dot)(&wq, &xq, &mut got) };
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (*g as f64 - w).abs() <= norm * 0.5 + 1e-3,
                    "{ty}: {g} vs {w}"
                );
            }
            for isa in Isa::all_available() {
                let kq = quant_dot(ty, isa).unwrap();
                assert_eq!(kq.act, scalar.act);
                let mut all = vec![0f32; rows];
                // SAFETY: `all_available` lists only paths this CPU runs.
                unsafe { (kq.dot)(&wq, &xq, &mut all) };
                if let Some(tile) = kq.tile {
                    // four weight rows (this one and three others) at once: each bit for bit
                    // what the row dot gives it
                    let others: Vec<Vec<u8>> = (0..TILE_ROWS as u32 - 1)
                        .map(|s| quantize_weights(ty, &values(k, 11 + s)))
                        .collect();
                    let ws = [&wq[..], &others[0], &others[1], &others[2]];
                    let mut outs = vec![vec![0f32; rows]; TILE_ROWS];
                    let [o0, o1, o2, o3] = &mut outs[..] else {
                        unreachable!()
                    };
                    // SAFETY: as above; four rows of equal length.
                    unsafe { tile(ws, &xq, &mut [o0, o1, o2, o3]) };
                    for (t, w) in ws.iter().enumerate() {
                        let mut each = vec![0f32; rows];
                        // SAFETY: as above.
                        unsafe { (kq.dot)(w, &xq, &mut each) };
                        let same = each
                            .iter()
                            .zip(&outs[t])
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "{ty} on {isa:?}: tile row {t} differs from the row dot"
                        );
                    }
                }
                for (r, (&v, &g)) in all.iter().zip(&got).enumerate() {
                    let mut one = [0f32];
                    // SAFETY: as above, for row r alone.
                    unsafe { (kq.dot)(&wq, &xq[r * qbytes..(r + 1) * qbytes], &mut one) };
                    assert_eq!(one[0].to_bits(), v.to_bits(), "{ty} on {isa:?}, row {r}");
                    if isa == Isa::Scalar {
                        assert_eq!(v.to_bits(), g.to_bits(), "{ty} on {isa:?}");
                    } else {
                        let tol = 1e-5 * (norm * 127.0) as f32;
                        assert!((v - g).abs() <= tol, "{ty} on {isa:?}: {v} vs {g}");
                    }
                }
            }
        }
    }
    /// The AVX2 row dots of Q4_0, Q5_0 and Q8_0 give the bits of GGML's AVX2
    /// `ggml_vec_dot_q*_0_q8_0`, modelled here from the blocks' bytes: per block, the exact
    /// integer sums of four consecutive products in eight lanes, each lane
    /// `acc = fma(d_x · d_y, sum, acc)` (the scales' product rounded to f32 first), the lanes
    /// reduced as `hsum_float_8` (upper half onto the lower, then lanes 2 and 3 onto 0 and 1,
    /// then 1 onto 0). The tiles give the row dots' bits (the test after this one).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_32_value_dots_follow_ggml_avx2_order_bit_for_bit() {
        use Type::*;
        if !Isa::Avx2.available() {
            eprintln!("skipped: no AVX2");
            return;
        }
        let half = |b: &[u8]| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        // the 32 signed levels of one block of `ty`
        let levels = |ty: Type, b: &[u8]| -> [i32; 32] {
            std::array::from_fn(|v| match ty {
                Q4_0 => ((b[2 + v % 16] >> (4 * (v / 16))) & 0xf) as i32 - 8,
                Q5_0 => {
                    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                    let low = (b[6 + v % 16] >> (4 * (v / 16))) & 0xf;
                    (low as i32 | (((qh >> v) & 1) as i32) << 4) - 16
                }
                _ => b[2 + v] as i8 as i32,
            })
        };
        for ty in [Q4_0, Q5_0, Q8_0] {
            for blocks in [1usize, 2, 7, 64] {
                let k = 32 * blocks;
                let bw = ty.row_size(32).unwrap();
                let mut wq = vec![0u8; ty.row_size(k as i64).unwrap()];
                quantize_row_ref(ty, &values(k, 31 + blocks as u32), &mut wq).unwrap();
                let mut xq = vec![0u8; Q8_0.row_size(k as i64).unwrap()];
                quantize_row_ref(Q8_0, &values(k, 57), &mut xq).unwrap();
                let mut acc = [0f32; 8];
                for (x, y) in wq.chunks_exact(bw).zip(xq.chunks_exact(34)) {
                    let d = half(x) * half(y);
                    let (lx, ly) = (levels(ty, x), levels(Q8_0, y));
                    for (l, a) in acc.iter_mut().enumerate() {
                        let sum: i32 = (4 * l..4 * l + 4).map(|v| lx[v] * ly[v]).sum();
                        *a = d.mul_add(sum as f32, *a);
                    }
                }
                let h: [f32; 4] = std::array::from_fn(|i| acc[i] + acc[i + 4]);
                let want = (h[0] + h[2]) + (h[1] + h[3]);
                let mut got = [0f32];
                // SAFETY: AVX2 checked above; one row of k values each.
                unsafe { (quant_dot(ty, Isa::Avx2).unwrap().dot)(&wq, &xq, &mut got) };
                assert_eq!(
                    got[0].to_bits(),
                    want.to_bits(),
                    "{ty}, {blocks} blocks: {} vs {want}",
                    got[0]
                );
            }
        }
    }

    /// The i-quants' row dots of the AVX2 and AVX-512 paths give the bits of GGML's AVX2
    /// `ggml_vec_dot_<type>_q8_K` (for IQ1_S and IQ1_M, whose GGML dot sums the grid and the
    /// shifts apart, the same steps on levels `8 · point ± 1`), modelled here from the blocks'
    /// integers (`iquant_x86::model`): per super-block, lane k the exact integer sum over
    /// the eight groups of scale · Σ level·y over the group's values 4k..4k + 4, then
    /// `acc = fma(d_x · d_y, lane, acc)`, the lanes reduced as `hsum_float_8`, times the
    /// type's factor.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn signed_group_dots_follow_ggml_avx2_order_bit_for_bit() {
        let paths: Vec<Isa> = [Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.available())
            .collect();
        for ty in iquant_x86::model::TYPES {
            let bytes = ty.row_size(256).unwrap();
            for blocks in [1usize, 2, 5, 16] {
                let k = 256 * blocks;
                let wq = quantize_weights(ty, &values(k, 11 + blocks as u32));
                let mut xq = vec![0u8; Type::Q8_K.row_size(k as i64).unwrap()];
                quantize_row_ref(Type::Q8_K, &values(k, 93), &mut xq).unwrap();
                let mut acc = [0f32; 8];
                let mut factor = 1.0;
                for (x, y) in wq
                    .chunks_exact(bytes)
                    .zip(bytemuck::cast_slice::<_, BlockQ8K>(&xq))
                {
                    let b = iquant_x86::model::block(ty, x);
                    factor = b.factor;
                    let d = b.d * y.d.get();
                    let mut lanes = [0i32; 8];
                    for g in 0..8 {
                        for (l, lane) in lanes.iter_mut().enumerate() {
                            let sum: i32 = (32 * g + 4 * l..32 * g + 4 * l + 4)
                                .map(|e| b.levels[e] * y.qs[e] as i32)
                                .sum();
                            *lane += b.scales[2 * g + l / 4] * sum;
                        }
                    }
                    for (a, &lane) in acc.iter_mut().zip(&lanes) {
                        *a = d.mul_add(lane as f32, *a);
                    }
                }
                let h: [f32; 4] = std::array::from_fn(|i| acc[i] + acc[i + 4]);
                let want = factor * ((h[0] + h[2]) + (h[1] + h[3]));
                for &isa in &paths {
                    let mut got = [0f32];
                    // SAFETY: the path is available; one row of k values each.
                    unsafe { (quant_dot(ty, isa).unwrap().dot)(&wq, &xq, &mut got) };
                    assert_eq!(
                        got[0].to_bits(),
                        want.to_bits(),
                        "{ty} {isa:?}, {blocks} blocks"
                    );
                }
            }
        }
    }

    /// k-quant `B`'s kernel on AVX-512 as the CPUs without VBMI and GFNI take it.
    #[cfg(target_arch = "x86_64")]
    fn plain_k<B: kquant_x86::KUnpack + DotBlock>() -> QuantDot {
        let (dot, tile) = B::AVX512;
        QuantDot {
            dot,
            tile: Some(tile),
            ..kernel_k::<B>(Isa::Avx512)
        }
    }

    /// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ3_XXS and IQ3_S: their
    /// AVX-512 row and tile dots with VBMI and GFNI ([`iquant_vbmi`], [`kquant_avx512`]) give
    /// the bits of the AVX-512 dots without them, which the CPUs lacking VBMI or GFNI take,
    /// for 1 to 9 activation rows.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vbmi_dots_are_the_plain_avx512_dots_bit_for_bit() {
        if !(Isa::Avx512.available() && iquant_vbmi::available()) {
            eprintln!("skipped: no AVX-512 VBMI and GFNI");
            return;
        }
        let plain = [
            (Type::IQ2_XXS, kernel_signed::<BlockIq2Xxs>(Isa::Avx512)),
            (Type::IQ2_XS, kernel_signed::<BlockIq2Xs>(Isa::Avx512)),
            (Type::IQ3_XXS, kernel_signed::<BlockIq3Xxs>(Isa::Avx512)),
            (Type::IQ3_S, kernel_signed::<BlockIq3S>(Isa::Avx512)),
            (Type::IQ4_XS, kernel_signed::<BlockIq4Xs>(Isa::Avx512)),
            (Type::Q4_K, plain_k::<BlockQ4K>()),
            (Type::Q6_K, plain_k::<BlockQ6K>()),
            (Type::Q2_K, plain_k::<BlockQ2K>()),
            (Type::Q3_K, plain_k::<BlockQ3K>()),
            (Type::Q5_K, plain_k::<BlockQ5K>()),
        ];
        for (ty, plain) in plain {
            let vbmi = quant_dot(ty, Isa::Avx512).unwrap();
            let k = 5 * QK_K;
            let ws: Vec<Vec<u8>> = (0..TILE_ROWS as u32)
                .map(|s| quantize_weights(ty, &values(k, 300 + s)))
                .collect();
            let qbytes = Type::Q8_K.row_size(k as i64).unwrap();
            for cols in 1..=9usize {
                let xq: Vec<u8> = (0..cols as u32)
                    .flat_map(|j| {
                        let mut q = vec![0u8; qbytes];
                        quantize_row_ref(Type::Q8_K, &values(k, 400 + j), &mut q).unwrap();
                        q
                    })
                    .collect();
                let mut tiles = [(); 2].map(|_| vec![vec![f32::NAN; cols]; TILE_ROWS]);
                for (kernel, outs) in [&plain, &vbmi].into_iter().zip(&mut tiles) {
                    let [o0, o1, o2, o3] = &mut outs[..] else {
                        unreachable!()
                    };
                    let rows = std::array::from_fn(|t| &ws[t][..]);
                    // SAFETY: the CPU has both kernels' features (checked above); four rows of
                    // k values, `cols` activation rows of as many.
                    unsafe { (kernel.tile.unwrap())(rows, &xq, &mut [o0, o1, o2, o3]) };
                }
                for (t, w) in ws.iter().enumerate() {
                    let (mut a, mut b) = (vec![0f32; cols], vec![0f32; cols]);
                    // SAFETY: as above.
                    unsafe { (plain.dot)(w, &xq, &mut a) };
                    // SAFETY: as above.
                    unsafe { (vbmi.dot)(w, &xq, &mut b) };
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&a),
                        bits(&b),
                        "{ty}, {cols} columns, row {t}: row dots"
                    );
                    assert_eq!(
                        bits(&a),
                        bits(&tiles[0][t]),
                        "{ty}, {cols} columns, row {t}"
                    );
                    assert_eq!(
                        bits(&a),
                        bits(&tiles[1][t]),
                        "{ty}, {cols} columns, row {t}"
                    );
                }
            }
        }
    }

    /// The tile dots (four weight rows at once: the 32-value types and the k-quants on AVX2
    /// and AVX-512 VNNI) on odd block counts and every column count from 1 to 9 (each group
    /// width of 4, 3, 2, 1 and their sums): every output bit for bit what the path's row dot
    /// gives its row, and within f32 rounding of the portable path's.
    #[test]
    fn tiles_are_the_row_dots_bit_for_bit_on_every_shape() {
        let mut checked = 0;
        let tiled = DOT_TYPES;
        for ty in tiled {
            for blocks in [1usize, 3, 37] {
                let k = ty.blck_size() * blocks;
                let ws: Vec<Vec<u8>> = (0..TILE_ROWS as u32)
                    .map(|s| quantize_weights(ty, &values(k, 70 + s)))
                    .collect();
                let scalar = quant_dot(ty, Isa::Scalar).unwrap();
                let qbytes = scalar.act.row_size(k as i64).unwrap();
                for cols in 1..=9usize {
                    let xq: Vec<u8> = (0..cols as u32)
                        .flat_map(|j| {
                            let mut q = vec![0u8; qbytes];
                            quantize_row_ref(scalar.act, &values(k, 200 + j), &mut q).unwrap();
                            q
                        })
                        .collect();
                    for isa in Isa::all_available() {
                        let kq = quant_dot(ty, isa).unwrap();
                        let Some(tile) = kq.tile else { continue };
                        let mut outs = vec![vec![f32::NAN; cols]; TILE_ROWS];
                        let [o0, o1, o2, o3] = &mut outs[..] else {
                            unreachable!()
                        };
                        let rows = std::array::from_fn(|t| &ws[t][..]);
                        // SAFETY: `all_available` lists only paths this CPU runs; four rows
                        // of k values, `cols` activation rows of as many.
                        unsafe { tile(rows, &xq, &mut [o0, o1, o2, o3]) };
                        for (t, w) in ws.iter().enumerate() {
                            let (mut each, mut portable) = (vec![0f32; cols], vec![0f32; cols]);
                            // SAFETY: as above.
                            unsafe { (kq.dot)(w, &xq, &mut each) };
                            // SAFETY: the portable path needs no CPU feature.
                            unsafe { (scalar.dot)(w, &xq, &mut portable) };
                            for j in 0..cols {
                                let (g, r, p) = (outs[t][j], each[j], portable[j]);
                                assert_eq!(
                                    g.to_bits(),
                                    r.to_bits(),
                                    "{ty} on {isa:?}, {blocks} blocks, {cols} columns, \
                                     row {t}, column {j}: {g} vs {r}"
                                );
                                assert!((g - p).abs() <= 1e-5 * (1.0 + p.abs()), "{g} vs {p}");
                            }
                        }
                        checked += 1;
                    }
                }
            }
        }
        // a tile on AVX2 and on AVX-512 VNNI for each of these types
        let paths = [Isa::Avx2, Isa::Avx512]
            .iter()
            .filter(|i| i.available())
            .count();
        assert_eq!(checked, paths * tiled.len() * 3 * 9);
    }

    /// The band products, on every path that has them, for every type that has them (the
    /// k-quants and the signed 32-value types, on AVX2 and on AVX-512 VNNI): each output
    /// within f32 rounding of the row dot's, and bit for bit the same whatever the other
    /// columns of its tile (every column count from 1 to 64, so every remainder of a column
    /// group) and the other rows of its band (a short band that repeats its last row); the
    /// 32-value types' AVX-512 products bit for bit the row dots' (GGML's order). Rows of 40
    /// blocks of 32: more than one of those products' K slices, the last one partial.
    #[test]
    fn band_products_match_the_row_dots_for_every_shape() {
        use Type::*;
        let k = 5 * QK_K;
        let quantize = |ty: Type, seed: u32| quantize_weights(ty, &values(k, seed));
        let cols = 64;
        let mut checked = 0;
        let banded = [
            Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS,
            IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M,
        ];
        for ty in banded {
            let act = quant_dot(ty, Isa::Scalar).unwrap().act;
            let qbytes = act.row_size(k as i64).unwrap();
            let xq: Vec<u8> = (0..cols as u32)
                .flat_map(|j| {
                    let mut q = vec![0u8; qbytes];
                    quantize_row_ref(act, &values(k, 500 + j), &mut q).unwrap();
                    q
                })
                .collect();
            let rows: Vec<Vec<u8>> = (0..BAND_ROWS as u32)
                .map(|s| quantize(ty, 40 + s))
                .collect();
            let norms: Vec<f32> = rows
                .iter()
                .map(|r| {
                    let mut wd = vec![0f32; k];
                    dequantize_row(ty, r, &mut wd).unwrap();
                    wd.iter().map(|v| v.abs()).sum::<f32>() * 0.5
                })
                .collect();
            for isa in Isa::all_available() {
                let kq = quant_dot(ty, isa).unwrap();
                let Some(bd) = kq.band else { continue };
                let mut want = vec![vec![0f32; cols]; BAND_ROWS];
                for (w, row) in want.iter_mut().zip(&rows) {
                    // SAFETY: `all_available` lists only paths this CPU runs.
                    unsafe { (kq.dot)(row, &xq, w) };
                }
                let mut scratch = vec![0u8; (bd.scratch_bytes)(k)];
                let mut full: Vec<Vec<f32>> = Vec::new();
                for n in (1..=cols).rev() {
                    let mut tile = vec![0u8; (bd.tile_bytes)(k, n)];
                    (bd.pack)(&xq[..n * qbytes], n, &mut tile);
                    let mut got = vec![vec![f32::NAN; n]; BAND_ROWS];
                    let mut outs: [&mut [f32]; BAND_ROWS] = {
                        let mut it = got.iter_mut();
                        std::array::from_fn(|_| &mut it.next().unwrap()[..])
                    };
                    let ws = std::array::from_fn(|t| &rows[t][..]);
                    // SAFETY: as above; the tile and scratch have the sizes asked for.
                    unsafe { (bd.dots)(ws, &tile, &mut scratch, &mut outs) };
                    if n == cols {
                        full = got.clone();
                    }
                    for t in 0..BAND_ROWS {
                        for j in 0..n {
                            let (g, w) = (got[t][j], want[t][j]);
                            assert!(
                                (g - w).abs() <= 1e-5 * norms[t],
                                "{ty} on {isa:?}, row {t}, column {j} of {n}: {g} vs {w}"
                            );
                            // the 32-value types on AVX-512: GGML's order for batches is
                            // its row dot's, so bit for bit the row dot's (the AVX2 bands
                            // scale each block's integer sum once: f32 rounding apart)
                            if isa == Isa::Avx512 && matches!(ty, Q4_0 | Q5_0 | Q8_0 | IQ4_NL) {
                                assert_eq!(g.to_bits(), w.to_bits(), "{ty}: row {t} col {j}");
                            }
                            assert_eq!(g.to_bits(), full[t][j].to_bits(), "{ty}: {n} columns");
                        }
                    }
                    // three rows, the last repeated
                    let ws = std::array::from_fn(|t| &rows[t.min(2)][..]);
                    let mut short = vec![vec![0f32; n]; BAND_ROWS];
                    let mut outs: [&mut [f32]; BAND_ROWS] = {
                        let mut it = short.iter_mut();
                        std::array::from_fn(|_| &mut it.next().unwrap()[..])
                    };
                    // SAFETY: as above.
                    unsafe { (bd.dots)(ws, &tile, &mut scratch, &mut outs) };
                    for t in 0..3 {
                        let same = short[t]
                            .iter()
                            .zip(&got[t])
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{ty}: a short band changes row {t}");
                    }
                    checked += 1;
                }
            }
        }
        // every one of them has band products on AVX2 and on AVX-512 VNNI
        let paths = [Isa::Avx2, Isa::Avx512]
            .iter()
            .filter(|i| i.available())
            .count();
        assert_eq!(checked, paths * banded.len() * cols);
    }

    /// The repacked layout holds the same values: its Q8_0 blocks dequantize to what the
    /// original blocks do, bit for bit; lengths that do not match are refused.
    #[test]
    fn repacked_blocks_hold_the_same_values() {
        let k = 8 * 32;
        let x = values(k, 11);
        for ty in [Type::Q4_0, Type::Q5_0, Type::IQ4_NL] {
            assert_eq!(repack_layout(ty), Some(Type::Q8_0));
            let mut w = vec![0u8; ty.row_size(k as i64).unwrap()];
            quantize_row_ref(ty, &x, &mut w).unwrap();
            let mut packed = vec![0u8; Type::Q8_0.row_size(k as i64).unwrap()];
            repack_blocks(ty, &w, &mut packed).unwrap();
            let (mut want, mut got) = (vec![0f32; k], vec![0f32; k]);
            dequantize_row(ty, &w, &mut want).unwrap();
            dequantize_row(Type::Q8_0, &packed, &mut got).unwrap();
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{ty}");
            let err = repack_blocks(ty, &w, &mut packed[1..]).unwrap_err();
            assert!(err.to_string().contains("bytes of Q8_0 blocks"), "{err}");
        }
        assert_eq!(repack_layout(Type::Q4_K), None);
        assert!(repack_blocks(Type::Q4_K, &[], &mut [])
            .unwrap_err()
            .to_string()
            .contains("no repacked layout"));
    }
}
