//! SOFT_MAX: plain and extended with a mask (F32/F16, broadcast over heads and batches),
//! scale and ALiBi bias (GGML's `test_soft_max`).

use std::sync::Arc;

use ggml::Type;

use crate::case::{Case, Init, Input, Metric, Vars, NMSE_SOFT_MAX};
use crate::reference::soft_max;

/// The soft_max cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let metric = Metric::Nmse(NMSE_SOFT_MAX);
    for ne in [
        [16i64, 2, 3, 1],
        [33, 5, 4, 2],
        [1025, 3, 1, 1],
        [7, 1, 8, 1],
    ] {
        for m_prec in [None, Some(Type::F32), Some(Type::F16)] {
            for nr23 in [[1i64, 1], [2, 1]] {
                if ne[2] % nr23[0] != 0 || (m_prec.is_none() && nr23 != [1, 1]) {
                    continue;
                }
                for scale in [1.0f32, 0.1] {
                    for max_bias in [0.0f32, 8.0] {
                        if max_bias > 0.0 && m_prec.is_none() {
                            continue;
                        }
                        let mut inputs = vec![Input::new(Type::F32, &ne)];
                        if let Some(mt) = m_prec {
                            // One mask row per row of a; broadcast over heads by nr23.
                            inputs.push(Input::new(
                                mt,
                                &[ne[0], ne[1], ne[2] / nr23[0], ne[3] / nr23[1]],
                            ));
                        }
                        out.push(
                            Case::new(
                                "SOFT_MAX",
                                Vars::new()
                                    .ty("type", Type::F32)
                                    .list("ne", &ne)
                                    .flag("mask", m_prec.is_some())
                                    .ty("m_prec", m_prec.unwrap_or(Type::F32))
                                    .list("nr23", &nr23)
                                    .float("scale", scale)
                                    .float("max_bias", max_bias),
                                inputs,
                                move |ctx, x| ctx.soft_max_ext(&x[0], x.get(1), scale, max_bias),
                                move |x| soft_max(&x[0], x.get(1), scale as f64, max_bias as f64),
                            )
                            .metric(metric),
                        );
                    }
                }
            }
        }
    }
    // A causal mask with -inf above the diagonal, in F16 and F32.
    for mt in [Type::F32, Type::F16] {
        let ne = [9i64, 9, 2, 1];
        let causal = Init::Custom(Arc::new(
            |_, i| if i[0] > i[1] { f64::NEG_INFINITY } else { 0.0 },
        ));
        out.push(
            Case::new(
                "SOFT_MAX",
                Vars::new()
                    .ty("type", Type::F32)
                    .list("ne", &ne)
                    .ty("m_prec", mt)
                    .val("mask", "causal"),
                vec![
                    Input::new(Type::F32, &ne).uniform(-5.0, 5.0),
                    Input::new(mt, &[9, 9]).init(causal),
                ],
                |ctx, x| ctx.soft_max_ext(&x[0], Some(&x[1]), 0.125, 0.0),
                |x| soft_max(&x[0], Some(&x[1]), 0.125, 0.0),
            )
            .metric(metric),
        );
    }
    // Five dimensions: the mask broadcast over dimensions 2 to 4, ALiBi over dimension 2.
    let ne = [6i64, 3, 4, 2, 3];
    out.push(
        Case::new(
            "SOFT_MAX",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .list("ne_mask", &[6, 3, 2, 1, 3])
                .float("max_bias", 8.0),
            vec![
                Input::new(Type::F32, &ne),
                Input::new(Type::F32, &[6, 3, 2, 1, 3]),
            ],
            |ctx, x| ctx.soft_max_ext(&x[0], Some(&x[1]), 0.5, 8.0),
            |x| soft_max(&x[0], Some(&x[1]), 0.5, 8.0),
        )
        .metric(metric),
    );
    // Plain, on a padded view, and in place.
    for (v, inplace) in [(false, false), (true, false), (false, true)] {
        let ne = [31i64, 4, 3, 1];
        out.push(
            Case::new(
                "SOFT_MAX",
                Vars::new()
                    .ty("type", Type::F32)
                    .list("ne", &ne)
                    .flag("v", v)
                    .flag("inplace", inplace),
                vec![Input::new(Type::F32, &ne).uniform(-10.0, 10.0).padded_if(v)],
                move |ctx, x| {
                    if inplace {
                        ctx.soft_max_inplace(&x[0])
                    } else {
                        ctx.soft_max(&x[0])
                    }
                },
                |x| soft_max(&x[0], None, 1.0, 0.0),
            )
            .metric(metric),
        );
    }
    out
}
