//! MUL_MAT and GET_ROWS with quantized weights, for every type that has a dequantizer: the
//! reference is an f64 product over the dequantized weights (the dequantizers themselves are
//! held bit-exact to GGML by the quant fixtures).

mod common;

use common::values;
use ggml::{backend, quants, Context, Type};

/// Quantizes `rows` rows of `k` values to `ty` and returns (bytes, dequantized values).
fn quantized(ty: Type, k: usize, rows: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
    let src = values(k * rows, seed);
    let imatrix: Vec<f32> = (0..k).map(|i| 1.0 + (i % 7) as f32 * 0.1).collect();
    let mut bytes = vec![0u8; ty.row_size(k as i64).unwrap() * rows];
    quants::quantize_chunk(ty, &src, &mut bytes, 0, rows, k, Some(&imatrix)).unwrap();
    let mut deq = vec![0f32; k * rows];
    quants::dequantize_row(ty, &bytes, &mut deq).unwrap();
    (bytes, deq)
}

fn types() -> Vec<Type> {
    Type::ALL
        .into_iter()
        .filter(|t| t.is_quantized() && quants::has_to_float(*t) && quants::has_quantizer(*t))
        .collect()
}

#[test]
fn mul_mat_with_quantized_weights() {
    let cpu = backend::cpu_init().unwrap();
    let tested = types();
    assert!(
        tested.len() >= 25,
        "only {} quantized types tested",
        tested.len()
    );
    for ty in tested {
        let (k, m, n) = (ty.blck_size() * 2, 5usize, 3usize);
        let (bytes, w) = quantized(ty, k, m, ty as u64);
        let x = values(k * n, 99);
        let ctx = Context::init(1 << 20, false).unwrap();
        let a = ctx.new_tensor_2d(ty, k as i64, m as i64).unwrap();
        let b = ctx.new_tensor_2d(Type::F32, k as i64, n as i64).unwrap();
        a.set_bytes(&bytes, 0).unwrap();
        b.set_f32(&x).unwrap();
        let c = ctx.mul_mat(&a, &b).unwrap();
        assert!(cpu.get_device().supports_op(&c), "{ty}");
        cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
            .unwrap();
        let got = c.get_f32().unwrap();
        let (mut err, mut norm) = (0f64, 0f64);
        for j in 0..n {
            for i in 0..m {
                let want: f64 = (0..k)
                    .map(|q| w[i * k + q] as f64 * x[j * k + q] as f64)
                    .sum();
                err += (got[j * m + i] as f64 - want).powi(2);
                norm += want * want;
            }
        }
        let nmse = err / norm.max(f64::MIN_POSITIVE);
        assert!(nmse <= 5e-4, "{ty}: NMSE {nmse}");
    }
}

/// Batches through the band products (the k-quants and the signed 32-value types on AVX2 and
/// AVX-512 VNNI, from 8 columns on) and the row kernels (other paths, other types): near the f64
/// product of the dequantized weights for column counts around every group boundary (7, 8,
/// 9, 16, 17, 64, 65) and row counts that leave a short band (13).
#[test]
fn batched_quantized_mul_mat_for_every_remainder() {
    let cpu = backend::cpu_init().unwrap();
    let (k, m) = (512usize, 13usize);
    for ty in [
        Type::Q4_0,
        Type::Q5_0,
        Type::Q8_0,
        Type::IQ4_NL,
        Type::Q2_K,
        Type::Q3_K,
        Type::Q4_K,
        Type::Q5_K,
        Type::Q6_K,
    ] {
        let (bytes, w) = quantized(ty, k, m, ty as u64 + 3);
        for n in [7usize, 8, 9, 16, 17, 64, 65] {
            let x = values(k * n, n as u64);
            let ctx = Context::init(4 << 20, false).unwrap();
            let a = ctx.new_tensor_2d(ty, k as i64, m as i64).unwrap();
            let b = ctx.new_tensor_2d(Type::F32, k as i64, n as i64).unwrap();
            a.set_bytes(&bytes, 0).unwrap();
            b.set_f32(&x).unwrap();
            let c = ctx.mul_mat(&a, &b).unwrap();
            cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
                .unwrap();
            let got = c.get_f32().unwrap();
            for j in 0..n {
                for i in 0..m {
                    let (want, scale) = (0..k).fold((0f64, 0f64), |(s, a), q| {
                        let p = w[i * k + q] as f64 * x[j * k + q] as f64;
                        (s + p, a + p.abs())
                    });
                    let g = got[j * m + i] as f64;
                    // the activations' 8-bit rounding: well within 2% of Σ|w·x|
                    assert!(
                        (g - want).abs() <= 0.02 * scale,
                        "{ty}, {n} columns, row {i}, column {j}: {g} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn get_rows_dequantizes_exactly() {
    let cpu = backend::cpu_init().unwrap();
    for ty in types() {
        let (k, rows) = (ty.blck_size(), 4usize);
        let (bytes, w) = quantized(ty, k, rows, 7 + ty as u64);
        let ctx = Context::init(1 << 20, false).unwrap();
        let a = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
        a.set_bytes(&bytes, 0).unwrap();
        let ids = ctx.new_tensor_1d(Type::I32, 4).unwrap();
        ids.set_i32(&[2, 0, 1, 3]).unwrap();
        let r = ctx.get_rows(&a, &ids).unwrap();
        cpu.graph_compute(&ctx.build_forward_expand(&r).unwrap())
            .unwrap();
        let got = r.get_f32().unwrap();
        let mut want = Vec::new();
        for i in [2, 0, 1, 3] {
            want.extend_from_slice(&w[i * k..(i + 1) * k]);
        }
        let same = got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(same, "{ty}: get_rows differs from dequantize_row");
        // An index past the rows fails the computation, naming it.
        ids.set_i32(&[2, 0, 9, 3]).unwrap();
        let e = cpu
            .graph_compute(&ctx.build_forward_expand(&r).unwrap())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("src1 index 9 at [2, 0, 0] is outside 0..4"),
            "{e}"
        );
    }
}

#[test]
fn quantized_types_without_dequantizer_are_refused_before_queueing() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_2d(Type::Q8_1, 32, 2).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 32, 2).unwrap();
    let c = ctx.mul_mat(&a, &b).unwrap();
    assert!(!cpu.get_device().supports_op(&c));
    let e = cpu
        .graph_compute_async(&ctx.build_forward_expand(&c).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("MUL_MAT") && e.contains("q8_1"), "{e}");
}

#[test]
fn cpy_quantizes_and_dequantizes_rows() {
    let cpu = backend::cpu_init().unwrap();
    let mut quantized_to = 0;
    for ty in Type::ALL.into_iter().filter(|t| t.is_quantized()) {
        let (k, rows) = (ty.blck_size() * 2, 3usize);
        let src = values(k * rows, 3 + ty as u64);
        let ctx = Context::init(1 << 20, false).unwrap();
        let a = ctx.new_tensor_2d(Type::F32, k as i64, rows as i64).unwrap();
        a.set_f32(&src).unwrap();
        let q = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
        let c = ctx.cpy(&a, &q).unwrap();
        if !quants::has_from_float_ref(ty) {
            assert!(!cpu.get_device().supports_op(&c), "{ty} has no from_float");
            continue;
        }
        quantized_to += 1;
        cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
            .unwrap();
        let mut want = vec![0u8; ty.row_size(k as i64).unwrap() * rows];
        quants::quantize_row_ref(ty, &src, &mut want).unwrap();
        assert_eq!(
            q.to_bytes().unwrap(),
            want,
            "{ty}: cpy bytes differ from quantize_row_ref"
        );

        if quants::has_to_float(ty) {
            let back = ctx.cast(&q, Type::F32).unwrap();
            cpu.graph_compute(&ctx.build_forward_expand(&back).unwrap())
                .unwrap();
            let mut deq = vec![0f32; k * rows];
            quants::dequantize_row(ty, &want, &mut deq).unwrap();
            assert_eq!(back.get_f32().unwrap(), deq, "{ty}: cast to f32");
        }
    }
    assert!(
        quantized_to >= 20,
        "only {quantized_to} types quantized by cpy"
    );
}

/// The quantized MUL_MAT (activations quantized once per node, chunks of rows × columns claimed
/// by the threads) gives bit for bit the same result on 1, 2 and 3 threads, for weights with
/// each dot type (Q8_0: Q4_0, Q5_0, Q8_0; Q8_1: Q4_1; Q8_K: Q4_K, Q6_K), F32 and F16
/// activations, more than one chunk of columns and rows, and weights broadcast over batches;
/// and stays near the f64 product of the dequantized weights.
#[test]
fn quantized_mul_mat_does_not_depend_on_the_thread_count() {
    let cpu = backend::cpu_init().unwrap();
    let (k, m, n, batches) = (512usize, 300usize, 70usize, 2usize);
    for ty in [
        Type::Q4_0,
        Type::Q5_0,
        Type::Q8_0,
        Type::Q4_1,
        Type::Q4_K,
        Type::Q6_K,
    ] {
        let (bytes, w) = quantized(ty, k, m, ty as u64 + 7);
        let x = values(k * n * batches, 5);
        for bty in [Type::F32, Type::F16] {
            let ctx = Context::init(8 << 20, false).unwrap();
            let a = ctx.new_tensor_2d(ty, k as i64, m as i64).unwrap();
            let b = ctx
                .new_tensor_3d(bty, k as i64, n as i64, batches as i64)
                .unwrap();
            a.set_bytes(&bytes, 0).unwrap();
            b.set_f32(&x).unwrap();
            let c = ctx.mul_mat(&a, &b).unwrap();
            let graph = ctx.build_forward_expand(&c).unwrap();
            let mut results = Vec::new();
            for threads in [1, 2, 3] {
                cpu.set_n_threads(threads).unwrap();
                cpu.graph_compute(&graph).unwrap();
                results.push(c.get_f32().unwrap());
            }
            for (t, r) in results.iter().enumerate().skip(1) {
                let same = r
                    .iter()
                    .zip(&results[0])
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{ty} × {bty}: {} threads differ from 1", t + 1);
            }
            let xb = b.get_f32().unwrap(); // as rounded to the activation type
            let (mut err, mut norm) = (0f64, 0f64);
            for j in 0..n * batches {
                for i in 0..m {
                    let want: f64 = (0..k)
                        .map(|q| w[i * k + q] as f64 * xb[j * k + q] as f64)
                        .sum();
                    err += (results[0][j * m + i] as f64 - want).powi(2);
                    norm += want * want;
                }
            }
            let nmse = err / norm;
            assert!(nmse <= 1e-4, "{ty} × {bty}: NMSE {nmse}");
        }
    }
}
