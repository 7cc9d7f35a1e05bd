//! SSM_CONV and SSM_SCAN (Mamba-1 and Mamba-2 forms, state snapshots) against plain f64
//! references, plus their shape rules.

mod common;

use common::*;
use ggml::{Context, Tensor, Type};

/// `result[i, t, s] = Σ_j sx[t + j, i, s]·c[j, i]`.
fn ref_ssm_conv(sx: &Host, c: &Host) -> Host {
    let d_conv = c.ne[0];
    let n_t = sx.ne[0] + 1 - d_conv;
    Host::from_fn([c.ne[1], n_t, sx.ne[2], 1, 1], |i| {
        (0..d_conv)
            .map(|j| sx.at([i[1] + j, i[0], i[2], 0, 0]) * c.at([j, i[0], 0, 0, 0]))
            .sum()
    })
}

fn softplus(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}

/// The selective scan: `y` (x's shape, flattened) then `k` blocks of final/snapshot states.
#[allow(clippy::too_many_arguments)]
fn ref_ssm_scan(
    s: &Host,
    x: &Host,
    dt: &Host,
    a: &Host,
    b: &Host,
    c: &Host,
    ids: &[i64],
    k: usize,
) -> Host {
    let (nc, nr, nh) = (s.ne[0], s.ne[1], s.ne[2]);
    let (nt, ns, ng) = (x.ne[2], x.ne[3], b.ne[1]);
    let seq = nc * nr * nh;
    let ny = nr * nh * nt * ns;
    let mut out = vec![0.0; ny + k * seq * ns];
    for q in 0..ns {
        let start = usize::try_from(ids[q]).ok().filter(|&i| i < s.ne[3]);
        let mut st: Vec<f64> = (0..seq)
            .map(|e| {
                let (j, i, h) = (e % nc, (e / nc) % nr, e / (nc * nr));
                start.map_or(0.0, |id| s.at([j, i, h, id, 0]))
            })
            .collect();
        for t in 0..nt {
            for h in 0..nh {
                let d = softplus(dt.at([h, t, q, 0, 0]));
                let g = h / (nh / ng);
                for i in 0..nr {
                    let mut y = 0.0;
                    for j in 0..nc {
                        let aa = if a.ne[0] == 1 {
                            a.at([0, h, 0, 0, 0])
                        } else {
                            a.at([j, h, 0, 0, 0])
                        };
                        let e = (h * nr + i) * nc + j;
                        st[e] = st[e] * (d * aa).exp()
                            + b.at([j, g, t, q, 0]) * x.at([i, h, t, q, 0]) * d;
                        y += st[e] * c.at([j, g, t, q, 0]);
                    }
                    out[((q * nt + t) * nh + h) * nr + i] = y;
                }
            }
            let slot = nt - 1 - t;
            if slot < k {
                let o = ny + (slot * ns + q) * seq;
                out[o..o + seq].copy_from_slice(&st);
            }
        }
    }
    Host {
        ne: [out.len(), 1, 1, 1, 1],
        v: out,
    }
}

#[test]
fn ssm_conv() {
    // (d_conv, n_t, d_inner, n_s)
    for (d_conv, n_t, d_inner, n_s) in [(4, 5, 8, 2), (3, 1, 5, 3), (1, 7, 3, 1), (4, 0, 4, 2)] {
        for layout in [Layout::Contiguous, Layout::Transposed, Layout::Padded] {
            let name = format!(
                "SSM_CONV(d_conv={d_conv},n_t={n_t},d_inner={d_inner},n_s={n_s},layout={layout:?})"
            );
            check(&name, TOL, |ctx, rng| {
                let ne = [d_conv - 1 + n_t, d_inner, n_s];
                let (sx, hs) = input(ctx, Type::F32, &ne, layout, rng, -1.0, 1.0)?;
                let (c, hc) = input(
                    ctx,
                    Type::F32,
                    &[d_conv, d_inner],
                    Layout::Contiguous,
                    rng,
                    -1.0,
                    1.0,
                )?;
                Ok((ctx.ssm_conv(&sx, &c)?, ref_ssm_conv(&hs, &hc)))
            });
        }
    }
}

struct Scan {
    d_state: i64,
    head_dim: i64,
    n_head: i64,
    n_group: i64,
    n_t: i64,
    n_seqs: i64,
    mamba1: bool,
    k: i64,
    ids: &'static [i64],
    permuted_x: bool,
}

fn run_scan(c: Scan) {
    check(&scan_name(&c), TOL, |ctx, rng| build_scan(&c, ctx, rng));
}

fn scan_name(c: &Scan) -> String {
    format!(
        "SSM_SCAN(d_state={},head_dim={},n_head={},n_group={},n_t={},n_seqs={},mamba1={},K={},ids={:?},permuted={})",
        c.d_state, c.head_dim, c.n_head, c.n_group, c.n_t, c.n_seqs, c.mamba1, c.k, c.ids, c.permuted_x
    )
}

/// Case `c`'s scan node and its reference.
fn build_scan(c: &Scan, ctx: &Context, rng: &mut Rng) -> ggml::Result<(Tensor, Host)> {
    let n_rs = c.n_seqs + 1;
    let f = Type::F32;
    let cont = Layout::Contiguous;
    let (s, hs) = input(
        ctx,
        f,
        &[c.d_state, c.head_dim, c.n_head, n_rs],
        cont,
        rng,
        -1.0,
        1.0,
    )?;
    let xl = if c.permuted_x {
        Layout::Permuted([0, 1, 3, 2])
    } else {
        cont
    };
    let (x, hx) = input(
        ctx,
        f,
        &[c.head_dim, c.n_head, c.n_t, c.n_seqs],
        xl,
        rng,
        -1.0,
        1.0,
    )?;
    let (dt, hdt) = input(ctx, f, &[c.n_head, c.n_t, c.n_seqs], cont, rng, -2.0, 1.0)?;
    let a0 = if c.mamba1 { c.d_state } else { 1 };
    let (a, ha) = input(ctx, f, &[a0, c.n_head], cont, rng, -1.0, -0.1)?;
    let bne = [c.d_state, c.n_group, c.n_t, c.n_seqs];
    let (b, hb) = input(ctx, f, &bne, xl, rng, -1.0, 1.0)?;
    let (cc, hc) = input(ctx, f, &bne, xl, rng, -1.0, 1.0)?;
    let idv: Vec<f64> = c.ids.iter().map(|&i| i as f64).collect();
    let (ids, _) = input_values(ctx, Type::I32, &[c.n_seqs], &idv)?;
    let out = ctx.ssm_scan(&s, &x, &dt, &a, &b, &cc, &ids, c.k)?;
    let want = ref_ssm_scan(&hs, &hx, &hdt, &ha, &hb, &hc, c.ids, c.k as usize);
    Ok((out, want))
}

#[test]
fn ssm_scan_mamba2() {
    for (n_head, n_group, k, n_t) in [(4, 1, 1, 3), (6, 2, 1, 1), (4, 4, 3, 5), (5, 1, 2, 2)] {
        for permuted_x in [false, true] {
            run_scan(Scan {
                d_state: 16,
                head_dim: 3,
                n_head,
                n_group,
                n_t,
                n_seqs: 2,
                mamba1: false,
                k,
                ids: &[2, 0],
                permuted_x,
            });
        }
    }
}

#[test]
fn ssm_scan_mamba1() {
    for (d_state, head_dim, n_t, n_seqs, ids) in [
        (16, 5, 4, 3, &[1i64, 0, 3][..]),
        (5, 7, 1, 1, &[0][..]),
        (8, 1, 6, 2, &[1, 1][..]),
    ] {
        run_scan(Scan {
            d_state,
            head_dim,
            n_head: 1,
            n_group: 1,
            n_t,
            n_seqs,
            mamba1: true,
            k: 1,
            ids,
            permuted_x: false,
        });
    }
}

/// An out-of-range id reads nothing out of bounds and fails the computation, naming it.
#[test]
fn ssm_scan_out_of_range_ids_fail_the_compute() {
    let c = Scan {
        d_state: 4,
        head_dim: 2,
        n_head: 2,
        n_group: 1,
        n_t: 2,
        n_seqs: 2,
        mamba1: false,
        k: 1,
        ids: &[1, 7],
        permuted_x: false,
    };
    let needles = ["SSM_SCAN", "src6 index 7 at [1, 0, 0] is outside 0..3"];
    check_compute_fails(&scan_name(&c), &needles, |ctx, rng| {
        build_scan(&c, ctx, rng).map(|(t, _)| t)
    });
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let f = Type::F32;
    let sx = ctx.new_tensor_3d(f, 6, 8, 2).unwrap();
    let c = ctx.new_tensor_2d(f, 4, 8).unwrap();
    assert_err(
        ctx.ssm_conv(&sx, &ctx.new_tensor_2d(f, 4, 7).unwrap()),
        &["SSM_CONV", "sx"],
    );
    assert_err(
        ctx.ssm_conv(&sx, &ctx.new_tensor_2d(f, 8, 8).unwrap()),
        &["SSM_CONV", "n_t >= 0"],
    );
    assert_err(
        ctx.ssm_conv(&sx, &ctx.new_tensor_2d(Type::F16, 4, 8).unwrap()),
        &["SSM_CONV", "f16"],
    );
    assert_err(
        ctx.ssm_conv(&ctx.new_tensor_4d(f, 6, 8, 2, 2).unwrap(), &c),
        &["SSM_CONV", "3-D"],
    );
    let conv = ctx.ssm_conv(&sx, &c).unwrap();
    assert_eq!(conv.ne(), [8, 3, 2, 1, 1]);

    let (ds, hd, nh, nt, ns) = (16, 3, 4, 5, 2);
    let s = ctx.new_tensor_4d(f, ds, hd, nh, 3).unwrap();
    let x = ctx.new_tensor_4d(f, hd, nh, nt, ns).unwrap();
    let dt = ctx.new_tensor_3d(f, nh, nt, ns).unwrap();
    let a2 = ctx.new_tensor_2d(f, 1, nh).unwrap();
    let a1 = ctx.new_tensor_2d(f, ds, nh).unwrap();
    let b = ctx.new_tensor_4d(f, ds, 2, nt, ns).unwrap();
    let ids = ctx.new_tensor_1d(Type::I32, ns).unwrap();
    let ok = ctx.ssm_scan(&s, &x, &dt, &a2, &b, &b, &ids, 3).unwrap();
    assert_eq!(ok.ne()[0], hd * nh * nt * ns + 3 * ds * hd * nh * ns);
    assert_err(
        ctx.ssm_scan(&s, &x, &dt, &a1, &b, &b, &ids, 2),
        &["SSM_SCAN", "Mamba-1", "K = 2"],
    );
    assert_err(
        ctx.ssm_scan(&s, &x, &dt, &a2, &b, &b, &ids, 0),
        &["SSM_SCAN", "K = 0"],
    );
    let b3 = ctx.new_tensor_4d(f, ds, 3, nt, ns).unwrap();
    assert_err(
        ctx.ssm_scan(&s, &x, &dt, &a2, &b3, &b3, &ids, 1),
        &["SSM_SCAN", "B", "n_group"],
    );
    let ids_f = ctx.new_tensor_1d(f, ns).unwrap();
    assert_err(
        ctx.ssm_scan(&s, &x, &dt, &a2, &b, &b, &ids_f, 1),
        &["SSM_SCAN", "ids", "i32"],
    );
    let ids3 = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    assert_err(
        ctx.ssm_scan(&s, &x, &dt, &a2, &b, &b, &ids3, 1),
        &["SSM_SCAN", "ids", "n_seqs"],
    );
    let dt_bad = ctx.new_tensor_3d(f, nh, nt + 1, ns).unwrap();
    assert_err(
        ctx.ssm_scan(&s, &x, &dt_bad, &a2, &b, &b, &ids, 1),
        &["SSM_SCAN", "dt"],
    );
    let xt = ctx.transpose(&x).unwrap();
    assert_err(
        ctx.ssm_scan(&s, &xt, &dt, &a2, &b, &b, &ids, 1),
        &["SSM_SCAN", "packed"],
    );
    assert_err(
        ctx.ssm_scan(&s, &x, &dt, &a2, &b, &b3, &ids, 1),
        &["SSM_SCAN", "C", "shape of B"],
    );
    for n in [&conv, &ok] {
        validate_node(n).unwrap_or_else(|e| panic!("{} refused: {e}", n.op().name()));
    }
}
