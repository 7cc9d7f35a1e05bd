//! FLASH_ATTN_EXT (grouped heads, mask, ALiBi, soft-capping, sinks, precision, float and
//! quantized K/V) and SOFT_MAX with attention sinks, against f64 references.

mod common;

use common::reference;
use common::*;
use ggml::ops::{Meta, NodeMeta, Prec};
use ggml::{quants, Context, Op, Tensor, Type};

// ---- reference -------------------------------------------------------------------------------

/// Attention of each query row over the keys of its head: `q` `[DK, n_q, H, S]`, `k`
/// `[DK, n_kv, Hk, S]`, `v` `[DV, n_kv, Hv, S]`, result `[DV, H, n_q, S]`. Keys whose mask is
/// −∞ take no part; a sink adds `e^sink` to the normalisation only; no keys and no sink give
/// zeros.
#[allow(clippy::too_many_arguments)]
fn flash_attn_ref(
    q: &Host,
    k: &Host,
    v: &Host,
    mask: Option<&Host>,
    sinks: Option<&[f64]>,
    scale: f64,
    max_bias: f64,
    softcap: f64,
) -> Host {
    let (dk, n_q, n_head, n_seq) = (q.ne[0], q.ne[1], q.ne[2], q.ne[3]);
    let (dv, n_kv) = (v.ne[0], k.ne[1]);
    let mut out = Host {
        ne: [dv, n_head, n_q, n_seq, 1],
        v: vec![0.0; dv * n_head * n_q * n_seq],
    };
    for s in 0..n_seq {
        for h in 0..n_head {
            let hk = h / (n_head / k.ne[2]);
            let hv = h / (n_head / v.ne[2]);
            let slope = reference::alibi_slope(max_bias, h, n_head);
            for i in 0..n_q {
                let mut logits = Vec::new();
                for j in 0..n_kv {
                    let m = mask.map_or(0.0, |m| m.at([j, i, h % m.ne[2], s % m.ne[3], 0]));
                    if m == f64::NEG_INFINITY {
                        continue;
                    }
                    let dot: f64 = (0..dk)
                        .map(|d| q.at([d, i, h, s, 0]) * k.at([d, j, hk, s, 0]))
                        .sum();
                    let mut x = dot * scale;
                    if softcap != 0.0 {
                        x = softcap * (x / softcap).tanh();
                    }
                    logits.push((j, x + slope * m));
                }
                let sink = sinks.map(|s| s[h]);
                let max = logits
                    .iter()
                    .map(|l| l.1)
                    .chain(sink)
                    .fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = logits.iter().map(|l| (l.1 - max).exp()).sum::<f64>()
                    + sink.map_or(0.0, |x| (x - max).exp());
                if total == 0.0 {
                    continue;
                }
                for d in 0..dv {
                    let acc: f64 = logits
                        .iter()
                        .map(|&(j, x)| (x - max).exp() * v.at([d, j, hv, s, 0]))
                        .sum();
                    out.v[flat(&out.ne, &[d, h, i, s, 0])] = acc / total;
                }
            }
        }
    }
    out
}

// ---- inputs ----------------------------------------------------------------------------------

/// A K or V tensor of `ty` and shape `ne`: float types through [`input`] with `layout`,
/// quantized ones (always contiguous: `layout` is ignored) quantized from random values and
/// read back dequantized.
fn kv_input(
    ctx: &Context,
    ty: Type,
    ne: &[i64],
    layout: Layout,
    rng: &mut Rng,
) -> ggml::Result<(Tensor, Host)> {
    if !ty.is_quantized() {
        return input(ctx, ty, ne, layout, rng, -1.0, 1.0);
    }
    let t = ctx.new_tensor(ty, ne)?;
    let n = t.nelements() as usize;
    let k = ne[0] as usize;
    let src: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    let mut bytes = vec![0u8; t.nbytes()];
    quants::quantize_chunk(ty, &src, &mut bytes, 0, n / k, k, None)?;
    t.set_bytes(&bytes, 0)?;
    let mut deq = vec![0f32; n];
    quants::dequantize_row(ty, &bytes, &mut deq)?;
    let host = Host {
        ne: shape(ne),
        v: deq.iter().map(|&x| x as f64).collect(),
    };
    Ok((t, host))
}

/// An F16 mask `[n_kv_pad, n_q_pad, m2, m3]`: random biases, −∞ above the causal diagonal
/// when `causal` (key j > query i + offset), and every key of query row `dead_row` masked.
fn mask_input(
    ctx: &Context,
    ne: [i64; 4],
    causal: bool,
    dead_row: Option<usize>,
    rng: &mut Rng,
) -> ggml::Result<(Tensor, Host)> {
    let full = shape(&ne);
    let mut k = 0usize;
    input_with(ctx, Type::F16, &ne, Layout::Contiguous, |_| {
        let (col, row) = (k % full[0], (k / full[0]) % full[1]);
        k += 1;
        if (causal && col > row + 2) || dead_row == Some(row) {
            f64::NEG_INFINITY
        } else {
            rng.uniform(-1.0, 1.0)
        }
    })
}

// ---- FLASH_ATTN_EXT cases --------------------------------------------------------------------

/// One FLASH_ATTN_EXT case.
#[derive(Clone, Copy, Debug)]
struct Fa {
    dk: i64,
    dv: i64,
    n_kv: i64,
    n_q: i64,
    n_head: i64,
    n_head_kv: i64,
    n_seq: i64,
    /// Mask planes (M2, M3), or no mask.
    mask: Option<[i64; 2]>,
    max_bias: f32,
    softcap: f32,
    sinks: bool,
    k_ty: Type,
    v_ty: Type,
    /// q, k and v as permuted views (`[D, H, N]` in memory, as llama.cpp builds them).
    permuted: bool,
    prec: Prec,
}

const FA: Fa = Fa {
    dk: 32,
    dv: 32,
    n_kv: 17,
    n_q: 3,
    n_head: 4,
    n_head_kv: 4,
    n_seq: 1,
    mask: None,
    max_bias: 0.0,
    softcap: 0.0,
    sinks: false,
    k_ty: Type::F32,
    v_ty: Type::F32,
    permuted: false,
    prec: Prec::Default,
};

impl Fa {
    fn name(&self) -> String {
        format!(
            "FLASH_ATTN_EXT(hsk={},hsv={},nh={},nr={},kv={},nb={},ns={},mask={:?},max_bias={},\
             logit_softcap={},sinks={},type_K={},type_V={},permuted={},prec={:?})",
            self.dk,
            self.dv,
            self.n_head_kv,
            self.n_head / self.n_head_kv,
            self.n_kv,
            self.n_q,
            self.n_seq,
            self.mask,
            self.max_bias,
            self.softcap,
            self.sinks,
            self.k_ty,
            self.v_ty,
            self.permuted,
            self.prec
        )
    }

    fn build(&self, ctx: &Context, rng: &mut Rng) -> ggml::Result<(Tensor, Host)> {
        let layout = if self.permuted {
            Layout::Permuted([0, 2, 1, 3])
        } else {
            Layout::Contiguous
        };
        let (q, hq) = input(
            ctx,
            Type::F32,
            &[self.dk, self.n_q, self.n_head, self.n_seq],
            layout,
            rng,
            -1.0,
            1.0,
        )?;
        let (k, hk) = kv_input(
            ctx,
            self.k_ty,
            &[self.dk, self.n_kv, self.n_head_kv, self.n_seq],
            layout,
            rng,
        )?;
        let (v, hv) = kv_input(
            ctx,
            self.v_ty,
            &[self.dv, self.n_kv, self.n_head_kv, self.n_seq],
            layout,
            rng,
        )?;
        let mask = match self.mask {
            // Padded as llama.cpp pads its KQ mask: more keys and rows than used.
            Some([m2, m3]) => Some(mask_input(
                ctx,
                [self.n_kv + 3, self.n_q + 2, m2, m3],
                true,
                (self.n_q > 1).then_some(1),
                rng,
            )?),
            None => None,
        };
        let scale = 1.0 / (self.dk as f32).sqrt();
        let mut out = ctx.flash_attn_ext(
            &q,
            &k,
            &v,
            mask.as_ref().map(|m| &m.0),
            scale,
            self.max_bias,
            self.softcap,
        )?;
        out.flash_attn_ext_set_prec(self.prec)?;
        let sinks = if self.sinks {
            let (s, hs) = input(
                ctx,
                Type::F32,
                &[self.n_head],
                Layout::Contiguous,
                rng,
                -2.0,
                2.0,
            )?;
            out = ctx.flash_attn_ext_add_sinks(&out, Some(&s))?;
            Some(hs.v)
        } else {
            None
        };
        assert_eq!(out.flash_attn_ext_get_prec()?, self.prec);
        let want = flash_attn_ref(
            &hq,
            &hk,
            &hv,
            mask.as_ref().map(|m| &m.1),
            sinks.as_deref(),
            scale as f64,
            self.max_bias as f64,
            self.softcap as f64,
        );
        Ok((out, want))
    }
}

fn run(cases: &[Fa]) {
    for c in cases {
        check_mem(&c.name(), TOL_MATMUL, 8 << 20, |ctx, rng| c.build(ctx, rng));
    }
}

#[test]
fn shapes_heads_and_masks() {
    let mut cases = Vec::new();
    for (dk, dv) in [(32, 32), (40, 24), (64, 64)] {
        for n_head_kv in [4, 2, 1] {
            for (n_kv, n_q, n_seq) in [(17, 3, 1), (33, 1, 2), (8, 5, 1)] {
                for mask in [None, Some([1, 1]), Some([4, n_seq])] {
                    cases.push(Fa {
                        dk,
                        dv,
                        n_kv,
                        n_q,
                        n_seq,
                        n_head_kv,
                        mask,
                        ..FA
                    });
                }
            }
        }
    }
    run(&cases);
}

#[test]
fn alibi_softcap_sinks_and_precision() {
    let mut cases = Vec::new();
    for max_bias in [0.0, 8.0] {
        for softcap in [0.0, 1.5, 30.0] {
            for sinks in [false, true] {
                for mask in [None, Some([1, 1])] {
                    if max_bias > 0.0 && mask.is_none() {
                        continue;
                    }
                    cases.push(Fa {
                        max_bias,
                        softcap,
                        sinks,
                        mask,
                        n_head: 6,
                        n_head_kv: 3,
                        prec: if sinks { Prec::F32 } else { Prec::Default },
                        ..FA
                    });
                }
            }
        }
    }
    run(&cases);
}

#[test]
fn kv_types_and_permuted_inputs() {
    let mut cases = Vec::new();
    let types = [
        Type::F32,
        Type::F16,
        Type::BF16,
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Q8_0,
        Type::IQ4_NL,
    ];
    for k_ty in types {
        for v_ty in [Type::F16, k_ty] {
            cases.push(Fa {
                k_ty,
                v_ty,
                mask: Some([1, 1]),
                n_head_kv: 2,
                ..FA
            });
        }
    }
    cases.push(Fa {
        dk: 256,
        dv: 256,
        k_ty: Type::Q4_K,
        v_ty: Type::Q6_K,
        n_kv: 5,
        ..FA
    });
    for k_ty in [Type::F32, Type::F16] {
        cases.push(Fa {
            k_ty,
            v_ty: k_ty,
            permuted: true,
            mask: Some([2, 1]),
            n_seq: 2,
            n_head: 4,
            n_head_kv: 2,
            ..FA
        });
    }
    run(&cases);
}

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

// ---- SOFT_MAX with sinks ---------------------------------------------------------------------

#[test]
fn soft_max_with_sinks() {
    for a_ty in FLOATS {
        for (a_ne, m_ne) in [
            ([16i64, 4, 6, 2], Some([16i64, 4, 1, 1])),
            ([9, 3, 5, 1], None),
            ([33, 2, 3, 2], Some([33, 5, 3, 2])),
        ] {
            for mty in [Type::F32, Type::F16] {
                for inplace in [false, true] {
                    for max_bias in [0.0f32, 8.0] {
                        if max_bias > 0.0 && m_ne.is_none() {
                            continue;
                        }
                        let name = format!(
                            "SOFT_MAX(type={a_ty},ne={a_ne:?},mask={m_ne:?},m_prec={mty},\
                             max_bias={max_bias},sinks=1,inplace={inplace})"
                        );
                        check(&name, TOL_SOFTMAX, |ctx, rng| {
                            let (a, ha) =
                                input(ctx, a_ty, &a_ne, Layout::Contiguous, rng, -3.0, 3.0)?;
                            let mask = match m_ne {
                                Some(ne) => Some(mask_input(ctx, ne, true, None, rng).and_then(
                                    |(m, hm)| {
                                        if mty == Type::F16 {
                                            return Ok((m, hm));
                                        }
                                        // The same values as F32.
                                        let m32 = ctx.new_tensor(Type::F32, &ne)?;
                                        write(&m32, &hm.v);
                                        Ok((m32, hm))
                                    },
                                )?),
                                None => None,
                            };
                            let (s, hs) = input(
                                ctx,
                                Type::F32,
                                &[a_ne[2]],
                                Layout::Contiguous,
                                rng,
                                -2.0,
                                4.0,
                            )?;
                            let mt = mask.as_ref().map(|m| &m.0);
                            let sm = if inplace {
                                ctx.soft_max_ext_inplace(&a, mt, 0.7, max_bias)?
                            } else {
                                ctx.soft_max_ext(&a, mt, 0.7, max_bias)?
                            };
                            let out = ctx.soft_max_add_sinks(&sm, Some(&s))?;
                            if inplace {
                                assert_aliases(&out, &a);
                            }
                            let want = reference::soft_max_sinks(
                                &ha,
                                mask.as_ref().map(|m| &m.1),
                                0.7,
                                max_bias as f64,
                                Some(&hs.v),
                            );
                            Ok((out, want))
                        });
                    }
                }
            }
        }
    }
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
