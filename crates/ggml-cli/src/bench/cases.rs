//! The benchmark cases, in the manner of `test-backend-ops`' test structs: each knows its op
//! name and parameter string (`NAME(vars)`, formatted as GGML formats them), builds its graph
//! in a context, and says what one run costs (FLOPs for matrix products, bytes moved otherwise).

use ggml::{Context, Tensor, Type, UnaryOp};

/// The element-wise binary ops benchmarked with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `ggml_add`.
    Add,
    /// `ggml_mul`.
    Mul,
}

/// One benchmark case: an op and its operands' types and shapes.
#[derive(Clone, Debug)]
pub enum Case {
    /// `test_mul_mat`: an `m`×`k` weight of `type_a` times `n` columns of `type_b`.
    MulMat {
        type_a: Type,
        type_b: Type,
        m: i64,
        n: i64,
        k: i64,
    },
    /// `test_bin_bcast`: `a` of shape `ne`·`nr` combined with `b` of shape `ne`, broadcast.
    BinBcast {
        op: BinOp,
        ty: Type,
        ne: [i64; 4],
        nr: [i64; 4],
    },
    /// `test_norm` (`rms == false`) and `test_rms_norm`.
    Norm {
        rms: bool,
        ty: Type,
        ne: [i64; 4],
        eps: f32,
    },
    /// `test_soft_max`: `soft_max_ext` with an optional 2-D mask of type `m_prec`.
    SoftMax {
        ty: Type,
        ne: [i64; 4],
        mask: bool,
        m_prec: Type,
        scale: f32,
        max_bias: f32,
    },
    /// `test_scale`.
    Scale { ty: Type, ne: [i64; 4], scale: f32 },
    /// `test_unary`.
    Unary { op: UnaryOp, ty: Type, ne: [i64; 4] },
    /// `test_get_rows`: `r` of the `m` rows of `n` columns, in `b` batches.
    GetRows {
        ty: Type,
        n: i64,
        m: i64,
        r: i64,
        b: i64,
    },
    /// `test_cpy`: a contiguous copy with a type conversion.
    Cpy {
        type_src: Type,
        type_dst: Type,
        ne: [i64; 4],
    },
    /// `test_cont`: a contiguous copy of a transposed tensor.
    Cont { ty: Type, ne: [i64; 4] },
    /// `test_sum_rows`.
    SumRows { ty: Type, ne: [i64; 4] },
}

/// GGML's `var_to_str` for a float (`std::to_string`: six decimals).
fn f(x: f32) -> String {
    format!("{x:.6}")
}

/// GGML's `var_to_str` for an array: `[a,b,c]`.
fn arr<T: ToString>(xs: &[T]) -> String {
    let parts: Vec<String> = xs.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// `name=value,…` as GGML's `VARS_TO_STR` macros write it.
fn vars(pairs: &[(&str, String)]) -> String {
    let parts: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(",")
}

impl Case {
    /// The op's name as `ggml_op_desc` gives it: the unary sub-op for UNARY (`SILU`), else the
    /// op (`MUL_MAT`).
    pub fn op_name(&self) -> &'static str {
        match self {
            Case::MulMat { .. } => "MUL_MAT",
            Case::BinBcast { op: BinOp::Add, .. } => "ADD",
            Case::BinBcast { op: BinOp::Mul, .. } => "MUL",
            Case::Norm { rms: true, .. } => "RMS_NORM",
            Case::Norm { rms: false, .. } => "NORM",
            Case::SoftMax { .. } => "SOFT_MAX",
            Case::Scale { .. } => "SCALE",
            Case::Unary { op, .. } => op.name(),
            Case::GetRows { .. } => "GET_ROWS",
            Case::Cpy { .. } => "CPY",
            Case::Cont { .. } => "CONT",
            Case::SumRows { .. } => "SUM_ROWS",
        }
    }

    /// The parameter string, with the names and order of GGML's test structs.
    pub fn vars(&self) -> String {
        let ty = |t: &Type| t.name().to_string();
        match self {
            Case::MulMat {
                type_a,
                type_b,
                m,
                n,
                k,
            } => vars(&[
                ("type_a", ty(type_a)),
                ("type_b", ty(type_b)),
                ("m", m.to_string()),
                ("n", n.to_string()),
                ("k", k.to_string()),
                ("bs", arr(&[1, 1])),
                ("nr", arr(&[1, 1])),
                ("per", arr(&[0, 1, 2, 3])),
                ("v", "0".into()),
            ]),
            Case::BinBcast { ty: t, ne, nr, .. } => {
                vars(&[("type", ty(t)), ("ne", arr(ne)), ("nr", arr(nr))])
            }
            Case::Norm { ty: t, ne, eps, .. } => vars(&[
                ("type", ty(t)),
                ("ne", arr(ne)),
                ("v", "0".into()),
                ("eps", f(*eps)),
            ]),
            Case::SoftMax {
                ty: t,
                ne,
                mask,
                m_prec,
                scale,
                max_bias,
            } => vars(&[
                ("type", ty(t)),
                ("ne", arr(ne)),
                ("mask", u8::from(*mask).to_string()),
                ("m_prec", ty(m_prec)),
                ("scale", f(*scale)),
                ("max_bias", f(*max_bias)),
            ]),
            Case::Scale { ty: t, ne, scale } => {
                vars(&[("type", ty(t)), ("ne", arr(ne)), ("scale", f(*scale))])
            }
            Case::Unary { ty: t, ne, .. } => {
                vars(&[("type", ty(t)), ("ne_a", arr(ne)), ("v", "0".into())])
            }
            Case::GetRows { ty: t, n, m, r, b } => vars(&[
                ("type", ty(t)),
                ("n", n.to_string()),
                ("m", m.to_string()),
                ("r", r.to_string()),
                ("b", b.to_string()),
                ("v", "0".into()),
            ]),
            Case::Cpy {
                type_src,
                type_dst,
                ne,
            } => vars(&[
                ("type_src", ty(type_src)),
                ("type_dst", ty(type_dst)),
                ("ne", arr(ne)),
                ("permute_src", arr(&[0, 0, 0, 0])),
                ("permute_dst", arr(&[0, 0, 0, 0])),
            ]),
            Case::Cont { ty: t, ne } | Case::SumRows { ty: t, ne } => {
                vars(&[("type", ty(t)), ("ne", arr(ne))])
            }
        }
    }

    /// `NAME(vars)`, the case's full name (what `-o` may also match).
    pub fn full_name(&self) -> String {
        format!("{}({})", self.op_name(), self.vars())
    }

    /// Creates the operands in `ctx` and returns the op's result.
    pub fn build(&self, ctx: &Context) -> ggml::Result<Tensor> {
        let new = |t: Type, ne: &[i64; 4]| ctx.new_tensor(t, ne);
        match self {
            Case::MulMat {
                type_a,
                type_b,
                m,
                n,
                k,
            } => {
                let a = new(*type_a, &[*k, *m, 1, 1])?;
                let b = new(*type_b, &[*k, *n, 1, 1])?;
                ctx.mul_mat(&a, &b)
            }
            Case::BinBcast { op, ty, ne, nr } => {
                let big: [i64; 4] = std::array::from_fn(|d| ne[d] * nr[d]);
                let a = new(*ty, &big)?;
                let b = new(*ty, ne)?;
                match op {
                    BinOp::Add => ctx.add(&a, &b),
                    BinOp::Mul => ctx.mul(&a, &b),
                }
            }
            Case::Norm { rms, ty, ne, eps } => {
                let a = new(*ty, ne)?;
                if *rms {
                    ctx.rms_norm(&a, *eps)
                } else {
                    ctx.norm(&a, *eps)
                }
            }
            Case::SoftMax {
                ty,
                ne,
                mask,
                m_prec,
                scale,
                max_bias,
            } => {
                let a = new(*ty, ne)?;
                let mask = if *mask {
                    Some(ctx.new_tensor_2d(*m_prec, ne[0], ne[1])?)
                } else {
                    None
                };
                ctx.soft_max_ext(&a, mask.as_ref(), *scale, *max_bias)
            }
            Case::Scale { ty, ne, scale } => ctx.scale(&new(*ty, ne)?, *scale),
            Case::Unary { op, ty, ne } => ctx.unary(&new(*ty, ne)?, *op),
            Case::GetRows { ty, n, m, r, b } => {
                let table = ctx.new_tensor_3d(*ty, *n, *m, *b)?;
                let rows = ctx.new_tensor_2d(Type::I32, *r, *b)?;
                ctx.get_rows(&table, &rows)
            }
            Case::Cpy {
                type_src,
                type_dst,
                ne,
            } => ctx.cpy(&new(*type_src, ne)?, &new(*type_dst, ne)?),
            Case::Cont { ty, ne } => ctx.cont(&ctx.transpose(&new(*ty, ne)?)?),
            Case::SumRows { ty, ne } => ctx.sum_rows(&new(*ty, ne)?),
        }
    }

    /// Floating-point operations of one run (`op_flops`); 0 for ops measured by bytes moved.
    pub fn op_flops(&self) -> u64 {
        match self {
            Case::MulMat { m, n, k, .. } => 2 * (m * n * k) as u64,
            _ => 0,
        }
    }

    /// Bytes one run moves (`op_size`): by default the result's bytes plus every operand's;
    /// `test_bin_bcast` counts three times the result, `test_cpy` the result and the source,
    /// as GGML's overrides do.
    pub fn op_size(&self, out: &Tensor) -> usize {
        match self {
            Case::BinBcast { .. } => 3 * out.nbytes(),
            Case::Cpy { .. } => out.nbytes() + out.src(0).map_or(0, Tensor::nbytes),
            _ => out.nbytes() + out.srcs().map(Tensor::nbytes).sum::<usize>(),
        }
    }

    /// The interval float inputs are drawn from: GGML's per-test choices (wide for unary ops
    /// so GELU's tails are exercised, near 1 for MUL, ±10 for RMS_NORM).
    pub fn input_range(&self) -> (f32, f32) {
        match self {
            Case::Unary { .. } => (-150.0, 150.0),
            Case::BinBcast { op: BinOp::Mul, .. } => (0.9, 1.1),
            Case::Norm { rms: true, .. } => (-10.0, 10.0),
            _ => (-1.0, 1.0),
        }
    }

    /// For cases with an index operand (GET_ROWS), the exclusive bound of valid indices.
    pub fn index_bound(&self) -> Option<i64> {
        match self {
            Case::GetRows { m, .. } => Some(*m),
            _ => None,
        }
    }
}

/// Weight types of the MUL_MAT cases: GGML's `all_types`, in its order.
pub const WEIGHT_TYPES: [Type; 27] = [
    Type::F32,
    Type::F16,
    Type::BF16,
    Type::Q4_0,
    Type::Q4_1,
    Type::Q5_0,
    Type::Q5_1,
    Type::Q8_0,
    Type::Q1_0,
    Type::Q2_0,
    Type::MXFP4,
    Type::NVFP4,
    Type::Q2_K,
    Type::Q3_K,
    Type::Q4_K,
    Type::Q5_K,
    Type::Q6_K,
    Type::TQ2_0,
    Type::IQ2_XXS,
    Type::IQ2_XS,
    Type::IQ2_S,
    Type::IQ3_XXS,
    Type::IQ1_S,
    Type::IQ1_M,
    Type::IQ4_NL,
    Type::IQ3_S,
    Type::IQ4_XS,
];

/// The shapes one list of cases uses; the full list has real-model sizes, the quick one
/// small sizes that run in milliseconds.
struct Sizes {
    /// (m, n, k) of the MUL_MAT cases: matrix-vector first, then matrix-matrix.
    mul_mat: [(i64, i64, i64); 3],
    /// Row length and row count of the row-wise ops (norms, unary, SCALE, SUM_ROWS, CONT).
    width: i64,
    rows: i64,
    /// Shapes of the SOFT_MAX cases.
    soft_max: [[i64; 4]; 2],
    /// Rows in the GET_ROWS table.
    table_rows: i64,
    /// Shape of the CPY case.
    cpy: [i64; 4],
}

const FULL: Sizes = Sizes {
    mul_mat: [(4096, 1, 4096), (512, 512, 512), (1024, 1024, 1024)],
    width: 4096,
    rows: 512,
    soft_max: [[1024, 1024, 10, 1], [77, 4096, 5, 1]],
    table_rows: 1024,
    cpy: [512, 3072, 1, 1],
};

const QUICK: Sizes = Sizes {
    mul_mat: [(256, 1, 256), (64, 64, 256), (128, 128, 256)],
    width: 256,
    rows: 32,
    soft_max: [[64, 64, 4, 1], [77, 64, 2, 1]],
    table_rows: 64,
    cpy: [64, 192, 1, 1],
};

/// Every case, in the order they run: small sizes with `quick`.
pub fn all(quick: bool) -> Vec<Case> {
    let s = if quick { &QUICK } else { &FULL };
    let rowwise = [s.width, s.rows, 1, 1];
    let mut cases = Vec::new();
    for (m, n, k) in s.mul_mat {
        for type_a in WEIGHT_TYPES {
            cases.push(Case::MulMat {
                type_a,
                type_b: Type::F32,
                m,
                n,
                k,
            });
        }
    }
    for op in [BinOp::Add, BinOp::Mul] {
        for nr in [[1, 1, 1, 1], [1, s.rows, 1, 1]] {
            cases.push(Case::BinBcast {
                op,
                ty: Type::F32,
                ne: [s.width, 1, 1, 1],
                nr,
            });
        }
    }
    for rms in [true, false] {
        cases.push(Case::Norm {
            rms,
            ty: Type::F32,
            ne: rowwise,
            eps: 1e-6,
        });
    }
    let soft_max = |ne, mask, m_prec| Case::SoftMax {
        ty: Type::F32,
        ne,
        mask,
        m_prec,
        scale: 1.0,
        max_bias: 0.0,
    };
    cases.push(soft_max(s.soft_max[0], false, Type::F32));
    cases.push(soft_max(s.soft_max[0], true, Type::F32));
    cases.push(soft_max(s.soft_max[0], true, Type::F16));
    cases.push(soft_max(s.soft_max[1], false, Type::F32));
    cases.push(Case::Scale {
        ty: Type::F32,
        ne: rowwise,
        scale: 2.0,
    });
    for op in [UnaryOp::Silu, UnaryOp::Gelu] {
        for ty in [Type::F32, Type::F16] {
            cases.push(Case::Unary {
                op,
                ty,
                ne: rowwise,
            });
        }
    }
    for ty in [Type::F32, Type::F16, Type::Q4_0, Type::Q8_0] {
        cases.push(Case::GetRows {
            ty,
            n: s.width,
            m: s.table_rows,
            r: s.rows,
            b: 1,
        });
    }
    cases.push(Case::Cpy {
        type_src: Type::F32,
        type_dst: Type::F16,
        ne: s.cpy,
    });
    cases.push(Case::Cont {
        ty: Type::F32,
        ne: rowwise,
    });
    cases.push(Case::SumRows {
        ty: Type::F32,
        ne: rowwise,
    });
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::{tensor_overhead, Op};

    /// `ggml_op_desc`, computed from a built tensor.
    fn op_desc(t: &Tensor) -> String {
        if t.op() == Op::Unary {
            UnaryOp::from_i32(t.op_params()[0]).map_or("?".into(), |u| u.name().into())
        } else {
            t.op().name().into()
        }
    }

    #[test]
    fn every_case_builds_the_op_it_is_named_after() {
        for quick in [true, false] {
            for case in all(quick) {
                let ctx = Context::init(16 * tensor_overhead(), true).unwrap();
                let out = case.build(&ctx).unwrap();
                assert_eq!(op_desc(&out), case.op_name(), "{}", case.full_name());
            }
        }
    }

    #[test]
    fn names_are_formatted_as_ggml_formats_them() {
        let mm = Case::MulMat {
            type_a: Type::F16,
            type_b: Type::F32,
            m: 4096,
            n: 1,
            k: 4096,
        };
        assert_eq!(
            mm.full_name(),
            "MUL_MAT(type_a=f16,type_b=f32,m=4096,n=1,k=4096,bs=[1,1],nr=[1,1],per=[0,1,2,3],v=0)"
        );
        let add = Case::BinBcast {
            op: BinOp::Add,
            ty: Type::F32,
            ne: [4096, 1, 1, 1],
            nr: [1, 512, 1, 1],
        };
        assert_eq!(
            add.full_name(),
            "ADD(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1])"
        );
        let sm = Case::SoftMax {
            ty: Type::F32,
            ne: [64, 64, 4, 1],
            mask: true,
            m_prec: Type::F16,
            scale: 1.0,
            max_bias: 0.0,
        };
        assert_eq!(
            sm.full_name(),
            "SOFT_MAX(type=f32,ne=[64,64,4,1],mask=1,m_prec=f16,scale=1.000000,max_bias=0.000000)"
        );
    }

    #[test]
    fn costs_follow_ggml_op_flops_and_op_size() {
        let ctx = Context::init(16 * tensor_overhead(), true).unwrap();
        let mm = Case::MulMat {
            type_a: Type::F32,
            type_b: Type::F32,
            m: 8,
            n: 3,
            k: 32,
        };
        assert_eq!(mm.op_flops(), 2 * 8 * 3 * 32);
        // out 8·3 f32, a 32·8 f32, b 32·3 f32
        assert_eq!(mm.op_size(&mm.build(&ctx).unwrap()), 4 * (24 + 256 + 96));
        let add = Case::BinBcast {
            op: BinOp::Add,
            ty: Type::F32,
            ne: [16, 1, 1, 1],
            nr: [1, 4, 1, 1],
        };
        assert_eq!(add.op_flops(), 0);
        assert_eq!(add.op_size(&add.build(&ctx).unwrap()), 3 * 4 * 64);
        let cpy = Case::Cpy {
            type_src: Type::F32,
            type_dst: Type::F16,
            ne: [16, 2, 1, 1],
        };
        assert_eq!(cpy.op_size(&cpy.build(&ctx).unwrap()), 2 * 32 + 4 * 32);
    }
}
