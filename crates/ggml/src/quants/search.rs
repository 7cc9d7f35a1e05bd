//! GGML's scale searches: given a group of values, find the scale (and for the asymmetric
//! formats the minimum) and the integer levels that minimise a weighted error.
//!
//! Each search evaluates its float expressions in GGML's order (f32 throughout, no fused
//! multiply-add), so that the chosen levels, and therefore the quantized bytes, are identical.

use super::common::{nearest_int, signed_absmax, GROUP_MAX_EPS};

/// The first `N` values of a group as an array (callers always pass whole groups).
#[inline(always)]
fn group<const N: usize, T>(s: &[T]) -> &[T; N] {
    s.first_chunk().expect("a search group holds N values")
}

/// Mutable counterpart of [`group`].
#[inline(always)]
fn group_mut<const N: usize, T>(s: &mut [T]) -> &mut [T; N] {
    s.first_chunk_mut().expect("a search group holds N values")
}

/// Σ v from 0.0, left to right (the order GGML's loops accumulate in).
#[inline(always)]
fn sum_in_order<const N: usize>(v: &[f32; N]) -> f32 {
    v.iter().fold(0.0f32, |s, &x| s + x)
}

/// `nearest_int(iscale·x)` clamped to `-nmax ..= nmax - 1`, for each value.
#[inline(always)]
fn symmetric_levels<const N: usize>(x: &[f32; N], iscale: f32, nmax: i32) -> [i32; N] {
    let mut l = [0i32; N];
    for i in 0..N {
        l[i] = nearest_int(iscale * x[i]).min(nmax - 1).max(-nmax);
    }
    l
}

/// Symmetric quantization of the `N` values of `x` to levels `-nmax ..= nmax - 1`, stored in
/// `levels` offset by `nmax` (GGML's `make_qx_quants`). Returns the scale.
///
/// `rmse_type` 0 takes the plain max-based scale; a negative value returns after the first
/// weighted refinement; positive values also try 18 scales around the max-based one. Without
/// `weights`, each error is weighted by x² (`rmse_type` ±1), 1 (±2), |x| (±3) or √|x|.
pub(crate) fn make_qx_quants<const N: usize>(
    nmax: i32,
    x: &[f32],
    levels: &mut [i8],
    rmse_type: i32,
    weights: Option<&[f32]>,
) -> f32 {
    let (x, levels) = (group::<N, _>(x), group_mut::<N, _>(levels));
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let set_levels = |levels: &mut [i8; N], l: &[i32; N]| {
        for i in 0..N {
            levels[i] = (nmax + l[i]) as i8;
        }
    };
    let iscale = -(nmax as f32) / max;
    let l = symmetric_levels(x, iscale, nmax);
    set_levels(levels, &l);
    if rmse_type == 0 {
        return 1.0 / iscale;
    }
    let return_early = rmse_type < 0;
    // w and w·x per value (GGML computes w·x·l as (w·x)·l).
    let mut w = [0.0f32; N];
    match (weights, rmse_type.abs()) {
        (Some(qw), _) => w.copy_from_slice(group::<N, _>(qw)),
        (None, 1) => w.iter_mut().zip(x).for_each(|(w, &v)| *w = v * v),
        (None, 2) => w = [1.0; N],
        (None, 3) => w.iter_mut().zip(x).for_each(|(w, &v)| *w = v.abs()),
        (None, _) => w.iter_mut().zip(x).for_each(|(w, &v)| *w = v.abs().sqrt()),
    }
    let mut wx = [0.0f32; N];
    for i in 0..N {
        wx[i] = w[i] * x[i];
    }
    // Weighted sums Σ w·x·l and Σ w·l², accumulated in order.
    let sums = |l: &[i32; N]| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for i in 0..N {
            let lf = l[i] as f32;
            sumlx += wx[i] * lf;
            suml2 += w[i] * lf * lf;
        }
        (sumlx, suml2)
    };
    let (sumlx, suml2) = sums(&l);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    // The 18 trial scales do not depend on each other's outcome, so their sums are computed
    // `LANES` trials at a time (one lane each, every lane summing in GGML's order), then the
    // trials are judged in GGML's order.
    const LANES: usize = 6;
    const TRIALS: [i32; 18] = [
        -9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9,
    ];
    let trial_iscale = |is: i32| -(nmax as f32 + 0.1 * is as f32) / max;
    let mut trial_sums = [(0.0f32, 0.0f32); 18];
    for (batch, out) in TRIALS.chunks(LANES).zip(trial_sums.chunks_mut(LANES)) {
        let mut iscales = [0.0f32; LANES];
        for (s, &is) in iscales.iter_mut().zip(batch) {
            *s = trial_iscale(is);
        }
        let (mut sx, mut s2) = ([0.0f32; LANES], [0.0f32; LANES]);
        for i in 0..N {
            let mut lf = [0.0f32; LANES];
            for k in 0..LANES {
                lf[k] = nearest_int(iscales[k] * x[i]).min(nmax - 1).max(-nmax) as f32;
            }
            for k in 0..LANES {
                sx[k] += wx[i] * lf[k];
                s2[k] += w[i] * lf[k] * lf[k];
            }
        }
        for (k, o) in out.iter_mut().enumerate() {
            *o = (sx[k], s2[k]);
        }
    }
    let mut best = scale * sumlx;
    for (&is, &(sumlx, suml2)) in TRIALS.iter().zip(&trial_sums) {
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            set_levels(levels, &symmetric_levels(x, trial_iscale(is), nmax));
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

/// Asymmetric quantization of the `N` values of `x` to levels `0 ..= nmax` with a scale and a
/// minimum, minimising the `weights`-weighted error over the trial scales of `steps` (GGML's
/// `make_qkx2_quants` and `make_qkx3_quants`, which compute the same thing whenever weights are
/// given, as they always are in GGML). Returns `(scale, -min)`.
pub(crate) fn make_qkx_quants<const N: usize>(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    levels: &mut [u8],
    steps: ScaleSteps,
) -> (f32, f32) {
    let (x, weights) = (group::<N, _>(x), group::<N, _>(weights));
    let levels = group_mut::<N, _>(levels);
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..N {
        let v = x[i];
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        sum_w += weights[i];
        sum_x += weights[i] * v;
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
    // Σ w·error(scale·l + min − x), accumulated in order.
    let weighted_error = |scale: f32, min: f32, levels: &[u8; N]| {
        let mut e = [0.0f32; N];
        for i in 0..N {
            e[i] = weights[i] * error(scale * levels[i] as f32 + min - x[i]);
        }
        sum_in_order(&e)
    };
    // Levels at inverse scale `iscale`: nearest_int(iscale·(x − min)) clamped to 0..=nmax.
    let quantize = |iscale: f32, min: f32, out: &mut [u8; N]| {
        for i in 0..N {
            out[i] = nearest_int(iscale * (x[i] - min)).max(0).min(nmax) as u8;
        }
    };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best = [0u8; N];
    quantize(iscale, min, &mut best);
    let mut best_error = weighted_error(scale, min, &best);
    if steps.nstep >= 1 {
        let mut aux = [0u8; N];
        for is in 0..=steps.nstep {
            iscale = (steps.rmin + steps.rdelta * is as f32 + nmax as f32) / (max - min);
            quantize(iscale, min, &mut aux);
            let (mut wl, mut wl2, mut wlx) = ([0.0f32; N], [0.0f32; N], [0.0f32; N]);
            for i in 0..N {
                let l = aux[i] as f32;
                wl[i] = weights[i] * l;
                wl2[i] = wl[i] * l;
                wlx[i] = wl[i] * x[i];
            }
            let (sum_l, sum_l2, sum_xl) =
                (sum_in_order(&wl), sum_in_order(&wl2), sum_in_order(&wlx));
            let det = sum_w * sum_l2 - sum_l * sum_l;
            if det > 0.0 {
                let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
                let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
                if this_min > 0.0 {
                    this_min = 0.0;
                    this_scale = sum_xl / sum_l2;
                }
                let cur_error = weighted_error(this_scale, this_min, &aux);
                if cur_error < best_error {
                    best = aux;
                    best_error = cur_error;
                    scale = this_scale;
                    min = this_min;
                }
            }
        }
    }
    levels.copy_from_slice(&best);
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
