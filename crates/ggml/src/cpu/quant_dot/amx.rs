//! AMX int8 tiles for quantized MUL_MAT against batches of activations: the 32-value block
//! types with signed levels (Q4_0, Q5_0, Q8_0, IQ4_NL; Q8_0 activations, `tdpbssd`) and with
//! unsigned levels and a minimum (Q4_1, Q5_1; Q8_1 activations, `tdpbusd`).
//!
//! Linux lends a process the tile registers only after it asks
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); [`granted`] asks once, when CPUID
//! lists AMX-TILE and AMX-INT8 and the OS enabled the tile state, and remembers the answer.
//!
//! A chunk of the product (up to 128 weight rows × up to 64 activation columns) is computed
//! in 16 × 16 output tiles. The activations (`A` of the tile product is the weights, `B` the
//! activations) are rearranged once per column block into the tiles' four-byte-interleaved
//! layout, with their scales widened to f32, and kept in the thread's scratch while the
//! thread's next chunks use the same columns; each 16-row group of weights is unpacked to
//! signed (or unsigned) bytes and f32 scales once per chunk. Every block has its own scale, so
//! each tile product spans one block (K = 32): its exact int32 sums are stored, converted and
//! multiplied by the two scales into sixteen f32 accumulators (one per weight row, sixteen
//! columns each), block after block in order. Rows and columns past the chunk's end are zeros
//! in the scratch, so every element is summed the same way wherever it falls in a tile: the
//! result does not depend on the chunking or the thread count. Against the VNNI kernels,
//! which sum each block in eight lanes and add the lanes at the end, the values differ by f32
//! rounding of the per-block terms only.

use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::OnceLock;

use super::x86::{half, Simd32};
use crate::quants::{BlockIq4Nl, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0};
use crate::types::Type;

/// Activation columns per chunk the kernel takes at most (the callers' column block).
pub(crate) const MAX_COLS: usize = 64;

/// Activation columns from which MUL_MAT takes the AMX kernel: the first count past token
/// generation's 1–4, which stays on the VNNI kernels (a tile product costs the same for 1 or
/// 16 columns; at 8 columns of 4096² Q5_0 the tiles took 9 ms against the VNNI kernels' 24).
pub(crate) const MIN_COLS: usize = 5;

/// Rows and columns of one output tile, values per block (the K of one tile product).
const T: usize = 16;
const QK: usize = 32;
/// Bytes of one tile operand for one block: 16 rows of 32 weight bytes, or 8 rows of 64
/// activation bytes (16 columns × 4 consecutive values).
const PANEL: usize = T * QK;
/// Column groups of 16 in a chunk.
const GROUPS: usize = MAX_COLS / T;

/// Whether CPUID lists AMX-TILE and AMX-INT8 and the OS enabled the tile state in XCR0.
fn cpu_has_amx_int8() -> bool {
    // CPUID exists on every x86_64 processor; leaf 7 is read only where leaf 0 lists it.
    let max = __cpuid(0).eax;
    let (l1, l7) = (__cpuid(1), (max >= 7).then(|| __cpuid_count(7, 0)));
    let Some(l7) = l7 else { return false };
    let (tile, int8) = ((l7.edx >> 24) & 1 == 1, (l7.edx >> 25) & 1 == 1);
    let osxsave = (l1.ecx >> 27) & 1 == 1;
    if !tile || !int8 || !osxsave {
        return false;
    }
    // SAFETY: CPUID reports OSXSAVE, so XGETBV exists and XCR0 is readable.
    let xcr0 = unsafe { xcr0() };
    // XTILECFG and XTILEDATA (bits 17, 18) enabled by the OS.
    xcr0 & (3 << 17) == 3 << 17
}

/// The OS-enabled state components (XCR0).
///
/// # Safety
/// The CPU must report OSXSAVE.
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    _xgetbv(0)
}

#[cfg(target_os = "linux")]
extern "C" {
    /// libc's system call entry.
    fn syscall(number: std::ffi::c_long, ...) -> std::ffi::c_long;
}

/// Asks Linux for the tile data state (once per process; every thread may then use it).
#[cfg(target_os = "linux")]
fn request_permission() -> bool {
    const SYS_ARCH_PRCTL: std::ffi::c_long = 158;
    const ARCH_GET_XCOMP_PERM: std::ffi::c_long = 0x1022;
    const ARCH_REQ_XCOMP_PERM: std::ffi::c_long = 0x1023;
    const XFEATURE_XTILEDATA: std::ffi::c_long = 18;
    let permitted = || {
        let mut bits = 0u64;
        // SAFETY: ARCH_GET_XCOMP_PERM writes one u64 through the pointer, which points at
        // `bits`, alive for the call.
        let rc = unsafe { syscall(SYS_ARCH_PRCTL, ARCH_GET_XCOMP_PERM, &mut bits as *mut u64) };
        rc == 0 && bits & (1 << XFEATURE_XTILEDATA) != 0
    };
    if permitted() {
        return true;
    }
    // SAFETY: ARCH_REQ_XCOMP_PERM takes the feature number by value and touches no memory of
    // this process.
    let rc = unsafe { syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) };
    rc == 0 && permitted()
}

/// Only Linux is known to need (and answer) the request; elsewhere AMX is not used.
#[cfg(not(target_os = "linux"))]
fn request_permission() -> bool {
    false
}

/// Whether this process may run AMX int8 tile instructions: the CPU has them, the OS enabled
/// their state and granted this process the tile data. Decided once per process.
pub(crate) fn granted() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| cpu_has_amx_int8() && request_permission())
}

/// The tile configuration (palette 1): tiles 0 and 1 hold 16 × 16 int32 sums, 2 and 3 16 rows
/// of 32 weight bytes, 4 and 5 8 rows of 64 activation bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

static CONFIG: TileConfig = {
    let mut colsb = [0u16; 16];
    let mut rows = [0u8; 16];
    let shapes = [(64, 16), (64, 16), (32, 16), (32, 16), (64, 8), (64, 8)];
    let mut t = 0;
    while t < shapes.len() {
        colsb[t] = shapes[t].0;
        rows[t] = shapes[t].1;
        t += 1;
    }
    TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        colsb,
        rows,
    }
};

/// A weight type the kernel takes: its blocks' levels and scales (from [`Simd32`]), the
/// layout of its activation blocks, and the minimum of the unsigned types.
trait AmxBlock: Simd32 {
    /// Bytes of one activation block, and the offset of its 32 levels in it.
    const ACT: (usize, usize);
    /// The block's minimum (the unsigned types), else zero.
    fn min(&self) -> f32;
}

macro_rules! amx_block {
    ($($t:ty: $act:expr, |$b:ident| $min:expr);* $(;)?) => {$(
        impl AmxBlock for $t {
            const ACT: (usize, usize) = $act;
            #[inline(always)]
            fn min(&self) -> f32 {
                let $b = self;
                $min
            }
        }
    )*};
}

// Q8_0: d, 32 levels; Q8_1: d, s, 32 levels.
amx_block!(
    BlockQ4_0: (34, 2), |_b| 0.0;
    BlockQ5_0: (34, 2), |_b| 0.0;
    BlockQ8_0: (34, 2), |_b| 0.0;
    BlockIq4Nl: (34, 2), |_b| 0.0;
    BlockQ4_1: (36, 4), |b| b.m.to_f32();
    BlockQ5_1: (36, 4), |b| b.m.to_f32();
);

/// One chunk: `(state, weights, weight row stride, rows, activations, columns, key, out)`, see
/// [`Chunks::run`].
type ChunkFn =
    unsafe fn(&mut Chunks<'_>, *const u8, usize, usize, &[u8], usize, usize, &mut dyn FnMut(usize, &[f32]));

/// The AMX kernel of one weight type.
#[derive(Clone, Copy)]
pub(crate) struct AmxKernel {
    run: ChunkFn,
}

/// The AMX kernel for weight type `ty`, if it has one (whether AMX may be used is the
/// caller's question).
pub(crate) fn kernel(ty: Type) -> Option<AmxKernel> {
    let run: ChunkFn = match ty {
        Type::Q4_0 => run::<BlockQ4_0>,
        Type::Q5_0 => run::<BlockQ5_0>,
        Type::Q8_0 => run::<BlockQ8_0>,
        Type::IQ4_NL => run::<BlockIq4Nl>,
        Type::Q4_1 => run::<BlockQ4_1>,
        Type::Q5_1 => run::<BlockQ5_1>,
        _ => return None,
    };
    Some(AmxKernel { run })
}

/// The scratch layout for rows of `blocks` blocks: byte offsets of the activation panels, their
/// scales and sums, the weight panel, its scales and minimums, the tile stores, and the end.
struct Layout {
    apanel: usize,
    ascale: usize,
    asum: usize,
    wpanel: usize,
    wscale: usize,
    wmin: usize,
    cbuf: usize,
    end: usize,
}

impl Layout {
    fn new(blocks: usize) -> Layout {
        let apanel = 0;
        let ascale = apanel + GROUPS * blocks * PANEL;
        let asum = ascale + GROUPS * blocks * T * 4;
        let wpanel = asum + GROUPS * blocks * T * 4;
        let wscale = wpanel + blocks * PANEL;
        let wmin = wscale + blocks * T * 4;
        let cbuf = wmin + blocks * T * 4;
        let end = cbuf + 2 * T * T * 4;
        Layout {
            apanel,
            ascale,
            asum,
            wpanel,
            wscale,
            wmin,
            cbuf,
            end,
        }
    }
}

/// Scratch bytes a thread needs for rows of `k` values (with room to align it to 64 bytes).
pub(crate) fn scratch_bytes(k: usize) -> usize {
    Layout::new(k / QK).end + 64
}

/// A thread's AMX state in one MUL_MAT node: its scratch, and which column block's activations
/// the scratch holds.
pub(crate) struct Chunks<'s> {
    kernel: AmxKernel,
    scratch: &'s mut [u8],
    layout: Layout,
    blocks: usize,
    packed: Option<usize>,
}

impl<'s> Chunks<'s> {
    /// The state for rows of `k` values (a multiple of 32) in `scratch`, which must hold
    /// [`scratch_bytes`]`(k)` bytes.
    pub(crate) fn new(kernel: AmxKernel, scratch: &'s mut [u8], k: usize) -> Chunks<'s> {
        let skip = scratch.as_ptr().align_offset(64);
        let layout = Layout::new(k / QK);
        let scratch = &mut scratch[skip..skip + layout.end];
        Chunks {
            kernel,
            scratch,
            layout,
            blocks: k / QK,
            packed: None,
        }
    }

    /// Computes `out(i, values)` for every weight row `i < rows`: the dot products of the row
    /// (at `w + i · stride`) with each of the `cols` activation rows in `acts`. `key` names the
    /// activation rows: calls with the same key must pass the same rows (the scratch keeps
    /// them rearranged from one call to the next).
    ///
    /// # Safety
    /// The process must have AMX ([`granted`]) and the CPU AVX-512 F/BW/VL; `w + i · stride`
    /// must hold a row of whole blocks of the kernel's type (`k / 32` blocks) for every
    /// `i < rows`; `acts` must hold `cols` rows of as many activation blocks of the type's
    /// dot type; `1 <= cols <= MAX_COLS`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn run(
        &mut self,
        w: *const u8,
        stride: usize,
        rows: usize,
        acts: &[u8],
        cols: usize,
        key: usize,
        out: &mut dyn FnMut(usize, &[f32]),
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { (self.kernel.run)(self, w, stride, rows, acts, cols, key, out) }
    }
}

/// One tile product per block for blocks `i` (tiles 0, 2, 4) and, with `PAIR`, `i + 1` (tiles
/// 1, 3, 5): sums zeroed, weights from `a` (16 rows 32 bytes apart, the next block 512 bytes
/// on), activations from `b` (8 rows 64 bytes apart), the int32 sums stored to `c` (16 rows
/// 64 bytes apart; the second block's 1024 bytes on). `tdpbusd` for unsigned weights.
macro_rules! tile_blocks {
    ($op:literal, $a:expr, $b:expr, $c:expr, pair) => {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tileloadd tmm2, [{a} + {s32}*1]",
            "tileloadd tmm4, [{b} + {s64}*1]",
            concat!($op, " tmm0, tmm2, tmm4"),
            "tileloadd tmm3, [{a} + {s32}*1 + 512]",
            "tileloadd tmm5, [{b} + {s64}*1 + 512]",
            concat!($op, " tmm1, tmm3, tmm5"),
            "tilestored [{c} + {s64}*1], tmm0",
            "tilestored [{c} + {s64}*1 + 1024], tmm1",
            a = in(reg) $a, b = in(reg) $b, c = in(reg) $c,
            s32 = in(reg) 32usize, s64 = in(reg) 64usize,
            options(nostack, preserves_flags),
        )
    };
    ($op:literal, $a:expr, $b:expr, $c:expr, single) => {
        asm!(
            "tilezero tmm0",
            "tileloadd tmm2, [{a} + {s32}*1]",
            "tileloadd tmm4, [{b} + {s64}*1]",
            concat!($op, " tmm0, tmm2, tmm4"),
            "tilestored [{c} + {s64}*1], tmm0",
            a = in(reg) $a, b = in(reg) $b, c = in(reg) $c,
            s32 = in(reg) 32usize, s64 = in(reg) 64usize,
            options(nostack, preserves_flags),
        )
    };
}

/// [`Chunks::run`] for weight type `B`.
///
/// # Safety
/// As [`Chunks::run`].
#[allow(clippy::incompatible_msrv, clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn run<B: AmxBlock>(
    st: &mut Chunks<'_>,
    w: *const u8,
    stride: usize,
    rows: usize,
    acts: &[u8],
    cols: usize,
    key: usize,
    out: &mut dyn FnMut(usize, &[f32]),
) {
    let nb = st.blocks;
    let groups = cols.div_ceil(T);
    let l = &st.layout;
    let base = st.scratch.as_mut_ptr();
    // SAFETY: every offset below is within the layout's regions of the aligned scratch
    // (`Chunks::new`), the activation and weight reads within the rows the caller vouches
    // for; the CPU has AVX-512 F/BW/VL and the process AMX (the caller).
    unsafe {
        let (apanel, ascale, asum) = (base.add(l.apanel), base.add(l.ascale), base.add(l.asum));
        let (wpanel, wscale, wmin) = (base.add(l.wpanel), base.add(l.wscale), base.add(l.wmin));
        let cbuf = base.add(l.cbuf);
        if st.packed != Some(key) {
            pack_acts::<B>(acts, cols, nb, apanel, ascale as *mut f32, asum as *mut f32);
            st.packed = Some(key);
        }
        asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, preserves_flags, readonly));
        let mut res = [[0f32; MAX_COLS]; T];
        for g0 in (0..rows).step_by(T) {
            let valid = T.min(rows - g0);
            unpack_weights::<B>(w.add(g0 * stride), stride, valid, nb, wpanel, wscale, wmin);
            for (c, cols_out) in (0..groups).map(|c| (c, c * T)) {
                let (ap, asc) = (apanel.add(c * nb * PANEL), ascale.add(c * nb * T * 4));
                let asm_ = asum.add(c * nb * T * 4);
                let mut acc = [_mm512_setzero_ps(); T];
                let mut i = 0;
                while i < nb {
                    let pair = i + 1 < nb;
                    let (a, b) = (wpanel.add(i * PANEL), ap.add(i * PANEL));
                    match (B::UNSIGNED, pair) {
                        (false, true) => tile_blocks!("tdpbssd", a, b, cbuf, pair),
                        (false, false) => tile_blocks!("tdpbssd", a, b, cbuf, single),
                        (true, true) => tile_blocks!("tdpbusd", a, b, cbuf, pair),
                        (true, false) => tile_blocks!("tdpbusd", a, b, cbuf, single),
                    }
                    for j in i..i + 1 + pair as usize {
                        let sums = cbuf.add((j - i) * T * T * 4);
                        let dx = _mm512_loadu_ps(asc.add(j * T * 4) as *const f32);
                        let ws = wscale.add(j * T * 4) as *const f32;
                        for (m, acc) in acc.iter_mut().enumerate() {
                            let s = _mm512_mul_ps(_mm512_set1_ps(*ws.add(m)), dx);
                            let v = _mm512_cvtepi32_ps(_mm512_load_si512(
                                sums.add(m * T * 4) as *const _,
                            ));
                            *acc = _mm512_fmadd_ps(s, v, *acc);
                        }
                        if B::UNSIGNED {
                            let sx = _mm512_loadu_ps(asm_.add(j * T * 4) as *const f32);
                            let wm = wmin.add(j * T * 4) as *const f32;
                            for (m, acc) in acc.iter_mut().enumerate() {
                                *acc = _mm512_fmadd_ps(_mm512_set1_ps(*wm.add(m)), sx, *acc);
                            }
                        }
                    }
                    i += 1 + pair as usize;
                }
                for (r, a) in res.iter_mut().zip(&acc) {
                    _mm512_storeu_ps(r[cols_out..].as_mut_ptr(), *a);
                }
            }
            for (m, r) in res.iter().enumerate().take(valid) {
                out(g0 + m, &r[..cols]);
            }
        }
        asm!("tilerelease", options(nostack, preserves_flags, nomem));
    }
}

/// The activations rearranged for the tiles: for column group `c` (16 columns, the last padded
/// with zeros) and block `i`, 8 rows of 64 bytes at `apanel + (c · nb + i) · 512`, row `r`
/// holding levels `4r..4r + 4` of each column; the scales (and, for Q8_1, the sums `s`) as
/// 16 f32 at `(c · nb + i) · 16` of `ascale` (`asum`).
///
/// # Safety
/// `acts` holds `cols` rows of `nb` activation blocks of `B`'s dot type, `cols <= MAX_COLS`;
/// the three outputs have room for `GROUPS · nb` of their units; AVX-512 F/BW.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn pack_acts<B: AmxBlock>(
    acts: &[u8],
    cols: usize,
    nb: usize,
    apanel: *mut u8,
    ascale: *mut f32,
    asum: *mut f32,
) {
    let (ab, qs) = B::ACT;
    let row = nb * ab;
    // SAFETY: the gathers read 4 bytes of a block of a column below `cols` (the others are
    // masked off); the stores are within the outputs (the caller).
    unsafe {
        let idx = _mm512_mullo_epi32(
            _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            _mm512_set1_epi32(row as i32),
        );
        let zero = _mm512_setzero_si512();
        for c in 0..cols.div_ceil(T) {
            let n = T.min(cols - c * T);
            let mask: __mmask16 = if n == T { !0 } else { (1u16 << n) - 1 };
            let col0 = acts.as_ptr().add(c * T * row);
            for i in 0..nb {
                let blk = col0.add(i * ab);
                let dst = apanel.add((c * nb + i) * PANEL);
                for r in 0..QK / 4 {
                    let v = _mm512_mask_i32gather_epi32::<1>(
                        zero,
                        mask,
                        idx,
                        blk.add(qs + 4 * r) as *const _,
                    );
                    _mm512_store_si512(dst.add(r * 64) as *mut _, v);
                }
                let head = _mm512_mask_i32gather_epi32::<1>(zero, mask, idx, blk as *const _);
                let at = (c * nb + i) * T;
                let d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
                _mm512_storeu_ps(ascale.add(at), d);
                if B::UNSIGNED {
                    let s = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(head)));
                    _mm512_storeu_ps(asum.add(at), s);
                }
            }
        }
    }
}

/// `valid` rows of weights (`stride` bytes apart from `w`, `nb` blocks each) unpacked for the
/// tiles: block `i` of row `m` as 32 bytes at `wpanel + (i · 16 + m) · 32`, its scale and
/// minimum as f32 at `i · 16 + m` of `wscale` and `wmin`; rows `valid..16` zeros.
///
/// # Safety
/// The rows hold `nb` blocks of `B`; the outputs have room for `nb` blocks of 16 rows;
/// AVX2 and F16C.
#[inline(always)]
unsafe fn unpack_weights<B: AmxBlock>(
    w: *const u8,
    stride: usize,
    valid: usize,
    nb: usize,
    wpanel: *mut u8,
    wscale: *mut u8,
    wmin: *mut u8,
) {
    // SAFETY: reads within the rows and writes within the outputs (the caller).
    unsafe {
        for m in 0..T {
            let (sc, mn) = (wscale as *mut f32, wmin as *mut f32);
            if m >= valid {
                for i in 0..nb {
                    let dst = wpanel.add((i * T + m) * QK) as *mut __m256i;
                    _mm256_store_si256(dst, _mm256_setzero_si256());
                    *sc.add(i * T + m) = 0.0;
                    *mn.add(i * T + m) = 0.0;
                }
                continue;
            }
            let row = std::slice::from_raw_parts(w.add(m * stride) as *const B, nb);
            for (i, b) in row.iter().enumerate() {
                let dst = wpanel.add((i * T + m) * QK) as *mut __m256i;
                _mm256_store_si256(dst, b.levels());
                *sc.add(i * T + m) = half(b.d());
                if B::UNSIGNED {
                    *mn.add(i * T + m) = b.min();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::quant_dot::tests::values;
    use crate::cpu::quant_dot::{quant_dot, Isa};
    use crate::quants::{dequantize_row, quantize_chunk, quantize_row_ref};

    /// Every AMX kernel against the portable row dot, on every remainder shape (weight rows
    /// and columns not multiples of 16, one block per row, full 64-column chunks), within
    /// `2 (nb + 1) · ε · Σ |w_k| (|x_k| + 0.01)` (both sum `nb` f32 block terms in f32; the
    /// 0.01 covers the activations' 8-bit rounding of values below 0.5); a second call with
    /// the same key (activations reused from the scratch) and one starting at a later row (a
    /// different chunking) give the same values bit for bit.
    #[test]
    fn amx_matches_the_portable_dot_on_every_shape() {
        if !granted() || !Isa::Avx512.available() {
            eprintln!(
                "AMX part skipped: this process has no AMX int8 (CPU without AMX-TILE/AMX-INT8 \
                 or AVX-512, tile state not enabled by the OS, or ARCH_REQ_XCOMP_PERM refused)"
            );
            return;
        }
        use Type::*;
        for ty in [Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_1, Q5_1] {
            let kern = kernel(ty).unwrap();
            let scalar = quant_dot(ty, Isa::Scalar).unwrap();
            for k in [32usize, 96, 1024] {
                let (wbytes, qbytes) = (ty.row_size(k as i64).unwrap(), scalar.act.row_size(k as i64).unwrap());
                let nb = k / QK;
                for (rows, cols) in [(1, 1), (16, 16), (21, 7), (5, 64), (40, 23), (33, 50)] {
                    let w = values(rows * k, 3 + rows as u32);
                    let mut wq = vec![0u8; rows * wbytes];
                    quantize_chunk(ty, &w, &mut wq, 0, rows, k, None).unwrap();
                    let mut wd = vec![0f32; rows * k];
                    for (q, d) in wq.chunks_exact(wbytes).zip(wd.chunks_exact_mut(k)) {
                        dequantize_row(ty, q, d).unwrap();
                    }
                    let x = values(cols * k, 40 + cols as u32);
                    let mut xq = vec![0u8; cols * qbytes];
                    for (v, q) in x.chunks_exact(k).zip(xq.chunks_exact_mut(qbytes)) {
                        quantize_row_ref(scalar.act, v, q).unwrap();
                    }
                    let mut scratch = vec![0u8; scratch_bytes(k)];
                    let mut chunks = Chunks::new(kern, &mut scratch, k);
                    let mut runs = Vec::new();
                    for (first, key) in [(0, 1), (0, 1), (rows / 2, 1), (0, 2)] {
                        let mut got = vec![f32::NAN; rows * cols];
                        // SAFETY: AMX granted and AVX-512 present (checked above); rows
                        // first..rows of wq have nb blocks each, xq holds cols rows.
                        unsafe {
                            chunks.run(
                                wq[first * wbytes..].as_ptr(),
                                wbytes,
                                rows - first,
                                &xq,
                                cols,
                                key,
                                &mut |i, v| {
                                    got[(first + i) * cols..(first + i + 1) * cols].copy_from_slice(v)
                                },
                            )
                        };
                        runs.push((first, got));
                    }
                    let all = &runs[0].1;
                    for (first, got) in &runs[1..] {
                        let same = all[first * cols..]
                            .iter()
                            .zip(&got[first * cols..])
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{ty} k={k} {rows}x{cols}: first row {first} differs");
                    }
                    for i in 0..rows {
                        let mut want = vec![0f32; cols];
                        // SAFETY: the portable path needs no CPU feature.
                        unsafe { (scalar.dot)(&wq[i * wbytes..(i + 1) * wbytes], &xq, &mut want) };
                        for j in 0..cols {
                            let mag: f64 = (0..k)
                                .map(|t| (wd[i * k + t].abs() * (x[j * k + t].abs() + 0.01)) as f64)
                                .sum();
                            let bound = 2.0 * (nb + 1) as f64 * f32::EPSILON as f64 * mag;
                            let (g, e) = (all[i * cols + j], want[j]);
                            assert!(
                                ((g - e) as f64).abs() <= bound,
                                "{ty} k={k} {rows}x{cols} at ({i}, {j}): {g} vs {e} (bound {bound})"
                            );
                        }
                    }
                }
            }
        }
    }
}
