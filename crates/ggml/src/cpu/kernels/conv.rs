//! Convolutions: IM2COL, IM2COL_3D, COL2IM_1D, CONV_2D, CONV_3D, CONV_2D_DW,
//! CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D, for F32, F16 and BF16 operands with any strides.
//!
//! IM2COL and the direct convolutions share one patch gatherer ([`Patches`]) over up to three
//! spatial axes. CONV_2D and CONV_3D are the product of the patch matrix (a row per output
//! position) and the kernel (a row per output channel), as GGML's CPU computes them (im2col
//! into its work buffer in chunks, then its MUL_MAT); here the packed GEMM of
//! [`crate::cpu::gemm`] gathers the patches straight into its panels ([`PatchPanels`]: im2col
//! fused into the packing, so no patch matrix is stored and nothing is allocated), and writes
//! each output channel's plane in place. With an F16 (BF16) kernel the patches are rounded to
//! F16 (BF16) first, as GGML's CPU converts the input to the kernel's type. Sums are f32, each
//! output computed by one thread in the GEMM's fixed order, so results do not depend on the
//! thread count.
//!
//! The transposed convolutions are a GEMM too: for each input position `l`, the products
//! `Y[(j, oc), l] = Σ_ic a[j, oc, ic]·b[l, ic]` of every tap `j` and output channel `oc`
//! ([`conv_transpose_1d`], [`conv_transpose_2d`]), then each output the sum, in order of `l`,
//! of the products whose tap reaches it (GGML's COL2IM_1D). CONV_2D_DW stays a direct loop:
//! each output channel reads one input channel, `KW·KH` products per output, too few for a
//! GEMM's panels to pay.

use std::ops::Range;

use super::{is_float, load, operand, store, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::cpu::gemm::{self, Kernel, Mat, Out, Panel, Round, Source, MAX_MR};
use crate::cpu::quant_dot::isa;
use crate::error::Result;
use crate::ops::{
    Col2im1dParams, Conv2dParams, Conv3dParams, ConvTranspose1dParams, ConvTranspose2dParams,
    Im2col3dParams, Im2colParams,
};
use crate::tensor::Tensor;
use crate::types::{bf16_to_f32, f16, f32_to_bf16, Type};

/// One spatial axis of a convolution: input length, kernel taps, stride, padding, dilation.
#[derive(Clone, Copy)]
struct Axis {
    len: i64,
    k: i64,
    s: i64,
    p: i64,
    d: i64,
}

impl Axis {
    /// An axis of length 1 with one tap (the missing axes of 1-D and 2-D convolutions).
    const UNIT: Axis = Axis {
        len: 1,
        k: 1,
        s: 1,
        p: 0,
        d: 1,
    };

    fn new(len: i64, k: i64, s: i32, p: i32, d: i32) -> Axis {
        Axis {
            len,
            k,
            s: s as i64,
            p: p as i64,
            d: d as i64,
        }
    }

    /// The input index that tap `k` of output `o` reads, if it lies inside the input.
    #[inline(always)]
    fn at(&self, o: usize, k: i64) -> Option<usize> {
        let i = o as i64 * self.s + k * self.d - self.p;
        (0..self.len).contains(&i).then_some(i as usize)
    }
}

/// `v` rounded to what an element of `ty` holds (F16, BF16; unchanged otherwise).
#[inline(always)]
fn round_as(ty: Type, v: f32) -> f32 {
    match ty {
        Type::F16 => f16::from_f32(v).to_f32(),
        Type::BF16 => bf16_to_f32(f32_to_bf16(v)),
        _ => v,
    }
}

/// Where the patches of a convolution come from: the input, its spatial axes (x, y, z) with
/// their byte strides, the byte strides of its channel and batch indices, and the output
/// extent of each axis.
struct Patches {
    src: TensorPtr,
    ax: [Axis; 3],
    nb: [usize; 3],
    nb_c: usize,
    nb_n: usize,
    ic: usize,
    out: [usize; 3],
    /// The type the gathered values are rounded to.
    round: Type,
}

impl Patches {
    /// Elements of one patch: `IC·KD·KH·KW`.
    fn len(&self) -> usize {
        self.ic * self.ax.iter().map(|a| a.k as usize).product::<usize>()
    }

    /// Output positions per batch element.
    fn per_batch(&self) -> usize {
        self.out.iter().product()
    }

    /// The batch index and output coordinates of flat position `r` (x fastest, then y, z,
    /// batch).
    fn position(&self, r: usize) -> (usize, [usize; 3]) {
        let [ox, oy, oz] = self.out;
        let o = [r % ox, r / ox % oy, r / (ox * oy) % oz];
        (r / (ox * oy * oz), o)
    }

    /// Writes the patch of batch `n` under output `o` into `out` (`len()` values, ordered
    /// channel, z, y, x), 0 where a tap falls outside the input.
    ///
    /// # Safety
    /// `n` must be below the batch count the input holds and `o` within `self.out`.
    unsafe fn gather(&self, n: usize, o: [usize; 3], out: &mut [f32]) {
        let [ax, ay, az] = self.ax;
        let base = self.src.data.wrapping_add(n * self.nb_n);
        let mut j = 0;
        for c in 0..self.ic {
            let plane = base.wrapping_add(c * self.nb_c);
            for kz in 0..az.k {
                let z = az.at(o[2], kz);
                for ky in 0..ay.k {
                    let y = ay.at(o[1], ky);
                    for kx in 0..ax.k {
                        out[j] = match (ax.at(o[0], kx), y, z) {
                            (Some(x), Some(y), Some(z)) => {
                                let off = x * self.nb[0] + y * self.nb[1] + z * self.nb[2];
                                // SAFETY: x, y, z, c and n index elements of the input.
                                round_as(self.round, unsafe {
                                    load(plane.wrapping_add(off), self.src.ty)
                                })
                            }
                            _ => 0.0,
                        };
                        j += 1;
                    }
                }
            }
        }
    }
}

impl Patches {
    /// Writes elements `p0..p0 + kc` of the patches of batch `n` under output positions
    /// `r0..r0 + rn` (flat, x fastest, within the batch; `at` but for `r0`) into `out`
    /// k-major, value `(p, r)` at `p · pr + r`, rows `rn..pr` zero: a GEMM panel
    /// ([`gemm::Source::panel`]), each column of `pr` values one element of `rn` patches. The positions are taken in runs along one
    /// output row, so each column is a few strided copies of input rows (contiguous ones at
    /// stride 1) with zeros where the taps fall in the padding.
    ///
    /// # Safety
    /// `n` must be below the batch count the input holds, `r0 + rn` at most
    /// [`Patches::per_batch`], `p0 + kc` at most [`Patches::len`], `rn ≤ pr ≤ MAX_MR`, and
    /// `out` hold `pr · kc` values.
    unsafe fn panel(&self, n: usize, r0: usize, at: Panel, out: &mut [f32]) {
        let Panel { rn, pr, p0, kc, .. } = at;
        assert!(rn <= pr && pr <= MAX_MR && out.len() >= pr * kc);
        let [ax, ay, az] = self.ax;
        // runs of positions along one output row: first row in the panel, length, the x of
        // the first, and the input y and z under tap 0 (negative in the padding)
        let mut runs = [(0usize, 0usize, 0i64, 0i64, 0i64); MAX_MR];
        let (mut nruns, mut r) = (0, 0);
        while r < rn {
            let (_, o) = self.position(r0 + r);
            let len = (self.out[0] - o[0]).min(rn - r);
            let (y, z) = (o[1] as i64 * ay.s - ay.p, o[2] as i64 * az.s - az.p);
            runs[nruns] = (r, len, o[0] as i64, y, z);
            (nruns, r) = (nruns + 1, r + len);
        }
        let base = self.src.data.wrapping_add(n * self.nb_n);
        let (kw, kh, kd) = (ax.k as usize, ay.k as usize, az.k as usize);
        // the element's tap and channel: x, y, z, channel
        let mut e = [
            p0 % kw,
            p0 / kw % kh,
            p0 / (kw * kh) % kd,
            p0 / (kw * kh * kd),
        ];
        for col in out.chunks_exact_mut(pr).take(kc) {
            let plane = base.wrapping_add(e[3] * self.nb_c);
            // input x = ox·s + tx: the outputs ox in lo..hi read inside the input
            let tx = e[0] as i64 * ax.d - ax.p;
            let lo = if tx >= 0 { 0 } else { (ax.s - 1 - tx) / ax.s };
            let hi = if ax.len - tx <= 0 {
                0
            } else {
                (ax.len - 1 - tx) / ax.s + 1
            };
            for &(r, len, ox0, y0, z0) in &runs[..nruns] {
                let seg = &mut col[r..r + len];
                let (y, z) = (y0 + e[1] as i64 * ay.d, z0 + e[2] as i64 * az.d);
                if !(0..ay.len).contains(&y) || !(0..az.len).contains(&z) {
                    seg.fill(0.0);
                    continue;
                }
                let from = (lo - ox0).clamp(0, len as i64) as usize;
                let to = (hi - ox0).clamp(from as i64, len as i64) as usize;
                seg[..from].fill(0.0);
                seg[to..].fill(0.0);
                if from == to {
                    continue; // no output of the run reads inside the row (x may be negative)
                }
                let x = ((ox0 + from as i64) * ax.s + tx) as usize;
                let src = plane.wrapping_add(
                    x * self.nb[0] + y as usize * self.nb[1] + z as usize * self.nb[2],
                );
                // SAFETY: outputs from..to read inputs x, x + s, … inside the row (y, z) of
                // this channel plane of batch n.
                unsafe { self.run(src, ax.s as usize * self.nb[0], &mut seg[from..to]) };
            }
            col[rn..].fill(0.0);
            e[0] += 1;
            if e[0] == kw {
                e[0] = 0;
                e[1] += 1;
                if e[1] == kh {
                    e[1] = 0;
                    e[2] += 1;
                    if e[2] == kd {
                        e[2] = 0;
                        e[3] += 1;
                    }
                }
            }
        }
    }

    /// `vals[i]`: the input element at `src + i · step`, rounded to the patches' type.
    ///
    /// # Safety
    /// Those elements must be inside the input.
    #[inline(always)]
    unsafe fn run(&self, src: *const u8, step: usize, vals: &mut [f32]) {
        match self.src.ty {
            Type::F32 if step == 4 => {
                for (i, v) in vals.iter_mut().enumerate() {
                    // SAFETY: as the caller guarantees (read unaligned: any address is sound).
                    *v = unsafe { (src.add(4 * i) as *const f32).read_unaligned() };
                }
            }
            ty => {
                for (i, v) in vals.iter_mut().enumerate() {
                    // SAFETY: as the caller guarantees.
                    *v = unsafe { load(src.add(i * step), ty) };
                }
            }
        }
        Round::for_weights(self.round).slice(vals);
    }
}

/// The patch matrix of one batch of a convolution as a GEMM operand: row `r` the patch under
/// output position `first + r`, its elements in the kernel's order (channel, z, y, x).
struct PatchPanels<'a> {
    patches: &'a Patches,
    batch: usize,
    first: usize,
}

impl Source for PatchPanels<'_> {
    unsafe fn panel(&self, _kern: &Kernel, at: Panel, out: &mut [f32]) {
        // SAFETY: the GEMM asks for rows and elements of the matrix its caller described:
        // positions of one batch, elements of one patch; pr is a tile's rows.
        unsafe { self.patches.panel(self.batch, self.first + at.r0, at, out) }
    }
}

impl Patches {
    /// The patches of a 2-D convolution of `b [W, H, IC, N]` under a kernel of `a`'s first
    /// two dimensions, with strides `s`, paddings `p`, dilations `d`.
    #[allow(clippy::too_many_arguments)]
    fn two_d(
        a: &TensorPtr,
        b: &TensorPtr,
        s: [i32; 2],
        p: [i32; 2],
        d: [i32; 2],
        out: [usize; 2],
        round: Type,
    ) -> Patches {
        Patches {
            src: *b,
            ax: [
                Axis::new(b.ne[0], a.ne[0], s[0], p[0], d[0]),
                Axis::new(b.ne[1], a.ne[1], s[1], p[1], d[1]),
                Axis::UNIT,
            ],
            nb: [b.nb[0], b.nb[1], 0],
            nb_c: b.nb[2],
            nb_n: b.nb[3],
            ic: b.ne[2] as usize,
            out: [out[0], out[1], 1],
            round,
        }
    }

    /// The patches of a 3-D convolution of `b [W, H, D, N·IC]` under a kernel of `a`'s
    /// first three dimensions.
    #[allow(clippy::too_many_arguments)]
    fn three_d(
        a: &TensorPtr,
        b: &TensorPtr,
        s: [i32; 3],
        p: [i32; 3],
        d: [i32; 3],
        ic: usize,
        out: [usize; 3],
        round: Type,
    ) -> Patches {
        Patches {
            src: *b,
            ax: std::array::from_fn(|i| Axis::new(b.ne[i], a.ne[i], s[i], p[i], d[i])),
            nb: [b.nb[0], b.nb[1], b.nb[2]],
            nb_c: b.nb[3],
            nb_n: ic * b.nb[3],
            ic,
            out,
            round,
        }
    }
}

/// The patches of an IM2COL node (1-D or 2-D).
fn im2col_patches(n: &NodePtrs) -> Patches {
    let p: Im2colParams = n.params();
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let out = [d.ne[1] as usize, d.ne[2] as usize];
    if p.is_2d == 1 {
        return Patches::two_d(
            a,
            b,
            [p.s0, p.s1],
            [p.p0, p.p1],
            [p.d0, p.d1],
            out,
            Type::F32,
        );
    }
    Patches {
        src: *b,
        ax: [
            Axis::new(b.ne[0], a.ne[0], p.s0, p.p0, p.d0),
            Axis::UNIT,
            Axis::UNIT,
        ],
        nb: [b.nb[0], 0, 0],
        nb_c: b.nb[1],
        nb_n: b.nb[2],
        ic: b.ne[1] as usize,
        out: [out[0], 1, 1],
        round: Type::F32,
    }
}

/// The patches of an IM2COL_3D node.
fn im2col_3d_patches(n: &NodePtrs) -> Patches {
    let p: Im2col3dParams = n.params();
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let ic = p.ic as usize;
    let batches = (b.ne[3] as usize / ic).max(1);
    let out = [
        d.ne[1] as usize,
        d.ne[2] as usize,
        d.ne[3] as usize / batches,
    ];
    let (s, pad, dil) = ([p.s0, p.s1, p.s2], [p.p0, p.p1, p.p2], [p.d0, p.d1, p.d2]);
    Patches::three_d(a, b, s, pad, dil, ic, out, Type::F32)
}

/// How a node's patches are described.
type PatchesOf = fn(&NodePtrs) -> Patches;

/// IM2COL and IM2COL_3D: an F16 or F32 result, a float input, one row of scratch.
pub(super) fn plan_im2col(t: &Tensor, three_d: bool) -> Result<Planned> {
    let b = operand(t, 1)?;
    if !matches!(t.ty(), Type::F16 | Type::F32) || !is_float(b.ty()) {
        return Err(unsupported(t));
    }
    let kernel = if three_d { im2col_3d } else { im2col };
    Ok(Planned::new(kernel, t.ne()[0] as usize * 4))
}

unsafe fn im2col(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { im2col_rows(n, p, im2col_patches) }
}

unsafe fn im2col_3d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { im2col_rows(n, p, im2col_3d_patches) }
}

/// Each result row `(ox, oy, n·OD + oz)` is the patch under that output position.
///
/// # Safety
/// As for every kernel; the shape rule made the result `[len, OW, OH, OD·N]`.
unsafe fn im2col_rows(n: &NodePtrs, p: &Params, of: PatchesOf) {
    let patches = of(n);
    let d = &n.dst;
    // SAFETY: the plan sized the scratch for one result row.
    let buf = unsafe { p.scratch_f32(d.ne[0] as usize) };
    for r in p.range(d.nrows()) {
        let (b, o) = patches.position(r);
        // SAFETY: r is a result row, so b and o are within the input's batches and the
        // output extent; the row holds len() = ne0 values and does not overlap `buf`.
        unsafe {
            patches.gather(b, o, buf);
            d.write_row(d.row_at(r), buf);
        }
    }
}

/// Where a direct convolution writes: byte strides of the output's x, y, z, channel and batch
/// indices, and the output channel count.
struct Outputs {
    nb: [usize; 3],
    nb_oc: usize,
    nb_n: usize,
    oc: usize,
}

/// The patches and outputs of a CONV_2D node.
fn conv_2d_geometry(n: &NodePtrs) -> (Patches, Outputs) {
    let p: Conv2dParams = n.params();
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let out = [d.ne[0] as usize, d.ne[1] as usize];
    let patches = Patches::two_d(a, b, [p.s0, p.s1], [p.p0, p.p1], [p.d0, p.d1], out, a.ty);
    let outputs = Outputs {
        nb: [d.nb[0], d.nb[1], 0],
        nb_oc: d.nb[2],
        nb_n: d.nb[3],
        oc: d.ne[2] as usize,
    };
    (patches, outputs)
}

/// The patches and outputs of a CONV_3D node.
fn conv_3d_geometry(n: &NodePtrs) -> (Patches, Outputs) {
    let p: Conv3dParams = n.params();
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let (c, oc) = (p.c as usize, p.oc as usize);
    let out = [d.ne[0] as usize, d.ne[1] as usize, d.ne[2] as usize];
    let (s, pad, dil) = ([p.s0, p.s1, p.s2], [p.p0, p.p1, p.p2], [p.d0, p.d1, p.d2]);
    let patches = Patches::three_d(a, b, s, pad, dil, c, out, a.ty);
    let outputs = Outputs {
        nb: [d.nb[0], d.nb[1], d.nb[2]],
        nb_oc: d.nb[3],
        nb_n: oc * d.nb[3],
        oc,
    };
    (patches, outputs)
}

/// How a direct convolution node is described.
type GeometryOf = fn(&NodePtrs) -> (Patches, Outputs);

/// Output positions per GEMM call when the result cannot take the GEMM's rows in place
/// (results through the scratch, then stored one by one).
const BLOCK: usize = 64;

/// CONV_2D and CONV_3D: a contiguous float kernel, float input and result; scratch for the
/// GEMM's panels and for a block of [`BLOCK`] results of every output channel.
pub(super) fn plan_conv(t: &Tensor, three_d: bool) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    if !is_float(a.ty()) || !a.is_contiguous() || !is_float(b.ty()) || !is_float(t.ty()) {
        return Err(unsupported(t));
    }
    let oc = if three_d {
        let c: Conv3dParams = crate::ops::read_params(&t.op_params());
        c.oc as usize
    } else {
        a.ne()[3] as usize
    };
    let kernel = if three_d { conv_3d } else { conv_2d };
    Ok(Planned::new(
        kernel,
        (gemm::scratch_len(oc) + BLOCK * oc) * 4,
    ))
}

unsafe fn conv_2d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { conv_gemm(n, p, conv_2d_geometry) }
}

unsafe fn conv_3d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { conv_gemm(n, p, conv_3d_geometry) }
}

/// `dst[o, oc, n] = Σₖ patch(n, o)[k] · kernel[oc][k]`: per batch, the product of the patch
/// matrix ([`PatchPanels`]) and the kernel's rows through the packed GEMM, split among the
/// threads in rectangles of whole tiles ([`gemm::Split`]). Each output channel's plane of a
/// batch is a result row of the GEMM when the result holds packed, aligned f32 planes
/// (always, for the result the op makes); otherwise blocks of [`BLOCK`] positions go through
/// the scratch.
///
/// # Safety
/// As for every kernel; the kernel operand is contiguous (checked by the plan).
unsafe fn conv_gemm(n: &NodePtrs, p: &Params, of: GeometryOf) {
    let (patches, outputs) = of(n);
    let (a, d) = (&n.src[0], &n.dst);
    let (k, per, oc) = (patches.len(), patches.per_batch(), outputs.oc);
    let batches = match per * oc {
        0 => 0,
        all => d.nelements() / all,
    };
    let kern = Kernel::for_isa(isa());
    let split = gemm::Split::new(&kern, per, oc, batches, p.nth);
    let units = p.range(split.units(batches));
    if units.is_empty() {
        return;
    }
    // SAFETY: the plan sized the scratch for the GEMM's panels and a block of results.
    let scratch = unsafe { p.scratch_f32(gemm::scratch_len(oc) + BLOCK * oc) };
    let (panels, block) = scratch.split_at_mut(gemm::scratch_len(oc));
    // The kernel is contiguous: output channel oc's k values packed, whatever strides its
    // size-1 dimensions carry (a 1x1 kernel's `nb[0]` after a permute).
    let ts = a.ty.type_size();
    let weights = Mat {
        ptr: a.data,
        ty: a.ty,
        row_stride: k * ts,
        elem_stride: ts,
    };
    let packed = d.ty == Type::F32
        && d.nb[0] == 4
        && d.nb[1] == outputs.nb[0] * d.ne[0] as usize
        && (outputs.nb[2] == 0 || outputs.nb[2] == outputs.nb[1] * d.ne[1] as usize)
        && outputs.nb_oc % 4 == 0
        && outputs.nb_n % 4 == 0
        && d.data as usize % 4 == 0
        && !d.overlaps(a)
        && !d.overlaps(&patches.src);
    for u in units {
        let (batch, rows, cols) = split.unit(u, per, oc);
        // This unit's output channels for positions `first + r`, r in `rs`, into `out`.
        let mut product = |first: usize, rs: Range<usize>, out: &Out| {
            let a = PatchPanels {
                patches: &patches,
                batch,
                first,
            };
            // SAFETY: rows are positions of the batch, columns output channels, k the patch
            // length; `out` is the result's planes of this batch (packed f32 positions,
            // overlapping neither operand) or the block in the scratch, and this unit's
            // rectangle is this thread's alone; `isa()` chose a path this CPU runs; the
            // panels' scratch is scratch_len(oc) long.
            let cs = cols.clone();
            unsafe { gemm::gemm(&kern, &a, &weights, k, Round::F32, out, rs, cs, panels) }
        };
        if packed {
            let out = Out {
                ptr: d.data.wrapping_add(batch * outputs.nb_n) as *mut f32,
                ld: outputs.nb_oc / 4,
            };
            product(0, rows, &out);
            continue;
        }
        for first in rows.clone().step_by(BLOCK) {
            let nr = BLOCK.min(rows.end - first);
            let out = Out {
                ptr: block.as_mut_ptr(),
                ld: BLOCK,
            };
            product(first, 0..nr, &out);
            for c in cols.clone() {
                for r in 0..nr {
                    let (_, o) = patches.position(first + r);
                    let off = o[0] * outputs.nb[0]
                        + o[1] * outputs.nb[1]
                        + o[2] * outputs.nb[2]
                        + c * outputs.nb_oc
                        + batch * outputs.nb_n;
                    // SAFETY: (o, c, batch) indexes an element of the result, written only by
                    // the thread that owns this unit.
                    unsafe { store(d.data.wrapping_add(off), d.ty, block[c * BLOCK + r]) };
                }
            }
        }
    }
}

/// CONV_2D_DW: float kernel, input and result; scratch for one kernel and one input plane.
pub(super) fn plan_conv_2d_dw(t: &Tensor) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    if !is_float(a.ty()) || !is_float(b.ty()) || !is_float(t.ty()) {
        return Err(unsupported(t));
    }
    let (an, bn) = (a.ne(), b.ne());
    Ok(Planned::new(
        conv_2d_dw,
        (an[0] * an[1] + bn[0] * bn[1]) as usize * 4,
    ))
}

/// Element `i` (all five indices) of `t`.
///
/// # Safety
/// `i` must index an element of `t`.
#[inline(always)]
unsafe fn at(t: &TensorPtr, i: [usize; 4]) -> *mut u8 {
    let off: usize = (0..4).map(|d| i[d] * t.nb[d]).sum();
    t.data.wrapping_add(off)
}

/// `dst[ox, oy, c, n] = Σ a[kx, ky, 0, c]·b[x, y, c, n]`, planes `(c, n)` split over threads;
/// each plane's kernel and input are first read into the scratch as f32.
unsafe fn conv_2d_dw(n: &NodePtrs, p: &Params) {
    let pr: Conv2dParams = n.params();
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let ax = Axis::new(b.ne[0], a.ne[0], pr.s0, pr.p0, pr.d0);
    let ay = Axis::new(b.ne[1], a.ne[1], pr.s1, pr.p1, pr.d1);
    let (kw, kh) = (a.ne[0] as usize, a.ne[1] as usize);
    let (w, h) = (b.ne[0] as usize, b.ne[1] as usize);
    let planes = p.range(d.ne[2] as usize * d.ne[3] as usize);
    if planes.is_empty() {
        return;
    }
    // SAFETY: the plan sized the scratch for KW·KH + W·H values.
    let scratch = unsafe { p.scratch_f32(kw * kh + w * h) };
    let (kbuf, ibuf) = scratch.split_at_mut(kw * kh);
    let channels = d.ne[2] as usize;
    for plane in planes {
        let (c, bn) = (plane % channels, plane / channels);
        for (j, v) in kbuf.iter_mut().enumerate() {
            // SAFETY: (kx, ky, 0, c) indexes the kernel.
            *v = unsafe { load(at(a, [j % kw, j / kw, 0, c]), a.ty) };
        }
        for y in 0..h {
            // SAFETY: row (y, c, bn) of b holds W elements; ibuf's row y holds W values.
            unsafe { b.read_row(b.row([y, c, bn, 0]), &mut ibuf[y * w..][..w]) };
        }
        for oy in 0..d.ne[1] as usize {
            let drow = d.row([oy, c, bn, 0]);
            for ox in 0..d.ne[0] as usize {
                let mut sum = 0f32;
                for ky in 0..kh {
                    let Some(y) = ay.at(oy, ky as i64) else {
                        continue;
                    };
                    for kx in 0..kw {
                        let Some(x) = ax.at(ox, kx as i64) else {
                            continue;
                        };
                        sum += kbuf[ky * kw + kx] * ibuf[y * w + x];
                    }
                }
                // SAFETY: (ox, oy, c, bn) is an element of this thread's plane.
                unsafe { d.set(drow, ox, sum) };
            }
        }
    }
}

/// The inputs `i` with `0 ≤ t − i·s < k` and `0 ≤ i < n`: the input positions whose kernel
/// reaches output `t` in a transposed convolution.
fn taps(t: i64, k: i64, s: i64, n: i64) -> Range<i64> {
    let lo = -((k - 1 - t).div_euclid(s));
    lo.max(0)..(t.div_euclid(s) + 1).min(n)
}

/// A transposed convolution's GEMM products per block, at most (f32 values of the scratch),
/// unless one input position's products alone are more.
const PRODUCTS: usize = 1 << 16;
/// Rows of the kernel (taps × output channels) per GEMM call the blocks aim at.
const TAP_ROWS: usize = 256;

/// A transposed convolution, 1-D as 2-D of height 1: kernel `a [KW, KH, OC, IC]`, input
/// `b [W, H, IC, N]`, result `[(W − 1)·s + KW, (H − 1)·s + KH, OC, N]` (F32), the byte
/// strides of each operand's four indices in that order, and the blocking: output channels
/// and input positions per block.
struct Transposed {
    k: [usize; 2],
    oc: usize,
    ic: usize,
    len: [usize; 2],
    batches: usize,
    s: usize,
    a_nb: [usize; 4],
    b_nb: [usize; 4],
    d_nb: [usize; 4],
    oc_block: usize,
    pos_block: usize,
}

/// An operand's shape and byte strides (its first four dimensions).
type Dims = ([i64; 4], [usize; 4]);

impl Transposed {
    /// The geometry of a CONV_TRANSPOSE_1D (`two_d` false) or CONV_TRANSPOSE_2D node with
    /// kernel `a`, input `b`, result strides `d_nb` and stride `s`.
    fn new(two_d: bool, (an, a_nb): Dims, (bn, b_nb): Dims, d_nb: [usize; 4], s: usize) -> Self {
        let u = |v: i64| v as usize;
        let (k, oc, ic, len, batches, a_nb, b_nb, d_nb) = if two_d {
            let (k, len) = ([u(an[0]), u(an[1])], [u(bn[0]), u(bn[1])]);
            (k, u(an[2]), u(an[3]), len, u(bn[3]), a_nb, b_nb, d_nb)
        } else {
            (
                [u(an[0]), 1],
                u(an[1]),
                u(an[2]),
                [u(bn[0]), 1],
                1,
                [a_nb[0], 0, a_nb[1], a_nb[2]],
                [b_nb[0], 0, b_nb[1], 0],
                [d_nb[0], 0, d_nb[1], 0],
            )
        };
        let taps = k[0] * k[1];
        let oc_block = TAP_ROWS.div_ceil(taps.max(1)).clamp(1, oc.max(1));
        let rows = taps * oc_block;
        let pos_block = (PRODUCTS / rows.max(1)).clamp(1, (len[0] * len[1]).max(1));
        Transposed {
            k,
            oc,
            ic,
            len,
            batches,
            s,
            a_nb,
            b_nb,
            d_nb,
            oc_block,
            pos_block,
        }
    }

    /// The geometry of node `n`.
    fn of_node(n: &NodePtrs, two_d: bool) -> Transposed {
        let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
        let s = if two_d {
            n.params::<ConvTranspose2dParams>().stride
        } else {
            n.params::<ConvTranspose1dParams>().s0
        };
        Transposed::new(two_d, dims(a), dims(b), dims(d).1, s as usize)
    }

    /// The f32 values of scratch a thread needs: the GEMM's panels and one block's products.
    fn scratch(&self) -> usize {
        let rows = self.k[0] * self.k[1] * self.oc_block;
        gemm::scratch_len(self.pos_block) + self.pos_block * rows
    }
}

/// The shape and byte strides of `t`'s first four dimensions.
fn dims(t: &TensorPtr) -> Dims {
    (
        std::array::from_fn(|i| t.ne[i]),
        std::array::from_fn(|i| t.nb[i]),
    )
}

/// CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D: float kernel, float input, F32 result; scratch
/// for the GEMM's panels and one block of products ([`Transposed`]).
pub(super) fn plan_conv_transpose(t: &Tensor, two_d: bool) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    if !is_float(a.ty()) || !is_float(b.ty()) || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    let kernel: super::KernelFn = if two_d {
        conv_transpose_2d
    } else {
        conv_transpose_1d
    };
    let of = |t: &Tensor| -> Dims {
        let (ne, nb) = (t.ne(), t.nb());
        (
            std::array::from_fn(|i| ne[i]),
            std::array::from_fn(|i| nb[i]),
        )
    };
    // the blocking does not depend on the stride
    let g = Transposed::new(two_d, of(a), of(b), of(t).1, 1);
    Ok(Planned::new(kernel, g.scratch() * 4))
}

unsafe fn conv_transpose_1d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { conv_transpose(n, p, false) }
}

unsafe fn conv_transpose_2d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { conv_transpose(n, p, true) }
}

/// `dst[x, y, oc, n] = Σ_{ix, iy} Σ_ic b[ix, iy, ic, n]·a[x − ix·s, y − iy·s, oc, ic]`, the
/// output channels split over threads. For each batch, block of output channels and block of
/// input positions, the packed GEMM gives every product `Y[l][(oc, ky, kx)] = Σ_ic a·b`
/// (`b` rounded to the kernel's type, as GGML's CPU converts it), then each product is added
/// to the output its tap reaches, input positions in order: every output is the sum of its
/// products in order of `(iy, ix)`, whatever the blocks and the thread count.
///
/// # Safety
/// As for every kernel.
unsafe fn conv_transpose(n: &NodePtrs, p: &Params, two_d: bool) {
    let g = Transposed::of_node(n, two_d);
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let chans = p.range(g.oc);
    if chans.is_empty() {
        return;
    }
    let kern = Kernel::for_isa(isa());
    let round = Round::for_weights(a.ty);
    let ([kw, kh], [w, h], s) = (g.k, g.len, g.s);
    let (taps, positions) = (kw * kh, w * h);
    let [ow, oh] = [(w.max(1) - 1) * s + kw, (h.max(1) - 1) * s + kh];
    // SAFETY: the plan sized the scratch (the same blocking).
    let scratch = unsafe { p.scratch_f32(g.scratch()) };
    let (panels, prods) = scratch.split_at_mut(gemm::scratch_len(g.pos_block));
    let at = |t: &TensorPtr, nb: &[usize; 4], i: [usize; 4]| {
        t.data
            .wrapping_add(i[0] * nb[0] + i[1] * nb[1] + i[2] * nb[2] + i[3] * nb[3])
    };
    for bn in 0..g.batches {
        for oc in chans.clone() {
            for y in 0..oh {
                for x in 0..ow {
                    // SAFETY: (x, y, oc, bn) is an element of the F32 result in this
                    // thread's channels.
                    unsafe { store(at(d, &g.d_nb, [x, y, oc, bn]), Type::F32, 0.0) };
                }
            }
        }
        for oc0 in chans.clone().step_by(g.oc_block) {
            let rows = taps * g.oc_block.min(chans.end - oc0);
            // kernel row r: tap (kx, ky) of channel oc0 + r / taps, its elements the inputs
            let weights = gemm::Gathered {
                row: |r: usize| at(a, &g.a_nb, [r % kw, r / kw % kh, oc0 + r / taps, 0]),
                ty: a.ty,
                elem_stride: g.a_nb[3],
            };
            for l0 in (0..positions).step_by(g.pos_block) {
                let ls = g.pos_block.min(positions - l0);
                let inputs = gemm::Gathered {
                    row: |l: usize| at(b, &g.b_nb, [(l0 + l) % w, (l0 + l) / w, 0, bn]),
                    ty: b.ty,
                    elem_stride: g.b_nb[2],
                };
                let out = Out {
                    ptr: prods.as_mut_ptr(),
                    ld: rows,
                };
                // SAFETY: `rows` kernel rows and `ls` input rows of `ic` elements each; the
                // products go to this thread's scratch (ls rows of `rows` values); `isa()`
                // chose a path this CPU runs; the panels' scratch is scratch_len(pos_block).
                unsafe {
                    gemm::gemm(
                        &kern,
                        &weights,
                        &inputs,
                        g.ic,
                        round,
                        &out,
                        0..rows,
                        0..ls,
                        panels,
                    )
                };
                for l in 0..ls {
                    let (ix, iy) = ((l0 + l) % w, (l0 + l) / w);
                    // the products of one tap row (ky) of one channel: kw outputs along x
                    let per_row = prods[l * rows..(l + 1) * rows].chunks_exact(kw);
                    for (q, vals) in per_row.enumerate() {
                        let (ky, c) = (q % kh, oc0 + q / kh);
                        let row = at(d, &g.d_nb, [ix * s, iy * s + ky, c, bn]);
                        for (kx, &v) in vals.iter().enumerate() {
                            let q = row.wrapping_add(kx * g.d_nb[0]) as *mut f32;
                            // SAFETY: the tap of an input position reaches an element of the
                            // F32 result, in this thread's channels (any alignment).
                            unsafe { q.write_unaligned(q.read_unaligned() + v) };
                        }
                    }
                }
            }
        }
    }
}

/// COL2IM_1D: float columns and result of the same type, no scratch.
pub(super) fn plan_col2im_1d(t: &Tensor) -> Result<Planned> {
    if !is_float(operand(t, 0)?.ty()) || !is_float(t.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(col2im_1d, 0))
}

/// `dst[t, oc] = Σ_j a[oc·K + (t + p0 − j·s0), j]`, output channels split over threads.
unsafe fn col2im_1d(n: &NodePtrs, p: &Params) {
    let pr: Col2im1dParams = n.params();
    let (a, d) = (&n.src[0], &n.dst);
    let k = a.ne[0] / pr.oc as i64;
    let s = pr.s0 as i64;
    for oc in p.range(d.ne[1] as usize) {
        for t in 0..d.ne[0] as usize {
            let t_abs = t as i64 + pr.p0 as i64;
            let mut sum = 0f32;
            for j in taps(t_abs, k, s, a.ne[1]) {
                let row = oc as i64 * k + t_abs - j * s;
                // SAFETY: row < K·OC and j < T index an element of a.
                sum += unsafe { load(at(a, [row as usize, j as usize, 0, 0]), a.ty) };
            }
            // SAFETY: (t, oc) is an element of this thread's channels.
            unsafe { store(at(d, [t, oc, 0, 0]), d.ty, sum) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::taps;

    /// `taps` lists exactly the inputs whose kernel reaches the output.
    #[test]
    fn taps_match_brute_force() {
        for k in 1..6i64 {
            for s in 1..5i64 {
                for n in 0..6i64 {
                    for t in 0..20i64 {
                        let want: Vec<i64> =
                            (0..n).filter(|i| (0..k).contains(&(t - i * s))).collect();
                        let got: Vec<i64> = taps(t, k, s, n).collect();
                        assert_eq!(got, want, "t {t} k {k} s {s} n {n}");
                    }
                }
            }
        }
    }
}
