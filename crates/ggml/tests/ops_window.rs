//! WIN_PART, WIN_UNPART, GET_REL_POS and ADD_REL_POS against plain f64 references, plus their
//! shape rules.

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta};
use ggml::{Context, Type};

/// Windows of `w` over `n` positions, padded.
fn nwin(n: usize, w: usize) -> usize {
    n.div_ceil(w)
}

/// `a` `[C, W, H]` cut into zero-padded `w × w` windows.
fn ref_win_part(a: &Host, w: usize) -> Host {
    let npx = nwin(a.ne[1], w);
    let np = npx * nwin(a.ne[2], w);
    Host::from_fn([a.ne[0], w, w, np, 1], |i| {
        let (x, y) = ((i[3] % npx) * w + i[1], (i[3] / npx) * w + i[2]);
        if x < a.ne[1] && y < a.ne[2] {
            a.at([i[0], x, y, 0, 0])
        } else {
            0.0
        }
    })
}

/// Windows back to a `w0 × h0` image.
fn ref_win_unpart(a: &Host, w0: usize, h0: usize, w: usize) -> Host {
    let npx = nwin(w0, w);
    Host::from_fn([a.ne[0], w0, h0, 1, 1], |i| {
        a.at([i[0], i[1] % w, i[2] % w, (i[2] / w) * npx + i[1] / w, 0])
    })
}

/// `result[:, k, q] = a[:, n − 1 − k + q]`.
fn ref_get_rel_pos(a: &Host) -> Host {
    let n = a.ne[1].div_ceil(2);
    Host::from_fn([a.ne[0], n, n, 1, 1], |i| {
        a.at([i[0], n - 1 - i[1] + i[2], 0, 0, 0])
    })
}

/// `a[kh·K + kw, qh·Qw + qw, b] + ph[kh, qw, qh, b] + pw[kw, qw, qh, b]`.
fn ref_add_rel_pos(a: &Host, pw: &Host, ph: &Host) -> Host {
    let (k, qw) = (pw.ne[0], pw.ne[1]);
    Host::from_fn(a.ne, |i| {
        let (kh, kw) = (i[0] / k, i[0] % k);
        let (qh, qx) = (i[1] / qw, i[1] % qw);
        a.at(i) + ph.at([kh, qx, qh, i[2], 0]) + pw.at([kw, qx, qh, i[2], 0])
    })
}

#[test]
fn win_part_and_unpart() {
    // (C, W, H, w): exact fits, padding on one or both sides, windows larger than the image.
    for (c, wd, ht, w) in [
        (3, 6, 4, 2),
        (5, 7, 5, 3),
        (2, 4, 9, 4),
        (4, 3, 2, 5),
        (1, 1, 1, 1),
    ] {
        for layout in [Layout::Contiguous, Layout::Padded] {
            let name = format!("WIN_PART(C={c},W={wd},H={ht},w={w},layout={layout:?})");
            check(&name, EXACT, |ctx, rng| {
                let (a, ha) = input(ctx, Type::F32, &[c, wd, ht], layout, rng, -1.0, 1.0)?;
                Ok((ctx.win_part(&a, w as i32)?, ref_win_part(&ha, w)))
            });
            let name = format!("WIN_UNPART(C={c},W={wd},H={ht},w={w},layout={layout:?})");
            check(&name, EXACT, |ctx, rng| {
                let np = nwin(wd as usize, w) * nwin(ht as usize, w);
                let ne = [c, w as i64, w as i64, np as i64];
                let (a, ha) = input(ctx, Type::F32, &ne, layout, rng, -1.0, 1.0)?;
                let out = ctx.win_unpart(&a, wd, ht, w as i32)?;
                Ok((out, ref_win_unpart(&ha, wd as usize, ht as usize, w)))
            });
        }
    }
}

#[test]
fn win_part_then_unpart_is_identity() {
    check("WIN_PART+WIN_UNPART(C=3,W=7,H=5,w=3)", EXACT, |ctx, rng| {
        let (a, ha) = input(
            ctx,
            Type::F32,
            &[3, 7, 5],
            Layout::Contiguous,
            rng,
            -1.0,
            1.0,
        )?;
        let p = ctx.win_part(&a, 3)?;
        Ok((ctx.win_unpart(&p, 7, 5, 3)?, ha))
    });
}

#[test]
fn get_rel_pos() {
    for ty in FLOATS {
        for (c, n) in [(4, 3), (7, 5), (1, 1), (16, 8)] {
            for layout in [Layout::Contiguous, Layout::Padded] {
                let name = format!("GET_REL_POS(type={ty},C={c},n={n},layout={layout:?})");
                check(&name, EXACT, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, &[c, 2 * n - 1], layout, rng, -2.0, 2.0)?;
                    Ok((ctx.get_rel_pos(&a, n, n)?, ref_get_rel_pos(&ha)))
                });
            }
        }
    }
}

#[test]
fn add_rel_pos() {
    // (K, Qw, Qh, B)
    for (k, qw, qh, b) in [(3, 3, 3, 2), (4, 2, 5, 3), (1, 1, 1, 1), (5, 4, 3, 1)] {
        for inplace in [false, true] {
            let name = format!("ADD_REL_POS(K={k},Qw={qw},Qh={qh},B={b},inplace={inplace})");
            check(&name, TOL, |ctx, rng| {
                let ne_a = [k * k, qw * qh, b];
                let (a, ha) = input(ctx, Type::F32, &ne_a, Layout::Contiguous, rng, -1.0, 1.0)?;
                let ne_p = [k, qw, qh, b];
                let (pw, hw) = input(ctx, Type::F32, &ne_p, Layout::Contiguous, rng, -1.0, 1.0)?;
                let (ph, hh) = input(ctx, Type::F32, &ne_p, Layout::Contiguous, rng, -1.0, 1.0)?;
                let out = if inplace {
                    let o = ctx.add_rel_pos_inplace(&a, &pw, &ph)?;
                    assert_aliases(&o, &a);
                    o
                } else {
                    ctx.add_rel_pos(&a, &pw, &ph)?
                };
                Ok((out, ref_add_rel_pos(&ha, &hw, &hh)))
            });
        }
    }
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let img = ctx.new_tensor_3d(Type::F32, 3, 7, 5).unwrap();
    let img16 = ctx.new_tensor_3d(Type::F16, 3, 7, 5).unwrap();
    let img4 = ctx.new_tensor_4d(Type::F32, 3, 7, 5, 2).unwrap();
    assert_err(ctx.win_part(&img, 0), &["WIN_PART", "w = 0"]);
    assert_err(ctx.win_part(&img16, 2), &["WIN_PART", "f16"]);
    assert_err(ctx.win_part(&img4, 2), &["WIN_PART", "3-D"]);
    let wins = ctx.new_tensor_4d(Type::F32, 3, 3, 3, 6).unwrap();
    assert_err(ctx.win_unpart(&wins, 7, 5, 2), &["WIN_UNPART", "windows"]);
    assert_err(ctx.win_unpart(&wins, 0, 5, 3), &["WIN_UNPART", "w0"]);
    assert_err(ctx.win_unpart(&wins, 7, 5, -1), &["WIN_UNPART", "w = -1"]);
    let table = ctx.new_tensor_2d(Type::F16, 4, 5).unwrap();
    assert_err(ctx.get_rel_pos(&table, 3, 2), &["GET_REL_POS", "qh = 3"]);
    assert_err(ctx.get_rel_pos(&table, 2, 2), &["GET_REL_POS", "2·qh − 1"]);
    let a = ctx.new_tensor_3d(Type::F32, 9, 6, 2).unwrap();
    let pw = ctx.new_tensor_4d(Type::F32, 3, 3, 2, 2).unwrap();
    let ph_bad = ctx.new_tensor_4d(Type::F32, 3, 2, 3, 2).unwrap();
    let pw_bad = ctx.new_tensor_4d(Type::F32, 3, 3, 2, 1).unwrap();
    let ph16 = ctx.new_tensor_4d(Type::F16, 3, 3, 2, 2).unwrap();
    assert_err(
        ctx.add_rel_pos(&a, &pw, &ph_bad),
        &["ADD_REL_POS", "ph", "shape of pw"],
    );
    assert_err(
        ctx.add_rel_pos(&a, &pw_bad, &pw_bad),
        &["ADD_REL_POS", "pw", "pw.ne3"],
    );
    assert_err(
        ctx.add_rel_pos(&a, &pw, &ph16),
        &["ADD_REL_POS", "ph", "f16"],
    );
    let at = ctx.transpose(&a).unwrap();
    assert_err(
        ctx.add_rel_pos(&at, &pw, &pw),
        &["ADD_REL_POS", "contiguous"],
    );

    let nodes = [
        ctx.win_part(&img, 3).unwrap(),
        ctx.win_unpart(&wins, 7, 5, 3).unwrap(),
        ctx.get_rel_pos(&ctx.new_tensor_2d(Type::BF16, 4, 5).unwrap(), 3, 3)
            .unwrap(),
        ctx.add_rel_pos(&a, &pw, &pw).unwrap(),
        ctx.add_rel_pos_inplace(&a, &pw, &pw).unwrap(),
    ];
    for n in &nodes {
        validate_node(n).unwrap_or_else(|e| panic!("{} refused: {e}", n.op().name()));
    }
    // A WIN_PART node whose window counts disagree with its operand is refused.
    let p = nodes[0].clone();
    let src = [Some(Meta::of(&img))];
    let mut params = p.op_params();
    params[0] += 1;
    let e = ggml::Op::WinPart.validate(&NodeMeta {
        dst: Meta::of(&p),
        view_offs: None,
        src: &src,
        op_params: &params,
    });
    assert_err(e, &["WIN_PART", "npx"]);
}
