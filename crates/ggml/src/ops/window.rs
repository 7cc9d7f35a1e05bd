//! Windows and relative positions of the Segment Anything image encoder: WIN_PART, WIN_UNPART,
//! GET_REL_POS and ADD_REL_POS.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// WIN_PART's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct WinPartParams {
    /// Windows along dimension 1 (`ceil(a.ne1 / w)`).
    pub npx: i32,
    /// Windows along dimension 2 (`ceil(a.ne2 / w)`).
    pub npy: i32,
    /// The window size.
    pub w: i32,
}

/// WIN_UNPART's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct WinUnpartParams {
    /// The window size.
    pub w: i32,
}

/// ADD_REL_POS's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct AddRelPosParams {
    /// 1 for the in-place form, 0 otherwise (GGML's bool as an i32).
    pub inplace: i32,
}

/// Windows of size `w` covering `n` positions, padded: `ceil(n / w)`.
fn windows(n: i64, w: i64) -> i64 {
    (n + (w - n % w) % w) / w
}

/// `Err` unless `w` is a positive window size.
fn check_w(src: &Srcs<'_>, w: i32) -> Result<i64> {
    if w <= 0 {
        return Err(src.err(format!("w = {w}; the window size must be positive")));
    }
    Ok(w as i64)
}

/// WIN_PART: F32 `a` `[C, W, H]` cut into `w × w` windows (zero-padded at the right and
/// bottom): `[C, w, w, npx·npy]`.
pub(crate) struct WinPart;

impl OpSpec for WinPart {
    type Params = WinPartParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &WinPartParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_type(0, &[Type::F32])?;
        if a.ne[3] != 1 || a.ne[4] != 1 {
            return Err(src.bad(0, "it must be 3-D (ne3 and ne4 equal to 1)"));
        }
        let w = check_w(src, p.w)?;
        let (npx, npy) = (windows(a.ne[1], w), windows(a.ne[2], w));
        if (p.npx as i64, p.npy as i64) != (npx, npy) {
            return Err(src.err(format!(
                "npx = {}, npy = {}; a's shape and w = {w} give {npx} and {npy}",
                p.npx, p.npy
            )));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [a.ne[0], w, w, npx * npy, 1],
        })
    }
}

/// WIN_UNPART: the inverse of WIN_PART for an image of `w0 × h0`: F32 `a` `[C, w, w, n]`
/// with `n = ceil(w0/w)·ceil(h0/w)` gives `[C, w0, h0]` (the padding dropped). The image size
/// is the result's shape, which the builder gives.
pub(crate) struct WinUnpart;

impl OpSpec for WinUnpart {
    type Params = WinUnpartParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, p: &WinUnpartParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_type(0, &[Type::F32])?;
        let w = check_w(src, p.w)?;
        let ne = src.requested()?;
        if ne[0] != a.ne[0] || ne[1] < 1 || ne[2] < 1 || ne[3] != 1 || ne[4] != 1 {
            return Err(src.err(format!(
                "the result {ne:?} must be [a.ne0 = {}, w0 >= 1, h0 >= 1]",
                a.ne[0]
            )));
        }
        let n = windows(ne[1], w) * windows(ne[2], w);
        if a.ne[1] != w || a.ne[2] != w || a.ne[3] != n || a.ne[4] != 1 {
            return Err(src.bad(
                0,
                format!(
                    "it must be [C, w, w, {n}]: {n} windows of w = {w} cover {} × {}",
                    ne[1], ne[2]
                ),
            ));
        }
        Ok(Shape::New { ty: Type::F32, ne })
    }
}

/// GET_REL_POS: from a table `a` `[C, 2·n − 1]` (F16, BF16 or F32), the F16 result
/// `[C, n, n]` with `result[:, k, q] = a[:, (n − 1 − k) + q]`.
pub(crate) struct GetRelPos;

impl OpSpec for GetRelPos {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        src.want_float(0)?;
        if a.ne[1] % 2 == 0 || a.ne[2..].iter().any(|&n| n != 1) {
            return Err(src.bad(0, "it must be a matrix with an odd number 2·n − 1 of rows"));
        }
        let n = (a.ne[1] + 1) / 2;
        Ok(Shape::New {
            ty: Type::F16,
            ne: [a.ne[0], n, n, 1, 1],
        })
    }
}

/// ADD_REL_POS: `a` `[K·K, Qh·Qw, B]` (F32, contiguous) plus the decomposed relative
/// positions `pw`, `ph` `[K, Qw, Qh, B]` (F32, contiguous, same shape):
/// `result[kh·K + kw, qh·Qw + qw, b] = a[…] + ph[kh, qw, qh, b] + pw[kw, qw, qh, b]`.
pub(crate) struct AddRelPos;

impl OpSpec for AddRelPos {
    type Params = AddRelPosParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("pw"), req("ph")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &AddRelPosParams) -> Result<Shape> {
        let (a, pw) = (src.get(0), src.get(1));
        for i in 0..3 {
            src.want_type(i, &[Type::F32])?;
            if !src.get(i).is_contiguous() {
                return Err(src.bad(i, "it must be contiguous"));
            }
        }
        src.want_same_shape(1, 2)?;
        if a.ne[3] != 1 || a.ne[4] != 1 {
            return Err(src.bad(0, "it must be 3-D (ne3 and ne4 equal to 1)"));
        }
        let fits = pw.ne[4] == 1
            && pw.ne[3] == a.ne[2]
            && pw.ne[0] * pw.ne[0] == a.ne[0]
            && pw.ne[1] * pw.ne[2] == a.ne[1];
        if !fits {
            return Err(src.bad(
                1,
                format!(
                    "it does not fit a {:?}: pw.ne0² must be a.ne0, pw.ne1·pw.ne2 a.ne1, \
                     pw.ne3 a.ne2",
                    a.ne
                ),
            ));
        }
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

impl Context {
    /// `ggml_win_part`: F32 `a` `[C, W, H]` cut into windows of `w × w` positions, padded with
    /// zeros at the right and bottom edges. The result is `[C, w, w, npx·npy]` with
    /// `npx = ceil(W/w)`, `npy = ceil(H/w)`; window `py·npx + px` holds
    /// `a[:, px·w + i, py·w + j]` at `[:, i, j]`.
    pub fn win_part(&self, a: &Tensor, w: i32) -> Result<Tensor> {
        let p = match w {
            1.. => WinPartParams {
                npx: windows(a.ne()[1], w as i64) as i32,
                npy: windows(a.ne()[2], w as i64) as i32,
                w,
            },
            _ => WinPartParams { npx: 0, npy: 0, w },
        };
        self.build::<WinPart>(Op::WinPart, &[Some(a)], p, false)
    }

    /// `ggml_win_unpart`: the inverse of [`Context::win_part`] for an image of `w0 × h0`
    /// positions: `a` `[C, w, w, ceil(w0/w)·ceil(h0/w)]` gives `[C, w0, h0]`, the padding
    /// dropped.
    pub fn win_unpart(&self, a: &Tensor, w0: i64, h0: i64, w: i32) -> Result<Tensor> {
        let ne = [a.ne()[0], w0, h0, 1, 1];
        self.build_shaped::<WinUnpart>(Op::WinUnpart, &[Some(a)], WinUnpartParams { w }, ne)
    }

    /// `ggml_get_rel_pos`: the relative-position table `a` `[C, 2·n − 1]` (F16; BF16 and
    /// F32 are converted) expanded to F16 `[C, kh, qh]` with `kh == qh == n`:
    /// `result[:, k, q] = a[:, (n − 1 − k) + q]`. `Err` unless `qh == kh` and
    /// `a.ne1 == 2·qh − 1`.
    ///
    /// Deliberate difference: GGML's CPU kernel copies a BF16 table's bits into the F16 result
    /// unconverted (and aborts on F32); here every table type is converted by value.
    pub fn get_rel_pos(&self, a: &Tensor, qh: i64, kh: i64) -> Result<Tensor> {
        if qh != kh || 2 * qh.max(kh) - 1 != a.ne()[1] {
            return Err(crate::error::Error::invalid(format!(
                "GET_REL_POS: qh = {qh}, kh = {kh}; they must be equal and a.ne1 = {} must be \
                 2·qh − 1",
                a.ne()[1]
            )));
        }
        self.build::<GetRelPos>(Op::GetRelPos, &[Some(a)], NoParams {}, false)
    }

    /// `ggml_add_rel_pos`: adds decomposed relative positions to attention scores: `a`
    /// `[K·K, Qh·Qw, B]`, `pw` and `ph` `[K, Qw, Qh, B]` (all F32 and contiguous) give
    /// `a[kh·K + kw, qh·Qw + qw, b] + ph[kh, qw, qh, b] + pw[kw, qw, qh, b]`, `a`'s shape.
    pub fn add_rel_pos(&self, a: &Tensor, pw: &Tensor, ph: &Tensor) -> Result<Tensor> {
        self.add_rel_pos_impl(a, pw, ph, false)
    }

    /// `ggml_add_rel_pos_inplace`: as [`Context::add_rel_pos`], writing into `a`'s memory.
    pub fn add_rel_pos_inplace(&self, a: &Tensor, pw: &Tensor, ph: &Tensor) -> Result<Tensor> {
        self.add_rel_pos_impl(a, pw, ph, true)
    }

    fn add_rel_pos_impl(
        &self,
        a: &Tensor,
        pw: &Tensor,
        ph: &Tensor,
        inplace: bool,
    ) -> Result<Tensor> {
        let p = AddRelPosParams {
            inplace: inplace as i32,
        };
        self.build::<AddRelPos>(Op::AddRelPos, &[Some(a), Some(pw), Some(ph)], p, inplace)
    }
}
