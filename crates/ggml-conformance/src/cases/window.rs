//! SAM's window ops: WIN_PART, WIN_UNPART, GET_REL_POS and ADD_REL_POS (GGML's
//! `test_win_part`-style graphs; exact copies, the additions at the default threshold).

use ggml::Type;

use crate::case::{Case, Input, Metric, Vars};
use crate::host::{shape, Host};

const F32: Type = Type::F32;

fn win_part(out: &mut Vec<Case>) {
    // (C, W, H, w): windows that tile exactly, and ones padded at the right and bottom.
    for (c, w_img, h_img, w) in [
        (3, 8, 8, 4),
        (5, 7, 9, 3),
        (2, 14, 14, 14),
        (4, 5, 3, 2),
        (1, 1, 1, 1),
    ] {
        let (npx, npy) = ((w_img + w - 1) / w, (h_img + w - 1) / w);
        let ne = [c, w_img, h_img];
        out.push(
            Case::new(
                "WIN_PART",
                Vars::new().ty("type", F32).list("ne", &ne).val("w", w),
                vec![Input::new(F32, &ne)],
                move |ctx, x| ctx.win_part(&x[0], w as i32),
                move |x| {
                    let a = &x[0];
                    Host::from_fn(shape(&[c, w, w, npx * npy]), |i| {
                        let (px, py) = (i[3] % npx as usize, i[3] / npx as usize);
                        let (xx, yy) = (px * w as usize + i[1], py * w as usize + i[2]);
                        if xx < a.ne[1] && yy < a.ne[2] {
                            a.at([i[0], xx, yy, 0, 0])
                        } else {
                            0.0
                        }
                    })
                },
            )
            .metric(Metric::Exact),
        );
        // The inverse, from windows holding values in the padding too (dropped).
        let parts = [c, w, w, npx * npy];
        out.push(
            Case::new(
                "WIN_UNPART",
                Vars::new()
                    .ty("type", F32)
                    .list("ne", &parts)
                    .val("w0", w_img)
                    .val("h0", h_img)
                    .val("w", w),
                vec![Input::new(F32, &parts)],
                move |ctx, x| ctx.win_unpart(&x[0], w_img, h_img, w as i32),
                move |x| {
                    let a = &x[0];
                    let w = w as usize;
                    Host::from_fn(shape(&[c, w_img, h_img]), |i| {
                        let win = (i[2] / w) * npx as usize + i[1] / w;
                        a.at([i[0], i[1] % w, i[2] % w, win, 0])
                    })
                },
            )
            .metric(Metric::Exact),
        );
    }
}

fn get_rel_pos(out: &mut Vec<Case>) {
    for (c, n) in [(4i64, 3i64), (7, 5), (16, 14), (1, 1)] {
        for ty in [Type::F16, Type::BF16, Type::F32] {
            let ne = [c, 2 * n - 1];
            out.push(
                Case::new(
                    "GET_REL_POS",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &ne)
                        .val("qh", n)
                        .val("kh", n),
                    vec![Input::new(ty, &ne)],
                    move |ctx, x| ctx.get_rel_pos(&x[0], n, n),
                    move |x| {
                        let n = n as usize;
                        Host::from_fn(shape(&[c, n as i64, n as i64]), |i| {
                            x[0].at([i[0], n - 1 - i[1] + i[2], 0, 0, 0])
                        })
                    },
                )
                .metric(Metric::Exact),
            );
        }
    }
}

fn add_rel_pos(out: &mut Vec<Case>) {
    // (K, Qw, Qh, B)
    for (k, qw, qh, b) in [
        (3i64, 3i64, 3i64, 1i64),
        (5, 4, 6, 2),
        (8, 7, 6, 1),
        (2, 1, 3, 3),
    ] {
        for inplace in [false, true] {
            let a_ne = [k * k, qh * qw, b];
            let p_ne = [k, qw, qh, b];
            out.push(Case::new(
                "ADD_REL_POS",
                Vars::new()
                    .ty("type", F32)
                    .list("ne_a", &a_ne)
                    .list("ne_pw", &p_ne)
                    .flag("inplace", inplace),
                vec![
                    Input::new(F32, &a_ne),
                    Input::new(F32, &p_ne),
                    Input::new(F32, &p_ne),
                ],
                move |ctx, x| {
                    if inplace {
                        ctx.add_rel_pos_inplace(&x[0], &x[1], &x[2])
                    } else {
                        ctx.add_rel_pos(&x[0], &x[1], &x[2])
                    }
                },
                move |x| {
                    let (a, pw, ph) = (&x[0], &x[1], &x[2]);
                    let (k, qw) = (k as usize, qw as usize);
                    Host::from_fn(a.ne, |i| {
                        let (kh, kw) = (i[0] / k, i[0] % k);
                        let (qy, qx) = (i[1] / qw, i[1] % qw);
                        a.at(i) + ph.at([kh, qx, qy, i[2], 0]) + pw.at([kw, qx, qy, i[2], 0])
                    })
                },
            ));
        }
    }
}

/// The window cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    win_part(&mut out);
    get_rel_pos(&mut out);
    add_rel_pos(&mut out);
    out
}
