//! SET_ROWS where the conformance suite does not look: duplicate indices (the later row wins)
//! and indices outside a (skipped), quantized destinations compared byte for byte with the
//! rows GGML's CPU quantizes (`common::ggml_cpu_quantize`), the node's slots and errors.

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta};
use ggml::{backend, quants, Context, Op, Tensor, Type};

/// `a` with row `c[i, j % C1, k % C2]` of plane `(j, k)` replaced by row `i` of `b`, in b's
/// row order (every index lies in `0..a.ne1`).
fn set_rows_ref(a: &Host, b: &Host, c: &Host) -> Host {
    let mut out = a.clone();
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            for i in 0..b.ne[1] {
                let r = c.at([i, i2 % c.ne[1], i3 % c.ne[2], 0, 0]);
                for k in 0..b.ne[0] {
                    let at = flat(&a.ne, &[k, r as usize, i2, i3, 0]);
                    out.v[at] = b.at([k, i, i2, i3, 0]);
                }
            }
        }
    }
    out
}

/// An index tensor of `ty` (I32 or I64) with shape `ne` holding `values`.
fn indices_tensor(ctx: &Context, ty: Type, ne: &[i64], values: &[i64]) -> ggml::Result<Tensor> {
    let t = ctx.new_tensor(ty, ne)?;
    let bytes: Vec<u8> = if ty == Type::I64 {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    } else {
        values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect()
    };
    t.set_bytes(&bytes, 0)?;
    Ok(t)
}

/// One case: destination and source types and shapes, index type and broadcast shape,
/// layouts.
#[derive(Clone, Copy, Debug)]
struct Case {
    a_ty: Type,
    b_ty: Type,
    c_ty: Type,
    a_ne: [i64; 4],
    n: i64,
    c_planes: [i64; 2],
    layout: Layout,
}

impl Case {
    fn name(&self) -> String {
        format!(
            "SET_ROWS(type={},type_src={},type_idx={},ne={:?},nr={},c_planes={:?},layout={:?})",
            self.a_ty, self.b_ty, self.c_ty, self.a_ne, self.n, self.c_planes, self.layout
        )
    }

    /// Random indices in `0..a.ne1`, with duplicates.
    fn index_values(&self, rng: &mut Rng) -> Vec<i64> {
        let count = self.n * self.c_planes[0] * self.c_planes[1];
        (0..count).map(|_| rng.range(0, self.a_ne[1] - 1)).collect()
    }

    fn build(&self, ctx: &Context, rng: &mut Rng) -> ggml::Result<(Tensor, Host)> {
        let [ne0, _, ne2, ne3] = self.a_ne;
        let (a, ha) = input(ctx, self.a_ty, &self.a_ne, self.layout, rng, -1.0, 1.0)?;
        let b_layout = match self.layout {
            Layout::Padded => Layout::Padded,
            _ => Layout::Permuted([0, 2, 1, 3]),
        };
        let (b, hb) = input(
            ctx,
            self.b_ty,
            &[ne0, self.n, ne2, ne3],
            b_layout,
            rng,
            -2.0,
            2.0,
        )?;
        let idx = self.index_values(rng);
        let c_ne = [self.n, self.c_planes[0], self.c_planes[1]];
        let c = indices_tensor(ctx, self.c_ty, &c_ne, &idx)?;
        let hc = Host::from_fn(shape(&c_ne), |i| idx[flat(&shape(&c_ne), &i)] as f64);
        let out = ctx.set_rows(&a, &b, &c)?;
        assert_aliases(&out, &a);
        Ok((out, set_rows_ref(&ha, &hb, &hc)))
    }
}

// Distinct in-range indices over every float type and layout are the conformance suite's
// (`ggml-conformance`, family `set_rows`); here what GGML leaves undefined: duplicate indices
// (the later row wins). Indices outside `a` fail the computation (below).
#[test]
fn duplicate_indices_the_later_row_wins() {
    for (a_ty, c_ty, a_ne, n, c_planes, layout) in [
        (
            Type::F32,
            Type::I32,
            [7, 9, 1, 1],
            5,
            [1, 1],
            Layout::Contiguous,
        ),
        (
            Type::F16,
            Type::I64,
            [16, 5, 3, 2],
            4,
            [3, 2],
            Layout::Contiguous,
        ),
        (
            Type::BF16,
            Type::I32,
            [3, 4, 2, 3],
            12,
            [1, 3],
            Layout::Contiguous,
        ),
        (
            Type::F32,
            Type::I64,
            [10, 6, 4, 2],
            5,
            [2, 2],
            Layout::Padded,
        ),
    ] {
        let case = Case {
            a_ty,
            b_ty: Type::F32,
            c_ty,
            a_ne,
            n,
            c_planes,
            layout,
        };
        check(&case.name(), EXACT, |ctx, rng| case.build(ctx, rng));
    }
}

#[test]
fn quantized_destinations() {
    let cpu = backend::cpu_init().unwrap();
    let types: Vec<Type> = Type::ALL
        .into_iter()
        .filter(|t| t.is_quantized() && quants::has_from_float_ref(*t))
        .collect();
    assert!(types.len() >= 20, "only {} quantized types", types.len());
    for ty in types {
        let k = 2 * ty.blck_size();
        let (rows, n) = (6usize, 4usize);
        let ctx = Context::init(1 << 20, false).unwrap();
        let a = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
        let before: Vec<u8> = (0..ty.row_size(k as i64).unwrap() * rows)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        a.set_bytes(&before, 0).unwrap();
        let b = ctx.new_tensor_2d(Type::F32, k as i64, n as i64).unwrap();
        let vals: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        b.set_f32(&vals).unwrap();
        // Row 3 twice (the later wins).
        let idx = [3i64, 0, 3, 1];
        let c = indices_tensor(&ctx, Type::I32, &[n as i64], &idx).unwrap();
        let out = ctx.set_rows(&a, &b, &c).unwrap();
        assert!(cpu.get_device().supports_op(&out), "{ty}");
        cpu.graph_compute(&ctx.build_forward_expand(&out).unwrap())
            .unwrap();
        let got = a.to_bytes().unwrap();
        let rb = ty.row_size(k as i64).unwrap();
        let mut want = before.clone();
        for (i, &r) in idx.iter().enumerate() {
            if (0..rows as i64).contains(&r) {
                let dst = &mut want[r as usize * rb..(r as usize + 1) * rb];
                dst.copy_from_slice(&ggml_cpu_quantize(ty, &vals[i * k..(i + 1) * k]));
            }
        }
        assert_eq!(got, want, "SET_ROWS(type={ty},type_src=f32)");
    }
}

/// An index outside the destination's rows writes nothing there and fails the computation
/// with an error naming the node, the index and its position, for I32 and I64 indices.
#[test]
fn out_of_range_indices_fail_the_compute() {
    for (c_ty, bad) in [(Type::I32, -1i64), (Type::I64, 9), (Type::I64, i64::MIN)] {
        let name = format!("set_rows out of range {c_ty} {bad}");
        let want = format!("src1 index {bad} at [2, 0, 0] is outside 0..9");
        check_compute_fails(&name, &["SET_ROWS", &want], |ctx, rng| {
            let (a, _) = input(ctx, Type::F32, &[4, 9], Layout::Contiguous, rng, -1.0, 1.0)?;
            let (b, _) = input(ctx, Type::F32, &[4, 3], Layout::Contiguous, rng, -1.0, 1.0)?;
            let c = indices_tensor(ctx, c_ty, &[3], &[1, 8, bad])?;
            ctx.set_rows(&a, &b, &c)
        });
    }
}

#[test]
fn builder_node_validates_and_slots_are_ggml_order() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F16, 8, 10, 2).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 8, 3, 2).unwrap();
    let c = ctx.new_tensor_2d(Type::I64, 3, 1).unwrap();
    let out = ctx.set_rows(&a, &b, &c).unwrap();
    assert_eq!(out.src(0), Some(&b));
    assert_eq!(out.src(1), Some(&c));
    assert_eq!(out.src(2), Some(&a));
    let src: Vec<Option<Meta>> = (0..3).map(|i| out.src(i).map(Meta::of)).collect();
    let params = out.op_params();
    let node = NodeMeta {
        dst: Meta::of(&out),
        view_offs: Some(out.view_offs()),
        src: &src,
        op_params: &params,
    };
    Op::SetRows.validate(&node).unwrap();
    // A result that is not a's memory is refused.
    let fresh = NodeMeta {
        view_offs: None,
        ..node
    };
    assert_err(
        Op::SetRows.validate(&fresh),
        &["SET_ROWS", "view of operand 2"],
    );
}

#[test]
fn bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 10, 4).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 8, 3, 4).unwrap();
    let c = ctx.new_tensor_2d(Type::I32, 3, 2).unwrap();
    ctx.set_rows(&a, &b, &c).unwrap();
    let b_i32 = ctx.new_tensor_3d(Type::I32, 8, 3, 4).unwrap();
    assert_err(ctx.set_rows(&a, &b_i32, &c), &["SET_ROWS", "b", "i32"]);
    let c_f32 = ctx.new_tensor_2d(Type::F32, 3, 2).unwrap();
    assert_err(
        ctx.set_rows(&a, &b, &c_f32),
        &["SET_ROWS", "c", "i32 or i64"],
    );
    let b_wide = ctx.new_tensor_3d(Type::F32, 9, 3, 4).unwrap();
    assert_err(ctx.set_rows(&a, &b_wide, &c), &["b", "ne0"]);
    let b_planes = ctx.new_tensor_3d(Type::F32, 8, 3, 2).unwrap();
    assert_err(ctx.set_rows(&a, &b_planes, &c), &["b", "ne2"]);
    let c_long = ctx.new_tensor_2d(Type::I32, 4, 2).unwrap();
    assert_err(ctx.set_rows(&a, &b, &c_long), &["c", "c.ne0"]);
    let c_3 = ctx.new_tensor_2d(Type::I32, 3, 3).unwrap();
    assert_err(ctx.set_rows(&a, &b, &c_3), &["c", "divide"]);
    let c_4d = ctx.new_tensor_4d(Type::I32, 3, 1, 1, 2).unwrap();
    assert_err(ctx.set_rows(&a, &b, &c_4d), &["c", "c.ne3"]);
    let a2 = ctx.new_tensor_2d(Type::F32, 10, 8).unwrap();
    let b2 = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let c2 = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let at = ctx.transpose(&a2).unwrap();
    assert_err(ctx.set_rows(&at, &b2, &c2), &["a", "packed"]);
    let bt = ctx
        .transpose(&ctx.new_tensor_2d(Type::F32, 3, 8).unwrap())
        .unwrap();
    assert_err(
        ctx.set_rows(&ctx.new_tensor_2d(Type::F32, 8, 10).unwrap(), &bt, &c2),
        &["b", "packed"],
    );
    // A destination type with no conversion builds but the CPU refuses it.
    let ai = ctx.new_tensor_2d(Type::I32, 8, 10).unwrap();
    let node = ctx.set_rows(&ai, &b2, &c2).unwrap();
    assert!(!backend::cpu_init().unwrap().get_device().supports_op(&node));
}
