//! FLASH_ATTN_EXT and SOFT_MAX with attention sinks: node validation, op parameters and
//! errors (their values are the conformance suite's, `ggml-conformance` family `attention`).

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta, Prec};
use ggml::{Context, Op, Tensor, Type};

#[test]
fn flash_attn_node_validates() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let q = ctx.new_tensor_4d(Type::F32, 16, 3, 4, 1).unwrap();
    let k = ctx.new_tensor_4d(Type::F16, 16, 9, 2, 1).unwrap();
    let v = ctx.new_tensor_4d(Type::F16, 8, 9, 2, 1).unwrap();
    let m = ctx.new_tensor_4d(Type::F16, 9, 4, 1, 1).unwrap();
    let s = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let fa = ctx
        .flash_attn_ext(&q, &k, &v, Some(&m), 0.25, 0.0, 0.0)
        .unwrap();
    assert_eq!(fa.ne(), [8, 4, 3, 1, 1]);
    let fa = ctx.flash_attn_ext_add_sinks(&fa, Some(&s)).unwrap();
    assert_eq!(fa.src(4), Some(&s));
    fa.flash_attn_ext_set_prec(Prec::F32).unwrap();
    let p = fa.op_params();
    assert_eq!(f32::from_bits(p[0] as u32), 0.25);
    assert_eq!(p[3], 10);
    let src: Vec<Option<Meta>> = (0..fa.n_src_slots())
        .map(|i| fa.src(i).map(Meta::of))
        .collect();
    let node = NodeMeta {
        dst: Meta::of(&fa),
        view_offs: None,
        src: &src,
        op_params: &p,
    };
    Op::FlashAttnExt.validate(&node).unwrap();
    let mut bad = p;
    bad[3] = 3;
    assert_err(
        Op::FlashAttnExt.validate(&NodeMeta {
            op_params: &bad,
            ..node
        }),
        &["FLASH_ATTN_EXT", "prec = 3"],
    );
    // Sinks go once; removing them gives the node without.
    assert_err(ctx.flash_attn_ext_add_sinks(&fa, Some(&s)), &["already"]);
    let none = ctx.flash_attn_ext_add_sinks(&fa, None).unwrap();
    assert!(none.src(4).is_none() && none.src(3).is_some());
    let sum = ctx.add(&q, &q).unwrap();
    assert_err(ctx.flash_attn_ext_add_sinks(&sum, Some(&s)), &["ADD"]);
    assert_err(sum.flash_attn_ext_set_prec(Prec::F32), &["ADD"]);
    assert_err(sum.flash_attn_ext_get_prec(), &["ADD"]);
}

#[test]
fn flash_attn_bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let t = |ty, ne: &[i64]| ctx.new_tensor(ty, ne).unwrap();
    let q = t(Type::F32, &[16, 3, 4, 2]);
    let k = t(Type::F16, &[16, 9, 2, 2]);
    let v = t(Type::F16, &[8, 9, 2, 2]);
    let fa = |q: &Tensor, k: &Tensor, v: &Tensor, m: Option<&Tensor>, mb: f32| {
        ctx.flash_attn_ext(q, k, v, m, 1.0, mb, 0.0)
    };
    fa(&q, &k, &v, None, 0.0).unwrap();
    assert_err(
        fa(&t(Type::F16, &[16, 3, 4, 2]), &k, &v, None, 0.0),
        &["q", "f32"],
    );
    assert_err(
        fa(&q, &t(Type::I32, &[16, 9, 2, 2]), &v, None, 0.0),
        &["k", "type"],
    );
    assert_err(
        fa(&q, &t(Type::F16, &[15, 9, 2, 2]), &v, None, 0.0),
        &["k", "k.ne0"],
    );
    assert_err(
        fa(&q, &t(Type::F16, &[16, 9, 3, 2]), &v, None, 0.0),
        &["k", "divide"],
    );
    assert_err(
        fa(&q, &t(Type::F16, &[16, 9, 2, 1]), &v, None, 0.0),
        &["k", "k.ne3"],
    );
    assert_err(
        fa(&q, &k, &t(Type::F16, &[8, 8, 2, 2]), None, 0.0),
        &["v", "v.ne1"],
    );
    assert_err(
        fa(&q, &k, &t(Type::F16, &[8, 9, 3, 2]), None, 0.0),
        &["v", "v.ne2"],
    );
    let kt = ctx.transpose(&t(Type::F16, &[9, 16, 2, 2])).unwrap();
    assert_err(fa(&q, &kt, &v, None, 0.0), &["k", "packed"]);
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F32, &[9, 3])), 0.0),
        &["mask", "f16"],
    );
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F16, &[8, 3])), 0.0),
        &["mask", "n_kv = 9"],
    );
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F16, &[9, 2])), 0.0),
        &["mask", "n_q = 3"],
    );
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F16, &[9, 3, 3])), 0.0),
        &["mask", "divide"],
    );
    assert_err(fa(&q, &k, &v, None, 8.0), &["max_bias = 8", "mask"]);
    assert_err(fa(&q, &k, &v, None, -1.0), &["max_bias = -1"]);
    assert_err(
        ctx.flash_attn_ext(&q, &k, &v, None, f32::NAN, 0.0, 0.0),
        &["scale = NaN"],
    );
    assert_err(
        ctx.flash_attn_ext(&q, &k, &v, None, 1.0, 0.0, f32::INFINITY),
        &["logit_softcap = inf"],
    );
    let q5 = t(Type::F32, &[16, 3, 4, 2, 2]);
    assert_err(fa(&q5, &k, &v, None, 0.0), &["q", "4 dimensions"]);
    let node = fa(&q, &k, &v, None, 0.0).unwrap();
    assert_err(
        ctx.flash_attn_ext_add_sinks(&node, Some(&t(Type::F32, &[3]))),
        &["sinks", "q.ne2 = 4"],
    );
    assert_err(
        ctx.flash_attn_ext_add_sinks(&node, Some(&t(Type::F16, &[4]))),
        &["sinks", "f32"],
    );
}

#[test]
fn soft_max_sinks_bad_arguments() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 4, 6).unwrap();
    let sm = ctx.soft_max(&a).unwrap();
    let s = ctx.new_tensor_1d(Type::F32, 6).unwrap();
    let with = ctx.soft_max_add_sinks(&sm, Some(&s)).unwrap();
    assert_eq!(with.src(2), Some(&s));
    assert!(with.src(1).is_none());
    assert_err(ctx.soft_max_add_sinks(&with, Some(&s)), &["already"]);
    assert_err(
        ctx.soft_max_add_sinks(&sm, Some(&ctx.new_tensor_1d(Type::F32, 5).unwrap())),
        &["SOFT_MAX", "sinks", "a.ne2 = 6"],
    );
    assert_err(
        ctx.soft_max_add_sinks(&sm, Some(&ctx.new_tensor_1d(Type::F16, 6).unwrap())),
        &["sinks", "f32"],
    );
    assert_err(ctx.soft_max_add_sinks(&a, Some(&s)), &["NONE"]);
    let src: Vec<Option<Meta>> = (0..3).map(|i| with.src(i).map(Meta::of)).collect();
    let p = with.op_params();
    Op::SoftMax
        .validate(&NodeMeta {
            dst: Meta::of(&with),
            view_offs: None,
            src: &src,
            op_params: &p,
        })
        .unwrap();
}

/// FLASH_ATTN_EXT in f64 (no soft cap, no ALiBi, no sinks): `[DV, n_head, n_q, 1]`.
fn attention_f64(q: &Host, k: &Host, v: &Host, mask: Option<&Host>, scale: f64) -> Host {
    let (n_q, n_head, n_kv, dk, dv) = (q.ne[1], q.ne[2], k.ne[1], q.ne[0], v.ne[0]);
    let (rk, rv) = (n_head / k.ne[2], n_head / v.ne[2]);
    let mut out = Host::from_fn([dv, n_head, n_q, 1, 1], |_| 0.0);
    for h in 0..n_head {
        for i in 0..n_q {
            let s: Vec<f64> = (0..n_kv)
                .map(|j| {
                    let m = mask.map_or(0.0, |m| m.at([j, i, 0, 0, 0]));
                    let dot: f64 = (0..dk)
                        .map(|d| q.at([d, i, h, 0, 0]) * k.at([d, j, h / rk, 0, 0]))
                        .sum();
                    dot * scale + m
                })
                .collect();
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                continue;
            }
            let w: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = w.iter().sum();
            for d in 0..dv {
                let acc: f64 = (0..n_kv).map(|j| w[j] * v.at([d, j, h / rv, 0, 0])).sum();
                out.v[d + dv * (h + n_head * i)] = acc / total;
            }
        }
    }
    out
}

/// GGML's three CPU paths of FLASH_ATTN_EXT against an f64 reference, with F16 K and V,
/// grouped heads and a causal mask with a fully masked row: tiled (≥ 64 query rows: f32
/// throughout, so a tight bound), rows (Q and the value accumulator rounded to F16, as GGML)
/// and split keys (one query row over ≥ 512 keys; 600 steps of the F16 accumulator bring an
/// NMSE of ~1.5e-5, GGML's own). The first two give the same bits with
/// any thread count; the split path's chunks follow the thread count, as GGML's do.
#[test]
fn flash_attn_paths_hold_to_f64() {
    // (name, n_q, n_kv, n_head, n_head_kv, NMSE bound)
    let cases = [
        ("tiled", 70, 150, 4, 1, 1e-10),
        ("tiled, 6 heads on 3", 64, 65, 6, 3, 1e-10),
        ("rows", 5, 40, 4, 1, 1e-5),
        ("split keys", 1, 600, 4, 1, 1e-4),
    ];
    for (name, n_q, n_kv, n_head, n_head_kv, tol) in cases {
        let (dk, dv) = (64i64, 48i64);
        let build = |ctx: &Context, rng: &mut Rng| {
            let (q, qh) = input(
                ctx,
                Type::F32,
                &[dk, n_q, n_head, 1],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let (k, kh) = input(
                ctx,
                Type::F16,
                &[dk, n_kv, n_head_kv, 1],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let (v, vh) = input(
                ctx,
                Type::F16,
                &[dv, n_kv, n_head_kv, 1],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let mne = [n_kv, n_q + 1];
            let (m, mh) = input_with(ctx, Type::F16, &mne, Layout::Contiguous, |at| {
                let (j, i) = ((at as i64) % mne[0], (at as i64) / mne[0]);
                let dead = n_q > 1 && i == 1;
                if dead || j > i + n_kv - n_q {
                    f64::NEG_INFINITY
                } else {
                    ((at * 37 % 11) as f64 - 5.0) / 8.0
                }
            })?;
            let scale = 1.0 / (dk as f32).sqrt();
            let out = ctx.flash_attn_ext(&q, &k, &v, Some(&m), scale, 0.0, 0.0)?;
            Ok((out, attention_f64(&qh, &kh, &vh, Some(&mh), scale as f64)))
        };
        if n_q > 1 {
            check_mem(name, tol, 8 << 20, build);
            continue;
        }
        for (threads, be) in backends() {
            let ctx = Context::init(8 << 20, false).unwrap();
            let mut rng = Rng::from_name(name);
            let (out, want) = build(&ctx, &mut rng).unwrap();
            let graph = ctx.build_forward_expand(&out).unwrap();
            be.graph_compute(&graph).unwrap();
            if let Err(msg) = compare(&read(&out), &want, tol) {
                panic!("{name} ({threads} threads): {msg}");
            }
        }
    }
}
