//! WIN_PART, WIN_UNPART, GET_REL_POS and ADD_REL_POS: row moves (any strides), split over
//! the result's rows (GGML runs the first three on one thread; the rows are independent).

use super::{is_float, operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::error::Result;
use crate::ops::{WinPartParams, WinUnpartParams};
use crate::tensor::Tensor;
use crate::types::Type;

/// WIN_PART, WIN_UNPART (F32) and GET_REL_POS (float table, F16 result).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let a = operand(t, 0)?.ty();
    let kernel = match t.op() {
        crate::ops::Op::WinPart if a == Type::F32 => win_part,
        crate::ops::Op::WinUnpart if a == Type::F32 => win_unpart,
        crate::ops::Op::GetRelPos if is_float(a) => get_rel_pos,
        _ => return Err(unsupported(t)),
    };
    Ok(Planned::new(kernel, 0))
}

/// ADD_REL_POS on F32.
pub(super) fn plan_add_rel_pos(t: &Tensor) -> Result<Planned> {
    let all_f32 = (0..3).all(|i| t.src(i).is_some_and(|s| s.ty() == Type::F32));
    if !all_f32 || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    Ok(Planned::new(add_rel_pos, 0))
}

/// Copies row `srow` of `s` into row `drow` of `d` (same `ne0`, converted when the types
/// differ), or zeros the row when `srow` is `None`.
///
/// # Safety
/// `drow` must be a row of `d`, `srow` one of `s`, both of `d.ne[0]` elements.
unsafe fn move_row(d: &TensorPtr, drow: *mut u8, s: &TensorPtr, srow: Option<*const u8>) {
    for i in 0..d.ne[0] as usize {
        // SAFETY: forwarded from the caller; `i` is below both rows' length.
        unsafe {
            match srow {
                Some(r) => d.copy_from(drow, i, s, r, i),
                None => d.zero(drow, i),
            }
        }
    }
}

/// Result row `[·, i, j, win]` is row `[·, px·w + i, py·w + j]` of the image (zeros past its
/// edges), `win = py·npx + px`.
unsafe fn win_part(n: &NodePtrs, p: &Params) {
    let WinPartParams { npx, w, .. } = n.params();
    let (d, a) = (&n.dst, &n.src[0]);
    let (npx, w) = (npx as usize, w as usize);
    for r in p.range(d.nrows()) {
        let [i, j, win, _] = d.unravel_row(r);
        let (x, y) = ((win % npx) * w + i, (win / npx) * w + j);
        let inside = x < a.ne[1] as usize && y < a.ne[2] as usize;
        let srow = inside.then(|| a.row([x, y, 0, 0]) as *const u8);
        // SAFETY: `r` is a row of the result; `x`, `y` are inside the image when used.
        unsafe { move_row(d, d.row_at(r), a, srow) };
    }
}

/// Image row `[·, x, y]` is row `[·, x % w, y % w]` of window `(y / w)·npx + x / w`.
unsafe fn win_unpart(n: &NodePtrs, p: &Params) {
    let WinUnpartParams { w } = n.params();
    let (d, a) = (&n.dst, &n.src[0]);
    let w = w as usize;
    let npx = (d.ne[1] as usize).div_ceil(w);
    for r in p.range(d.nrows()) {
        let [x, y, _, _] = d.unravel_row(r);
        let srow = a.row([x % w, y % w, (y / w) * npx + x / w, 0]);
        // SAFETY: the shape rule made a hold every window of the image, so the indices are
        // inside it; `r` is a row of the result.
        unsafe { move_row(d, d.row_at(r), a, Some(srow)) };
    }
}

/// Result row `[·, k, q]` is table row `(n − 1 − k) + q`, `n = result.ne1`.
unsafe fn get_rel_pos(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let len = d.ne[1] as usize;
    for r in p.range(d.nrows()) {
        let [k, q, _, _] = d.unravel_row(r);
        let srow = a.row([len - 1 - k + q, 0, 0, 0]);
        // SAFETY: k, q < n, so the table row is below 2·n − 1 = a.ne1.
        unsafe { move_row(d, d.row_at(r), a, Some(srow)) };
    }
}

/// `a + ph[kh] + pw[kw]` per attention row; threads split the batch (`a.ne2`). Each thread
/// first copies its batch of `a` into the result unless they are the same memory (in place).
unsafe fn add_rel_pos(n: &NodePtrs, p: &Params) {
    let (d, a, pw, ph) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let k = pw.ne[0] as usize;
    let (qw, qh) = (pw.ne[1] as usize, pw.ne[2] as usize);
    let same = d.data == a.data;
    for b in p.range(a.ne[2] as usize) {
        for qy in 0..qh {
            for qx in 0..qw {
                let q = qy * qw + qx;
                let (drow, arow) = (d.row([q, b, 0, 0]), a.row([q, b, 0, 0]));
                let (wrow, hrow) = (pw.row([qx, qy, b, 0]), ph.row([qx, qy, b, 0]));
                for ky in 0..k {
                    for kx in 0..k {
                        let i = ky * k + kx;
                        // SAFETY: q < Qh·Qw = a.ne1, b < a.ne2, i < K·K = a.ne0, ky, kx < K
                        // = pw.ne0; the rule checked these shapes.
                        unsafe {
                            let base = if same { d.get(drow, i) } else { a.get(arow, i) };
                            let v = base + ph.get(hrow, ky) + pw.get(wrow, kx);
                            d.set(drow, i, v);
                        }
                    }
                }
            }
        }
    }
}
