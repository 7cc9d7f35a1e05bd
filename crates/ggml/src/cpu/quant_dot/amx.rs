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
use crate::quants::{
    scale_min, BlockIq4Nl, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8_0, PackedF16,
};
use crate::types::Type;
use crate::QK_K;

/// Activation columns per chunk the kernel takes at most (the callers' column block).
pub(crate) const MAX_COLS: usize = 64;

/// Activation columns from which MUL_MAT takes the AMX kernel: the first count past token
/// generation's 1–4, which stays on the VNNI kernels (a tile product costs the same for 1 or
/// 16 columns; at 8 columns of 4096² Q5_0 the tiles took 9 ms against the VNNI kernels' 24).
pub(crate) const MIN_COLS: usize = 5;

/// Rows and columns of one output tile.
const T: usize = 16;
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

/// A tile configuration (palette 1) for tile products over `g` values: tiles 0 and 1 hold
/// 16 × 16 int32 sums, 2 and 3 16 rows of `g` weight bytes, 4 and 5 `g / 4` rows of 64
/// activation bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

const fn config(g: u16) -> TileConfig {
    let mut colsb = [0u16; 16];
    let mut rows = [0u8; 16];
    let shapes = [
        (64, 16),
        (64, 16),
        (g, 16),
        (g, 16),
        (64, g as u8 / 4),
        (64, g as u8 / 4),
    ];
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
}

static CONFIG_32: TileConfig = config(32);
static CONFIG_16: TileConfig = config(16);

/// The activation types: Q8_0 (`d`, 32 levels), Q8_1 (`d`, `s`, 32 levels), Q8_K (`d` as
/// f32, 256 levels, 16 sums of 16 levels).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Q8_0,
    Q8_1,
    Q8K,
}

impl Act {
    /// Bytes and values of one block.
    const fn block(self) -> (usize, usize) {
        match self {
            Act::Q8_0 => (34, 32),
            Act::Q8_1 => (36, 32),
            Act::Q8K => (292, 256),
        }
    }
}

/// A weight type the kernel takes. Its blocks are cut into units of `G` values that share one
/// scale (and minimum): the K of one tile product.
trait Tiled: bytemuck::Pod {
    /// Values per unit (32, or 16 for the k-quants with a scale per 16 values).
    const G: usize;
    /// Values per block.
    const VALUES: usize;
    /// Whether the unpacked levels are unsigned (`tdpbusd`), else signed (`tdpbssd`).
    const UNSIGNED: bool;
    /// Whether the units have a minimum term (`min · activation sum`).
    const HAS_MIN: bool;
    /// The activation type.
    const ACT: Act;
    /// Unpacks the block: unit `u`'s `G` levels as bytes to `dst(u)`, its scale (the weight's
    /// factor of `activation scale · Σ level · activation level`) to `scale[u]` and, where
    /// the type has one, its minimum (the factor of the activations' `d · Σ levels` over the
    /// unit) to `min[u]`.
    ///
    /// # Safety
    /// `dst(u)` must be writable for `G` bytes for every unit; AVX2 and F16C.
    unsafe fn unpack(&self, dst: impl Fn(usize) -> *mut u8, scale: &mut [f32], min: &mut [f32]);
}

/// The 32-value types through [`Simd32`]: one unit per block.
macro_rules! tiled32 {
    ($($t:ty: $act:ident, |$b:ident| $min:expr);* $(;)?) => {$(
        impl Tiled for $t {
            const G: usize = 32;
            const VALUES: usize = 32;
            const UNSIGNED: bool = <$t as Simd32>::UNSIGNED;
            const HAS_MIN: bool = <$t as Simd32>::UNSIGNED;
            const ACT: Act = Act::$act;
            #[inline(always)]
            unsafe fn unpack(
                &self,
                dst: impl Fn(usize) -> *mut u8,
                scale: &mut [f32],
                min: &mut [f32],
            ) {
                let $b = self;
                // SAFETY: 32 writable bytes at dst(0); the caller has AVX2 and F16C.
                unsafe {
                    _mm256_storeu_si256(dst(0) as *mut __m256i, self.levels());
                    scale[0] = half(self.d());
                }
                min[0] = $min;
            }
        }
    )*};
}

tiled32!(
    BlockQ4_0: Q8_0, |_b| 0.0;
    BlockQ5_0: Q8_0, |_b| 0.0;
    BlockQ8_0: Q8_0, |_b| 0.0;
    BlockIq4Nl: Q8_0, |_b| 0.0;
    BlockQ4_1: Q8_1, |b| b.m.to_f32();
    BlockQ5_1: Q8_1, |b| b.m.to_f32();
);

impl Tiled for BlockQ4K {
    const G: usize = 32;
    const VALUES: usize = QK_K;
    const UNSIGNED: bool = true;
    const HAS_MIN: bool = true;
    const ACT: Act = Act::Q8K;
    #[inline(always)]
    unsafe fn unpack(&self, dst: impl Fn(usize) -> *mut u8, scale: &mut [f32], min: &mut [f32]) {
        let (d, dmin) = (half_sw(self.d), half_sw(self.dmin));
        for j in 0..QK_K / 32 {
            let (sc, m) = scale_min(j, &self.scales);
            scale[j] = d * sc as f32;
            min[j] = -dmin * m as f32;
        }
        // SAFETY: 32 readable bytes of qs per chunk; 32 writable bytes at every dst(u); the
        // caller has AVX2.
        unsafe {
            let low = _mm256_set1_epi8(0xf);
            for c in 0..4 {
                // values 64c..64c + 32 in the low nibbles, the next 32 in the high ones
                let q = _mm256_loadu_si256(self.qs[32 * c..].as_ptr() as *const __m256i);
                _mm256_storeu_si256(dst(2 * c) as *mut __m256i, _mm256_and_si256(q, low));
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
                _mm256_storeu_si256(dst(2 * c + 1) as *mut __m256i, hi);
            }
        }
    }
}

impl Tiled for BlockQ6K {
    const G: usize = 16;
    const VALUES: usize = QK_K;
    const UNSIGNED: bool = false;
    const HAS_MIN: bool = false;
    const ACT: Act = Act::Q8K;
    #[inline(always)]
    unsafe fn unpack(&self, dst: impl Fn(usize) -> *mut u8, scale: &mut [f32], _min: &mut [f32]) {
        let d = half_sw(self.d);
        for (s, &sc) in scale.iter_mut().zip(&self.scales) {
            *s = d * sc as f32;
        }
        // SAFETY: 32 readable bytes of ql and qh per load; 16 writable bytes at every dst(u)
        // (the 32 values of one store are units 2u and 2u + 1); the caller has AVX2.
        unsafe {
            let (low, three, bias) = (
                _mm256_set1_epi8(0xf),
                _mm256_set1_epi8(3),
                _mm256_set1_epi8(32),
            );
            for h in 0..2 {
                let ql0 = _mm256_loadu_si256(self.ql[64 * h..].as_ptr() as *const __m256i);
                let ql1 = _mm256_loadu_si256(self.ql[64 * h + 32..].as_ptr() as *const __m256i);
                let qh = _mm256_loadu_si256(self.qh[32 * h..].as_ptr() as *const __m256i);
                let hb = |s: i32| {
                    let v = match s {
                        0 => qh,
                        2 => _mm256_srli_epi16(qh, 2),
                        4 => _mm256_srli_epi16(qh, 4),
                        _ => _mm256_srli_epi16(qh, 6),
                    };
                    _mm256_slli_epi16(_mm256_and_si256(v, three), 4)
                };
                let quarters = [
                    _mm256_or_si256(_mm256_and_si256(ql0, low), hb(0)),
                    _mm256_or_si256(_mm256_and_si256(ql1, low), hb(2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low), hb(4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low), hb(6)),
                ];
                for (q, v) in quarters.into_iter().enumerate() {
                    // levels 0..64 offset to −32..32 as signed bytes
                    let v = _mm256_sub_epi8(v, bias);
                    let u = 8 * h + 2 * q;
                    _mm_storeu_si128(dst(u) as *mut __m128i, _mm256_castsi256_si128(v));
                    _mm_storeu_si128(dst(u + 1) as *mut __m128i, _mm256_extracti128_si256(v, 1));
                }
            }
        }
    }
}

/// A half widened in software (the k-quants' two per super-block).
#[inline(always)]
fn half_sw(h: PackedF16) -> f32 {
    h.to_f32()
}

/// One chunk: `(state, weights, weight row stride, rows, activations, columns, key, out)`, see
/// [`Chunks::run`].
type ChunkFn = unsafe fn(
    &mut Chunks<'_>,
    *const u8,
    usize,
    usize,
    &[u8],
    usize,
    usize,
    &mut dyn FnMut(usize, &[f32]),
);

/// The AMX kernel of one weight type.
#[derive(Clone, Copy)]
pub(crate) struct AmxKernel {
    run: ChunkFn,
    /// Values per unit.
    g: usize,
}

/// The AMX kernel for weight type `ty`, if it has one (whether AMX may be used is the
/// caller's question).
pub(crate) fn kernel(ty: Type) -> Option<AmxKernel> {
    fn of<B: Tiled>() -> AmxKernel {
        AmxKernel {
            run: run::<B>,
            g: B::G,
        }
    }
    Some(match ty {
        Type::Q4_0 => of::<BlockQ4_0>(),
        Type::Q5_0 => of::<BlockQ5_0>(),
        Type::Q8_0 => of::<BlockQ8_0>(),
        Type::IQ4_NL => of::<BlockIq4Nl>(),
        Type::Q4_1 => of::<BlockQ4_1>(),
        Type::Q5_1 => of::<BlockQ5_1>(),
        Type::Q4_K => of::<BlockQ4K>(),
        Type::Q6_K => of::<BlockQ6K>(),
        _ => return None,
    })
}

/// The scratch layout for rows of `units` units of `g` values: byte offsets of the activation
/// panels, their scales and sums, the weight panel, its scales and minimums, the tile stores,
/// and the end.
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
    fn new(units: usize, g: usize) -> Layout {
        let apanel = 0;
        let ascale = apanel + GROUPS * units * T * g;
        let asum = ascale + GROUPS * units * T * 4;
        let wpanel = asum + GROUPS * units * T * 4;
        let wscale = wpanel + units * T * g;
        let wmin = wscale + units * T * 4;
        let cbuf = wmin + units * T * 4;
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

/// Scratch bytes a thread needs for rows of `k` values with `kernel` (with room to align it
/// to 64 bytes).
pub(crate) fn scratch_bytes(kernel: AmxKernel, k: usize) -> usize {
    Layout::new(k / kernel.g, kernel.g).end + 64
}

/// A thread's AMX state in one MUL_MAT node: its scratch, and which column block's activations
/// the scratch holds.
pub(crate) struct Chunks<'s> {
    kernel: AmxKernel,
    scratch: &'s mut [u8],
    layout: Layout,
    units: usize,
    packed: Option<usize>,
}

impl<'s> Chunks<'s> {
    /// The state for rows of `k` values (whole blocks) in `scratch`, which must hold
    /// [`scratch_bytes`]`(kernel, k)` bytes.
    pub(crate) fn new(kernel: AmxKernel, scratch: &'s mut [u8], k: usize) -> Chunks<'s> {
        let skip = scratch.as_ptr().align_offset(64);
        let units = k / kernel.g;
        let layout = Layout::new(units, kernel.g);
        let scratch = &mut scratch[skip..skip + layout.end];
        Chunks {
            kernel,
            scratch,
            layout,
            units,
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
    /// must hold a row of whole blocks of the kernel's type (`k` values) for every `i < rows`;
    /// `acts` must hold `cols` rows of as many activation blocks of the type's dot type;
    /// `1 <= cols <= MAX_COLS`.
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

/// One tile product per unit for unit `a`/`b` (tiles 0, 2, 4) and, with `pair`, `a2`/`b2`
/// (tiles 1, 3, 5): sums zeroed, weights from `a` (16 rows `g` bytes apart), activations from
/// `b` (rows 64 bytes apart), the int32 sums stored to `c` (16 rows 64 bytes apart; the second
/// unit's 1024 bytes on). `tdpbusd` for unsigned weights.
macro_rules! tile_units {
    ($op:literal, $g:expr, $a:expr, $b:expr, $a2:expr, $b2:expr, $c:expr, pair) => {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tileloadd tmm2, [{a} + {sa}*1]",
            "tileloadd tmm4, [{b} + {s64}*1]",
            concat!($op, " tmm0, tmm2, tmm4"),
            "tileloadd tmm3, [{a2} + {sa}*1]",
            "tileloadd tmm5, [{b2} + {s64}*1]",
            concat!($op, " tmm1, tmm3, tmm5"),
            "tilestored [{c} + {s64}*1], tmm0",
            "tilestored [{c} + {s64}*1 + 1024], tmm1",
            a = in(reg) $a, b = in(reg) $b, a2 = in(reg) $a2, b2 = in(reg) $b2,
            c = in(reg) $c, sa = in(reg) $g, s64 = in(reg) 64usize,
            options(nostack, preserves_flags),
        )
    };
    ($op:literal, $g:expr, $a:expr, $b:expr, $c:expr, single) => {
        asm!(
            "tilezero tmm0",
            "tileloadd tmm2, [{a} + {sa}*1]",
            "tileloadd tmm4, [{b} + {s64}*1]",
            concat!($op, " tmm0, tmm2, tmm4"),
            "tilestored [{c} + {s64}*1], tmm0",
            a = in(reg) $a, b = in(reg) $b, c = in(reg) $c,
            sa = in(reg) $g, s64 = in(reg) 64usize,
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
unsafe fn run<B: Tiled>(
    st: &mut Chunks<'_>,
    w: *const u8,
    stride: usize,
    rows: usize,
    acts: &[u8],
    cols: usize,
    key: usize,
    out: &mut dyn FnMut(usize, &[f32]),
) {
    let (nu, g) = (st.units, B::G);
    let unit = T * g;
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
            pack_acts::<B>(acts, cols, nu, apanel, ascale as *mut f32, asum as *mut f32);
            st.packed = Some(key);
        }
        let config = if g == 32 { &CONFIG_32 } else { &CONFIG_16 };
        asm!("ldtilecfg [{}]", in(reg) config, options(nostack, preserves_flags, readonly));
        let mut res = [[0f32; MAX_COLS]; T];
        for g0 in (0..rows).step_by(T) {
            let valid = T.min(rows - g0);
            let (ws, wm) = (wscale as *mut f32, wmin as *mut f32);
            unpack_weights::<B>(w.add(g0 * stride), stride, valid, nu, wpanel, ws, wm);
            for (c, cols_out) in (0..groups).map(|c| (c, c * T)) {
                let ap = apanel.add(c * nu * unit);
                let (asc, asm_) = (ascale.add(c * nu * T * 4), asum.add(c * nu * T * 4));
                let mut acc = [_mm512_setzero_ps(); T];
                let mut u = 0;
                while u < nu {
                    let pair = u + 1 < nu;
                    let (a, b) = (wpanel.add(u * unit), ap.add(u * unit));
                    let (a2, b2) = (a.add(unit), b.add(unit));
                    match (B::UNSIGNED, pair) {
                        (false, true) => tile_units!("tdpbssd", g, a, b, a2, b2, cbuf, pair),
                        (false, false) => tile_units!("tdpbssd", g, a, b, cbuf, single),
                        (true, true) => tile_units!("tdpbusd", g, a, b, a2, b2, cbuf, pair),
                        (true, false) => tile_units!("tdpbusd", g, a, b, cbuf, single),
                    }
                    for j in u..u + 1 + pair as usize {
                        let sums = cbuf.add((j - u) * T * T * 4);
                        let dx = _mm512_loadu_ps(asc.add(j * T * 4) as *const f32);
                        let wsj = ws.add(j * T);
                        for (m, acc) in acc.iter_mut().enumerate() {
                            let s = _mm512_mul_ps(_mm512_set1_ps(*wsj.add(m)), dx);
                            let v = _mm512_cvtepi32_ps(_mm512_load_si512(
                                sums.add(m * T * 4) as *const _
                            ));
                            *acc = _mm512_fmadd_ps(s, v, *acc);
                        }
                        if B::HAS_MIN {
                            let sx = _mm512_loadu_ps(asm_.add(j * T * 4) as *const f32);
                            let wmj = wm.add(j * T);
                            for (m, acc) in acc.iter_mut().enumerate() {
                                *acc = _mm512_fmadd_ps(_mm512_set1_ps(*wmj.add(m)), sx, *acc);
                            }
                        }
                    }
                    u += 1 + pair as usize;
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
/// with zeros) and unit `u`, `G / 4` rows of 64 bytes at `apanel + (c · nu + u) · 16 G`, row
/// `r` holding levels `4r..4r + 4` of the unit in each column; the scales (and the sums of the
/// types with a minimum: Q8_1's `s`, Q8_K's `d · Σ levels` of the unit) as 16 f32 at
/// `(c · nu + u) · 16` of `ascale` (`asum`).
///
/// # Safety
/// `acts` holds `cols` rows of `nu` units of activation blocks of `B`'s dot type,
/// `cols <= MAX_COLS`; the three outputs have room for `GROUPS · nu` of their units; AVX-512
/// F/BW.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn pack_acts<B: Tiled>(
    acts: &[u8],
    cols: usize,
    nu: usize,
    apanel: *mut u8,
    ascale: *mut f32,
    asum: *mut f32,
) {
    let g = B::G;
    let (ab, per) = B::ACT.block();
    let upb = per / g;
    let row = nu / upb * ab;
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
            for u in 0..nu {
                let (blk, within) = (col0.add(u / upb * ab), u % upb);
                let qs = blk.add(match B::ACT {
                    Act::Q8_0 => 2,
                    Act::Q8_1 => 4,
                    Act::Q8K => 4 + within * g,
                });
                let dst = apanel.add((c * nu + u) * T * g);
                for r in 0..g / 4 {
                    let v = _mm512_mask_i32gather_epi32::<1>(
                        zero,
                        mask,
                        idx,
                        qs.add(4 * r) as *const _,
                    );
                    _mm512_store_si512(dst.add(r * 64) as *mut _, v);
                }
                let head = _mm512_mask_i32gather_epi32::<1>(zero, mask, idx, blk as *const _);
                let at = (c * nu + u) * T;
                let d = match B::ACT {
                    Act::Q8K => _mm512_castsi512_ps(head),
                    _ => _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head)),
                };
                _mm512_storeu_ps(ascale.add(at), d);
                if B::HAS_MIN {
                    let s = match B::ACT {
                        Act::Q8K => {
                            // the unit's group sums (i16 at 260 + 2·group): one per 16 values;
                            // the dword ending at the last group's sum, so nothing past the
                            // block is read
                            let at = 260 + 2 * (within * g / 16) + 2 * (g / 16) - 4;
                            let v = _mm512_mask_i32gather_epi32::<1>(
                                zero,
                                mask,
                                idx,
                                blk.add(at) as *const _,
                            );
                            let hi = _mm512_srai_epi32::<16>(v);
                            let sum = if g == 32 {
                                _mm512_add_epi32(
                                    hi,
                                    _mm512_srai_epi32::<16>(_mm512_slli_epi32::<16>(v)),
                                )
                            } else {
                                hi
                            };
                            _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum))
                        }
                        _ => _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(head))),
                    };
                    _mm512_storeu_ps(asum.add(at), s);
                }
            }
        }
    }
}

/// `valid` rows of weights (`stride` bytes apart from `w`, `nu` units each) unpacked for the
/// tiles: unit `u` of row `m` as `G` bytes at `wpanel + (u · 16 + m) · G`, its scale and
/// minimum at `u · 16 + m` of `wscale` and `wmin`; rows `valid..16` zeros.
///
/// # Safety
/// The rows hold `nu` units of blocks of `B`; the outputs have room for `nu` units of 16 rows;
/// AVX2 and F16C.
#[inline(always)]
unsafe fn unpack_weights<B: Tiled>(
    w: *const u8,
    stride: usize,
    valid: usize,
    nu: usize,
    wpanel: *mut u8,
    wscale: *mut f32,
    wmin: *mut f32,
) {
    let (g, upb) = (B::G, B::VALUES / B::G);
    // SAFETY: reads within the rows and writes within the outputs (the caller).
    unsafe {
        for m in 0..T {
            if m >= valid {
                for u in 0..nu {
                    std::ptr::write_bytes(wpanel.add((u * T + m) * g), 0, g);
                    *wscale.add(u * T + m) = 0.0;
                    *wmin.add(u * T + m) = 0.0;
                }
                continue;
            }
            let row = std::slice::from_raw_parts(w.add(m * stride) as *const B, nu / upb);
            let (mut sc, mut mn) = ([0f32; QK_K / 16], [0f32; QK_K / 16]);
            for (i, b) in row.iter().enumerate() {
                let u0 = i * upb;
                b.unpack(
                    |u| wpanel.add(((u0 + u) * T + m) * g),
                    &mut sc[..upb],
                    &mut mn[..upb],
                );
                for u in 0..upb {
                    *wscale.add((u0 + u) * T + m) = sc[u];
                    *wmin.add((u0 + u) * T + m) = mn[u];
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
    /// `2 (n + 1) · ε · Σ (|w_k| + μ) (|x_k| + 0.01)`, n the f32 terms the kernel sums per
    /// element (one per unit of 32 or 16 values, two with a minimum), μ the row's largest
    /// |w| for the types with a minimum (which bounds the minimum terms), else 0, and the 0.01
    /// the activations' 8-bit rounding of values below 0.5; a second call with
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
        for ty in [Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_1, Q5_1, Q4_K, Q6_K] {
            let kern = kernel(ty).unwrap();
            let scalar = quant_dot(ty, Isa::Scalar).unwrap();
            let with_min = matches!(ty, Q4_1 | Q5_1 | Q4_K);
            let ks: &[usize] = if ty.blck_size() == 32 {
                &[32, 96, 1024]
            } else {
                &[256, 768]
            };
            for &k in ks {
                let (wbytes, qbytes) = (
                    ty.row_size(k as i64).unwrap(),
                    scalar.act.row_size(k as i64).unwrap(),
                );
                let terms = k / kern.g * (1 + with_min as usize);
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
                    let mut scratch = vec![0u8; scratch_bytes(kern, k)];
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
                                    got[(first + i) * cols..(first + i + 1) * cols]
                                        .copy_from_slice(v)
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
                        let wrow = &wd[i * k..(i + 1) * k];
                        let mu = if with_min {
                            wrow.iter().fold(0f32, |a, v| a.max(v.abs()))
                        } else {
                            0.0
                        };
                        for j in 0..cols {
                            let mag: f64 = (0..k)
                                .map(|t| {
                                    ((wrow[t].abs() + mu) * (x[j * k + t].abs() + 0.01)) as f64
                                })
                                .sum();
                            let bound = 2.0 * (terms + 1) as f64 * f32::EPSILON as f64 * mag;
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
