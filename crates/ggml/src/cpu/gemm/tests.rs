//! Every path this CPU has against an f64 reference, on odd sizes, all three weight types,
//! strided and permuted activations; and the split among threads against one thread.

use super::*;
use crate::types::{f16, f32_to_bf16};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// `v` stored as `ty` (little-endian bytes).
fn encode(v: &[f32], ty: Type) -> Vec<u8> {
    match ty {
        Type::F32 => bytemuck::cast_slice(v).to_vec(),
        Type::F16 => v
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_bits().to_le_bytes())
            .collect(),
        _ => v
            .iter()
            .flat_map(|&x| f32_to_bf16(x).to_bits().to_le_bytes())
            .collect(),
    }
}

/// The value element `x` of type `ty` holds.
fn stored(x: f32, ty: Type) -> f32 {
    match ty {
        Type::F32 => x,
        Type::F16 => f16::from_f32(x).to_f32(),
        _ => bf16_to_f32(f32_to_bf16(x)),
    }
}

/// An `rows × k` operand of type `ty` laid out row-major (`transposed` false: rows packed)
/// or column-major (`transposed`: element p of row r at p · rows + r, a permuted view), with
/// its f32 values (as stored) and its bytes.
struct Operand {
    vals: Vec<f32>,
    bytes: Vec<u8>,
    ty: Type,
    rows: usize,
    k: usize,
    transposed: bool,
}

impl Operand {
    fn new(ty: Type, rows: usize, k: usize, transposed: bool, seed: u32) -> Operand {
        let vals: Vec<f32> = values(rows * k, seed)
            .iter()
            .map(|&x| stored(x, ty))
            .collect();
        let laid: Vec<f32> = if transposed {
            (0..rows * k)
                .map(|e| vals[e % rows * k + e / rows])
                .collect()
        } else {
            vals.clone()
        };
        // two bytes of slack so the start can be moved to test unaligned rows
        let mut bytes = encode(&laid, ty);
        bytes.extend([0, 0]);
        Operand {
            vals,
            bytes,
            ty,
            rows,
            k,
            transposed,
        }
    }

    fn mat(&self) -> Mat {
        let ts = self.ty.type_size();
        let (row_stride, elem_stride) = if self.transposed {
            (ts, ts * self.rows)
        } else {
            (ts * self.k, ts)
        };
        Mat {
            ptr: self.bytes.as_ptr(),
            ty: self.ty,
            row_stride,
            elem_stride,
        }
    }
}

/// Runs the product of `a` and `b` split as `nth` threads would split it (each unit in turn,
/// with its own scratch), on kernel `kern`.
fn run(kern: &Kernel, a: &Operand, b: &Operand, nth: usize) -> Vec<f32> {
    let (m, n, k) = (a.rows, b.rows, a.k);
    let mut c = vec![f32::NAN; m * n];
    let split = Split::new(kern, m, n, 1, nth);
    let mut scratch = vec![0f32; scratch_len(n)];
    for u in 0..split.units(1) {
        let (_, rows, cols) = split.unit(u, m, n);
        let out = Out {
            ptr: c.as_mut_ptr(),
            ld: m,
        };
        // SAFETY: the operands hold m and n rows of k elements; c is m × n; the path is one
        // this CPU has; the scratch is as long as `scratch_len` says.
        unsafe {
            gemm(
                kern,
                &a.mat(),
                &b.mat(),
                k,
                Round::for_weights(a.ty),
                &out,
                rows,
                cols,
                &mut scratch,
            )
        };
    }
    c
}

/// Every path's kernel on this CPU, portable first.
fn kernels() -> Vec<(Isa, Kernel)> {
    Isa::all_available()
        .into_iter()
        .map(|i| (i, Kernel::for_isa(i)))
        .collect()
}

/// Checks `c` against the f64 sum of the products of `a` and `b` rounded to `a`'s dot type,
/// within f32 summation error.
fn check(c: &[f32], a: &Operand, b: &Operand, what: &str) {
    let (m, n, k) = (a.rows, b.rows, a.k);
    let round = Round::for_weights(a.ty);
    for j in 0..n {
        for i in 0..m {
            let (mut want, mut mag) = (0f64, 0f64);
            for p in 0..k {
                let x = a.vals[i * k + p] as f64 * round.apply(b.vals[j * k + p]) as f64;
                want += x;
                mag += x.abs();
            }
            let got = c[j * m + i] as f64;
            let tol = (k as f64 + 2.0) * 1.2e-7 * mag + 1e-30;
            assert!(
                (got - want).abs() <= tol,
                "{what}: c[{j}][{i}] = {got}, want {want} (tolerance {tol})"
            );
        }
    }
}

/// Odd sizes (none a multiple of a tile or block but some above them), every weight type,
/// F32 and F16 activations packed or permuted (and weights permuted too), on every path,
/// against f64.
#[test]
fn every_path_matches_f64_on_odd_sizes() {
    let shapes = [
        (1, 1, 1),
        (7, 5, 17),
        (17, 13, 33),
        (33, 4, 100),
        (100, 31, 257),
        (257, 7, 300),
        (40, 17, 600),
    ];
    for (isa, kern) in kernels() {
        for wt in [Type::F32, Type::F16, Type::BF16] {
            for bt in [Type::F32, Type::F16] {
                // (a, b) permuted: OUT_PROD reads both with their rows side by side
                for (ta, tb) in [(false, false), (false, true), (true, true)] {
                    for (s, &(m, n, k)) in shapes.iter().enumerate() {
                        let a = Operand::new(wt, m, k, ta, 2 * s as u32);
                        let b = Operand::new(bt, n, k, tb, 2 * s as u32 + 1);
                        let what = format!("{isa:?} {wt}×{bt} m {m} n {n} k {k} t {ta} {tb}");
                        check(&run(&kern, &a, &b, 1), &a, &b, &what);
                    }
                }
            }
        }
    }
}

/// Rows of F16 weights that start at an odd byte address, and column counts past [`NC`].
#[test]
fn unaligned_rows_and_more_columns_than_a_block() {
    for (isa, kern) in kernels() {
        let mut a = Operand::new(Type::F16, 9, 19, false, 3);
        let b = Operand::new(Type::F32, NC + 21, 19, false, 4);
        check(&run(&kern, &a, &b, 1), &a, &b, &format!("{isa:?} wide"));
        // the same rows one byte further on
        a.bytes.insert(0, 0xAB);
        let mut mat = a.mat();
        mat.ptr = a.bytes[1..].as_ptr();
        let mut c = vec![0f32; 9 * (NC + 21)];
        let mut scratch = vec![0f32; scratch_len(NC + 21)];
        let out = Out {
            ptr: c.as_mut_ptr(),
            ld: 9,
        };
        // SAFETY: as in `run`, with a's bytes one further on.
        unsafe {
            let (bm, r) = (b.mat(), Round::F16);
            gemm(
                &kern,
                &mat,
                &bm,
                19,
                r,
                &out,
                0..9,
                0..NC + 21,
                &mut scratch,
            )
        };
        check(&c, &a, &b, &format!("{isa:?} unaligned"));
    }
}

/// `k == 0` gives zeros.
#[test]
fn an_empty_sum_is_zero() {
    for (_, kern) in kernels() {
        let a = Operand::new(Type::F32, 5, 0, false, 1);
        let b = Operand::new(Type::F32, 3, 0, false, 2);
        assert_eq!(run(&kern, &a, &b, 2), vec![0.0; 15]);
    }
}

/// Every thread count splits the product into disjoint rectangles covering it, and gives the
/// very same bits as one thread.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    for (isa, kern) in kernels() {
        for &(m, n, k) in &[(300, 9, 70), (20, 200, 40), (64, 64, 300)] {
            let a = Operand::new(Type::BF16, m, k, false, 5);
            let b = Operand::new(Type::F32, n, k, false, 6);
            let one = run(&kern, &a, &b, 1);
            for nth in [2, 3, 4, 7, 8] {
                let many = run(&kern, &a, &b, nth);
                assert!(
                    one.iter()
                        .zip(&many)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{isa:?} m {m} n {n} k {k}: {nth} threads differ from one"
                );
            }
        }
    }
}

/// The split hands out whole batches when there are enough, else about one rectangle per
/// thread per batch; the rectangles of a batch tile it exactly.
#[test]
fn the_split_covers_every_element_once() {
    let kern = Kernel::for_isa(Isa::Scalar);
    for &(m, n, batches, nth) in &[
        (100, 50, 1, 2),
        (7, 3, 3, 2),
        (64, 64, 16, 4),
        (5, 900, 1, 6),
    ] {
        let split = Split::new(&kern, m, n, batches, nth);
        let mut seen = vec![0u8; batches * m * n];
        for u in 0..split.units(batches) {
            let (batch, rows, cols) = split.unit(u, m, n);
            for j in cols {
                for i in rows.clone() {
                    seen[(batch * n + j) * m + i] += 1;
                }
            }
        }
        assert!(
            seen.iter().all(|&s| s == 1),
            "m {m} n {n} b {batches} nth {nth}"
        );
        let whole = batches >= 4 * nth || batches % nth == 0;
        let want = if whole { batches } else { batches * nth };
        assert_eq!(
            split.units(batches),
            want,
            "m {m} n {n} b {batches} nth {nth}"
        );
    }
}

/// F16 weights take activations rounded to f16, BF16 weights to bf16: a value halfway
/// between two f16 (resp. bf16) values rounds to the even one before it is multiplied.
#[test]
fn activations_are_rounded_to_the_weights_dot_type() {
    for (isa, kern) in kernels() {
        // 1 + 2^-11 lies halfway between 1 and the next f16, 1 + 2^-8 likewise for bf16
        for (wt, x) in [
            (Type::F16, 1.0 + 2f32.powi(-11)),
            (Type::BF16, 1.0 + 2f32.powi(-8)),
        ] {
            let a = Operand {
                vals: vec![1.0],
                bytes: encode(&[1.0, 0.0], wt),
                ty: wt,
                rows: 1,
                k: 1,
                transposed: false,
            };
            let b = Operand {
                vals: vec![x],
                bytes: encode(&[x], Type::F32),
                ty: Type::F32,
                rows: 1,
                k: 1,
                transposed: false,
            };
            assert_eq!(run(&kern, &a, &b, 1), vec![1.0], "{isa:?} {wt}");
        }
    }
}

/// A 32-column batch of many weight rows is cut along the rows, so each of two threads packs
/// half of the weights rather than all of them.
#[test]
fn few_columns_split_the_weight_rows() {
    for (isa, kern) in kernels() {
        let split = Split::new(&kern, 4096, 32, 1, 2);
        let (_, rows, cols) = split.unit(0, 4096, 32);
        assert_eq!(cols, 0..32, "{isa:?}");
        assert!(
            rows.len() >= 2000 && rows.len() <= 2100,
            "{isa:?}: {rows:?}"
        );
    }
}

/// Gathered rows (in reverse, so never evenly spaced; and in order, packed as a Mat) and
/// scattered result rows (in reverse) give the bits of the same product read and written at
/// one stride, on every path.
#[test]
fn gathered_and_scattered_rows_give_the_strided_bits() {
    for (isa, kern) in kernels() {
        for (wt, bt) in [
            (Type::F32, Type::F32),
            (Type::F16, Type::F32),
            (Type::BF16, Type::F16),
        ] {
            let (m, n, k) = (53, 29, 300);
            let a = Operand::new(wt, m, k, false, 7);
            let b = Operand::new(bt, n, k, false, 8);
            let want = run(&kern, &a, &b, 1);
            let bm = b.mat();
            let row = |j: usize| bm.ptr.wrapping_add(j * bm.row_stride);
            let mut c = vec![f32::NAN; m * n];
            let mut scratch = vec![0f32; scratch_len(n)];
            for reversed in [false, true] {
                let at = |j: usize| if reversed { n - 1 - j } else { j };
                let acts = Gathered {
                    row: |j: usize| row(at(j)),
                    ty: bt,
                    elem_stride: bm.elem_stride,
                };
                let base = c.as_mut_ptr();
                let out = Scattered(|j: usize| base.wrapping_add(at(j) * m));
                // SAFETY: the rows named are b's rows and c's, m values each; the path is
                // one this CPU has; the scratch is as long as `scratch_len` says.
                unsafe {
                    let r = Round::for_weights(wt);
                    gemm(&kern, &a.mat(), &acts, k, r, &out, 0..m, 0..n, &mut scratch)
                };
                let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{isa:?} {wt}×{bt} reversed {reversed}");
            }
        }
    }
}
