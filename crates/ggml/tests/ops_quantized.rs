//! MUL_MAT and GET_ROWS with quantized weights, for every type that has a dequantizer: the
//! reference is an f64 product over the dequantized weights (the dequantizers themselves are
//! held bit-exact to GGML by the quant fixtures).

mod common;

use common::{ggml_cpu_quantize, values};
use ggml::{backend, quants, Context, Tensor, Type};

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
        let want = ggml_cpu_quantize(ty, &src);
        assert_eq!(
            q.to_bytes().unwrap(),
            want,
            "{ty}: cpy bytes differ from GGML's CPU quantizer"
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

/// CPY and SET_ROWS into Q8_0 and Q8_1 from F32, F16 and BF16 round as GGML's x86 CPU does
/// (`v·(127/amax)` rounded half to even), not as the reference quantizer (`roundf(v/d)`):
/// blocks with amax 127 (scale 1) and values at halves give the levels GGML's CPU gives,
/// which differ from the reference's at each half with an even integer part
/// (test-backend-ops' CPY bf16→q8_0).
#[test]
fn cpy_and_set_rows_into_q8_round_as_ggml_cpu() {
    let cpu = backend::cpu_init().unwrap();
    let mut x: Vec<f32> = (0..64).map(|i| (i as f32 - 32.0) * 0.5).collect();
    x[0] = 127.0;
    x[40] = -127.0;
    for ty in [Type::Q8_0, Type::Q8_1] {
        let want = ggml_cpu_quantize(ty, &x);
        let mut reference = vec![0u8; want.len()];
        quants::quantize_row_ref(ty, &x, &mut reference).unwrap();
        // The levels of both blocks (after each block's F16 scale, and Q8_1's sum).
        let head = ty.type_size() - 32;
        let levels = |b: &[u8]| -> Vec<u8> {
            b.chunks(ty.type_size())
                .flat_map(|blk| blk[head..].to_vec())
                .collect()
        };
        let (w, r) = (levels(&want), levels(&reference));
        let differ = w.iter().zip(&r).filter(|(a, b)| a != b).count();
        // Half to even and half away differ at ±0.5, ±2.5, …, ±14.5: 8 levels per block.
        assert_eq!(differ, 16, "{ty}: levels where the two roundings differ");
        for src_ty in [Type::F32, Type::F16, Type::BF16] {
            let ctx = Context::init(1 << 20, false).unwrap();
            let a = ctx.new_tensor_2d(src_ty, 64, 1).unwrap();
            // Every value is exact in F16 and BF16.
            let cast = ctx.new_tensor_2d(Type::F32, 64, 1).unwrap();
            cast.set_f32(&x).unwrap();
            let a_in = ctx.cpy(&cast, &a).unwrap();
            let q = ctx.new_tensor_2d(ty, 64, 1).unwrap();
            let c = ctx.cpy(&a_in, &q).unwrap();
            cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
                .unwrap();
            assert_eq!(q.to_bytes().unwrap(), want, "CPY {src_ty} -> {ty}");

            let rows = ctx.new_tensor_2d(ty, 64, 3).unwrap();
            rows.set_bytes(&vec![0u8; want.len() * 3], 0).unwrap();
            let idx = ctx.new_tensor_1d(Type::I32, 1).unwrap();
            idx.set_bytes(&2i32.to_le_bytes(), 0).unwrap();
            let s = ctx.set_rows(&rows, &a_in, &idx).unwrap();
            cpu.graph_compute(&ctx.build_forward_expand(&s).unwrap())
                .unwrap();
            let got = rows.to_bytes().unwrap();
            assert_eq!(
                &got[2 * want.len()..],
                &want[..],
                "SET_ROWS {src_ty} -> {ty}"
            );
            assert!(
                got[..2 * want.len()].iter().all(|&b| b == 0),
                "other rows kept"
            );
        }
    }
}

/// A tensor of `ty` and shape `ne` holding arbitrary block bytes (a byte copy needs no valid
/// scales), and those bytes.
fn block_bytes(ctx: &Context, ty: Type, ne: &[i64], seed: u64) -> (Tensor, Vec<u8>) {
    let t = ctx.new_tensor(ty, ne).unwrap();
    let mut s = seed | 1;
    let bytes: Vec<u8> = (0..t.nbytes())
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u8
        })
        .collect();
    t.set_bytes(&bytes, 0).unwrap();
    (t, bytes)
}

/// The byte offset of block `b` (a flat index over `ne` with dimension 0 counted in blocks,
/// fastest first) in a tensor of strides `nb`.
fn block_offset(ty: Type, ne: [i64; 5], nb: [usize; 5], mut b: usize) -> usize {
    let mut off = 0;
    for d in 0..5 {
        let n = if d == 0 {
            ne[0] as usize / ty.blck_size()
        } else {
            ne[d] as usize
        };
        off += (b % n) * nb[d];
        b /= n;
    }
    off
}

/// CPY from a quantized type into the same type copies whole blocks in logical order, for
/// the layouts of test-backend-ops (source permuted, destination contiguous or permuted, so
/// equal and different shapes), and between shapes of other rows; bytes compared with an
/// index walk written here.
#[test]
fn cpy_between_equal_quantized_types_copies_blocks_in_logical_order() {
    let cpu = backend::cpu_init().unwrap();
    let perms: [([usize; 4], Option<[usize; 4]>); 4] = [
        ([0, 1, 2, 3], None),
        ([0, 2, 1, 3], None),
        ([0, 3, 1, 2], Some([0, 2, 1, 3])),
        ([0, 1, 3, 2], Some([0, 3, 2, 1])),
    ];
    let mut tested = 0;
    for ty in types() {
        tested += 1;
        let ne0 = 2 * ty.blck_size() as i64;
        for (i, (ps, pd)) in perms.iter().enumerate() {
            let ctx = Context::init(1 << 22, false).unwrap();
            let (base, bytes) = block_bytes(&ctx, ty, &[ne0, 2, 3, 4], 7 + i as u64);
            let a = ctx.permute(&base, ps[0], ps[1], ps[2], ps[3]).unwrap();
            let ane = a.ne();
            // test-backend-ops' destination: a new tensor of a's shape, perhaps permuted.
            let dst_base = ctx.new_tensor(ty, &ane[..4]).unwrap();
            let b = match pd {
                Some(p) => ctx.permute(&dst_base, p[0], p[1], p[2], p[3]).unwrap(),
                None => dst_base.clone(),
            };
            let c = ctx.cpy(&a, &b).unwrap();
            cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
                .unwrap();
            let got = dst_base.to_bytes().unwrap();
            let size = ty.type_size();
            let blocks = base.nbytes() / size;
            let mut want = vec![0u8; got.len()];
            for k in 0..blocks {
                let from = block_offset(ty, a.ne(), a.nb(), k);
                let to = block_offset(ty, b.ne(), b.nb(), k);
                want[to..to + size].copy_from_slice(&bytes[from..from + size]);
            }
            assert_eq!(got, want, "CPY {ty} permute_src {ps:?} permute_dst {pd:?}");
        }
    }
    assert!(tested >= 20, "only {tested} quantized types");
}

/// CONCAT of a quantized type along each dimension (one source a permuted view, rows still
/// packed) copies whole blocks: each result row is `a`'s row or `b`'s (dimensions 1 to 3),
/// or `a`'s blocks followed by `b`'s (dimension 0).
#[test]
fn concat_of_quantized_types_copies_blocks() {
    let cpu = backend::cpu_init().unwrap();
    for ty in [Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::IQ4_NL, Type::Q1_0] {
        let bs = ty.blck_size() as i64;
        for dim in 0..4 {
            let ctx = Context::init(1 << 22, false).unwrap();
            let ne_a = [2 * bs, 3, 2, 2];
            let mut ne_b = ne_a;
            ne_b[dim] = if dim == 0 { 3 * bs } else { 4 };
            let (a, ab) = block_bytes(&ctx, ty, &ne_a, 11 + dim as u64);
            // b stored with dimensions 1 and 2 swapped, and viewed back into ne_b.
            let (b_base, bb) = block_bytes(
                &ctx,
                ty,
                &[ne_b[0], ne_b[2], ne_b[1], ne_b[3]],
                21 + dim as u64,
            );
            let b = ctx.permute(&b_base, 0, 2, 1, 3).unwrap();
            assert_eq!(&b.ne()[..4], &ne_b[..]);
            let c = ctx.concat(&a, &b, dim).unwrap();
            cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
                .unwrap();
            let got = c.to_bytes().unwrap();
            let row = |t: &Tensor, bytes: &[u8], i: [usize; 3]| {
                let nb = t.nb();
                let off = i[0] * nb[1] + i[1] * nb[2] + i[2] * nb[3];
                bytes[off..off + ty.row_size(t.ne()[0]).unwrap()].to_vec()
            };
            let ne = c.ne();
            let mut want = Vec::new();
            for i3 in 0..ne[3] as usize {
                for i2 in 0..ne[2] as usize {
                    for i1 in 0..ne[1] as usize {
                        let i = [i1, i2, i3];
                        if dim == 0 {
                            want.extend(row(&a, &ab, i));
                            want.extend(row(&b, &bb, i));
                        } else if i[dim - 1] < ne_a[dim] as usize {
                            want.extend(row(&a, &ab, i));
                        } else {
                            let mut j = i;
                            j[dim - 1] -= ne_a[dim] as usize;
                            want.extend(row(&b, &bb, j));
                        }
                    }
                }
            }
            assert_eq!(got, want, "CONCAT {ty} dim {dim}");
        }
    }
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

/// Token generation's shapes (1 to 4 columns, where every thread quantizes the columns
/// itself and the 32-value types take four weight rows at a time on AVX2 and AVX-512): 13
/// weight rows (three groups of four and one left over) of an odd number of blocks, on 1 and 2
/// threads; each output bit for bit what a matrix of its row alone gives (so the four-row
/// kernels give the one-row kernel's bits), and near the f64 product of the dequantized
/// weights.
#[test]
fn matvec_rows_match_their_rows_alone() {
    let cpu = backend::cpu_init().unwrap();
    let m = 13usize;
    for ty in types() {
        let k = ty.blck_size() * if ty.blck_size() == 32 { 37 } else { 3 };
        let (bytes, w) = quantized(ty, k, m, ty as u64 + 11);
        let row_bytes = ty.row_size(k as i64).unwrap();
        for n in 1..=4usize {
            let x = values(k * n, 40 + n as u64);
            let product = |rows: usize, wbytes: &[u8], threads: usize| {
                let ctx = Context::init(4 << 20, false).unwrap();
                let a = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
                let b = ctx.new_tensor_2d(Type::F32, k as i64, n as i64).unwrap();
                a.set_bytes(wbytes, 0).unwrap();
                b.set_f32(&x).unwrap();
                let c = ctx.mul_mat(&a, &b).unwrap();
                cpu.set_n_threads(threads).unwrap();
                cpu.graph_compute(&ctx.build_forward_expand(&c).unwrap())
                    .unwrap();
                c.get_f32().unwrap()
            };
            for threads in [1, 2] {
                let got = product(m, &bytes, threads);
                for i in 0..m {
                    let alone = product(1, &bytes[i * row_bytes..(i + 1) * row_bytes], 1);
                    for j in 0..n {
                        let g = got[j * m + i];
                        assert_eq!(
                            g.to_bits(),
                            alone[j].to_bits(),
                            "{ty}, {n} columns, {threads} threads, row {i}, column {j}"
                        );
                        let (want, scale) = (0..k).fold((0f64, 0f64), |(s, a), q| {
                            let p = w[i * k + q] as f64 * x[j * k + q] as f64;
                            (s + p, a + p.abs())
                        });
                        assert!(
                            (g as f64 - want).abs() <= 0.02 * scale + 1e-6,
                            "{ty}, row {i}, column {j}: {g} vs {want}"
                        );
                    }
                }
            }
        }
    }
    cpu.set_n_threads(1).unwrap();
}
