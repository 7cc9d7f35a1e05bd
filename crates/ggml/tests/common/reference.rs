//! f64 references of the ops whose definitions more than one test file needs. Plain loops
//! over logical indices; nothing here calls the library.

use super::{Host, Shape, DIMS};

/// `f(a[i], b[i mod b.ne])` over a's shape (ADD, SUB, MUL, DIV broadcasting).
pub fn broadcast(a: &Host, b: &Host, f: impl Fn(f64, f64) -> f64) -> Host {
    Host::from_fn(a.ne, |i| {
        let j: Shape = std::array::from_fn(|d| i[d] % b.ne[d]);
        f(a.at(i), b.at(j))
    })
}

/// `a` tiled to shape `ne` (REPEAT).
pub fn repeat(a: &Host, ne: Shape) -> Host {
    Host::from_fn(ne, |i| a.at(std::array::from_fn(|d| i[d] % a.ne[d])))
}

/// `a` followed by `b` along `dim` (CONCAT).
pub fn concat(a: &Host, b: &Host, dim: usize) -> Host {
    let mut ne = a.ne;
    ne[dim] += b.ne[dim];
    Host::from_fn(ne, |mut i| {
        if i[dim] < a.ne[dim] {
            a.at(i)
        } else {
            i[dim] -= a.ne[dim];
            b.at(i)
        }
    })
}

/// `c[i, j, …] = Σₖ a[k, i, …]·b[k, j, …]`, batch d of b using batch d / (b.ne[d]/a.ne[d])
/// of a (MUL_MAT).
pub fn mul_mat(a: &Host, b: &Host) -> Host {
    let ne = [a.ne[1], b.ne[1], b.ne[2], b.ne[3], b.ne[4]];
    Host::from_fn(ne, |i| {
        let ab: Vec<usize> = (2..DIMS).map(|d| i[d] / (b.ne[d] / a.ne[d])).collect();
        (0..a.ne[0])
            .map(|k| a.at([k, i[0], ab[0], ab[1], ab[2]]) * b.at([k, i[1], i[2], i[3], i[4]]))
            .sum()
    })
}

/// `out[:, i, j, k] = a[:, idx[i, j, k], j, k]` (GET_ROWS; every index lies in `0..a.ne1`).
pub fn get_rows(a: &Host, idx: &Host) -> Host {
    let ne = [a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2], 1];
    Host::from_fn(ne, |i| {
        let r = idx.at([i[1], i[2], i[3], 0, 0]);
        a.at([i[0], r as usize, i[2], i[3], 0])
    })
}

/// The sum of each row, shape `[1, ne1, …]` (SUM_ROWS).
pub fn row_sums(h: &Host) -> Host {
    h.map_rows(1, |_, row| vec![row.iter().sum()])
}

/// GGML's ALiBi slope of head `h` of `n_head` (`ggml-cpu/ops.cpp`, soft_max): with
/// n = 2^⌊log2 n_head⌋, m0 = 2^(−max_bias/n), m1 = 2^(−max_bias/2/n), the slope is m0^(h+1)
/// for h < n and m1^(2(h−n)+1) after; 1 without bias.
pub fn alibi_slope(max_bias: f64, h: usize, n_head: usize) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n = 1usize << (usize::BITS - 1 - n_head.leading_zeros());
    let m0 = 2f64.powf(-max_bias / n as f64);
    let m1 = 2f64.powf(-max_bias / 2.0 / n as f64);
    if h < n {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi(2 * (h - n) as i32 + 1)
    }
}

/// softmax(x·scale + slope·mask) per row, mask row `i` for row `i`, broadcast over dims 2..5
/// (SOFT_MAX, SOFT_MAX_EXT; with sinks it is the conformance suite's).
pub fn soft_max(a: &Host, mask: Option<&Host>, scale: f64, max_bias: f64) -> Host {
    a.map_rows(a.ne[0], |r, row| {
        let slope = alibi_slope(max_bias, r[1], a.ne[2]);
        let w: Vec<f64> = row
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let m = mask.map_or(0.0, |m| {
                    m.at([i, r[0], r[1] % m.ne[2], r[2] % m.ne[3], r[3] % m.ne[4]])
                });
                x * scale + slope * m
            })
            .collect();
        let max = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = w.iter().map(|&x| (x - max).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    })
}

/// erf by Simpson's rule on 2/√π·e^(−t²) over [0, |x|] (1024 intervals, error below 1e-9);
/// ±1 beyond |x| = 6 where erf differs from ±1 by less than 1e-17.
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    if a > 6.0 {
        return x.signum();
    }
    let n = 1024;
    let h = a / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(a);
    for k in 1..n {
        s += f(k as f64 * h) * if k % 2 == 1 { 4.0 } else { 2.0 };
    }
    (s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()).copysign(x)
}
