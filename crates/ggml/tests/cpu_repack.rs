//! The CPU repack buffer type (GGML's `CPU_REPACK`): weights placed in it give MUL_MAT and
//! MUL_MAT_ID the same bits as in a normal CPU buffer, on every kernel path (the test runs
//! itself again under each `GGML_CPU_FORCE` value), for 1 to 64 columns and row counts that
//! leave remainders in every chunking; and it refuses what its layout cannot serve.

mod common;

use common::values;
use ggml::{backend, quants, Backend, Buffer, BufferType, Context, Tensor, Type};

/// The types with a repacked layout.
const LAYOUT_TYPES: [Type; 3] = [Type::Q4_0, Type::Q5_0, Type::IQ4_NL];

/// `rows` rows of `k` values quantized to `ty`.
fn quantized(ty: Type, k: usize, rows: usize, seed: u64) -> Vec<u8> {
    let src = values(k * rows, seed);
    let mut bytes = vec![0u8; ty.row_size(k as i64).unwrap() * rows];
    quants::quantize_chunk(ty, &src, &mut bytes, 0, rows, k, None).unwrap();
    bytes
}

/// A weight of type `ty` and shape `ne` in a buffer of `buft`, set to `bytes`.
fn weight(ty: Type, ne: &[i64], buft: &BufferType, bytes: &[u8]) -> (Context, Tensor, Buffer) {
    let ctx = Context::init(1 << 16, true).unwrap();
    let w = match ne.len() {
        2 => ctx.new_tensor_2d(ty, ne[0], ne[1]),
        _ => ctx.new_tensor_3d(ty, ne[0], ne[1], ne[2]),
    }
    .unwrap();
    w.set_name("w");
    let buf = backend::alloc_ctx_tensors_from_buft(&ctx, buft).unwrap();
    w.set_bytes(bytes, 0).unwrap();
    (ctx, w, buf)
}

/// The bits of `op(w, x)` computed on the CPU, with `x` of shape `[k, n, batch]` set to
/// `xs`.
fn compute(
    cpu: &Backend,
    w: &Tensor,
    x_ne: [i64; 3],
    xs: &[f32],
    op: &dyn Fn(&Context, &Tensor, &Tensor) -> Tensor,
) -> Vec<u32> {
    let ctx = Context::init(4 << 20, false).unwrap();
    let x = ctx
        .new_tensor_3d(Type::F32, x_ne[0], x_ne[1], x_ne[2])
        .unwrap();
    x.set_f32(xs).unwrap();
    let y = op(&ctx, w, &x);
    assert!(cpu.get_device().supports_op(&y), "{:?}", y.op());
    cpu.graph_compute(&ctx.build_forward_expand(&y).unwrap())
        .unwrap();
    y.get_f32().unwrap().iter().map(|v| v.to_bits()).collect()
}

/// Every check of the layouts on the path this process runs.
fn check_this_path() {
    let cpu = backend::cpu_init().unwrap();
    let repack = backend::cpu_repack_buffer_type();
    let host = backend::cpu_buffer_type();
    let mat: &dyn Fn(&Context, &Tensor, &Tensor) -> Tensor = &|c, w, x| c.mul_mat(w, x).unwrap();
    for ty in LAYOUT_TYPES {
        // 37 rows: remainders of the bands (8), tiles (16) and row chunks; k of 96 values
        // has an odd count of 32-value units (a single AMX unit at the end), 512 an even one.
        for (k, m) in [(96i64, 37i64), (512, 37)] {
            let bytes = quantized(ty, k as usize, m as usize, ty as u64 + k as u64);
            let (_c0, plain, _b0) = weight(ty, &[k, m], &host, &bytes);
            let (_c1, packed, _b1) = weight(ty, &[k, m], &repack, &bytes);
            for n in 1..=64i64 {
                let xs = values((k * n) as usize, n as u64);
                let want = compute(&cpu, &plain, [k, n, 1], &xs, mat);
                let got = compute(&cpu, &packed, [k, n, 1], &xs, mat);
                assert_eq!(got, want, "{ty} k {k}, {m} rows, {n} columns");
            }
        }
        // a stack of 3 matrices: MUL_MAT over batches, and MUL_MAT_ID choosing experts
        let (k, m, e) = (128i64, 19i64, 3i64);
        let bytes = quantized(ty, k as usize, (m * e) as usize, 7);
        let (_c0, plain, _b0) = weight(ty, &[k, m, e], &host, &bytes);
        let (_c1, packed, _b1) = weight(ty, &[k, m, e], &repack, &bytes);
        for n in [1i64, 9, 33] {
            let xs = values((k * n * e) as usize, 40 + n as u64);
            let want = compute(&cpu, &plain, [k, n, e], &xs, mat);
            assert_eq!(
                compute(&cpu, &packed, [k, n, e], &xs, mat),
                want,
                "{ty} batched, {n}"
            );
        }
        let moe: &dyn Fn(&Context, &Tensor, &Tensor) -> Tensor = &|c, w, x| {
            // x is [k, n_used = 1, tokens]; each token picks expert (token mod 3)
            let tokens = x.ne()[2];
            let ids = c.new_tensor_2d(Type::I32, 1, tokens).unwrap();
            let picks: Vec<i32> = (0..tokens as i32).map(|t| (t * 2 + 1) % 3).collect();
            ids.set_i32(&picks).unwrap();
            c.mul_mat_id(w, x, &ids).unwrap()
        };
        for tokens in [1i64, 6, 20] {
            let xs = values((k * tokens) as usize, 90 + tokens as u64);
            let want = compute(&cpu, &plain, [k, 1, tokens], &xs, moe);
            let got = compute(&cpu, &packed, [k, 1, tokens], &xs, moe);
            assert_eq!(got, want, "{ty} MUL_MAT_ID, {tokens} tokens");
        }
    }
}

/// The paths `GGML_CPU_FORCE` names (a path the CPU lacks runs its best one instead).
const PATHS: [&str; 4] = ["scalar", "avx2", "avx512", "amx"];

#[test]
fn repacked_weights_give_the_same_bits_on_every_path() {
    if std::env::var_os("GGML_CPU_FORCE").is_some() {
        check_this_path();
        return;
    }
    check_this_path();
    let exe = std::env::current_exe().unwrap();
    for path in PATHS {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "repacked_weights_give_the_same_bits_on_every_path",
                "--test-threads=1",
            ])
            .env("GGML_CPU_FORCE", path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "GGML_CPU_FORCE={path}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("1 passed"), "GGML_CPU_FORCE={path}: {said}");
    }
}

#[test]
fn the_cpu_lists_the_repack_type_among_its_extra_buffer_types() {
    let cpu = backend::cpu_init().unwrap();
    let dev = cpu.get_device();
    let extra = dev.get_extra_bufts();
    assert_eq!(extra, vec![backend::cpu_repack_buffer_type()]);
    let repack = &extra[0];
    assert_eq!(repack.name(), "CPU_REPACK");
    assert!(!repack.is_host());
    assert_eq!(repack.get_alignment(), 32);
    assert!(dev.supports_buft(repack));
    // a Q5_0 weight takes 34 bytes per 32 values there (its levels as bytes), 22 elsewhere
    let ctx = Context::init(1 << 12, true).unwrap();
    let w = ctx.new_tensor_2d(Type::Q5_0, 256, 4).unwrap();
    assert_eq!(backend::cpu_buffer_type().get_alloc_size(&w), 4 * 8 * 22);
    assert_eq!(repack.get_alloc_size(&w), 4 * 8 * 34);
}

/// A Q5_0 weight of 64 × 4 in a repack buffer, set.
fn repacked_q5_0() -> (Context, Tensor, Buffer) {
    let bytes = quantized(Type::Q5_0, 64, 4, 3);
    weight(
        Type::Q5_0,
        &[64, 4],
        &backend::cpu_repack_buffer_type(),
        &bytes,
    )
}

#[test]
fn a_repacked_weight_cannot_be_read_back() {
    let (_ctx, w, _buf) = repacked_q5_0();
    let mut out = vec![0u8; w.nbytes()];
    let err = w.get_bytes(&mut out, 0).unwrap_err().to_string();
    assert!(err.contains("CPU_REPACK buffer"), "{err}");
    assert!(err.contains("get_tensor"), "{err}");
    assert!(err.contains("\"w\""), "{err}");
    let err = backend::tensor_memset(&w, 0, 0, 22)
        .unwrap_err()
        .to_string();
    assert!(err.contains("CPU_REPACK buffer"), "{err}");
}

#[test]
fn a_partial_write_of_a_repacked_weight_is_refused() {
    let (_ctx, w, _buf) = repacked_q5_0();
    let row = quantized(Type::Q5_0, 64, 1, 5);
    let err = w.set_bytes(&row, 0).unwrap_err().to_string();
    assert!(err.contains("CPU_REPACK buffer"), "{err}");
    assert!(err.contains("44 bytes at offset 0"), "{err}");
    let err = w.set_bytes(&row, 44).unwrap_err().to_string();
    assert!(err.contains("at offset 44"), "{err}");
}

#[test]
fn ops_other_than_mul_mat_cannot_read_a_repacked_weight() {
    let (_wctx, w, _buf) = repacked_q5_0();
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let rows = ctx.new_tensor_1d(Type::I32, 2).unwrap();
    rows.set_i32(&[0, 3]).unwrap();
    let got = ctx.get_rows(&w, &rows).unwrap();
    assert!(!cpu.get_device().supports_op(&got));
    let err = cpu
        .graph_compute(&ctx.build_forward_expand(&got).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("GET_ROWS"), "{err}");
    assert!(err.contains("not supported"), "{err}");
    // MUL_MAT with F16 activations (which the weight takes in a CPU buffer) is refused too
    let x = ctx.new_tensor_2d(Type::F16, 64, 4).unwrap();
    let t = ctx.mul_mat(&w, &x).unwrap();
    assert!(!cpu.get_device().supports_op(&t));
    let x = ctx.new_tensor_2d(Type::F32, 64, 4).unwrap();
    assert!(cpu.get_device().supports_op(&ctx.mul_mat(&w, &x).unwrap()));
}

#[test]
fn types_without_a_layout_are_refused_by_the_buffer() {
    for (ty, ne) in [(Type::Q4_K, [256i64, 4]), (Type::F32, [8, 4])] {
        let ctx = Context::init(1 << 12, true).unwrap();
        let t = ctx.new_tensor_2d(ty, ne[0], ne[1]).unwrap();
        t.set_name("t");
        let err = backend::alloc_ctx_tensors_from_buft(&ctx, &backend::cpu_repack_buffer_type())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no repacked layout"), "{ty}: {err}");
        assert!(err.contains("\"t\""), "{ty}: {err}");
    }
}
