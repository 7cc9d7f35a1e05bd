//! Convolutions: IM2COL, IM2COL_3D, COL2IM_1D, CONV_2D, CONV_3D, CONV_2D_DW,
//! CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D, for F32, F16 and BF16 operands with any strides.
//!
//! IM2COL and the direct convolutions share one patch gatherer ([`Patches`]) over up to three
//! spatial axes; the direct ones then take [`JB`] output positions at a time and dot each
//! kernel row (converted once per block) with the whole block, as MUL_MAT does. With an F16
//! (BF16) kernel the patches are rounded to F16 (BF16) first, as GGML's CPU converts the input
//! to the kernel's type. Sums are f32, each output computed by one thread in a fixed order,
//! so results do not depend on the thread count.

use std::ops::Range;

use super::matmul::{dot_portable, dots_fn, row_f32, JB};
use super::{is_float, load, operand, store, unsupported, NodePtrs, Params, Planned, TensorPtr};
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

/// CONV_2D and CONV_3D: a contiguous float kernel, float input and result; scratch for
/// [`JB`] patches and one kernel row.
pub(super) fn plan_conv(t: &Tensor, three_d: bool) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    if !is_float(a.ty()) || !a.is_contiguous() || !is_float(b.ty()) || !is_float(t.ty()) {
        return Err(unsupported(t));
    }
    let an = a.ne();
    let k = if three_d {
        let c: Conv3dParams = crate::ops::read_params(&t.op_params());
        (an[0] * an[1] * an[2]) as usize * c.c as usize
    } else {
        (an[0] * an[1] * an[2]) as usize
    };
    let kernel = if three_d { conv_3d } else { conv_2d };
    Ok(Planned::new(kernel, (JB + 1) * k * 4))
}

unsafe fn conv_2d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { conv_direct(n, p, conv_2d_geometry) }
}

unsafe fn conv_3d(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { conv_direct(n, p, conv_3d_geometry) }
}

/// `dst[o, oc, n] = dot(kernel row oc, patch(n, o))` over this thread's output positions.
///
/// # Safety
/// As for every kernel; the kernel operand is contiguous (checked by the plan).
unsafe fn conv_direct(n: &NodePtrs, p: &Params, of: GeometryOf) {
    let (patches, outputs) = of(n);
    let (a, d) = (&n.src[0], &n.dst);
    let k = patches.len();
    let batches = match patches.per_batch() {
        0 => 0,
        per => d.nelements() / (per * outputs.oc.max(1)),
    };
    let positions = p.range(batches * patches.per_batch());
    if positions.is_empty() {
        return;
    }
    let dots = dots_fn();
    // SAFETY: the plan sized the scratch for (JB + 1)·k values.
    let scratch = unsafe { p.scratch_f32((JB + 1) * k) };
    let (wbuf, pbuf) = scratch.split_at_mut(k);
    let borrow = !d.overlaps(a);
    let row_bytes = k * a.ty.type_size();
    // The kernel is contiguous, so each output channel's `k` values are packed, but its size-1
    // dimensions may carry any stride (a 1x1 kernel's `nb[0]` after a permute): its rows are
    // read as rows of `k` packed elements, not with its own `nb[0]`.
    let mut kernel = *a;
    kernel.ne[0] = k as i64;
    kernel.nb[0] = a.ty.type_size();
    let mut out = [0f32; JB];
    for start in positions.clone().step_by(JB) {
        let nj = JB.min(positions.end - start);
        let where_: [(usize, [usize; 3]); JB] =
            std::array::from_fn(|t| patches.position(start + t.min(nj - 1)));
        for (t, buf) in pbuf.chunks_exact_mut(k.max(1)).take(nj).enumerate() {
            let (b, o) = where_[t];
            // SAFETY: start + t is an output position, so b and o are in range.
            unsafe { patches.gather(b, o, &mut buf[..k]) };
        }
        let mut block: [&[f32]; JB] = [&[]; JB];
        for (slot, c) in block.iter_mut().zip(pbuf.chunks_exact(k.max(1))) {
            *slot = &c[..k];
        }
        for oc in 0..outputs.oc {
            // SAFETY: the kernel is contiguous, `k` packed elements per output channel, so
            // its row `oc` lies inside it and is a row of `kernel`; wbuf holds k values.
            let w = unsafe { row_f32(&kernel, a.data.wrapping_add(oc * row_bytes), wbuf, borrow) };
            dots(w, &block[..nj], &mut out[..nj]);
            for (t, &v) in out[..nj].iter().enumerate() {
                let (b, o) = where_[t];
                let off = o[0] * outputs.nb[0]
                    + o[1] * outputs.nb[1]
                    + o[2] * outputs.nb[2]
                    + oc * outputs.nb_oc
                    + b * outputs.nb_n;
                // SAFETY: (o, oc, b) indexes an element of the result, written only by the
                // thread that owns position start + t.
                unsafe { store(d.data.wrapping_add(off), d.ty, v) };
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

/// CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D: float kernel, float input; scratch for the
/// kernel of one output channel and the input, both channels innermost.
pub(super) fn plan_conv_transpose(t: &Tensor, two_d: bool) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    if !is_float(a.ty()) || !is_float(b.ty()) || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    let (an, bn) = (a.ne(), b.ne());
    let (kernel, taps_per_oc, inputs, ic): (super::KernelFn, _, _, _) = if two_d {
        (conv_transpose_2d, an[0] * an[1], bn[0] * bn[1], an[3])
    } else {
        (conv_transpose_1d, an[0], bn[0], an[2])
    };
    Ok(Planned::new(
        kernel,
        ((taps_per_oc + inputs) * ic) as usize * 4,
    ))
}

/// Fills `out[(j·IC + ic)]` with element `(pos(j), ic)` of `t` for `j` in `0..n`, rounded to
/// `round`: a tensor rearranged with its channels innermost.
///
/// # Safety
/// `pos(j)` with the channel index `ic` in slot `ch` must index elements of `t`.
unsafe fn channels_last(
    t: &TensorPtr,
    n: usize,
    ic: usize,
    pos: impl Fn(usize, usize) -> [usize; 4],
    round: Type,
    out: &mut [f32],
) {
    for j in 0..n {
        for c in 0..ic {
            // SAFETY: forwarded from the caller.
            out[j * ic + c] = round_as(round, unsafe { load(at(t, pos(j, c)), t.ty) });
        }
    }
}

/// `dst[t, oc] = Σ_l Σ_ic b[l, ic]·a[t − l·s0, oc, ic]`, output channels split over threads.
unsafe fn conv_transpose_1d(n: &NodePtrs, p: &Params) {
    let s = n.params::<ConvTranspose1dParams>().s0 as i64;
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let (k, ic, len) = (a.ne[0] as usize, a.ne[2] as usize, b.ne[0] as usize);
    let chans = p.range(a.ne[1] as usize);
    if chans.is_empty() {
        return;
    }
    // SAFETY: the plan sized the scratch for (K + L)·IC values.
    let scratch = unsafe { p.scratch_f32((k + len) * ic) };
    let (kbuf, bbuf) = scratch.split_at_mut(k * ic);
    // SAFETY: (l, ic) indexes b [L, IC].
    unsafe { channels_last(b, len, ic, |l, c| [l, c, 0, 0], a.ty, bbuf) };
    for oc in chans {
        // SAFETY: (k, oc, ic) indexes a [K, OC, IC].
        unsafe { channels_last(a, k, ic, |j, c| [j, oc, c, 0], Type::F32, kbuf) };
        for t in 0..d.ne[0] as usize {
            let mut sum = 0f32;
            for l in taps(t as i64, k as i64, s, len as i64) {
                let l = l as usize;
                let j = t - l * s as usize;
                sum += dot_portable(&bbuf[l * ic..][..ic], &kbuf[j * ic..][..ic]);
            }
            // SAFETY: (t, oc) is an element of the result in this thread's channels.
            unsafe { store(at(d, [t, oc, 0, 0]), d.ty, sum) };
        }
    }
}

/// `dst[x, y, oc, n] = Σ_{ix, iy, ic} b[ix, iy, ic, n]·a[x − ix·s, y − iy·s, oc, ic]`, pairs
/// `(oc, n)` split over threads. (GGML's CPU computes batch 0 only.)
unsafe fn conv_transpose_2d(n: &NodePtrs, p: &Params) {
    let s = n.params::<ConvTranspose2dParams>().stride as i64;
    let (a, b, d) = (&n.src[0], &n.src[1], &n.dst);
    let (kw, kh, ic) = (a.ne[0] as usize, a.ne[1] as usize, a.ne[3] as usize);
    let (w, h) = (b.ne[0] as usize, b.ne[1] as usize);
    let oc_n = d.ne[2] as usize;
    let pairs = p.range(oc_n * d.ne[3] as usize);
    if pairs.is_empty() {
        return;
    }
    // SAFETY: the plan sized the scratch for (KW·KH + W·H)·IC values.
    let scratch = unsafe { p.scratch_f32((kw * kh + w * h) * ic) };
    let (kbuf, bbuf) = scratch.split_at_mut(kw * kh * ic);
    let mut batch = usize::MAX;
    for pair in pairs {
        let (oc, bn) = (pair % oc_n, pair / oc_n);
        if bn != batch {
            batch = bn;
            // SAFETY: (x, y, ic, bn) indexes b.
            unsafe { channels_last(b, w * h, ic, |j, c| [j % w, j / w, c, bn], a.ty, bbuf) };
        }
        // SAFETY: (kx, ky, oc, ic) indexes a.
        unsafe {
            channels_last(
                a,
                kw * kh,
                ic,
                |j, c| [j % kw, j / kw, oc, c],
                Type::F32,
                kbuf,
            )
        };
        for y in 0..d.ne[1] as usize {
            for x in 0..d.ne[0] as usize {
                let mut sum = 0f32;
                for iy in taps(y as i64, kh as i64, s, h as i64) {
                    let (iy, ky) = (iy as usize, y - iy as usize * s as usize);
                    for ix in taps(x as i64, kw as i64, s, w as i64) {
                        let (ix, kx) = (ix as usize, x - ix as usize * s as usize);
                        sum += dot_portable(
                            &bbuf[(iy * w + ix) * ic..][..ic],
                            &kbuf[(ky * kw + kx) * ic..][..ic],
                        );
                    }
                }
                // SAFETY: (x, y, oc, bn) is an element of this thread's pair.
                unsafe { store(at(d, [x, y, oc, bn]), d.ty, sum) };
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
