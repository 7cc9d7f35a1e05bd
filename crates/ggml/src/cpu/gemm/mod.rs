//! Dense packed GEMM for float operands (MUL_MAT's F32, F16 and BF16 path, OUT_PROD, float
//! MUL_MAT_ID, the convolutions), in the style of BLIS: `c[j][i] = Σₖ a[i][k] · b[j][k]` for
//! `a` the weights (`m` rows of `k` elements) and `b` the activations (`n` rows of `k`), `c`
//! row `j` holding the `m` results of column `j`.
//!
//! ## Blocking
//! For each block of [`NC`] columns and each slice of [`KC`] of the shared dimension, the
//! columns' slice of `b` is packed into panels of `NR` columns (k-major: the `NR` values of
//! one `k` side by side), then for each block of [`MC`] rows the rows' slice of `a` into panels
//! of `MR` rows (k-major likewise). A register-tiled micro-kernel multiplies one `a` panel by
//! one `b` panel (`MR × NR` products per `k`: `MR` values of `a` in vector registers, each
//! value of `b` broadcast), adding to `c` after the first slice of `k`. The `b` panel a
//! micro-kernel walks stays in L1 while the `a` panels of the block stream from L2. The block
//! sizes are constants chosen for caches of at least 32 KiB (L1) and 512 KiB (L2) per core,
//! not tuned to one processor. Panels past the edge of `a` or `b` are zero-padded, and edge
//! tiles go through a tile on the stack, so every element is summed in the same order: in
//! f32, `k` ascending within each slice of [`KC`], slices added to `c` in order. The thread
//! that computes an element, and the thread count, never change that order.
//!
//! ## Operands and results
//! Each operand is a [`Source`] of panels: a [`Mat`] (rows at one stride, MUL_MAT's and
//! OUT_PROD's operands), [`Gathered`] rows at any addresses (MUL_MAT_ID's activations, the
//! rows routed to one expert), or a caller's own packer (the convolutions gather their
//! patches straight into the panels: im2col fused into the packing, no patch matrix). The
//! result goes to a [`Sink`]: [`Out`] (rows at one stride) or [`Scattered`] rows at any
//! addresses (MUL_MAT_ID's results). Every source packs the same values in the same panel
//! layout and every sink takes the same sums, so the order of summation above holds for all.
//!
//! ## Numerics (as GGML)
//! GGML's CPU backend multiplies F16 weights by activations converted to F16 (the
//! `vec_dot_type` of F16 is F16; F32 activations are converted with round-to-nearest-even in
//! the work buffer, then `ggml_vec_dot_f16` or llamafile's tinyBLAS widens both to f32 and sums
//! the products in f32), and BF16 weights by activations rounded to BF16 (`vec_dot_type` BF16,
//! products of the widened values summed in f32, or `vdpbf16ps`, which sums the same exact
//! products). F32 weights take F32 activations; F16 or BF16 activations are widened to f32.
//! Here `b` is rounded to the weights' dot type while it is packed ([`Round`]), `a` widened
//! exactly, and the products (exact in f32 for F16 and BF16 operands) summed in f32 with FMA:
//! GGML's results up to the order of summation. (On the AVX-512 and AVX2 paths, MUL_MAT's
//! F16 weights, and its BF16 weights on the AVX2 path or where the CPU has AVX-512 BF16, go to
//! `kernels::matmul_f16` and `kernels::matmul_bf16` instead, which follow GGML's order too.)
//!
//! ## Paths
//! Three micro-kernels, chosen by [`Kernel::for_isa`] from [`isa`](crate::cpu::quant_dot::isa)
//! (so `GGML_CPU_FORCE=scalar|avx2|avx512` forces one): portable (arrays the compiler
//! vectorises), AVX2+FMA (16 × 6) and AVX-512 F (48 × 8).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;

use std::ops::Range;

use crate::cpu::kernels::load;
use crate::cpu::kernels::vec::{f16_to_f32_row, f32_to_f16_row};
use crate::cpu::quant_dot::Isa;
use crate::types::{bf16, bf16_to_f32, f16, f32_to_bf16, Type};

/// Columns of `b` per packed block.
pub(crate) const NC: usize = 1024;
/// Elements of the shared dimension per packed slice.
pub(crate) const KC: usize = 256;
/// Rows of `a` per packed block (a multiple of every path's `MR`).
pub(crate) const MC: usize = 192;
/// The most values an edge tile holds (`MR · NR` of every path).
const TILE: usize = 512;

/// One operand: `rows` rows of `k` elements of a float type at any strides.
#[derive(Clone, Copy)]
pub(crate) struct Mat {
    /// Element (0, 0).
    pub ptr: *const u8,
    /// The element type (F32, F16 or BF16).
    pub ty: Type,
    /// Bytes between rows.
    pub row_stride: usize,
    /// Bytes between the elements of a row.
    pub elem_stride: usize,
}

impl Mat {
    /// Whether the elements of a row are packed.
    fn packed(&self) -> bool {
        self.elem_stride == self.ty.type_size()
    }
}

/// One panel the GEMM asks a [`Source`] for: rows `r0..r0 + rn` of the operand (`rn ≤ pr`),
/// elements `p0..p0 + kc`, laid out k-major for tiles of `pr` rows, rounded by `round`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Panel {
    /// The first row.
    pub r0: usize,
    /// Rows in the operand (the rest of the panel's `pr` is zero).
    pub rn: usize,
    /// Rows of the panel: the kernel's `mr` or `nr`.
    pub pr: usize,
    /// The first element.
    pub p0: usize,
    /// Elements.
    pub kc: usize,
    /// What the values are rounded to.
    pub round: Round,
}

/// An operand the GEMM packs its panels from.
pub(crate) trait Source {
    /// Packs panel `at` into `out` (`pr · kc` values) k-major, value `(p, r)` at `p · pr + r`,
    /// rows `rn..pr` zero; each value widened to f32, then rounded by `round`.
    ///
    /// # Safety
    /// The rows and elements must be readable; the CPU must have the kernel's path.
    unsafe fn panel(&self, kern: &Kernel, at: Panel, out: &mut [f32]);
}

/// Rows at any addresses: row `r` at `row(r)`, its elements `elem_stride` bytes apart, of
/// type `ty` (F32, F16 or BF16).
pub(crate) struct Gathered<F: Fn(usize) -> *const u8> {
    /// The address of each row's element 0.
    pub row: F,
    /// The element type.
    pub ty: Type,
    /// Bytes between the elements of a row.
    pub elem_stride: usize,
}

/// Where the GEMM writes its result: row `j` (column `j` of the product) holds `m` packed
/// f32 values.
pub(crate) trait Sink {
    /// Row `j`'s value 0.
    fn row(&self, j: usize) -> *mut f32;

    /// Rows `j..j + h` as row `j` and the f32 values between consecutive rows, when they are
    /// evenly spaced (a whole tile is then written in place).
    fn rows(&self, j: usize, h: usize) -> Option<(*mut f32, usize)>;
}

/// Rows at any addresses: row `j` at `row(j)` (f32-aligned, `m` values each, no two rows
/// overlapping).
pub(crate) struct Scattered<F: Fn(usize) -> *mut f32>(pub F);

/// Which of a tensor's strides steps between an operand's GEMM rows: MUL_MAT's operands have
/// their rows along `nb1` (elements along `nb0`); OUT_PROD's along `nb0` (elements `nb1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowsAlong {
    /// Rows `nb1` apart, elements `nb0` apart.
    Nb1,
    /// Rows `nb0` apart, elements `nb1` apart.
    Nb0,
}

impl RowsAlong {
    /// The operand at `ptr` of type `ty` with byte strides `nb`.
    pub(crate) fn mat(self, ptr: *const u8, ty: Type, nb: [usize; crate::tensor::MAX_DIMS]) -> Mat {
        let (row_stride, elem_stride) = match self {
            RowsAlong::Nb1 => (nb[1], nb[0]),
            RowsAlong::Nb0 => (nb[0], nb[1]),
        };
        Mat {
            ptr,
            ty,
            row_stride,
            elem_stride,
        }
    }
}

/// The result: row `j` (column `j` of the product) at `ptr + j · ld`, its `m` values packed.
#[derive(Clone, Copy)]
pub(crate) struct Out {
    /// Element (row 0, value 0).
    pub ptr: *mut f32,
    /// f32 values between result rows.
    pub ld: usize,
}

impl Sink for Out {
    fn row(&self, j: usize) -> *mut f32 {
        self.ptr.wrapping_add(j * self.ld)
    }

    fn rows(&self, j: usize, _h: usize) -> Option<(*mut f32, usize)> {
        Some((self.row(j), self.ld))
    }
}

impl<F: Fn(usize) -> *mut f32> Sink for Scattered<F> {
    fn row(&self, j: usize) -> *mut f32 {
        (self.0)(j)
    }

    fn rows(&self, j: usize, h: usize) -> Option<(*mut f32, usize)> {
        let first = (self.0)(j);
        if h <= 1 {
            return Some((first, 0));
        }
        // Rows at falling addresses (a step that would be negative) are not one strided block.
        let step = ((self.0)(j + 1) as usize)
            .checked_sub(first as usize)
            .filter(|&s| s > 0 && s % 4 == 0)?;
        let at = |t: usize| t.checked_mul(step)?.checked_add(first as usize);
        let even = (2..h).all(|t| at(t) == Some((self.0)(j + t) as usize));
        even.then_some((first, step / 4))
    }
}

/// What `b`'s values are rounded to while packing: the weights' dot type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// Kept as f32 (F32 weights).
    F32,
    /// Rounded to the nearest f16 (F16 weights).
    F16,
    /// Rounded to the nearest bf16 (BF16 weights).
    Bf16,
}

impl Round {
    /// The rounding for weights of type `ty` (F32, F16 or BF16).
    pub(crate) fn for_weights(ty: Type) -> Round {
        match ty {
            Type::F16 => Round::F16,
            Type::BF16 => Round::Bf16,
            _ => Round::F32,
        }
    }

    /// `v` rounded (round to nearest, ties to even, as GGML's conversions).
    #[inline(always)]
    pub(crate) fn apply(self, v: f32) -> f32 {
        match self {
            Round::F32 => v,
            Round::F16 => f16::from_f32(v).to_f32(),
            Round::Bf16 => bf16_to_f32(f32_to_bf16(v)),
        }
    }

    /// Every value of `v` rounded (to F16 with the row converters: F16C or AVX-512 where
    /// the path has them, the same bits as [`Round::apply`]).
    pub(crate) fn slice(self, v: &mut [f32]) {
        match self {
            Round::F32 => {}
            Round::F16 => {
                let mut h = [0u16; 64];
                for c in v.chunks_mut(h.len()) {
                    let (n, p) = (c.len(), c.as_mut_ptr() as *mut u8);
                    // SAFETY: n ≤ 64 values each way, in distinct buffers.
                    unsafe {
                        f32_to_f16_row(p, h.as_mut_ptr() as *mut u8, n);
                        f16_to_f32_row(h.as_ptr() as *const u8, p, n);
                    }
                }
            }
            Round::Bf16 => {
                for x in v {
                    *x = self.apply(*x);
                }
            }
        }
    }
}

/// A micro-kernel: `c[j·ldc + i] = (c[j·ldc + i] if acc) + Σₚ a[p·MR + i] · b[p·NR + j]` for
/// `p < kc`, `i < MR`, `j < NR`, the sum in f32 from `p = 0` up, added to `c` last.
///
/// Safety: `a` must hold `kc · MR` values, `b` `kc · NR`, `c` a tile of `NR` rows `ldc` apart
/// with `MR` values each, and the CPU the path's features.
type MicroFn =
    unsafe fn(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool);

/// Packs a whole panel of `MR` rows of `a` (`rows_stride` bytes apart, their elements of type
/// `ty` packed), elements `0..kc` from `base` on, into `out` k-major (value `(p, r)` at
/// `p · MR + r`), widened to f32.
///
/// Safety: the rows and elements must be readable, `out` must hold `kc · MR` values, and the
/// CPU the path's features.
type PanelFn = unsafe fn(ty: Type, base: *const u8, row_stride: usize, kc: usize, out: *mut f32);

/// A path's micro-kernel and its tile.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    /// Rows of `a` per tile.
    mr: usize,
    /// Columns of `b` per tile.
    nr: usize,
    micro: MicroFn,
    pack_panel: PanelFn,
}

impl Kernel {
    /// The kernel of path `isa` (which the CPU must have: see [`Isa::available`]); the
    /// portable one for [`Isa::Scalar`] and on other architectures.
    pub(crate) fn for_isa(isa: Isa) -> Kernel {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 if isa.available() => avx512::KERNEL,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 if isa.available() => avx2::KERNEL,
            _ => portable::KERNEL,
        }
    }

    /// Thread `ith` of `nth`'s band of `0..m` rows of `a`: whole tiles of `mr` rows (the last
    /// band shorter), so no tile is cut between threads.
    pub(crate) fn band(&self, m: usize, ith: usize, nth: usize) -> Range<usize> {
        let per = m.div_ceil(self.mr).div_ceil(nth.max(1)) * self.mr;
        (ith * per).min(m)..((ith + 1) * per).min(m)
    }
}

/// The most rows of `a` a tile of any path has (a [`Source`] packs panels of at most this
/// many rows).
pub(crate) const MAX_MR: usize = 48;
const _: () = assert!(portable::KERNEL.mr <= MAX_MR);
#[cfg(target_arch = "x86_64")]
const _: () = assert!(avx2::KERNEL.mr <= MAX_MR && avx512::KERNEL.mr <= MAX_MR);

/// `out[i] = src[i]` widened (exact), with F16C where the CPU has it (the element kernels'
/// row conversion).
pub(crate) fn widen_f16(src: &[f16], out: &mut [f32]) {
    let src = &src[..out.len()];
    // SAFETY: `src` holds `out.len()` f16 values, `out` room for as many f32; two slices
    // cannot overlap mutably.
    unsafe {
        f16_to_f32_row(
            src.as_ptr() as *const u8,
            out.as_mut_ptr() as *mut u8,
            out.len(),
        )
    }
}

/// Scratch f32 values one thread needs for [`gemm`] over at most `n` columns: a packed slice
/// of `b` and one of `a`.
pub(crate) fn scratch_len(n: usize) -> usize {
    // every path's NR is at most 16
    KC * (n.min(NC) + 16) + MC * KC
}

/// `c[j][i] = Σₖ a[i][k] · round(b[j][k])` for `i` in `rows`, `j` in `cols` (`rows` within
/// `a`'s rows, `cols` within `b`'s), `k < k`, as the module docs describe; `c` is zeroed when
/// `k == 0`.
///
/// # Safety
/// `a` must address at least `rows.end` rows and `b` `cols.end` rows of `k` readable elements;
/// `c` rows `cols` with values `rows` must be writable and overlap neither operand, nor be
/// written by anyone else meanwhile; the CPU must have the kernel's path; `scratch` must hold
/// [`scratch_len`]`(cols.len())` values.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm(
    kern: &Kernel,
    a: &impl Source,
    b: &impl Source,
    k: usize,
    round: Round,
    c: &impl Sink,
    rows: Range<usize>,
    cols: Range<usize>,
    scratch: &mut [f32],
) {
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    let (mr, nr) = (kern.mr, kern.nr);
    if k == 0 {
        for j in cols {
            for i in rows.clone() {
                // SAFETY: (j, i) is an element the caller lets us write.
                unsafe { *c.row(j).add(i) = 0.0 };
            }
        }
        return;
    }
    let ncols = cols.len().min(NC);
    let (bpack, apack) = scratch.split_at_mut(KC * ncols.next_multiple_of(nr));
    let apack = &mut apack[..MC * KC];
    for jc in cols.clone().step_by(NC) {
        let nc = NC.min(cols.end - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            // SAFETY: columns jc..jc + nc of b, elements pc..pc + kc (caller's bounds).
            unsafe { pack(kern, b, jc, nc, nr, pc, kc, round, bpack) };
            for ic in rows.clone().step_by(MC) {
                let mc = MC.min(rows.end - ic);
                // SAFETY: rows ic..ic + mc of a, as above.
                unsafe { pack(kern, a, ic, mc, mr, pc, kc, Round::F32, apack) };
                for jr in (0..nc).step_by(nr) {
                    let bp = &bpack[jr * kc..(jr + nr) * kc];
                    for ir in (0..mc).step_by(mr) {
                        let ap = &apack[ir * kc..(ir + mr) * kc];
                        let (w, h) = ((mc - ir).min(mr), (nc - jr).min(nr));
                        // SAFETY: the panels hold kc · mr and kc · nr values; the tile at
                        // row jc + jr, value ic + ir, is within the caller's ranges for w
                        // values of h rows; the caller guarantees the path.
                        unsafe { tile(kern, kc, ap, bp, c, [jc + jr, ic + ir], pc > 0, w, h) };
                    }
                }
            }
        }
    }
}

/// One micro-kernel call on the tile of `c` at row `j0`, value `i0`, of which `w` values of
/// `h` rows are in the result: straight into `c` for a whole tile of evenly spaced rows, else
/// through a tile on the stack.
///
/// # Safety
/// As [`MicroFn`], for the `w × h` part of the tile only.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile(
    kern: &Kernel,
    kc: usize,
    ap: &[f32],
    bp: &[f32],
    c: &impl Sink,
    [j0, i0]: [usize; 2],
    acc: bool,
    w: usize,
    h: usize,
) {
    let (mr, nr) = (kern.mr, kern.nr);
    debug_assert!(ap.len() == kc * mr && bp.len() == kc * nr);
    if w == mr && h == nr {
        if let Some((row, ld)) = c.rows(j0, h) {
            // SAFETY: a whole tile of evenly spaced rows; forwarded from the caller.
            unsafe { (kern.micro)(kc, ap.as_ptr(), bp.as_ptr(), row.add(i0), ld, acc) };
            return;
        }
    }
    let mut t = [0f32; TILE];
    for j in 0..h {
        let row = c.row(j0 + j);
        for i in 0..w {
            // SAFETY: (j, i) is in the part of the tile the caller owns.
            t[j * mr + i] = if acc {
                unsafe { *row.add(i0 + i) }
            } else {
                0.0
            };
        }
    }
    // SAFETY: `t` holds mr · nr <= TILE values; the panels as forwarded.
    unsafe { (kern.micro)(kc, ap.as_ptr(), bp.as_ptr(), t.as_mut_ptr(), mr, true) };
    for j in 0..h {
        let row = c.row(j0 + j);
        for i in 0..w {
            // SAFETY: as above.
            unsafe { *row.add(i0 + i) = t[j * mr + i] };
        }
    }
}

/// Packs rows `r0..r0 + rn` of `m`, elements `p0..p0 + kc`, into panels of `pr` rows:
/// panel `q` at `out[q · pr · kc..]`, as [`Source::panel`] packs one.
///
/// # Safety
/// The rows and elements must be readable in `m`; `out` must hold `rn.div_ceil(pr) · pr · kc`
/// values.
#[allow(clippy::too_many_arguments)]
unsafe fn pack(
    kern: &Kernel,
    m: &impl Source,
    r0: usize,
    rn: usize,
    pr: usize,
    p0: usize,
    kc: usize,
    round: Round,
    out: &mut [f32],
) {
    for (q, panel) in out
        .chunks_exact_mut(pr * kc)
        .take(rn.div_ceil(pr))
        .enumerate()
    {
        let at = Panel {
            r0: r0 + q * pr,
            rn: pr.min(rn - q * pr),
            pr,
            p0,
            kc,
            round,
        };
        // SAFETY: rows r0 + q·pr.. of the caller's, as many as remain (at most pr).
        unsafe { m.panel(kern, at, panel) };
    }
}

impl Source for Mat {
    unsafe fn panel(&self, kern: &Kernel, at: Panel, out: &mut [f32]) {
        let (m, r0, rn, pr) = (self, at.r0, at.rn, at.pr);
        let (p0, kc, round) = (at.p0, at.kc, at.round);
        if rn == pr && !m.packed() && m.row_stride == m.ty.type_size() {
            // Rows stored side by side (each element index a packed run of rows, as
            // OUT_PROD's operands are): one run of `pr` values per element, read as a row of
            // the transpose.
            let t = Mat {
                ptr: m.ptr.wrapping_add(r0 * m.row_stride),
                ty: m.ty,
                row_stride: m.elem_stride,
                elem_stride: m.row_stride,
            };
            for (p, run) in out.chunks_exact_mut(pr).take(kc).enumerate() {
                // SAFETY: element p0 + p of the panel's pr rows, which lie side by side.
                unsafe {
                    read(
                        t.ptr.wrapping_add((p0 + p) * t.row_stride),
                        t.ty,
                        t.elem_stride,
                        run,
                    )
                };
                round.slice(run);
            }
            return;
        }
        if rn == pr && pr == kern.mr && round == Round::F32 && m.packed() {
            // SAFETY: pr = MR whole rows of packed elements p0..p0 + kc (caller); the panel
            // holds kc · MR values.
            unsafe {
                let base = m.ptr.add(r0 * m.row_stride + p0 * m.elem_stride);
                (kern.pack_panel)(m.ty, base, m.row_stride, kc, out.as_mut_ptr());
            }
            return;
        }
        let row = |r: usize| m.ptr.wrapping_add(r * m.row_stride);
        // SAFETY: forwarded from the caller.
        unsafe { panel_by_rows(row, m.ty, m.elem_stride, at, out) }
    }
}

impl<F: Fn(usize) -> *const u8> Source for Gathered<F> {
    unsafe fn panel(&self, kern: &Kernel, at: Panel, out: &mut [f32]) {
        let (r0, rn) = (at.r0, at.rn);
        // evenly spaced rows (a run of whole rows, say) pack as a Mat, with its fast paths
        let first = (self.row)(r0);
        let step = if rn > 1 {
            ((self.row)(r0 + 1) as usize).wrapping_sub(first as usize)
        } else {
            0
        };
        let even = rn > 1
            && step > 0
            && step < isize::MAX as usize / rn
            && (2..rn).all(|r| (self.row)(r0 + r) as usize == first as usize + r * step);
        if even {
            let m = Mat {
                ptr: first,
                ty: self.ty,
                row_stride: step,
                elem_stride: self.elem_stride,
            };
            // SAFETY: the same rows and elements, forwarded from the caller.
            return unsafe { m.panel(kern, Panel { r0: 0, ..at }, out) };
        }
        // SAFETY: forwarded from the caller.
        unsafe { panel_by_rows(&self.row, self.ty, self.elem_stride, at, out) }
    }
}

/// [`Source::panel`] row by row for rows at `row(r)`, their elements of type `ty`
/// `elem_stride` bytes apart.
///
/// # Safety
/// As [`Source::panel`].
unsafe fn panel_by_rows(
    row: impl Fn(usize) -> *const u8,
    ty: Type,
    elem_stride: usize,
    at: Panel,
    out: &mut [f32],
) {
    let (r0, rn, pr, p0, kc) = (at.r0, at.rn, at.pr, at.p0, at.kc);
    let mut vals = [0f32; KC];
    let vals = &mut vals[..kc];
    for r in 0..pr {
        if r >= rn {
            for p in 0..kc {
                out[p * pr + r] = 0.0;
            }
            continue;
        }
        let start = row(r0 + r).wrapping_add(p0 * elem_stride);
        // SAFETY: row r0 + r, elements p0..p0 + kc, forwarded from the caller.
        unsafe { read(start, ty, elem_stride, vals) };
        at.round.slice(vals);
        for (p, &v) in vals.iter().enumerate() {
            out[p * pr + r] = v;
        }
    }
}

/// `out.len()` elements of type `ty` from `start` on, `stride` bytes apart, widened to f32.
///
/// # Safety
/// They must be readable.
unsafe fn read(start: *const u8, ty: Type, stride: usize, out: &mut [f32]) {
    let n = out.len();
    if stride == ty.type_size() {
        match ty {
            Type::F32 => {
                // SAFETY: n packed f32 values (read unaligned: any byte address is sound).
                for (i, v) in out.iter_mut().enumerate() {
                    *v = unsafe { (start as *const f32).add(i).read_unaligned() };
                }
                return;
            }
            Type::F16 if start as usize % 2 == 0 => {
                // SAFETY: n packed, aligned f16 values.
                let src = unsafe { std::slice::from_raw_parts(start as *const f16, n) };
                widen_f16(src, out);
                return;
            }
            Type::BF16 => {
                for (i, v) in out.iter_mut().enumerate() {
                    // SAFETY: as above, for bf16.
                    let h = unsafe { (start as *const bf16).add(i).read_unaligned() };
                    *v = bf16_to_f32(h);
                }
                return;
            }
            _ => {}
        }
    }
    for (i, v) in out.iter_mut().enumerate() {
        // SAFETY: element i of the run (caller).
        *v = unsafe { load(start.add(i * stride), ty) };
    }
}

/// Packs elements `ps` of `pr` rows (`row_stride` bytes apart, elements of type `ty` packed,
/// from `base` on) into `out` k-major (value `(p, r)` at `p · pr + r`), one at a time: the
/// panel packers' remainder.
///
/// # Safety
/// The elements must be readable and `out` hold `ps.end · pr` values.
unsafe fn pack_panel_tail(
    ty: Type,
    base: *const u8,
    row_stride: usize,
    ps: Range<usize>,
    pr: usize,
    out: *mut f32,
) {
    let ts = ty.type_size();
    for p in ps {
        for r in 0..pr {
            // SAFETY: forwarded from the caller.
            unsafe { *out.add(p * pr + r) = load(base.add(r * row_stride + p * ts), ty) };
        }
    }
}

/// How a MUL_MAT's result splits among threads: `parts` rectangles of each batch's product,
/// `pm` bands of rows times `pn` bands of columns, in units of whole tiles.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Split {
    pm: usize,
    pn: usize,
    /// Rows of `a` per band (a multiple of the tile's rows).
    band_m: usize,
    /// Columns of `b` per band (a multiple of the tile's columns).
    band_n: usize,
}

impl Split {
    /// The split of `batches` products of `m × n` among `nth` threads: whole batches per
    /// thread when there are many of them (or as many as a multiple of the threads), else
    /// each product cut into `nth` rectangles of whole tiles, the cut (`pm × pn`) the one
    /// whose largest rectangle costs least: its products, plus its rows and columns weighted
    /// as the packing each thread does for itself (about one vector FMA's time per value
    /// packed, 16 lanes), so ties go to cutting `a`, which each thread then packs only
    /// part of.
    pub(crate) fn new(kern: &Kernel, m: usize, n: usize, batches: usize, nth: usize) -> Split {
        let (tm, tn) = (m.div_ceil(kern.mr), n.div_ceil(kern.nr));
        let whole = nth == 1 || batches >= 4 * nth || batches % nth == 0;
        let (pm, pn) = if whole {
            (1, 1)
        } else {
            (1..=nth)
                .filter(|pm| nth % pm == 0)
                .map(|pm| (pm, nth / pm))
                .min_by_key(|&(pm, pn)| {
                    let (bm, bn) = (tm.div_ceil(pm) * kern.mr, tn.div_ceil(pn) * kern.nr);
                    bm * bn + 16 * (bm + bn)
                })
                .unwrap_or((1, 1))
        };
        Split {
            pm,
            pn,
            band_m: tm.div_ceil(pm) * kern.mr,
            band_n: tn.div_ceil(pn) * kern.nr,
        }
    }

    /// Work units: rectangles of all batches.
    pub(crate) fn units(&self, batches: usize) -> usize {
        batches * self.pm * self.pn
    }

    /// Unit `u`'s batch, rows of `a` (within `0..m`) and columns of `b` (within `0..n`).
    pub(crate) fn unit(&self, u: usize, m: usize, n: usize) -> (usize, Range<usize>, Range<usize>) {
        let parts = self.pm * self.pn;
        let (batch, r) = (u / parts, u % parts);
        let (bm, bn) = (r / self.pn, r % self.pn);
        let rows = (bm * self.band_m).min(m)..((bm + 1) * self.band_m).min(m);
        let cols = (bn * self.band_n).min(n)..((bn + 1) * self.band_n).min(n);
        (batch, rows, cols)
    }
}

#[cfg(test)]
mod tests;
