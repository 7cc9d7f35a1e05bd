//! The wgpu device through ggml's public API: registry, memory, asynchronous work, events.

mod common;

use ggml::{backend, Context, DeviceType, Event, Type};

#[test]
fn each_adapter_is_a_registered_device_with_device_memory() {
    let Some(dev) = common::device() else {
        return;
    };
    assert!(dev.name().starts_with("WGPU"), "{}", dev.name());
    assert_eq!(backend::dev_by_name(&dev.name()), Some(dev.clone()));
    assert!(matches!(dev.dev_type(), DeviceType::Gpu | DeviceType::Igpu));
    assert!(dev.description().len() > 3, "{}", dev.description());
    let buft = dev.buffer_type();
    assert_eq!(buft.name(), dev.name());
    assert!(!buft.is_host());
    assert_eq!(buft.get_alignment(), ggml_wgpu::ALIGNMENT);
    let buf = buft.alloc_buffer(100).unwrap();
    assert_eq!(buf.get_size(), 100);
    assert!(
        buf.get_base().is_none(),
        "device memory has no host address"
    );
    assert!(dev.init(Some("x")).is_err());
    let f16 = dev.features().into_iter().find(|(k, _)| k == "SHADER_F16");
    let f16 = f16.map(|(_, v)| v).unwrap_or_default();
    eprintln!("{}: SHADER_F16 used: {f16}", dev.name());
    if std::env::var_os(ggml_wgpu::DISABLE_F16_ENV).is_some() {
        assert_eq!(f16, "0", "{} is set", ggml_wgpu::DISABLE_F16_ENV);
    } else {
        assert!(f16 == "0" || f16 == "1", "{f16:?}");
    }
    let too_big = buft.get_max_size() + 1;
    let e = buft.alloc_buffer(too_big).unwrap_err().to_string();
    assert!(e.contains(&too_big.to_string()), "{e}");
}

#[test]
fn the_device_reports_its_memory_and_what_its_buffers_take_of_it() {
    let Some(dev) = common::device() else {
        return;
    };
    let (free, total) = dev.memory();
    let backend = dev.features().into_iter().find(|(k, _)| k == "BACKEND");
    let backend = backend.map(|(_, v)| v).unwrap_or_default();
    eprintln!("{} ({backend}): {free} free of {total}", dev.name());
    if backend != "Vulkan" {
        // No memory query outside Vulkan: unknown.
        assert_eq!((free, total), (0, 0));
        return;
    }
    assert!(total > 0 && free <= total, "{free} free of {total}");
    let buft = dev.buffer_type();
    let size = (64usize << 20).min(buft.get_max_size());
    let buf = buft.alloc_buffer(size).unwrap();
    let (held, total_held) = dev.memory();
    // Other tests allocate small buffers on the same device meanwhile.
    const SLACK: usize = 1 << 20;
    let source = dev.features().into_iter().find(|(k, _)| k == "MEMORY");
    eprintln!("with a buffer of {size}: {held} free ({source:?})");
    assert_eq!(total_held, total);
    assert!(
        held + size <= free + SLACK,
        "{held} free with {size} allocated, {free} before"
    );
    drop(buf);
    let (after, _) = dev.memory();
    assert!(
        after + SLACK >= held + size,
        "{after} free after the buffer, {held} with it"
    );
}

#[test]
fn bytes_round_trip_at_any_offset_and_length() {
    let Some(dev) = common::device() else {
        return;
    };
    let stream = dev.init(None).unwrap();
    let ctx = Context::init(1 << 16, true).unwrap();
    let t = ctx.new_tensor_1d(Type::I8, 37).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
    let mut want: Vec<u8> = (0..37u8).map(|i| i.wrapping_mul(7) ^ 0x5a).collect();
    t.set_bytes(&want, 0).unwrap();
    // Writes that start and end inside 4-byte words keep their neighbours.
    for (at, data) in [
        (5usize, &[1u8, 2, 3][..]),
        (34, &[9, 9, 9]),
        (1, &[4]),
        (8, &[6; 8]),
    ] {
        t.set_bytes(data, at).unwrap();
        want[at..at + data.len()].copy_from_slice(data);
    }
    assert_eq!(t.to_bytes().unwrap(), want);
    let mut part = [0u8; 5];
    t.get_bytes(&mut part, 3).unwrap();
    assert_eq!(part, want[3..8]);
    t.buffer().unwrap().clear(0xab).unwrap();
    assert_eq!(t.to_bytes().unwrap(), vec![0xab; 37]);
}

#[test]
fn asynchronous_work_is_ordered_on_the_queue_and_events_mark_it() {
    let Some(dev) = common::device() else {
        return;
    };
    let stream = dev.init(None).unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 1000).unwrap();
    let b = ctx.new_tensor_1d(Type::F32, 1000).unwrap();
    let sum = ctx.add(&a, &b).unwrap();
    let out = ctx.relu(&sum).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
    let xs: Vec<f32> = (0..1000).map(|i| i as f32 - 500.0).collect();
    let ys: Vec<f32> = (0..1000).map(|i| (i % 7) as f32).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    stream.tensor_set_async(&a, bytes(&xs), 0).unwrap();
    stream.tensor_set_async(&b, bytes(&ys), 0).unwrap();
    stream.graph_compute_async(&graph).unwrap();
    let pending = stream.tensor_get_async(&out, 0, 4000).unwrap();
    let ev = Event::new(&dev).unwrap();
    ev.record(&stream).unwrap();
    ev.synchronize().unwrap();
    assert!(ev.is_signalled());
    let got: Vec<f32> = (pending.wait().unwrap().chunks_exact(4))
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| (x + y).max(0.0)).collect();
    assert_eq!(got, want);
    // A second stream of the device waits for the first one's event on the queue.
    let other = dev.init(None).unwrap();
    a.set_f32(&ys).unwrap();
    stream.graph_compute_async(&graph).unwrap();
    ev.record(&stream).unwrap();
    other.event_wait(&ev).unwrap();
    let pending = other.tensor_get_async(&out, 0, 8).unwrap();
    other.synchronize().unwrap();
    let first = pending.wait().unwrap();
    assert_eq!(first[..4], (2.0 * ys[0]).to_le_bytes());
    assert_eq!(first[4..], (2.0 * ys[1]).to_le_bytes());
}

#[test]
fn copies_between_device_buffers_stay_on_the_device() {
    let Some(dev) = common::device() else {
        return;
    };
    let stream = dev.init(None).unwrap();
    let (c1, c2) = (
        Context::init(1 << 16, true).unwrap(),
        Context::init(1 << 16, true).unwrap(),
    );
    let src = c1.new_tensor_1d(Type::F32, 64).unwrap();
    let dst = c2.new_tensor_1d(Type::F32, 64).unwrap();
    let _b1 = backend::alloc_ctx_tensors(&c1, &stream).unwrap();
    let _b2 = backend::alloc_ctx_tensors(&c2, &stream).unwrap();
    let vals: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
    src.set_f32(&vals).unwrap();
    backend::tensor_copy(&src, &dst).unwrap();
    assert_eq!(dst.get_f32().unwrap(), vals);
    src.set_f32(&[0.0; 64]).unwrap();
    backend::tensor_copy_async(&stream, &stream, &dst, &src).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(src.get_f32().unwrap(), vals);
}

/// A stream on the wgpu device and the CPU's, or `None` without an adapter.
fn gpu_and_cpu() -> Option<(ggml::Backend, ggml::Backend)> {
    let gpu = common::device()?.init(None).unwrap();
    Some((gpu, backend::cpu_init().unwrap()))
}

/// As [`gpu_and_cpu`], for the tests that hold the device to the CPU's bits: `None` (after
/// saying why) where the device does not compute in f64 (no `SHADER_F64`, or
/// `GGML_WGPU_DISABLE_F64`), whose fused multiply-adds and functions are close, not the CPU's.
fn gpu_and_cpu_in_f64() -> Option<(ggml::Backend, ggml::Backend)> {
    let dev = common::device()?;
    let f64 = dev
        .features()
        .iter()
        .any(|(k, v)| k == "SHADER_F64" && v == "1");
    if !f64 {
        eprintln!("SKIPPED: the device does not compute in f64 (SHADER_F64)");
        return None;
    }
    Some((dev.init(None).unwrap(), backend::cpu_init().unwrap()))
}

/// Pseudo-random values in [-0.5, 0.5) from `seed`.
fn lcg(seed: u32) -> impl FnMut() -> f32 {
    let mut state = seed;
    move || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
    }
}

/// The quantized types the device writes (CPY, SET_ROWS).
const QUANTIZED_RESULTS: [Type; 6] = [
    Type::Q4_0,
    Type::Q4_1,
    Type::Q5_0,
    Type::Q5_1,
    Type::Q8_0,
    Type::IQ4_NL,
];

/// The bytes of `t`.
fn bytes_of(t: &ggml::Tensor) -> Vec<u8> {
    let mut bytes = vec![0u8; t.nbytes()];
    t.get_bytes(&mut bytes, 0).unwrap();
    bytes
}

/// The normalised mean squared error of `g` against `c`.
fn nmse(g: &[f32], c: &[f32]) -> f64 {
    let err: f64 = g
        .iter()
        .zip(c)
        .map(|(&a, &b)| f64::from(a - b).powi(2))
        .sum();
    err / c.iter().map(|&b| f64::from(b).powi(2)).sum::<f64>()
}

/// Holds the device's outputs `g` to the CPU's `c`: bit for bit where the device follows the
/// CPU's float order ([`ggml_wgpu::follows_the_cpus_order`]: the CPU on its AVX-512 path), else
/// (the CPU's AVX2 or portable path, whose orders the shaders do not reproduce) to rounding:
/// NMSE below 1e-7 (the F16 roundings of flash attention's accumulator make most of it).
/// `what` names the case.
fn assert_cpus_results(g: &[f32], c: &[f32], what: &str) {
    assert_eq!(g.len(), c.len(), "{what}");
    let differ = (g.iter().zip(c))
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    let e = nmse(g, c);
    eprintln!(
        "{what}: {} of {} outputs the CPU's bits, NMSE {e:.3e}",
        c.len() - differ,
        c.len()
    );
    if ggml_wgpu::follows_the_cpus_order() {
        assert_eq!(
            differ,
            0,
            "{what}: {differ} of {} outputs differ from the CPU's bits (first: {:?})",
            c.len(),
            g.iter().zip(c).find(|(a, b)| a.to_bits() != b.to_bits())
        );
    } else {
        assert!(e < 1e-7, "{what}: NMSE {e:.3e} against the CPU's results");
    }
}

/// MUL_MAT of `w` (`k × rows`, quantized to `ty`) by `x` (`k × cols`) on `stream`.
fn mul_mat_on(stream: &ggml::Backend, ty: Type, w: &[f32], x: &[f32], k: usize) -> Vec<f32> {
    let (rows, cols) = (w.len() / k, x.len() / k);
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, k as i64, cols as i64).unwrap();
    let out = ctx.mul_mat(&a, &b).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, stream).unwrap();
    let mut q = vec![0u8; ty.row_size(k as i64).unwrap() * rows];
    ggml::quantize_chunk(ty, w, &mut q, 0, rows, k, None).unwrap();
    a.set_bytes(&q, 0).unwrap();
    b.set_f32(x).unwrap();
    stream.graph_compute(&graph).unwrap();
    out.get_f32().unwrap()
}

#[test]
fn quantized_products_round_activations_as_the_cpu_does() {
    let Some((gpu, cpu)) = gpu_and_cpu() else {
        return;
    };
    let k = 512;
    let mut values = lcg(12345);
    let w: Vec<f32> = (0..k * 16).map(|_| values()).collect();
    let x: Vec<f32> = (0..k * 3).map(|_| 40.0 * values()).collect();
    for ty in [
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Q8_0,
        Type::IQ4_NL,
        Type::Q2_K,
        Type::Q3_K,
        Type::Q4_K,
        Type::Q5_K,
        Type::Q6_K,
        Type::IQ4_XS,
        // No integer dots on the CPU: f32 products of the dequantized weights on both.
        Type::TQ1_0,
        Type::TQ2_0,
        Type::Q1_0,
        Type::Q2_0,
        Type::MXFP4,
        Type::NVFP4,
    ] {
        let (g, c) = (
            mul_mat_on(&gpu, ty, &w, &x, k),
            mul_mat_on(&cpu, ty, &w, &x, k),
        );
        let e = nmse(&g, &c);
        // Without the activations' 8-bit rounding the difference is ~1e-5 (NMSE); with it,
        // only the order of the sums differs, and for Q4_1 the f16 rounding of Q8_1's block
        // sums, which the CPU multiplies by the weights' minimums.
        eprintln!("{ty}: NMSE {:.3e} against the CPU", e);
        assert!(e < 1e-6, "{ty}: NMSE {:.3e} against the CPU", e);
    }
}

/// MUL_MAT with the weight types whose CPU kernels follow GGML's x86 float order (Gemma 3
/// 270M's Q5_0, Q8_0, Q4_K, Q6_K, at its row lengths, and Q4_0, IQ4_NL) gives the CPU's bits
/// for every output, with 1 to 7 columns (GGML's row dots) and 8 or more (its tiled and
/// tinyBLAS products, which for the k-quants take other f32 steps).
#[test]
fn quantized_products_give_the_cpus_bits() {
    let Some((gpu, cpu)) = gpu_and_cpu_in_f64() else {
        return;
    };
    let mut values = lcg(4242);
    let rows = 24;
    for (ty, k) in [
        (Type::Q5_0, 640),
        (Type::Q8_0, 640),
        (Type::Q4_0, 1024),
        (Type::IQ4_NL, 640),
        (Type::Q4_K, 1024),
        (Type::Q6_K, 2048),
    ] {
        let w: Vec<f32> = (0..k * rows).map(|_| values()).collect();
        for cols in [1, 3, 7, 8, 20] {
            let x: Vec<f32> = (0..k * cols).map(|_| 6.0 * values()).collect();
            let (g, c) = (
                mul_mat_on(&gpu, ty, &w, &x, k),
                mul_mat_on(&cpu, ty, &w, &x, k),
            );
            assert_cpus_results(&g, &c, &format!("{ty}, k {k}, {cols} columns"));
        }
    }
}

/// EXP (the device's `exp_`, which FLASH_ATTN_EXT's exponentials are) gives the C library's
/// `expf` bit for bit (the CPU's `f32::exp`: glibc's FMA build on Linux): every 61st f32 from
/// 0 down to −104 (18.4M values, past where `expf` underflows), every f32 within 2^12 of
/// each of `expf`'s thresholds and of the subnormal results' edge, every 997th positive f32
/// up to past overflow, zeros, subnormal inputs, ±∞ and NaN (every f32 of [−104, 0] with
/// `GGML_WGPU_EXP_STRIDE=1`: 0 of 1.12e9 differ on lavapipe).
#[test]
fn exp_gives_the_c_librarys_expf_bit_for_bit() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let Some((gpu, _)) = gpu_and_cpu_in_f64() else {
        return;
    };
    let edges = [
        0xc2cf_f1b4u32,
        0xc2ce_8ecf,
        0xc2ae_ac50,
        0x42b1_7217,
        0xb300_0000,
    ]
    .into_iter()
    .flat_map(|b| b - 4096..b + 4096);
    let special = [
        0u32,
        1,
        0x8000_0001,
        0x807f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
    ];
    // `GGML_WGPU_EXP_STRIDE=1` takes every f32 of [-104, 0] (1.1e9 values).
    let stride = std::env::var("GGML_WGPU_EXP_STRIDE").map_or(61, |v| v.parse().unwrap());
    let mut xs = (0x8000_0000u32..0xc2d0_0000)
        .step_by(stride)
        .chain((0..0x42b2_0000).step_by(997))
        .chain(edges)
        .chain(special)
        .map(f32::from_bits);
    let (mut differ, mut first, mut total) = (0usize, None, 0usize);
    loop {
        let chunk: Vec<f32> = xs.by_ref().take(1 << 22).collect();
        if chunk.is_empty() {
            break;
        }
        total += chunk.len();
        let n = chunk.len() as i64;
        let got = gemma_op_on(&gpu, &[&[n]], &[Data::F32(&chunk)], &|c, t| {
            c.unary(&t[0], ggml::ops::UnaryOp::Exp).unwrap()
        });
        for (&x, g) in chunk.iter().zip(got) {
            let want = x.exp();
            if g.to_bits() != want.to_bits() && !(g.is_nan() && want.is_nan()) {
                differ += 1;
                first.get_or_insert((x, g, want));
            }
        }
    }
    eprintln!("EXP: {differ} of {total} values differ from expf");
    assert_eq!(differ, 0, "first (x, device, expf): {first:?}");
}

/// An operand of [`gemma_op_on`]: F32 values, I32 values (positions) or F16 values.
enum Data<'a> {
    F32(&'a [f32]),
    I32(&'a [i32]),
    F16(&'a [f32]),
}

/// The result (as f32) of the op `build` makes of tensors of `shapes` (type by `data`) holding
/// `data`, on `stream`.
fn gemma_op_on(
    stream: &ggml::Backend,
    shapes: &[&[i64]],
    data: &[Data<'_>],
    build: &dyn Fn(&Context, &[ggml::Tensor]) -> ggml::Tensor,
) -> Vec<f32> {
    let ctx = Context::init(1 << 20, true).unwrap();
    let ins: Vec<ggml::Tensor> = shapes
        .iter()
        .zip(data)
        .map(|(ne, d)| {
            let ty = match d {
                Data::F32(_) => Type::F32,
                Data::I32(_) => Type::I32,
                Data::F16(_) => Type::F16,
            };
            ctx.new_tensor(ty, ne).unwrap()
        })
        .collect();
    let out = build(&ctx, &ins);
    let graph = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, stream).unwrap();
    for (t, d) in ins.iter().zip(data) {
        match d {
            Data::F32(v) => t.set_f32(v).unwrap(),
            Data::I32(v) => t.set_i32(v).unwrap(),
            Data::F16(v) => {
                let bytes: Vec<u8> = v
                    .iter()
                    .flat_map(|&x| ggml::f16::from_f32(x).to_le_bytes())
                    .collect();
                t.set_bytes(&bytes, 0).unwrap();
            }
        }
    }
    stream.graph_compute(&graph).unwrap();
    out.get_f32().unwrap()
}

/// Asserts that the op `build` makes gives the CPU's results on `gpu` ([`assert_cpus_results`]:
/// its bits where the device follows the CPU's order); `what` names the case.
fn same_results(
    gpu: &ggml::Backend,
    cpu: &ggml::Backend,
    shapes: &[&[i64]],
    data: &[Data<'_>],
    build: &dyn Fn(&Context, &[ggml::Tensor]) -> ggml::Tensor,
    what: String,
) {
    let g = gemma_op_on(gpu, shapes, data, build);
    let c = gemma_op_on(cpu, shapes, data, build);
    assert_cpus_results(&g, &c, &what);
}

/// A mask of `rows` rows of `n_kv`: 0, or −∞ past `diag` keys beyond the row's index.
fn masked_past(n_kv: usize, rows: usize, diag: usize) -> Vec<f32> {
    (0..n_kv * rows)
        .map(|i| {
            if i % n_kv > diag + i / n_kv {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect()
}

/// Gemma's FLASH_ATTN_EXT (scale 1/16, F32 precision) of q, k, v and mask `t[0..4]`.
fn gemma_attention(c: &Context, t: &[ggml::Tensor]) -> ggml::Tensor {
    let o = (c.flash_attn_ext(&t[0], &t[1], &t[2], Some(&t[3]), 1.0 / 16.0, 0.0, 0.0)).unwrap();
    o.flash_attn_ext_set_prec(ggml::ops::Prec::F32).unwrap();
    o
}

/// The ops of Gemma 3 270M's layers besides MUL_MAT, at its shapes (7 tokens): RMS_NORM
/// (rows of 640 and per-head rows of 256), ROPE NEOX (256 dimensions, both of its bases, at
/// positions up to 225), GEGLU and FLASH_ATTN_EXT (F16 K and V, F16 mask: the CPU's rows path)
/// give the CPU's bits for every output; ROPE past the host's table of angles (positions from
/// 4096) at least 97% of them (7077 of 7168 on lavapipe, NMSE 7e-17).
#[test]
fn gemma_layer_ops_give_the_cpus_bits() {
    let Some((gpu, cpu)) = gpu_and_cpu_in_f64() else {
        return;
    };
    let mut values = lcg(99);
    const NT: i64 = 7;
    const NKV: i64 = 32;
    let nt = NT as usize;
    let x640: Vec<f32> = (0..640 * nt).map(|_| 8.0 * values()).collect();
    let x256: Vec<f32> = (0..256 * 4 * nt).map(|_| 4.0 * values()).collect();
    let pos: Vec<i32> = (0..nt as i32).map(|i| 3 + 37 * i).collect();
    let gate: Vec<f32> = (0..2048 * nt).map(|_| 10.0 * values()).collect();
    let up: Vec<f32> = (0..2048 * nt).map(|_| 4.0 * values()).collect();
    let n_kv = NKV as usize;
    let kv: Vec<f32> = (0..256 * n_kv).map(|_| 2.0 * values()).collect();
    let vv: Vec<f32> = (0..256 * n_kv).map(|_| 2.0 * values()).collect();
    let mask = masked_past(n_kv, 8, 20);
    let rope = |base: f32| {
        move |c: &Context, t: &[ggml::Tensor]| {
            c.rope_ext(
                &t[0],
                &t[1],
                None,
                256,
                ggml::ROPE_TYPE_NEOX,
                32768,
                base,
                1.0,
                0.0,
                1.0,
                32.0,
                1.0,
            )
            .unwrap()
        }
    };
    let (rope_local, rope_global) = (rope(10_000.0), rope(1_000_000.0));
    type Build<'a> = &'a dyn Fn(&Context, &[ggml::Tensor]) -> ggml::Tensor;
    type Case<'a> = (&'a str, Vec<&'a [i64]>, Vec<Data<'a>>, Build<'a>);
    let cases: [Case<'_>; 6] = [
        (
            "RMS_NORM 640",
            vec![&[640, NT]],
            vec![Data::F32(&x640)],
            &|c, t| c.rms_norm(&t[0], 1e-6).unwrap(),
        ),
        (
            "RMS_NORM 256 per head",
            vec![&[256, 4, NT]],
            vec![Data::F32(&x256)],
            &|c, t| c.rms_norm(&t[0], 1e-6).unwrap(),
        ),
        (
            "ROPE NEOX base 1e4",
            vec![&[256, 4, NT], &[NT]],
            vec![Data::F32(&x256), Data::I32(&pos)],
            &rope_local,
        ),
        (
            "ROPE NEOX base 1e6",
            vec![&[256, 4, NT], &[NT]],
            vec![Data::F32(&x256), Data::I32(&pos)],
            &rope_global,
        ),
        (
            "GEGLU",
            vec![&[2048, NT], &[2048, NT]],
            vec![Data::F32(&gate), Data::F32(&up)],
            &|c, t| c.glu_split(&t[0], &t[1], ggml::ops::GluOp::Geglu).unwrap(),
        ),
        (
            "FLASH_ATTN_EXT",
            vec![&[256, NT, 4], &[256, NKV, 1], &[256, NKV, 1], &[NKV, 8]],
            vec![
                Data::F32(&x256),
                Data::F16(&kv),
                Data::F16(&vv),
                Data::F16(&mask),
            ],
            &gemma_attention,
        ),
    ];
    for (name, shapes, data, build) in cases {
        let g = gemma_op_on(&gpu, &shapes, &data, build);
        let c = gemma_op_on(&cpu, &shapes, &data, build);
        assert_cpus_results(&g, &c, name);
    }
    // Past the host's table of angles (4096 positions) the device computes them, rounded from
    // f64, where the C library's cosf/sinf differ by an ulp at about 2% of the angles.
    let far: Vec<i32> = (0..NT as i32).map(|i| 4090 + 1000 * i).collect();
    let data = [Data::F32(&x256), Data::I32(&far)];
    let shapes: [&[i64]; 2] = [&[256, 4, NT], &[NT]];
    let (g, c) = (
        gemma_op_on(&gpu, &shapes, &data, &rope_local),
        gemma_op_on(&cpu, &shapes, &data, &rope_local),
    );
    let same = g.iter().zip(&c).filter(|(a, b)| a == b).count();
    let e = nmse(&g, &c);
    eprintln!(
        "ROPE NEOX past the table: {same} of {} equal, NMSE {:.3e}",
        c.len(),
        e
    );
    assert!(same * 100 >= c.len() * 97 && e < 1e-15);
}

/// The bytes of `x` (`k × rows`, F32, read through a transposed view when `transposed`) copied
/// into a tensor of `ty` on `stream`.
fn quantized_on(
    stream: &ggml::Backend,
    ty: Type,
    x: &[f32],
    k: usize,
    transposed: bool,
) -> Vec<u8> {
    let rows = x.len() / k;
    let ctx = Context::init(1 << 20, true).unwrap();
    let (n0, n1) = if transposed { (rows, k) } else { (k, rows) };
    let a = ctx.new_tensor_2d(Type::F32, n0 as i64, n1 as i64).unwrap();
    let src = if transposed {
        ctx.transpose(&a).unwrap()
    } else {
        a.clone()
    };
    let dst = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
    let out = ctx.cpy(&src, &dst).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, stream).unwrap();
    a.set_f32(x).unwrap();
    stream.graph_compute(&graph).unwrap();
    bytes_of(&dst)
}

#[test]
fn copies_into_quantized_types_round_as_the_cpu_does() {
    let Some((gpu, cpu)) = gpu_and_cpu() else {
        return;
    };
    let (k, rows) = (96, 5);
    let mut values = lcg(777);
    let mut x: Vec<f32> = (0..k * rows).map(|_| 30.0 * values()).collect();
    // A block of zeros and one of equal values (scale 0, the minimum's own block).
    x[32..64].fill(0.0);
    x[64..96].fill(2.5);
    for ty in QUANTIZED_RESULTS {
        for transposed in [false, true] {
            let (g, c) = (
                quantized_on(&gpu, ty, &x, k, transposed),
                quantized_on(&cpu, ty, &x, k, transposed),
            );
            // GGML's IQ4_NL reference leaves an all-zero block (scale 0) with the previous
            // block's indices; the device writes index 0 there: the values are the same (0).
            let size = ty.type_size();
            let zero_scale = |b: &[u8]| ty == Type::IQ4_NL && b[..2] == [0, 0];
            let bad = (g.chunks_exact(size).zip(c.chunks_exact(size)))
                .filter(|(a, b)| a != b && !(zero_scale(a) && zero_scale(b)))
                .count();
            assert_eq!(
                bad, 0,
                "{ty} (transposed {transposed}): {bad} blocks differ"
            );
        }
    }
}

/// SET_ROWS of the rows of `x` (`k × n`, F32) into rows `idx` of a tensor of `ty` with `rows`
/// rows whose blocks start as `init`, on `stream`; the result's bytes.
fn set_rows_on(
    stream: &ggml::Backend,
    ty: Type,
    init: &[u8],
    x: &[f32],
    idx: &[i32],
    k: usize,
) -> Vec<u8> {
    let rows = init.len() / ty.row_size(k as i64).unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let dst = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
    let src = ctx
        .new_tensor_2d(Type::F32, k as i64, idx.len() as i64)
        .unwrap();
    let ids = ctx.new_tensor_1d(Type::I32, idx.len() as i64).unwrap();
    let out = ctx.set_rows(&dst, &src, &ids).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, stream).unwrap();
    dst.set_bytes(init, 0).unwrap();
    src.set_f32(x).unwrap();
    ids.set_i32(idx).unwrap();
    stream.graph_compute(&graph).unwrap();
    bytes_of(&out)
}

#[test]
fn set_rows_into_quantized_types_writes_the_cpus_blocks() {
    let Some((gpu, cpu)) = gpu_and_cpu() else {
        return;
    };
    let (k, rows) = (96, 7);
    let mut values = lcg(99);
    let old: Vec<f32> = (0..k * rows).map(|_| 8.0 * values()).collect();
    let x: Vec<f32> = (0..k * 3).map(|_| 8.0 * values()).collect();
    let idx = [5, 0, 2];
    for ty in QUANTIZED_RESULTS {
        let mut init = vec![0u8; ty.row_size(k as i64).unwrap() * rows];
        ggml::quantize_chunk(ty, &old, &mut init, 0, rows, k, None).unwrap();
        let (g, c) = (
            set_rows_on(&gpu, ty, &init, &x, &idx, k),
            set_rows_on(&cpu, ty, &init, &x, &idx, k),
        );
        assert_ne!(g, init, "{ty}: nothing written");
        let bad = g.iter().zip(&c).filter(|(a, b)| a != b).count();
        assert_eq!(
            bad,
            0,
            "{ty}: {bad} of {} bytes differ from the CPU's",
            c.len()
        );
    }
}

/// `op` of `x` (with the gate `g` for the GLU forms), tensors of `ty` (F32 or F16), on `stream`;
/// the result widened to f32.
fn gelu_on(stream: &ggml::Backend, op: &str, ty: Type, x: &[f32], g: &[f32]) -> Vec<f32> {
    let ctx = Context::init(1 << 20, true).unwrap();
    let n = x.len() as i64;
    let (a, b) = (
        ctx.new_tensor_1d(ty, n).unwrap(),
        ctx.new_tensor_1d(ty, n).unwrap(),
    );
    let out = match op {
        "gelu" => ctx.gelu(&a),
        "gelu_quick" => ctx.gelu_quick(&a),
        "geglu" => ctx.geglu_split(&a, &b),
        _ => ctx.geglu_quick_split(&a, &b),
    }
    .unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, stream).unwrap();
    for (t, v) in [(&a, x), (&b, g)] {
        let bytes: Vec<u8> = match ty {
            Type::F32 => v.iter().flat_map(|v| v.to_le_bytes()).collect(),
            _ => v
                .iter()
                .flat_map(|&v| ggml::f16::from_f32(v).to_le_bytes())
                .collect(),
        };
        t.set_bytes(&bytes, 0).unwrap();
    }
    stream.graph_compute(&graph).unwrap();
    let bytes = out.to_bytes().unwrap();
    match ty {
        Type::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|c| ggml::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    }
}

/// GELU, GELU_QUICK, GEGLU and GEGLU_QUICK give the CPU's values, which are GGML's (its F16
/// tables: `x` rounded to F16, the function, rounded to F16; F32 GELU 0 at or below −10 and
/// `x` at or above 10): GELU and GEGLU bit for bit (the device reads the CPU's table), the
/// quick forms (computed on the device) too except where the device's f32 function lands on
/// the other side of an F16 rounding boundary (then one F16 step apart; none on lavapipe).
#[test]
fn gelus_round_through_f16_as_the_cpu_does() {
    let Some((gpu, cpu)) = gpu_and_cpu() else {
        return;
    };
    let n = 4096;
    let x: Vec<f32> = (0..n)
        .map(|i| -12.0 + 24.0 * i as f32 / n as f32 + 1e-4)
        .collect();
    let g: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    for ty in [Type::F32, Type::F16] {
        for op in ["gelu", "gelu_quick", "geglu", "geglu_quick"] {
            let (d, c) = (gelu_on(&gpu, op, ty, &x, &g), gelu_on(&cpu, op, ty, &x, &g));
            let same = d
                .iter()
                .zip(&c)
                .filter(|(a, b)| a.to_bits() == b.to_bits())
                .count();
            for (i, (&a, &b)) in d.iter().zip(&c).enumerate() {
                // One F16 step; near 0 the device's tanh, absolute-accurate to ~1e-7 next to
                // ±1, decides (x·(1 + tanh) for x down to −10, times the gate).
                let step = (ggml::f16::from_f32(b).to_f32().abs() / 1024.0).max(2e-6);
                assert!(
                    (a - b).abs() <= step * 1.01,
                    "{op} {ty} at x = {}: {a} vs {b}",
                    x[i]
                );
            }
            eprintln!("{op} {ty}: {same} of {n} bit-identical to the CPU");
            let least = if op.contains("quick") {
                n * 99 / 100
            } else {
                n
            };
            assert!(least <= same, "{op} {ty}: {same} of {n} bit-identical");
            if op == "gelu" && ty == Type::F32 {
                // GGML's clamps, and table values (F16-representable) between them.
                let at = |v: f32| x.iter().position(|&t| t >= v).unwrap();
                assert_eq!((d[at(-10.5)], d[at(11.0)]), (0.0, x[at(11.0)]));
                let mid = at(0.7);
                assert_eq!(d[mid], ggml::f16::from_f32(d[mid]).to_f32());
            }
        }
    }
}

/// SOFT_MAX (Gemma's attention without flash attention: scale, F16 causal mask; also ALiBi
/// and sinks) gives the CPU's bits: its own f32 exponential and f64 sums in 16 lanes, rows of
/// 7 to 1000 (with tails of every length mod 16), logits spread to where the exponentials
/// are subnormal and zero.
#[test]
fn soft_max_gives_the_cpus_bits() {
    let Some((gpu, cpu)) = gpu_and_cpu_in_f64() else {
        return;
    };
    let mut values = lcg(31);
    for (n, rows, amp, bias, sinks) in [
        (7i64, 5i64, 4.0f32, 0.0f32, false),
        (32, 7, 8.0, 0.0, false),
        (100, 38, 40.0, 0.0, false),
        (256, 38, 16.0, 0.0, true),
        (1000, 9, 400.0, 0.0, false),
        (61, 12, 8.0, 8.0, true),
    ] {
        let (nu, ru) = (n as usize, rows as usize);
        let heads = 4usize;
        let x: Vec<f32> = (0..nu * ru * heads).map(|_| amp * values()).collect();
        let mask: Vec<f32> = (0..nu * ru)
            .map(|i| {
                if i % nu > nu / 2 + i / nu {
                    f32::NEG_INFINITY
                } else {
                    values()
                }
            })
            .collect();
        let sink: Vec<f32> = (0..heads).map(|_| 4.0 * values()).collect();
        let shapes: [&[i64]; 3] = [&[n, rows, heads as i64], &[n, rows], &[heads as i64]];
        let data = [Data::F32(&x), Data::F16(&mask), Data::F32(&sink)];
        let build = |c: &Context, t: &[ggml::Tensor]| {
            let o = c.soft_max_ext(&t[0], Some(&t[1]), 0.125, bias).unwrap();
            if sinks {
                c.soft_max_add_sinks(&o, Some(&t[2])).unwrap()
            } else {
                o
            }
        };
        let what = format!("rows of {n} (x{amp}, max_bias {bias}, sinks {sinks})");
        same_results(&gpu, &cpu, &shapes, &data, &build, what);
    }
}

/// MUL_MAT with F16 weights (Gemma's attention products without flash attention: K·Q and
/// V·softmax over the F16 cache) gives the CPU's bits: on its AVX-512 path tinyBLAS's order
/// from 2 columns, `ggml_vec_dot_f16`'s for one (or weight rows not a multiple of 4), for k
/// with every kind of tail, F32 and F16 activations.
#[test]
fn f16_products_give_the_cpus_bits() {
    let Some((gpu, cpu)) = gpu_and_cpu_in_f64() else {
        return;
    };
    let mut values = lcg(55);
    for k in [1i64, 15, 16, 17, 63, 64, 65, 100, 256, 257] {
        for (m, cols) in [(8i64, 1i64), (8, 2), (6, 7), (12, 20), (4, 38)] {
            let w: Vec<f32> = (0..k * m).map(|_| 3.0 * values()).collect();
            let x: Vec<f32> = (0..k * cols).map(|_| 5.0 * values()).collect();
            for half in [false, true] {
                let shapes: [&[i64]; 2] = [&[k, m], &[k, cols]];
                let data = [Data::F16(&w), float(half, &x)];
                let build = |c: &Context, t: &[ggml::Tensor]| c.mul_mat(&t[0], &t[1]).unwrap();
                let what = format!("k {k}, {m} rows, {cols} columns, F16 activations {half}");
                same_results(&gpu, &cpu, &shapes, &data, &build, what);
            }
        }
    }
}

/// `v` as F16 values where `half`, else F32.
fn float(half: bool, v: &[f32]) -> Data<'_> {
    if half {
        Data::F16(v)
    } else {
        Data::F32(v)
    }
}

/// FLASH_ATTN_EXT on the CPU's rows path (fewer than 64 query rows) at Gemma's head size, with
/// up to 256 keys (masked past a diagonal) and scores spread over a wide range: F16 K and V
/// (Gemma's cache), and F16 with F32 either way, give the CPU's bits for every output. Those
/// are the two-sums of the F16 accumulator and of the f64 helpers (`keep`: without it lavapipe
/// simplified every two-sum's error to 0, 3 of 7168 outputs differed at 7 rows × 32 keys).
#[test]
fn flash_attention_rows_give_the_cpus_bits() {
    let Some((gpu, cpu)) = gpu_and_cpu_in_f64() else {
        return;
    };
    let mut values = lcg(7);
    for (nt, nkv, amp, k16, v16) in [
        (7i64, 32i64, 2.0f32, true, true),
        (7, 32, 2.0, false, true),
        (7, 32, 2.0, true, false),
        (38, 256, 2.0, true, true),
        (38, 256, 8.0, true, true),
        (38, 256, 2.0, true, false),
        (38, 256, 2.0, false, true),
        (1, 256, 8.0, true, true),
    ] {
        let (ntu, nkvu) = (nt as usize, nkv as usize);
        let q: Vec<f32> = (0..256 * 4 * ntu).map(|_| 4.0 * values()).collect();
        let kv: Vec<f32> = (0..256 * nkvu).map(|_| amp * values()).collect();
        let vv: Vec<f32> = (0..256 * nkvu).map(|_| 2.0 * values()).collect();
        let rows = ntu.next_multiple_of(64);
        let mask = masked_past(nkvu, rows, 100);
        let shapes: [&[i64]; 4] = [
            &[256, nt, 4],
            &[256, nkv, 1],
            &[256, nkv, 1],
            &[nkv, rows as i64],
        ];
        let data = [
            Data::F32(&q),
            float(k16, &kv),
            float(v16, &vv),
            Data::F16(&mask),
        ];
        let what = format!("{nt} rows, {nkv} keys (x{amp}), K F16 {k16}, V F16 {v16}");
        same_results(&gpu, &cpu, &shapes, &data, &gemma_attention, what);
    }
}
