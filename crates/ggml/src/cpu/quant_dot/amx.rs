//! AMX int8 tiles for quantized MUL_MAT against batches of activations: the k-quants (Q2_K,
//! Q3_K, Q4_K, Q5_K, Q6_K; Q8_K activations) in GGML's float order, and the 32-value block
//! types with signed levels (Q4_0, Q5_0, Q8_0, IQ4_NL; Q8_0 activations, `tdpbssd`) and with
//! unsigned levels and a minimum (Q4_1, Q5_1; Q8_1 activations, `tdpbusd`) in an order of
//! their own.
//!
//! Linux lends a process the tile registers only after it asks
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); [`granted`] asks once, when CPUID
//! lists AMX-TILE and AMX-INT8 and the OS enabled the tile state, and remembers the answer.
//!
//! A chunk of the product (up to 128 weight rows × up to 64 activation columns) is computed
//! in 16 × 16 output tiles. The activations (`A` of the tile product is the weights, `B` the
//! activations) are rearranged once per column block into the tiles' four-byte-interleaved
//! layout and kept in the thread's scratch while the thread's next chunks use the same
//! columns; each 16-row group of weights is unpacked once per chunk. Rows and columns past
//! the chunk's end are zeros in the scratch, so every element is summed the same way wherever
//! it falls in a tile: the result does not depend on the chunking or the thread count.
//!
//! **The k-quants** ([`run_k`]) take exactly the f32 steps of the band products
//! (`kquant_tile.rs`), which are those of GGML's tiled MUL_MAT for batches of 8 columns or
//! more, so their outputs are GGML's bits (unit test
//! `amx_k_quants_are_the_band_products_bit_for_bit`). Per super-block, row and column the
//! tiles give exact integers: each weight value's product `p = scale·(level − offset)`
//! (offset 4 for Q3_K, 32 for Q6_K, else 0; |p| < 2^13) is stored as its low byte
//! (unsigned) and its high byte (arithmetic shift by 8; not needed for Q2_K, whose products
//! stay below 256), and four K = 64 tile products each give `Σ lo·y` and `Σ hi·y`, so `s1 =
//! Σ lo·y + 256·Σ hi·y = Σ scale·(level − offset)·y` (the band products' `Σ scale·level·y −
//! offset·Σ scale·bsum`, Q8_K's `bsums` being its levels' exact sums); for the types with
//! minimums four more give `s2 = Σ min·y` (`Σ min·bsum`). Then, per output, in f32:
//!
//! - Q3_K, Q6_K: `r = f32(s1) · d`;
//! - Q2_K, Q4_K, Q5_K: `r = fma(−dmin, f32(s2), f32(s1) · d)`;
//! - every type: `acc = fma(r, yd, acc)`, super-block after super-block from `acc = 0`
//!   (`yd` the column's Q8_K scale; `d`, `dmin` the super-block's, from the same unpacking the
//!   band products take).
//!
//! **The 32-value types** ([`run`]) keep another order: each block has its own scale, so each
//! tile product spans one block (K = 32); its exact int32 sums are converted and multiplied
//! by the two scales into sixteen f32 accumulators (one per weight row, sixteen columns
//! each), block after block: `acc = fma(xd·yd, f32(Σ x·y), acc)` (plus `fma(m, s, acc)` for
//! Q4_1/Q5_1). GGML (tinyBLAS, and the band products of `band32.rs`) sums each block in eight
//! f32 lanes of four values (`lane = fma(xd·yd, f32(Σ of 4), lane)`) and adds the lanes at
//! the end, so the two differ by f32 rounding of the per-block terms. GGML's order on the
//! tiles needs those eight partial sums of every block, row and column exactly (each is
//! rounded on its own by its lane's fma): with the activations laid out block-diagonally
//! (output column = activation column × lane, zeros outside the lane's four values), eight
//! tile products per block and 16 columns instead of one, each partial sum then stored,
//! converted and fused as the band products do it. That saves only the band products'
//! `vpdpbusd` per four values (one of their three vector instructions per partial sum) at
//! the price of eight tile products and stores per block, so it is at best about as fast as
//! `band32.rs`: not done, and these types stay on the band products unless
//! `GGML_CPU_FORCE=amx`.

use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::OnceLock;

use super::kquant_tile::{act_tile_bytes, pack_act, scale_lane, ACT_BLOCK, ACT_D};
use super::kquant_x86::KUnpack;
use super::x86::{half, Simd32};
use crate::quants::{
    BlockIq4Nl, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ6K, BlockQ8_0,
};
use crate::types::Type;
use crate::QK_K;

/// Activation columns per chunk the kernel takes at most (the callers' column block).
pub(crate) const MAX_COLS: usize = 64;

/// Activation columns from which MUL_MAT takes the 32-value types' AMX kernel (with
/// `GGML_CPU_FORCE=amx`): the first count past token generation's 1–4, which stays on the VNNI
/// kernels (a tile product costs the same for 1 or 16 columns; at 8 columns of 4096² Q5_0 the
/// tiles took 9 ms against the VNNI kernels' 24).
pub(crate) const MIN_COLS: usize = 5;

/// Activation columns from which MUL_MAT takes the k-quants' kernel: where GGML takes its
/// tiled MUL_MAT, whose bits the kernel gives (the band products' threshold; below it GGML's
/// one-column dot is the order to follow).
pub(crate) const EXACT_MIN_COLS: usize = 8;

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

/// A tile configuration (palette 1): the (bytes per row, rows) of each of the eight tiles.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

const fn config(shapes: [(u16, u8); 8]) -> TileConfig {
    let mut colsb = [0u16; 16];
    let mut rows = [0u8; 16];
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

/// The 32-value kernel's tiles: 0 and 1 hold 16 × 16 int32 sums, 2 and 3 16 rows of 32
/// weight bytes, 4 and 5 8 rows of 64 activation bytes.
static CONFIG_32: TileConfig = config([
    (64, 16),
    (64, 16),
    (32, 16),
    (32, 16),
    (64, 8),
    (64, 8),
    (0, 0),
    (0, 0),
]);

/// The k-quant kernel's tiles: all eight 16 rows of 64 bytes (sums, weights, activations; see
/// [`run_k`]).
static CONFIG_K: TileConfig = config([(64, 16); 8]);

/// Values per block of the 32-value types: the K of one of their tile products.
const QK: usize = 32;

/// The activation types of the 32-value kernel: Q8_0 (`d`, 32 levels), Q8_1 (`d`, `s`, 32
/// levels).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Q8_0,
    Q8_1,
}

impl Act {
    /// Bytes of one block.
    const fn bytes(self) -> usize {
        match self {
            Act::Q8_0 => 34,
            Act::Q8_1 => 36,
        }
    }
}

/// A 32-value weight type the kernel takes: each block has one scale (and minimum), so one
/// tile product spans one block.
trait Tiled: bytemuck::Pod {
    /// Whether the unpacked levels are unsigned (`tdpbusd`), else signed (`tdpbssd`).
    const UNSIGNED: bool;
    /// Whether the units have a minimum term (`min · activation sum`).
    const HAS_MIN: bool;
    /// The activation type.
    const ACT: Act;
    /// Unpacks the block: its 32 levels as bytes to `dst`; returns its scale (the weight's
    /// factor of `activation scale · Σ level · activation level`) and, where the type has one,
    /// its minimum (the factor of the activations' `d · Σ levels`), else 0.
    ///
    /// # Safety
    /// `dst` must be writable for 32 bytes; AVX2 and F16C.
    unsafe fn unpack(&self, dst: *mut u8) -> (f32, f32);
}

/// The 32-value types through [`Simd32`].
macro_rules! tiled32 {
    ($($t:ty: $act:ident, |$b:ident| $min:expr);* $(;)?) => {$(
        impl Tiled for $t {
            const UNSIGNED: bool = <$t as Simd32>::UNSIGNED;
            const HAS_MIN: bool = <$t as Simd32>::UNSIGNED;
            const ACT: Act = Act::$act;
            #[inline(always)]
            unsafe fn unpack(&self, dst: *mut u8) -> (f32, f32) {
                let $b = self;
                // SAFETY: 32 writable bytes at dst; the caller has AVX2 and F16C.
                unsafe {
                    _mm256_storeu_si256(dst as *mut __m256i, self.levels());
                    (half(self.d()), $min)
                }
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
    /// Scratch bytes for rows of `k` values (without the alignment slack).
    scratch: fn(usize) -> usize,
    /// Whether every output is bit for bit GGML's (and the band products') for batches of
    /// [`EXACT_MIN_COLS`] columns or more: the k-quants' kernel ([`run_k`]).
    pub(crate) exact: bool,
}

/// The AMX kernel for weight type `ty`, if it has one (whether AMX may be used is the
/// caller's question).
pub(crate) fn kernel(ty: Type) -> Option<AmxKernel> {
    fn of<B: Tiled>() -> AmxKernel {
        AmxKernel {
            run: run::<B>,
            scratch: |k| Layout::new(k / QK).end,
            exact: false,
        }
    }
    fn of_k<B: KTiled>() -> AmxKernel {
        AmxKernel {
            run: run_k::<B>,
            scratch: k_scratch,
            exact: true,
        }
    }
    Some(match ty {
        Type::Q4_0 => of::<BlockQ4_0>(),
        Type::Q5_0 => of::<BlockQ5_0>(),
        Type::Q8_0 => of::<BlockQ8_0>(),
        Type::IQ4_NL => of::<BlockIq4Nl>(),
        Type::Q4_1 => of::<BlockQ4_1>(),
        Type::Q5_1 => of::<BlockQ5_1>(),
        Type::Q2_K => of_k::<BlockQ2K>(),
        Type::Q3_K => of_k::<BlockQ3K>(),
        Type::Q4_K => of_k::<BlockQ4K>(),
        Type::Q5_K => of_k::<BlockQ5K>(),
        Type::Q6_K => of_k::<BlockQ6K>(),
        _ => return None,
    })
}

/// The 32-value kernel's scratch layout for rows of `units` blocks: byte offsets of the
/// activation panels, their scales and sums, the weight panel, its scales and minimums, the
/// tile stores, and the end.
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
    fn new(units: usize) -> Layout {
        let g = QK;
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
    (kernel.scratch)(k) + 64
}

/// A thread's AMX state in one MUL_MAT node: its scratch, and which column block's activations
/// the scratch holds.
pub(crate) struct Chunks<'s> {
    kernel: AmxKernel,
    scratch: &'s mut [u8],
    /// Values per row.
    k: usize,
    packed: Option<usize>,
}

impl<'s> Chunks<'s> {
    /// The state for rows of `k` values (whole blocks) in `scratch`, which must hold
    /// [`scratch_bytes`]`(kernel, k)` bytes.
    pub(crate) fn new(kernel: AmxKernel, scratch: &'s mut [u8], k: usize) -> Chunks<'s> {
        let skip = scratch.as_ptr().align_offset(64);
        let scratch = &mut scratch[skip..skip + (kernel.scratch)(k)];
        Chunks {
            kernel,
            scratch,
            k,
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
    let (nu, g) = (st.k / QK, QK);
    let unit = T * g;
    let groups = cols.div_ceil(T);
    let l = &Layout::new(nu);
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
        asm!("ldtilecfg [{}]", in(reg) &CONFIG_32, options(nostack, preserves_flags, readonly));
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
/// with zeros) and block `u`, 8 rows of 64 bytes at `apanel + (c · nu + u) · 512`, row `r`
/// holding levels `4r..4r + 4` of the block in each column; the scales (and, for the types
/// with a minimum, Q8_1's `s`) as 16 f32 at `(c · nu + u) · 16` of `ascale` (`asum`).
///
/// # Safety
/// `acts` holds `cols` rows of `nu` activation blocks of `B`'s dot type,
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
    let ab = B::ACT.bytes();
    let row = nu * ab;
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
                let blk = col0.add(u * ab);
                let qs = blk.add(match B::ACT {
                    Act::Q8_0 => 2,
                    Act::Q8_1 => 4,
                });
                let dst = apanel.add((c * nu + u) * T * QK);
                for r in 0..QK / 4 {
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
                let d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
                _mm512_storeu_ps(ascale.add(at), d);
                if B::HAS_MIN {
                    // Q8_1's `s`, the f16 after `d`
                    let s = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(head)));
                    _mm512_storeu_ps(asum.add(at), s);
                }
            }
        }
    }
}

/// `valid` rows of weights (`stride` bytes apart from `w`, `nu` blocks each) unpacked for the
/// tiles: block `u` of row `m` as 32 bytes at `wpanel + (u · 16 + m) · 32`, its scale and
/// minimum at `u · 16 + m` of `wscale` and `wmin`; rows `valid..16` zeros.
///
/// # Safety
/// The rows hold `nu` blocks of `B`; the outputs have room for `nu` blocks of 16 rows;
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
    // SAFETY: reads within the rows and writes within the outputs (the caller).
    unsafe {
        for m in 0..T {
            let row =
                (m < valid).then(|| std::slice::from_raw_parts(w.add(m * stride) as *const B, nu));
            for u in 0..nu {
                let at = u * T + m;
                let dst = wpanel.add(at * QK);
                let (sc, mn) = match row {
                    Some(row) => row[u].unpack(dst),
                    None => {
                        std::ptr::write_bytes(dst, 0, QK);
                        (0.0, 0.0)
                    }
                };
                *wscale.add(at) = sc;
                *wmin.add(at) = mn;
            }
        }
    }
}

/// The k-quants' weight panel, per super-block: the 16 rows' products `scale·(level −
/// offset)` (i16) split into bytes, the low bytes (`K_LO`, 16 rows of 256, unsigned) and the
/// high ones (`K_HI`, arithmetic shift by 8), the group minimums as one byte per value
/// (`K_MIN`), then the rows' `d` and `corr_d` as f32.
const K_LO: usize = 0;
/// See [`K_LO`].
const K_HI: usize = T * QK_K;
/// See [`K_LO`].
const K_MIN: usize = 2 * T * QK_K;
/// See [`K_LO`].
const K_D: usize = 3 * T * QK_K;
/// See [`K_LO`].
const K_CD: usize = K_D + T * 4;
/// Bytes of one super-block of the panel.
const K_BLOCK: usize = K_CD + T * 4;
/// Bytes of one set of tile stores (the three sums of a 16 × 16 output tile).
const K_SUMS: usize = 3 * T * T * 4;

/// What the k-quant kernel computes for type `B` beyond the low bytes' product.
trait KTiled: KUnpack {
    /// Whether the products `scale·(level − offset)` need their high bytes: they are signed
    /// (the types with a level offset) or reach 256.
    const HI: bool;
}

/// [`KTiled`] for each k-quant, from its largest group scale (magnitude) and level.
macro_rules! k_tiled {
    ($($t:ty: $max_scale:expr),*) => {$(
        impl KTiled for $t {
            const HI: bool = <$t as KUnpack>::LEVEL_OFFSET != 0
                || $max_scale * <$t as KUnpack>::MAX_LEVEL as i32 > 255;
        }
    )*};
}
k_tiled!(BlockQ2K: 15, BlockQ3K: 32, BlockQ4K: 63, BlockQ5K: 63, BlockQ6K: 128);

/// The k-quant kernel's scratch for rows of `k` values: the activation tiles of
/// [`MAX_COLS`] columns (`kquant_tile`'s layout), one 16-row weight panel, two sets of tile
/// stores.
fn k_scratch(k: usize) -> usize {
    act_tile_bytes(k, MAX_COLS) + k / QK_K * K_BLOCK + 2 * K_SUMS
}

/// [`Chunks::run`] for the k-quant `B`, in GGML's float order for batches (its tiled MUL_MAT,
/// which the band products of `kquant_tile.rs` follow): for each 16 weight rows, super-block
/// and 16 columns, tile products over the 256 values give the exact int32 sums `Σ lo·y`,
/// `Σ hi·y` (so `s1 = Σ scale·(level − offset)·y = lo-sum + 256·hi-sum`) and, for the types
/// with minimums, `s2 = Σ min·y` (= `Σ min·bsum`); then per output, as GGML does, `r =
/// f32(s1)·d` (level offset) or `r = fma(−dmin, f32(s2), f32(s1)·d)` (minimums), and `acc =
/// fma(r, yd, acc)` super-block after super-block — the band products' bits.
///
/// # Safety
/// As [`Chunks::run`].
#[allow(clippy::incompatible_msrv, clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn run_k<B: KTiled>(
    st: &mut Chunks<'_>,
    w: *const u8,
    stride: usize,
    rows: usize,
    acts: &[u8],
    cols: usize,
    key: usize,
    out: &mut dyn FnMut(usize, &[f32]),
) {
    let nb = st.k / QK_K;
    let min = B::LEVEL_OFFSET == 0;
    let (apanel, rest) = st.scratch.split_at_mut(act_tile_bytes(st.k, MAX_COLS));
    let (wpanel, cbuf) = rest.split_at_mut(nb * K_BLOCK);
    if st.packed != Some(key) {
        pack_act(acts, cols, apanel);
        st.packed = Some(key);
    }
    let (ap, wp, cb) = (apanel.as_ptr(), wpanel.as_mut_ptr(), cbuf.as_mut_ptr());
    // SAFETY: every offset below is within the scratch's regions (sized by `k_scratch` for
    // rows of k values and MAX_COLS columns), the weight reads within the rows the caller
    // vouches for; the CPU has AVX-512 F/BW/VL and the process AMX (the caller).
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) &CONFIG_K, options(nostack, preserves_flags, readonly));
        let mut res = [[0f32; MAX_COLS]; T];
        for g0 in (0..rows).step_by(T) {
            let valid = T.min(rows - g0);
            unpack_k::<B>(w.add(g0 * stride), stride, valid, nb, wp);
            for c in 0..cols.div_ceil(T) {
                let tiles = ap.add(c * nb * ACT_BLOCK);
                let mut acc = [_mm512_setzero_ps(); T];
                // the tile products of super-block i, then the f32 steps of i − 1 (the
                // tile unit and the vector units work side by side)
                for i in 0..=nb {
                    if i < nb {
                        let sums = cb.add(i % 2 * K_SUMS);
                        k_tiles::<B>(wp.add(i * K_BLOCK), tiles.add(i * ACT_BLOCK), sums);
                    }
                    let Some(i) = i.checked_sub(1) else { continue };
                    let (wb, tb) = (wp.add(i * K_BLOCK), tiles.add(i * ACT_BLOCK));
                    let sums = cb.add(i % 2 * K_SUMS) as *const __m512i;
                    let yd = _mm512_loadu_ps(tb.add(ACT_D) as *const f32);
                    let factor = |off: usize, m: usize| {
                        _mm512_set1_ps((wb.add(off + 4 * m) as *const f32).read())
                    };
                    for (m, a) in acc.iter_mut().enumerate() {
                        let mut s1 = _mm512_load_si512(sums.add(m));
                        if B::HI {
                            let hi = _mm512_load_si512(sums.add(T + m));
                            s1 = _mm512_add_epi32(s1, _mm512_slli_epi32::<8>(hi));
                        }
                        let r = _mm512_mul_ps(_mm512_cvtepi32_ps(s1), factor(K_D, m));
                        let r = if min {
                            let s2 = _mm512_cvtepi32_ps(_mm512_load_si512(sums.add(2 * T + m)));
                            _mm512_fmadd_ps(factor(K_CD, m), s2, r)
                        } else {
                            r
                        };
                        *a = _mm512_fmadd_ps(r, yd, *a);
                    }
                }
                for (r, a) in res.iter_mut().zip(&acc) {
                    _mm512_storeu_ps(r[c * T..].as_mut_ptr(), *a);
                }
            }
            for (m, r) in res.iter().enumerate().take(valid) {
                out(g0 + m, &r[..cols]);
            }
        }
        asm!("tilerelease", options(nostack, preserves_flags, nomem));
    }
}

/// The tile products of one super-block of the 16-row panel at `wb` and one column group's
/// activation tile at `tb`, stored to `sums` (64-byte aligned): the 16 × 16 int32 sums of the
/// low bytes, then those of the high bytes (where [`KTiled::HI`]), then those of the minimums
/// (the types with minimums). Tiles 0–2 hold the sums, 3–5 the panel's K-slices of 64 values,
/// 6 the activations' (16 rows of four values of 16 columns); four slices per super-block.
///
/// # Safety
/// The process has AMX and [`CONFIG_K`] is loaded; `wb` holds a [`K_BLOCK`], `tb` an
/// [`ACT_BLOCK`], `sums` [`K_SUMS`] writable bytes.
#[inline(always)]
unsafe fn k_tiles<B: KTiled>(wb: *const u8, tb: *const u8, sums: *mut u8) {
    let min = B::LEVEL_OFFSET == 0;
    // SAFETY: the loads read 16 rows of 64 bytes inside the blocks, the stores write the
    // three kilobytes of `sums` (the caller).
    unsafe {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            options(nostack, nomem)
        );
        for q in 0..QK_K / 64 {
            asm!(
                "tileloadd tmm6, [{b} + {s64}*1]",
                "tileloadd tmm3, [{a} + {s256}*1]",
                "tdpbusd tmm0, tmm3, tmm6",
                b = in(reg) tb.add(q * T * 64), a = in(reg) wb.add(K_LO + 64 * q),
                s64 = in(reg) 64usize, s256 = in(reg) QK_K,
                options(nostack, readonly),
            );
            if B::HI {
                let a = wb.add(K_HI + 64 * q);
                if B::LEVEL_OFFSET != 0 {
                    asm!(
                        "tileloadd tmm4, [{a} + {s256}*1]",
                        "tdpbssd tmm1, tmm4, tmm6",
                        a = in(reg) a, s256 = in(reg) QK_K, options(nostack, readonly),
                    );
                } else {
                    asm!(
                        "tileloadd tmm4, [{a} + {s256}*1]",
                        "tdpbusd tmm1, tmm4, tmm6",
                        a = in(reg) a, s256 = in(reg) QK_K, options(nostack, readonly),
                    );
                }
            }
            if min {
                asm!(
                    "tileloadd tmm5, [{a} + {s256}*1]",
                    "tdpbusd tmm2, tmm5, tmm6",
                    a = in(reg) wb.add(K_MIN + 64 * q), s256 = in(reg) QK_K,
                    options(nostack, readonly),
                );
            }
        }
        asm!(
            "tilestored [{c} + {s64}*1], tmm0",
            c = in(reg) sums, s64 = in(reg) 64usize, options(nostack),
        );
        if B::HI {
            asm!(
                "tilestored [{c} + {s64}*1], tmm1",
                c = in(reg) sums.add(T * 64), s64 = in(reg) 64usize, options(nostack),
            );
        }
        if min {
            asm!(
                "tilestored [{c} + {s64}*1], tmm2",
                c = in(reg) sums.add(2 * T * 64), s64 = in(reg) 64usize, options(nostack),
            );
        }
    }
}

/// `valid` rows of k-quant weights (`stride` bytes apart from `w`, `nb` super-blocks each)
/// unpacked into the panel `wp` ([`K_LO`]'s layout, `nb` super-blocks); rows `valid..16`
/// zeros. The scales, minimums and factors are those the band products take
/// ([`KUnpack::unpack`]), so the sums and the f32 steps are theirs.
///
/// # Safety
/// The rows hold `nb` super-blocks of `B`; `wp` has room for `nb` [`K_BLOCK`]s; AVX-512
/// F/BW, AVX2 and F16C.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn unpack_k<B: KTiled>(w: *const u8, stride: usize, valid: usize, nb: usize, wp: *mut u8) {
    let min = B::LEVEL_OFFSET == 0;
    // SAFETY: reads within the rows and writes within the panel (the caller).
    unsafe {
        for m in 0..T {
            if m >= valid {
                for i in 0..nb {
                    let wb = wp.add(i * K_BLOCK);
                    for part in [K_LO, K_HI, K_MIN] {
                        std::ptr::write_bytes(wb.add(part + m * QK_K), 0, QK_K);
                    }
                    (wb.add(K_D + 4 * m) as *mut f32).write(0.0);
                    (wb.add(K_CD + 4 * m) as *mut f32).write(0.0);
                }
                continue;
            }
            let row = std::slice::from_raw_parts(w.add(m * stride) as *const B, nb);
            for (i, x) in row.iter().enumerate() {
                let wb = wp.add(i * K_BLOCK);
                let u = x.unpack();
                let (mut sc, mut corr) = ([0i16; 16], [0i16; 16]);
                _mm256_storeu_si256(sc.as_mut_ptr() as *mut __m256i, u.scales);
                _mm256_storeu_si256(corr.as_mut_ptr() as *mut __m256i, u.corr);
                let off = _mm512_set1_epi16(B::LEVEL_OFFSET as i16);
                for (c, lv) in u.levels.iter().enumerate() {
                    // values 32c..32c + 32: groups 2c and 2c + 1
                    let (s0, s1) = (sc[scale_lane(2 * c)], sc[scale_lane(2 * c + 1)]);
                    let scale = _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(_mm256_set1_epi16(s0)),
                        _mm256_set1_epi16(s1),
                    );
                    let lv = _mm512_sub_epi16(_mm512_cvtepu8_epi16(*lv), off);
                    let v = _mm512_mullo_epi16(lv, scale);
                    let at = m * QK_K + 32 * c;
                    let lo = wb.add(K_LO + at) as *mut __m256i;
                    _mm256_storeu_si256(lo, _mm512_cvtepi16_epi8(v));
                    if B::HI {
                        let hi = _mm512_cvtepi16_epi8(_mm512_srai_epi16::<8>(v));
                        _mm256_storeu_si256(wb.add(K_HI + at) as *mut __m256i, hi);
                    }
                    if min {
                        let mins = _mm256_set_m128i(
                            _mm_set1_epi8(corr[2 * c + 1] as i8),
                            _mm_set1_epi8(corr[2 * c] as i8),
                        );
                        _mm256_storeu_si256(wb.add(K_MIN + at) as *mut __m256i, mins);
                    }
                }
                (wb.add(K_D + 4 * m) as *mut f32).write(u.d);
                (wb.add(K_CD + 4 * m) as *mut f32).write(u.corr_d);
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

    /// Every 32-value AMX kernel against the portable row dot, on every remainder shape (weight
    /// rows and columns not multiples of 16, one block per row, full 64-column chunks), within
    /// `2 (n + 1) · ε · Σ (|w_k| + μ) (|x_k| + 0.01)`, n the f32 terms the kernel sums per
    /// element (one per block, two with a minimum), μ the row's largest
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
        for ty in [Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_1, Q5_1] {
            let kern = kernel(ty).unwrap();
            assert!(!kern.exact, "{ty}");
            let scalar = quant_dot(ty, Isa::Scalar).unwrap();
            let with_min = matches!(ty, Q4_1 | Q5_1);
            for k in [32, 96, 1024] {
                let (wbytes, qbytes) = (
                    ty.row_size(k as i64).unwrap(),
                    scalar.act.row_size(k as i64).unwrap(),
                );
                let terms = k / QK * (1 + with_min as usize);
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

    /// The k-quants' AMX kernel gives the band products' bits (GGML's tiled MUL_MAT, see
    /// `kquant_tile::band_products_are_ggml_tiled_bit_for_bit`) for every k-quant, every column
    /// count from 5 to 64, weight row counts that are not multiples of 16, one and several
    /// super-blocks, and any split of the rows into chunks (each chunk's first row anywhere,
    /// the activations packed once and reused, or packed again under a new key).
    #[test]
    fn amx_k_quants_are_the_band_products_bit_for_bit() {
        if !granted() || !Isa::Avx512.available() {
            eprintln!(
                "AMX part skipped: this process has no AMX int8 (CPU without AMX-TILE/AMX-INT8 \
                 or AVX-512, tile state not enabled by the OS, or ARCH_REQ_XCOMP_PERM refused)"
            );
            return;
        }
        use crate::cpu::quant_dot::BAND_ROWS;
        use Type::*;
        let mut seed = 1u32;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as usize % n
        };
        let mut checked = 0;
        for ty in [Q2_K, Q3_K, Q4_K, Q5_K, Q6_K] {
            let kern = kernel(ty).unwrap();
            assert!(kern.exact, "{ty}");
            let bd = quant_dot(ty, Isa::Avx512).unwrap().band.unwrap();
            for cols in 5..=MAX_COLS {
                let k = QK_K * [1, 3, 5][next(3)];
                let rows = [1, 9, 16, 23, 40, 33][next(6)];
                let (wbytes, qbytes) = (
                    ty.row_size(k as i64).unwrap(),
                    Type::Q8_K.row_size(k as i64).unwrap(),
                );
                let mut wq = vec![0u8; rows * wbytes];
                let w = values(rows * k, 7 + cols as u32);
                quantize_chunk(ty, &w, &mut wq, 0, rows, k, None).unwrap();
                let mut xq = vec![0u8; cols * qbytes];
                let x = values(cols * k, 300 + cols as u32);
                for (v, q) in x.chunks_exact(k).zip(xq.chunks_exact_mut(qbytes)) {
                    quantize_row_ref(Type::Q8_K, v, q).unwrap();
                }
                // the band products, eight rows at a time (a short band repeats its last row)
                let mut tile = vec![0u8; (bd.tile_bytes)(k, cols)];
                (bd.pack)(&xq, cols, &mut tile);
                let mut band_scratch = vec![0u8; (bd.scratch_bytes)(k)];
                let mut want = vec![0f32; rows * cols];
                for r0 in (0..rows).step_by(BAND_ROWS) {
                    let ws = std::array::from_fn(|t| {
                        let r = (r0 + t).min(rows - 1);
                        &wq[r * wbytes..(r + 1) * wbytes]
                    });
                    let mut got = vec![vec![0f32; cols]; BAND_ROWS];
                    let mut outs: [&mut [f32]; BAND_ROWS] = {
                        let mut it = got.iter_mut();
                        std::array::from_fn(|_| &mut it.next().unwrap()[..])
                    };
                    // SAFETY: AVX-512 VNNI checked above; the tile and scratch have the sizes
                    // asked for.
                    unsafe { (bd.dots)(ws, &tile, &mut band_scratch, &mut outs) };
                    for (t, g) in got.iter().enumerate().take(rows - r0) {
                        want[(r0 + t) * cols..(r0 + t + 1) * cols].copy_from_slice(g);
                    }
                }
                // the AMX kernel, the rows cut in two chunks at a random row, the second with
                // the same key or a new one
                let mut scratch = vec![0u8; scratch_bytes(kern, k)];
                let mut chunks = Chunks::new(kern, &mut scratch, k);
                let split = next(rows + 1);
                let mut got = vec![f32::NAN; rows * cols];
                for (first, end, key) in [(0, split, 1), (split, rows, 1 + next(2))] {
                    if first == end {
                        continue;
                    }
                    // SAFETY: AMX granted and AVX-512 present (checked above); rows
                    // first..end of wq have k values each, xq holds cols rows.
                    unsafe {
                        chunks.run(
                            wq[first * wbytes..].as_ptr(),
                            wbytes,
                            end - first,
                            &xq,
                            cols,
                            key,
                            &mut |i, v| {
                                got[(first + i) * cols..(first + i + 1) * cols].copy_from_slice(v)
                            },
                        )
                    };
                }
                for (n, (g, e)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        e.to_bits(),
                        "{ty} k={k} {rows}x{cols} at ({}, {}): {g} vs {e}",
                        n / cols,
                        n % cols
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 5 * (MAX_COLS - 4));
    }
}
