//! The meta device over CPU members of one thread each: weights split along rows, columns,
//! with segments (a fused QKV), mirrored and partial; a matrix product, a two-layer MLP and an
//! attention-like block. Results equal one CPU's bit for bit where each value is computed the
//! same way (row splits: every dot product is the one-device one); where a product is split
//! along its inner axis the sum is reordered, and the result is held against an f64
//! reference (NMSE ≤ 1e-12).

use std::collections::HashMap;

use ggml::backend::{self, SplitAxis, SplitState, TensorInfo};
use ggml::{Backend, Context, Device, DeviceType, ErrorKind, Tensor, Type};

fn cpu() -> Device {
    backend::dev_by_type(DeviceType::Cpu).expect("the CPU device")
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

fn nmse(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - w).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    err / norm
}

/// A meta device of `n` CPU members splitting the named tensors as given (everything else
/// mirrored).
fn meta_dev(n: usize, splits: &[(&str, SplitState)]) -> Device {
    let map: HashMap<String, SplitState> = splits
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    backend::meta_device(&vec![cpu(); n], move |info: &TensorInfo, _| {
        map.get(&info.name)
            .cloned()
            .unwrap_or_else(SplitState::mirrored)
    })
    .unwrap()
}

/// A backend of [`meta_dev`], each member with one thread.
fn meta(n: usize, splits: &[(&str, SplitState)]) -> Backend {
    let b = meta_dev(n, splits).init(None).unwrap();
    b.set_n_threads(1).unwrap();
    b
}

fn one() -> Backend {
    let b = backend::cpu_init().unwrap();
    b.set_n_threads(1).unwrap();
    b
}

/// Leaves with the values they are filled with.
type Inputs = Vec<(Tensor, Vec<f32>)>;

/// A model function: builds a graph in a context, records its leaves, returns its outputs.
type Build = dyn Fn(&Context, &mut Inputs) -> Vec<Tensor>;

/// A graph built by a model function: its named inputs and outputs.
struct Model {
    ctx: Context,
    inputs: Inputs,
    outputs: Vec<Tensor>,
}

/// `ctx.new_tensor` named `name`, filled from `seed` when the model is run.
fn weight(ctx: &Context, inputs: &mut Inputs, name: &str, ne: &[i64], seed: u64) -> Tensor {
    let t = ctx.new_tensor(Type::F32, ne).unwrap();
    t.set_name(name);
    let n = ne.iter().product::<i64>() as usize;
    inputs.push((t.clone(), values(n, seed)));
    t
}

/// Builds the model, allocates it on `b`, writes the inputs, computes, and reads the outputs.
fn run(b: &Backend, build: &Build) -> Vec<Vec<f32>> {
    let m = model(build);
    let g = m.ctx.new_graph().unwrap();
    for o in &m.outputs {
        g.build_forward_expand(o).unwrap();
    }
    let _buf = backend::alloc_ctx_tensors(&m.ctx, b).unwrap();
    for (t, v) in &m.inputs {
        t.set_f32(v).unwrap();
    }
    b.graph_compute(&g).unwrap();
    // Inputs read back as written, whatever their split.
    for (t, v) in &m.inputs {
        assert_eq!(&t.get_f32().unwrap(), v, "input {:?} round trip", t.name());
    }
    m.outputs.iter().map(|o| o.get_f32().unwrap()).collect()
}

fn model(build: &Build) -> Model {
    let ctx = Context::init(1 << 22, true).unwrap();
    let mut inputs = Vec::new();
    let outputs = build(&ctx, &mut inputs);
    Model {
        ctx,
        inputs,
        outputs,
    }
}

/// y = W x with W [k, n] and x [k, t].
fn matmul(k: i64, n: i64, t: i64) -> impl Fn(&Context, &mut Inputs) -> Vec<Tensor> {
    move |ctx, inputs| {
        let w = weight(ctx, inputs, "w", &[k, n], 1);
        let x = weight(ctx, inputs, "x", &[k, t], 2);
        vec![ctx.mul_mat(&w, &x).unwrap()]
    }
}

/// f64 reference of `W x` (W [k, n] row-major by GGML's layout, x [k, t]).
fn matmul_ref(w: &[f32], x: &[f32], k: usize, n: usize, t: usize) -> Vec<f64> {
    let mut y = vec![0f64; n * t];
    for c in 0..t {
        for r in 0..n {
            y[c * n + r] = (0..k)
                .map(|i| w[r * k + i] as f64 * x[c * k + i] as f64)
                .sum();
        }
    }
    y
}

#[test]
fn rows_split_matmul_equals_one_device_bit_for_bit() {
    let want = run(&one(), &matmul(64, 50, 7));
    for n in [2, 3, 4] {
        let got = run(&meta(n, &[("w", SplitState::axis(1))]), &matmul(64, 50, 7));
        assert_eq!(got, want, "{n} members");
    }
    // Uneven sizes given explicitly.
    let got = run(
        &meta(2, &[("w", SplitState::axis_sizes(1, &[10, 40]))]),
        &matmul(64, 50, 7),
    );
    assert_eq!(got, want);
}

#[test]
fn columns_split_matmul_sums_partials_within_nmse() {
    let (k, n, t) = (96, 40, 6);
    let w = values((k * n) as usize, 1);
    let x = values((k * t) as usize, 2);
    let want = matmul_ref(&w, &x, k as usize, n as usize, t as usize);
    for members in [2, 3] {
        let b = meta(
            members,
            &[("w", SplitState::axis(0)), ("x", SplitState::axis(0))],
        );
        let got = run(&b, &matmul(k, n, t));
        let e = nmse(&got[0], &want);
        assert!(e <= 1e-12, "{members} members: NMSE {e}");
    }
}

#[test]
fn mirrored_weights_give_the_one_device_result_bit_for_bit() {
    let want = run(&one(), &matmul(33, 17, 5));
    let got = run(&meta(2, &[]), &matmul(33, 17, 5));
    assert_eq!(got, want);
}

/// A fused QKV product: W [d, 3d] in three segments, each halved; q, k and v are views.
fn fused_qkv(ctx: &Context, inputs: &mut Inputs) -> Vec<Tensor> {
    let (d, t) = (24i64, 5i64);
    let w = weight(ctx, inputs, "wqkv", &[16, 3 * d], 3);
    let x = weight(ctx, inputs, "x", &[16, t], 4);
    let qkv = ctx.mul_mat(&w, &x).unwrap(); // [3d, t]
    let es = 4usize;
    (0..3)
        .map(|i| {
            let v = ctx
                .view_2d(&qkv, d, t, qkv.nb()[1], i * d as usize * es)
                .unwrap();
            ctx.scale(&ctx.cont(&v).unwrap(), 1.0).unwrap()
        })
        .collect()
}

#[test]
fn fused_qkv_segments_split_each_part() {
    let want = run(&one(), &fused_qkv);
    for n in [2, 3] {
        let b = meta(n, &[("wqkv", SplitState::segments_even(1, &[24, 24, 24]))]);
        assert_eq!(run(&b, &fused_qkv), want, "{n} members");
    }
    // The same split spelled out as GGML's per-segment, per-member lengths.
    let b = meta(
        2,
        &[(
            "wqkv",
            SplitState::segments(1, &[12, 12, 12, 12, 12, 12], &[1, 1, 1]),
        )],
    );
    assert_eq!(run(&b, &fused_qkv), want);
}

#[test]
fn segments_scatter_each_member_its_slice() {
    // Two segments of 4 and 2 rows, over two members: member 0 holds rows 0-1 and 4, member 1
    // rows 2-3 and 5. A product with a whole x keeps the rows in that order per member, and
    // reading the result back restores the original order.
    let b = meta(2, &[("w", SplitState::segments_even(1, &[4, 2]))]);
    let got = run(&b, &matmul(8, 6, 3));
    assert_eq!(got, run(&one(), &matmul(8, 6, 3)));
}

/// The second layer's product is split along its inner axis: partial sums, to which a
/// partial bias is added (each member holds half of it).
fn partial_bias(ctx: &Context, inputs: &mut Inputs) -> Vec<Tensor> {
    let w = weight(ctx, inputs, "w", &[32, 8], 5);
    let x = weight(ctx, inputs, "x", &[32, 3], 6);
    let b = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    b.set_name("b");
    // Halves of these are exact, so the round trip of the partial bias is too.
    inputs.push((b.clone(), (0..8).map(|i| i as f32 * 0.25 - 1.0).collect()));
    let y = ctx.mul_mat(&w, &x).unwrap();
    vec![ctx.add(&y, &b).unwrap()]
}

#[test]
fn partial_weights_add_to_partial_results() {
    let m = model(&partial_bias);
    let (w, x, bias) = (&m.inputs[0].1, &m.inputs[1].1, &m.inputs[2].1);
    let mut want = matmul_ref(w, x, 32, 8, 3);
    for (i, v) in want.iter_mut().enumerate() {
        *v += bias[i % 8] as f64;
    }
    let b = meta(
        2,
        &[
            ("w", SplitState::axis(0)),
            ("x", SplitState::axis(0)),
            ("b", SplitState::partial()),
        ],
    );
    let got = run(&b, &partial_bias);
    let e = nmse(&got[0], &want);
    assert!(e <= 1e-12, "NMSE {e}");
}

/// GELU as GGML's CPU (and so ours) computes it for F32: 0 at or below −10, `x` at or above
/// 10, else the function at `x` rounded to F16, rounded to F16 (its table). Modelling the
/// rounding keeps the 1e-12 bounds: the pre-activations here land on the same F16 values.
fn gelu_ref(x: f64) -> f64 {
    let h = |v: f64| ggml::f16::from_f64(v).to_f64();
    let gelu = |x: f64| {
        0.5 * x
            * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * x * (1.0 + 0.044715 * x * x)).tanh())
    };
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        h(gelu(h(x)))
    }
}

fn silu_ref(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// A two-layer MLP: h = act(W1 x + b1), y = W2 h + b2; W1 split by rows, b1 with it, W2 by
/// columns (so y is partial sums, combined before the bias).
fn mlp(act: &'static str) -> impl Fn(&Context, &mut Inputs) -> Vec<Tensor> {
    move |ctx, inputs| {
        let (d, f, t) = (48, 64, 5);
        let w1 = weight(ctx, inputs, "w1", &[d, f], 11);
        let b1 = weight(ctx, inputs, "b1", &[f], 12);
        let w2 = weight(ctx, inputs, "w2", &[f, d], 13);
        let b2 = weight(ctx, inputs, "b2", &[d], 14);
        let x = weight(ctx, inputs, "x", &[d, t], 15);
        let pre = ctx.add(&ctx.mul_mat(&w1, &x).unwrap(), &b1).unwrap();
        let h = match act {
            "gelu" => ctx.gelu(&pre).unwrap(),
            _ => ctx.silu(&pre).unwrap(),
        };
        let y = ctx.add(&ctx.mul_mat(&w2, &h).unwrap(), &b2).unwrap();
        vec![h, y]
    }
}

fn mlp_ref(act: &str, inputs: &[(Tensor, Vec<f32>)]) -> Vec<f64> {
    let (d, f, t) = (48usize, 64usize, 5usize);
    let v = |i: usize| &inputs[i].1;
    let mut h = vec![0f64; f * t];
    for c in 0..t {
        for r in 0..f {
            let s: f64 = (0..d)
                .map(|i| v(0)[r * d + i] as f64 * v(4)[c * d + i] as f64)
                .sum();
            let s = (s as f32 + v(1)[r]) as f64;
            h[c * f + r] = if act == "gelu" {
                gelu_ref(s)
            } else {
                silu_ref(s)
            };
        }
    }
    let mut y = vec![0f64; d * t];
    for c in 0..t {
        for r in 0..d {
            let s: f64 = (0..f).map(|i| v(2)[r * f + i] as f64 * h[c * f + i]).sum();
            y[c * d + r] = s + v(3)[r] as f64;
        }
    }
    y
}

#[test]
fn two_layer_mlp_splits_rows_then_columns() {
    for act in ["gelu", "silu"] {
        let want = run(&one(), &mlp(act));
        let reference = mlp_ref(act, &model(&mlp(act)).inputs);
        assert!(
            nmse(&want[1], &reference) <= 1e-12,
            "one device against f64"
        );
        for n in [2, 3, 4] {
            let b = meta(n, &mlp_splits());
            let got = run(&b, &mlp(act));
            assert_eq!(
                got[0], want[0],
                "{act}, {n} members: the hidden layer, bit for bit"
            );
            let e = nmse(&got[1], &reference);
            assert!(e <= 1e-12, "{act}, {n} members: NMSE {e}");
        }
    }
}

/// Attention over `heads` heads of `hd` each: the Q, K, V projections split by rows (heads),
/// the output projection by columns, and a residual connection after it.
fn attention(ctx: &Context, inputs: &mut Inputs) -> Vec<Tensor> {
    let (hd, heads, t) = (8i64, 4i64, 6i64);
    let d = hd * heads;
    let x = weight(ctx, inputs, "x", &[d, t], 21);
    let mut proj = |name: &str, seed| {
        let w = weight(ctx, inputs, name, &[d, d], seed);
        ctx.reshape_3d(&ctx.mul_mat(&w, &x).unwrap(), hd, heads, t)
            .unwrap() // [hd, H, t]
    };
    let q = ctx.permute(&proj("wq", 22), 0, 2, 1, 3).unwrap(); // [hd, t, H]
    let k = ctx.permute(&proj("wk", 23), 0, 2, 1, 3).unwrap();
    let v = ctx
        .cont(&ctx.permute(&proj("wv", 24), 1, 2, 0, 3).unwrap())
        .unwrap(); // [t, hd, H]
    let kq = ctx.mul_mat(&k, &q).unwrap(); // [t_k, t_q, H]
    let kq = ctx
        .soft_max(&ctx.scale(&kq, 1.0 / (hd as f32).sqrt()).unwrap())
        .unwrap();
    let kqv = ctx.mul_mat(&v, &kq).unwrap(); // [hd, t_q, H]
    let merged = ctx.cont(&ctx.permute(&kqv, 0, 2, 1, 3).unwrap()).unwrap(); // [hd, H, t]
    let merged = ctx.reshape_2d(&merged, d, t).unwrap();
    let wo = weight(ctx, inputs, "wo", &[d, d], 25);
    let out = ctx.add(&ctx.mul_mat(&wo, &merged).unwrap(), &x).unwrap();
    vec![merged, out]
}

fn attention_ref(inputs: &[(Tensor, Vec<f32>)]) -> Vec<f64> {
    let (hd, heads, t) = (8usize, 4usize, 6usize);
    let d = hd * heads;
    let x = &inputs[0].1;
    let proj = |w: &[f32]| -> Vec<f64> {
        let mut y = vec![0f64; d * t];
        for c in 0..t {
            for r in 0..d {
                y[c * d + r] = (0..d)
                    .map(|i| w[r * d + i] as f64 * x[c * d + i] as f64)
                    .sum();
            }
        }
        y
    };
    let (q, k, v) = (proj(&inputs[1].1), proj(&inputs[2].1), proj(&inputs[3].1));
    let mut merged = vec![0f64; d * t];
    for h in 0..heads {
        for tq in 0..t {
            let at = |m: &[f64], tt: usize, i: usize| m[tt * d + h * hd + i];
            let scores: Vec<f64> = (0..t)
                .map(|tk| {
                    (0..hd).map(|i| at(&k, tk, i) * at(&q, tq, i)).sum::<f64>() / (hd as f64).sqrt()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for i in 0..hd {
                merged[tq * d + h * hd + i] = (0..t).map(|tk| e[tk] / sum * at(&v, tk, i)).sum();
            }
        }
    }
    let wo = &inputs[4].1;
    let mut out = vec![0f64; d * t];
    for c in 0..t {
        for r in 0..d {
            let s: f64 = (0..d)
                .map(|i| wo[r * d + i] as f64 * merged[c * d + i])
                .sum();
            out[c * d + r] = s + x[c * d + r] as f64;
        }
    }
    out
}

#[test]
fn attention_block_splits_heads() {
    let want = run(&one(), &attention);
    let reference = attention_ref(&model(&attention).inputs);
    assert!(
        nmse(&want[1], &reference) <= 1e-12,
        "one device against f64"
    );
    for n in [2, 4] {
        let rows = SplitState::axis(1);
        let b = meta(
            n,
            &[
                ("wq", rows.clone()),
                ("wk", rows.clone()),
                ("wv", rows),
                ("wo", SplitState::axis(0)),
            ],
        );
        let got = run(&b, &attention);
        assert_eq!(
            got[0], want[0],
            "{n} members: the heads' outputs, bit for bit"
        );
        let e = nmse(&got[1], &reference);
        assert!(e <= 1e-12, "{n} members: NMSE {e}");
    }
}

#[test]
fn the_device_describes_itself() {
    let dev = backend::meta_device(&[cpu(), cpu()], |_, _| SplitState::mirrored()).unwrap();
    assert_eq!(dev.name(), "Meta(CPU,CPU)");
    assert_eq!(dev.dev_type(), DeviceType::Meta);
    assert_eq!(dev.buffer_type().name(), "Meta(CPU,CPU)");
    assert!(!dev.buffer_type().is_host());
    assert_eq!(dev.host_buffer_type(), cpu().host_buffer_type());
    let (_, cpu_total) = cpu().memory();
    assert_eq!(dev.memory().1, 2 * cpu_total);
    assert!(backend::meta_devices().contains(&dev));
    assert!(
        !backend::devices().contains(&dev),
        "meta devices are not registered"
    );
    let b = dev.init(None).unwrap();
    assert_eq!(b.name(), "Meta(CPU,CPU)");
    assert_eq!(b.get_device(), dev);
}

#[test]
fn bad_device_lists_are_errors() {
    let e = backend::meta_device(&[], |_, _| SplitState::mirrored()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("devices is empty"), "{e}");
    let e = backend::meta_device(&vec![cpu(); 17], |_, _| SplitState::mirrored()).unwrap_err();
    assert!(
        e.to_string().contains("17 devices") && e.to_string().contains("16"),
        "{e}"
    );
    assert!(backend::meta_device(&vec![cpu(); 16], |_, _| SplitState::mirrored()).is_ok());
    let inner = backend::meta_device(&[cpu()], |_, _| SplitState::mirrored()).unwrap();
    let e = backend::meta_device(&[inner], |_, _| SplitState::mirrored()).unwrap_err();
    assert!(e.to_string().contains("itself a meta device"), "{e}");
}

/// Allocating one weight of shape `ne` split as `state` over two members: the error text.
fn alloc_err(ne: &[i64], ty: Type, state: SplitState) -> String {
    let dev = backend::meta_device(&[cpu(), cpu()], move |_, _| state.clone()).unwrap();
    let ctx = Context::init(1 << 16, true).unwrap();
    let w = ctx.new_tensor(ty, ne).unwrap();
    w.set_name("w");
    let e = backend::alloc_ctx_tensors_from_buft(&ctx, &dev.buffer_type()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    e.to_string()
}

#[test]
fn split_functions_that_do_not_fit_the_tensor_are_errors() {
    let e = alloc_err(&[8, 6], Type::F32, SplitState::axis_sizes(1, &[2, 3]));
    assert!(
        e.contains("\"w\"") && e.contains("sum to 5") && e.contains("has 6"),
        "{e}"
    );
    let e = alloc_err(&[8, 6], Type::F32, SplitState::axis_sizes(1, &[2, 2, 2]));
    assert!(e.contains("3 lengths"), "{e}");
    let e = alloc_err(&[8, 6], Type::F32, SplitState::axis_sizes(1, &[6, 0]));
    assert!(e.contains("member 1 gets no elements"), "{e}");
    let e = alloc_err(&[8, 6], Type::F32, SplitState::axis(4));
    assert!(e.contains("axis 4"), "{e}");
    let e = alloc_err(&[1, 6], Type::F32, SplitState::axis(0));
    assert!(e.contains("member 1 gets no elements"), "{e}");
    let e = alloc_err(&[8, 6], Type::F16, SplitState::partial());
    assert!(e.contains("must be F32"), "{e}");
    let e = alloc_err(&[64, 2], Type::Q8_0, SplitState::axis_sizes(0, &[16, 48]));
    assert!(e.contains("blocks of 32"), "{e}");
}

#[test]
fn ops_without_a_split_for_their_operands_are_errors() {
    // A product of a column-split weight with a whole input has no split of its own.
    let dev = backend::meta_device(&[cpu(), cpu()], |info, _| {
        if info.name == "w" {
            SplitState::axis(0)
        } else {
            SplitState::mirrored()
        }
    })
    .unwrap();
    let ctx = Context::init(1 << 16, true).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    w.set_name("w");
    let x = ctx.new_tensor_2d(Type::F32, 8, 2).unwrap();
    let y = ctx.mul_mat(&w, &x).unwrap();
    y.set_name("y");
    let e = backend::alloc_ctx_tensors_from_buft(&ctx, &dev.buffer_type()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("\"y\"") && e.to_string().contains("MUL_MAT"),
        "{e}"
    );
}

#[test]
fn split_states_report_their_parts() {
    let s = SplitState::segments(1, &[2, 3, 4, 5], &[1, 2]);
    assert_eq!(s.split_axis(), SplitAxis::Axis(1));
    assert_eq!(s.ne(), &[2, 3, 4, 5]);
    assert_eq!(s.nr(), &[1, 2]);
    assert_eq!(s.n_segments(), 2);
    assert_eq!(SplitState::partial().split_axis(), SplitAxis::Partial);
    assert_eq!(SplitState::partial().n_segments(), 1);
}

#[test]
fn raw_bytes_and_partial_reads() {
    let b = meta(
        2,
        &[("w", SplitState::axis(0)), ("p", SplitState::partial())],
    );
    let ctx = Context::init(1 << 16, true).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 4, 4).unwrap();
    w.set_name("w");
    let p = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    p.set_name("p");
    let buf = backend::alloc_ctx_tensors(&ctx, &b).unwrap();
    // Rows 1..3 of w (split by columns), written and read alone.
    let rows: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.set_bytes(&rows, 16).unwrap();
    let mut back = vec![0u8; 8 * 4];
    w.get_bytes(&mut back, 16).unwrap();
    assert_eq!(back, rows);
    // Half a row is not a whole slice of the split.
    let e = w.set_bytes(&rows[..8], 16).unwrap_err();
    assert!(e.to_string().contains("whole slices"), "{e}");
    // A partial tensor: each member holds half, a read sums them.
    p.set_f32(&[1.0, -2.0, 3.0, 0.5]).unwrap();
    assert_eq!(p.get_f32().unwrap(), vec![1.0, -2.0, 3.0, 0.5]);
    assert!(backend::tensor_memset(&p, 1, 0, 4).is_err());
    backend::tensor_memset(&p, 0, 0, 16).unwrap();
    assert_eq!(p.get_f32().unwrap(), vec![0.0; 4]);
    // The asynchronous transfers of the meta stream reach the tensor through its bytes.
    b.tensor_set_async(&w, rows.clone(), 16).unwrap();
    assert_eq!(
        b.tensor_get_async(&w, 16, 32).unwrap().wait().unwrap(),
        rows
    );
    // Clearing the buffer clears every member's part.
    buf.clear(0).unwrap();
    assert_eq!(w.get_f32().unwrap(), vec![0.0; 16]);
}

/// The MLP's split: the first layer by rows (its bias with it), the second by columns.
fn mlp_splits() -> [(&'static str, SplitState); 3] {
    [
        ("w1", SplitState::axis(1)),
        ("b1", SplitState::axis(0)),
        ("w2", SplitState::axis(0)),
    ]
}

/// The MLP's weights in a buffer of their own on `b`, filled.
struct MlpWeights {
    _ctx: Context,
    _buf: ggml::Buffer,
    w: [Tensor; 4],
    inputs: Inputs,
}

fn mlp_weights(b: &Backend) -> MlpWeights {
    let ctx = Context::init(1 << 20, true).unwrap();
    let mut inputs = Vec::new();
    let w = [
        weight(&ctx, &mut inputs, "w1", &[48, 64], 11),
        weight(&ctx, &mut inputs, "b1", &[64], 12),
        weight(&ctx, &mut inputs, "w2", &[64, 48], 13),
        weight(&ctx, &mut inputs, "b2", &[48], 14),
    ];
    let buf = backend::alloc_ctx_tensors(&ctx, b).unwrap();
    buf.set_usage(ggml::BufferUsage::Weights);
    for (t, v) in &inputs {
        t.set_f32(v).unwrap();
    }
    MlpWeights {
        _ctx: ctx,
        _buf: buf,
        w,
        inputs,
    }
}

impl MlpWeights {
    /// x (an input [48, 5]) and y = W2 gelu(W1 x + b1) + b2, built in `ctx`.
    fn layers(&self, ctx: &Context) -> (Tensor, Tensor) {
        let [w1, b1, w2, b2] = &self.w;
        let x = ctx.new_tensor_2d(Type::F32, 48, 5).unwrap();
        x.set_name("x");
        x.set_input();
        let h = ctx
            .gelu(&ctx.add(&ctx.mul_mat(w1, &x).unwrap(), b1).unwrap())
            .unwrap();
        (
            x.clone(),
            ctx.add(&ctx.mul_mat(w2, &h).unwrap(), b2).unwrap(),
        )
    }

    /// The f64 result for input values `xv`.
    fn reference(&self, x: &Tensor, xv: Vec<f32>) -> Vec<f64> {
        let mut inputs = self.inputs.clone();
        inputs.push((x.clone(), xv));
        mlp_ref("gelu", &inputs)
    }
}

#[test]
fn the_scheduler_runs_graphs_on_a_meta_backend() {
    let two = meta_dev(2, &mlp_splits()).init(None).unwrap();
    let weights = mlp_weights(&two);
    let sched = backend::sched_new(std::slice::from_ref(&two), 256, false).unwrap();
    for seed in [15, 16] {
        let gctx = Context::init(1 << 20, true).unwrap();
        let (x, y) = weights.layers(&gctx);
        // A last op pinned to the CPU the scheduler appended: y is copied out of the meta
        // device's buffer to it.
        let out = gctx.scale(&y, 2.0).unwrap();
        let g = gctx.build_forward_expand(&out).unwrap();
        sched.reset();
        let cpu_stream = sched.get_backend(1).unwrap();
        sched.set_tensor_backend(&out, &cpu_stream).unwrap();
        sched.alloc_graph(&g).unwrap();
        let xv = values(48 * 5, seed);
        x.set_f32(&xv).unwrap();
        sched.graph_compute(&g).unwrap();
        // Every node but the last runs on the meta backend: two splits.
        for n in g.nodes() {
            let want = if n == out { &cpu_stream } else { &two };
            assert_eq!(
                sched.get_tensor_backend(&n).as_ref(),
                Some(want),
                "{:?}",
                n.name()
            );
        }
        assert_eq!(sched.get_n_splits(), 2);
        let want = weights.reference(&x, xv);
        let e = nmse(&y.get_f32().unwrap(), &want);
        assert!(e <= 1e-12, "seed {seed}: NMSE {e}");
        let doubled: Vec<f64> = want.iter().map(|v| 2.0 * v).collect();
        let e = nmse(&out.get_f32().unwrap(), &doubled);
        assert!(e <= 1e-12, "seed {seed}: NMSE {e}");
    }
}

#[test]
fn graph_allocator_places_intermediates_and_graphs_run_again() {
    // Weights in their own buffer; the graph's tensors placed by the graph allocator in a
    // compute buffer of the meta device, with memory reuse; computed twice with new inputs.
    let dev = meta_dev(2, &mlp_splits());
    let b = dev.init(None).unwrap();
    b.set_n_threads(1).unwrap();
    let weights = mlp_weights(&b);
    let gctx = Context::init(1 << 20, true).unwrap();
    let (x, y) = weights.layers(&gctx);
    let y = gctx.scale(&y, 0.5).unwrap();
    y.set_output();
    let g = gctx.build_forward_expand(&y).unwrap();
    let galloc = ggml::Gallocr::new(&dev.buffer_type()).unwrap();
    galloc.alloc_graph(&g).unwrap();
    for seed in [15, 16] {
        let xv = values(48 * 5, seed);
        x.set_f32(&xv).unwrap();
        b.graph_compute(&g).unwrap();
        let want: Vec<f64> = weights.reference(&x, xv).iter().map(|v| v * 0.5).collect();
        let e = nmse(&y.get_f32().unwrap(), &want);
        assert!(e <= 1e-12, "seed {seed}: NMSE {e}");
    }
}

/// A product split along its inner axis, carried through linear ops (a reshape, a scale and a
/// subtraction of partial sums) before a soft-max needs the totals.
fn linear_then_softmax(ctx: &Context, inputs: &mut Inputs) -> Vec<Tensor> {
    let w = weight(ctx, inputs, "w", &[32, 12], 31);
    let x = weight(ctx, inputs, "x", &[32, 4], 32);
    let v = weight(ctx, inputs, "v", &[32, 12], 33);
    let y = ctx
        .reshape_3d(&ctx.mul_mat(&w, &x).unwrap(), 6, 2, 4)
        .unwrap();
    let z = ctx
        .reshape_3d(&ctx.mul_mat(&v, &x).unwrap(), 6, 2, 4)
        .unwrap();
    let d = ctx.sub(&ctx.scale(&y, 0.5).unwrap(), &z).unwrap();
    vec![d.clone(), ctx.soft_max(&d).unwrap()]
}

#[test]
fn partial_sums_flow_through_linear_ops() {
    let want = run(&one(), &linear_then_softmax);
    let m = model(&linear_then_softmax);
    let (w, x, v) = (&m.inputs[0].1, &m.inputs[1].1, &m.inputs[2].1);
    let (y, z) = (matmul_ref(w, x, 32, 12, 4), matmul_ref(v, x, 32, 12, 4));
    let d: Vec<f64> = y.iter().zip(&z).map(|(a, b)| 0.5 * a - b).collect();
    let soft: Vec<f64> = d
        .chunks(6)
        .flat_map(|row| {
            let max = row.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = row.iter().map(|r| (r - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / sum)
        })
        .collect();
    assert!(nmse(&want[1], &soft) <= 1e-12);
    let split = [
        ("w", SplitState::axis(0)),
        ("x", SplitState::axis(0)),
        ("v", SplitState::axis(0)),
    ];
    for n in [2, 3] {
        let got = run(&meta(n, &split), &linear_then_softmax);
        let e = (nmse(&got[0], &d), nmse(&got[1], &soft));
        assert!(e.0 <= 1e-12 && e.1 <= 1e-12, "{n} members: NMSE {e:?}");
    }
}

#[test]
fn a_partial_weight_an_op_needs_whole_is_an_error() {
    let b = meta(2, &[("p", SplitState::partial())]);
    let ctx = Context::init(1 << 20, true).unwrap();
    let p = ctx.new_tensor_2d(Type::F32, 4, 2).unwrap();
    p.set_name("p");
    let s = ctx.soft_max(&p).unwrap();
    let g = ctx.build_forward_expand(&s).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, &b).unwrap();
    p.set_f32(&[0.5; 8]).unwrap();
    let e = b.graph_compute(&g).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("\"p\"") && e.to_string().contains("partial"),
        "{e}"
    );
}
