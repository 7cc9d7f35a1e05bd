//! GGML's scale searches: given a group of values, find the scale (and for the asymmetric
//! formats the minimum) and the integer levels that minimise a weighted error.
//!
//! Each search evaluates its float expressions in GGML's order (f32 throughout, no fused
//! multiply-add), so that the chosen levels, and therefore the quantized bytes, are identical.

use super::common::{nearest_int, signed_absmax, GROUP_MAX_EPS};

/// Most values a search handles at once (GGML's groups have 8 to 32 values).
const MAX_GROUP: usize = 32;

/// Symmetric quantization of `x` (at most 32 values) to levels `-nmax ..= nmax - 1`, stored in
/// `levels` offset by `nmax` (GGML's `make_qx_quants`). Returns the scale.
///
/// `rmse_type` 0 takes the plain max-based scale; a negative value returns after the first
/// weighted refinement; positive values also try 18 scales around the max-based one. Without
/// `weights`, each error is weighted by x² (`rmse_type` ±1), 1 (±2), |x| (±3) or √|x|.
pub(crate) fn make_qx_quants(
    nmax: i32,
    x: &[f32],
    levels: &mut [i8],
    rmse_type: i32,
    weights: Option<&[f32]>,
) -> f32 {
    debug_assert!(x.len() <= MAX_GROUP);
    let n = x.len().min(MAX_GROUP);
    let x = &x[..n];
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.min(nmax - 1).max(-nmax);
    let mut iscale = -(nmax as f32) / max;
    if rmse_type == 0 {
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = (nmax + clamp(nearest_int(iscale * v))) as i8;
        }
        return 1.0 / iscale;
    }
    let return_early = rmse_type < 0;
    // w and w·x per value (GGML computes w·x·l as (w·x)·l).
    let (mut w, mut wx) = ([0.0f32; MAX_GROUP], [0.0f32; MAX_GROUP]);
    for (i, &v) in x.iter().enumerate() {
        w[i] = match (weights, rmse_type.abs()) {
            (Some(qw), _) => qw[i],
            (None, 1) => v * v,
            (None, 2) => 1.0,
            (None, 3) => v.abs(),
            (None, _) => v.abs().sqrt(),
        };
        wx[i] = w[i] * v;
    }
    // Weighted sums Σ w·x·l and Σ w·l² for the levels at `iscale`, accumulated in order.
    let sums = |iscale: f32| {
        let mut l = [0.0f32; MAX_GROUP];
        for (l, &v) in l.iter_mut().zip(x) {
            *l = clamp(nearest_int(iscale * v)) as f32;
        }
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for i in 0..n {
            sumlx += wx[i] * l[i];
            suml2 += w[i] * l[i] * l[i];
        }
        (sumlx, suml2)
    };
    let set_levels = |levels: &mut [i8], iscale: f32| {
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = (nmax + clamp(nearest_int(iscale * v))) as i8;
        }
    };
    set_levels(levels, iscale);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            set_levels(levels, iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Symmetric 3-bit search of Q3_K's reference quantizer (GGML's `make_q3_quants`): levels
/// `-nmax ..= nmax - 1` stored offset by `nmax`; with `do_rmse`, up to five passes of
/// coordinate descent on the x²-weighted error. Returns the scale.
pub(crate) fn make_q3_quants(nmax: i32, x: &[f32], levels: &mut [i8], do_rmse: bool) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.min(nmax - 1).max(-nmax);
    let iscale = -(nmax as f32) / max;
    if !do_rmse {
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = (clamp(nearest_int(iscale * v)) + nmax) as i8;
        }
        return 1.0 / iscale;
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (q, &v) in levels.iter_mut().zip(x) {
        let l = clamp(nearest_int(iscale * v));
        *q = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (q, &v) in levels.iter_mut().zip(x) {
            let w = v * v;
            let old = *q as f32;
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new_l = clamp(nearest_int(v * sl2 / slx));
                if new_l != *q as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for q in levels.iter_mut() {
        *q += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// The grid of trial scales for [`make_qkx_quants`]: `nmax + rmin + rdelta·k` for k in
/// `0 ..= nstep`, divided by the value range.
#[derive(Clone, Copy)]
pub(crate) struct ScaleSteps {
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    /// Measure the error as |diff| rather than diff².
    pub use_mad: bool,
}

/// The trial scales of GGML's imatrix quantizers (`make_qkx3_quants(..., -0.9f, 0.05f, 36,
/// false)`), used by Q4_1, Q5_1 and the k-quants.
pub(crate) const QKX3_STEPS: ScaleSteps = ScaleSteps {
    rmin: -0.9,
    rdelta: 0.05,
    nstep: 36,
    use_mad: false,
};

/// Asymmetric quantization of `x` to levels `0 ..= nmax` with a scale and a minimum, minimising
/// the `weights`-weighted error over the trial scales of `steps` (GGML's `make_qkx2_quants` and
/// `make_qkx3_quants`, which compute the same thing whenever weights are given, as they always
/// are in GGML). `aux` is scratch of `x.len()` levels. Returns `(scale, -min)`.
pub(crate) fn make_qkx_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    levels: &mut [u8],
    aux: &mut [u8],
    steps: ScaleSteps,
) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        let v = x[i];
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * v;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let error = |diff: f32| {
        if steps.use_mad {
            diff.abs()
        } else {
            diff * diff
        }
    };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        levels[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * error(diff);
    }
    if steps.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=steps.nstep {
        iscale = (steps.rmin + steps.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * error(diff);
            }
            if cur_error < best_error {
                levels[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Quantization of non-negative values (sub-block scales or minimums) to levels `0 ..= nmax`
/// under `weights` (GGML's `make_qp_quants`): the best of nine trial scales, then up to five
/// passes of coordinate descent. Levels are stored as bytes, truncating as GGML's `uint8_t`
/// stores do. Returns the scale.
pub(crate) fn make_qp_quants(nmax: i32, x: &[f32], levels: &mut [u8], weights: &[f32]) -> f32 {
    let mut max = 0.0f32;
    for &v in x {
        max = if max > v { max } else { v };
    }
    if max < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for (q, &v) in levels.iter_mut().zip(x) {
        *q = nearest_int(iscale * v) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0.0f32;
    for ((&q, &v), &w) in levels.iter().zip(x).zip(weights) {
        let diff = v - scale * q as f32;
        best_mse += w * diff * diff;
    }
    for is in (-4..=4).filter(|&is| is != 0) {
        let iscale_is = (0.1 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0.0f32;
        for (&v, &w) in x.iter().zip(weights) {
            let l = nearest_int(iscale_is * v).min(nmax);
            let diff = v - scale_is * l as f32;
            mse += w * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for ((q, &v), &w) in levels.iter_mut().zip(x).zip(weights) {
        let l = nearest_int(iscale * v).min(nmax);
        *q = l as u8;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for ((q, &v), &w) in levels.iter_mut().zip(x).zip(weights) {
            let old = *q as f32;
            let mut slx = sumlx - w * v * old;
            let mut sl2 = suml2 - w * old * old;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(v * sl2 / slx).min(nmax);
                if new_l != *q as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}
