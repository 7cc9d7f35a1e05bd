//! Plain f64 references shared by several families: loops over logical indices, written for
//! clarity, never calling the library.

use crate::host::{Host, Shape, DIMS};

/// `f(x)` at every position of `a`.
pub fn map(a: &Host, f: impl Fn(f64) -> f64) -> Host {
    Host {
        ne: a.ne,
        v: a.v.iter().map(|&x| f(x)).collect(),
    }
}

/// The index of `b` that element `i` of a larger tensor reads when `b` is tiled over it.
pub fn tiled(i: Shape, b: &Shape) -> Shape {
    std::array::from_fn(|d| i[d] % b[d])
}

/// `f(a[i], b[i mod b.ne])` over `a`'s shape (ADD, SUB, MUL, DIV with broadcasting).
pub fn broadcast(a: &Host, b: &Host, f: impl Fn(f64, f64) -> f64) -> Host {
    Host::from_fn(a.ne, |i| f(a.at(i), b.at(tiled(i, &b.ne))))
}

/// `a` tiled to shape `ne` (REPEAT).
pub fn repeat(a: &Host, ne: Shape) -> Host {
    Host::from_fn(ne, |i| a.at(tiled(i, &a.ne)))
}

/// `a` then `b` along dimension `dim` (CONCAT).
pub fn concat(a: &Host, b: &Host, dim: usize) -> Host {
    let mut ne = a.ne;
    ne[dim] += b.ne[dim];
    Host::from_fn(ne, |i| {
        if i[dim] < a.ne[dim] {
            a.at(i)
        } else {
            let mut j = i;
            j[dim] -= a.ne[dim];
            b.at(j)
        }
    })
}

/// `out[i, j, …] = Σ_k a[k, i, …] · b[k, j, …]`, where batch `d` of `b` uses batch
/// `d / (b.ne[d] / a.ne[d])` of `a` (MUL_MAT's broadcasting).
pub fn mul_mat(a: &Host, b: &Host) -> Host {
    let ne = [a.ne[1], b.ne[1], b.ne[2], b.ne[3], b.ne[4]];
    Host::from_fn(ne, |i| {
        let mut ia = [0, i[0], 0, 0, 0];
        for d in 2..DIMS {
            ia[d] = i[d] / (b.ne[d] / a.ne[d]);
        }
        let mut sum = 0.0;
        for k in 0..a.ne[0] {
            ia[0] = k;
            sum += a.at(ia) * b.at([k, i[1], i[2], i[3], i[4]]);
        }
        sum
    })
}

/// ALiBi slope of head `h` of `n_head` as GGML's soft_max computes it: with
/// `n = 2^⌊log2 n_head⌋`, heads below `n` get `m0^(h+1)` with `m0 = 2^(−max_bias/n)`, the
/// others `m1^(2(h−n)+1)` with `m1 = 2^(−max_bias/(2n))`; 1 when `max_bias` is 0.
pub fn alibi_slope(max_bias: f64, h: usize, n_head: usize) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let mut n = 1usize;
    while n * 2 <= n_head {
        n *= 2;
    }
    if h < n {
        2f64.powf(-max_bias / n as f64).powi(h as i32 + 1)
    } else {
        2f64.powf(-max_bias / (2 * n) as f64)
            .powi(2 * (h - n) as i32 + 1)
    }
}

/// `softmax(a·scale + slope·mask)` along each row; row `(i1, i2, i3, i4)` adds mask row
/// `(i1, i2 mod m2, i3 mod m3, i4 mod m4)`, and the slope is that of head `i2` of `a.ne[2]`
/// (SOFT_MAX with its extensions).
pub fn soft_max(a: &Host, mask: Option<&Host>, scale: f64, max_bias: f64) -> Host {
    soft_max_sinks(a, mask, scale, max_bias, None)
}

/// [`soft_max`] with attention sinks: head `i2`'s sink `s` joins each row's normalisation as
/// one more logit `s` that has no output.
pub fn soft_max_sinks(
    a: &Host,
    mask: Option<&Host>,
    scale: f64,
    max_bias: f64,
    sinks: Option<&Host>,
) -> Host {
    a.map_rows(a.ne[0], |r, row| {
        let slope = alibi_slope(max_bias, r[2], a.ne[2]);
        let logits: Vec<f64> = (0..row.len())
            .map(|c| {
                let m = match mask {
                    None => 0.0,
                    Some(m) => m.at([c, r[1], r[2] % m.ne[2], r[3] % m.ne[3], r[4] % m.ne[4]]),
                };
                row[c] * scale + slope * m
            })
            .collect();
        let sink = sinks.map(|s| s.v[r[2]]);
        let top = logits
            .iter()
            .chain(sink.as_ref())
            .cloned()
            .fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = logits.iter().map(|&l| (l - top).exp()).collect();
        let total: f64 = exps.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - top).exp());
        exps.into_iter().map(|e| e / total).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(ne: Shape, v: &[f64]) -> Host {
        Host { ne, v: v.to_vec() }
    }

    #[test]
    fn small_known_values() {
        let a = h([2, 2, 1, 1, 1], &[1.0, 2.0, 3.0, 4.0]);
        let b = h([2, 1, 1, 1, 1], &[10.0, 20.0]);
        assert_eq!(
            broadcast(&a, &b, |x, y| x + y).v,
            vec![11.0, 22.0, 13.0, 24.0]
        );
        assert_eq!(repeat(&b, [4, 1, 1, 1, 1]).v, vec![10.0, 20.0, 10.0, 20.0]);
        assert_eq!(concat(&a, &b, 1).v, vec![1.0, 2.0, 3.0, 4.0, 10.0, 20.0]);
        // Rows of a (as weights) dotted with rows of a.
        assert_eq!(mul_mat(&a, &a).v, vec![5.0, 11.0, 11.0, 25.0]);
        let s = soft_max(&b, None, 0.0, 0.0);
        assert_eq!(s.v, vec![0.5, 0.5]);
        // 8 heads, max_bias 8: m0 = 2^-1, slopes 1/2, 1/4, …
        assert_eq!(alibi_slope(8.0, 0, 8), 0.5);
        assert_eq!(alibi_slope(8.0, 2, 8), 0.125);
        // 6 heads: n = 4, head 5 uses m1 = 2^-1 to the power 3.
        assert_eq!(alibi_slope(8.0, 5, 6), 0.125);
    }
}
