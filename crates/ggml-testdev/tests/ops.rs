//! Every op family, computed on the test device (memory in a server thread) and on the CPU from
//! the same inputs: the results agree bit for bit, and the CPU inputs' memory is never touched
//! by the device. A small forerunner of the op conformance suite, which can register the same
//! device (`ggml_testdev::register`).

use ggml::{backend, Context, Tensor, Type, UnaryOp};
mod common;

use common::input;
use ggml_testdev::Server;

/// How an input is filled.
#[derive(Clone, Copy)]
enum Fill {
    /// Values in roughly [-2, 2).
    Values,
    /// Indices in `0..n`.
    Indices(i32),
}

/// A case: builds its graph in a context, returns the inputs with their fill and the output.
type Build = fn(&Context) -> ggml::Result<(Vec<(Tensor, Fill)>, Tensor)>;

fn f32_input(ctx: &Context, ne: &[i64]) -> ggml::Result<(Tensor, Fill)> {
    Ok((ctx.new_tensor(Type::F32, ne)?, Fill::Values))
}

fn cases() -> Vec<(&'static str, Build)> {
    vec![
        ("add broadcast", |c| {
            let (a, b) = (f32_input(c, &[8, 4, 3])?, f32_input(c, &[8, 1, 3])?);
            let out = c.add(&a.0, &b.0)?;
            Ok((vec![a, b], out))
        }),
        ("sub mul div", |c| {
            let (a, b) = (f32_input(c, &[6, 5])?, f32_input(c, &[6, 5])?);
            let out = c.div(&c.mul(&c.sub(&a.0, &b.0)?, &a.0)?, &b.0)?;
            Ok((vec![a, b], out))
        }),
        ("add1 and scale_bias in place", |c| {
            let (a, b) = (f32_input(c, &[7, 3])?, f32_input(c, &[1])?);
            let s = c.add1(&a.0, &b.0)?;
            let out = c.scale_bias_inplace(&s, 1.5, -0.25)?;
            Ok((vec![a, b], out))
        }),
        ("mul_mat f32", |c| {
            let (w, x) = (f32_input(c, &[32, 12])?, f32_input(c, &[32, 5])?);
            let out = c.mul_mat(&w.0, &x.0)?;
            Ok((vec![w, x], out))
        }),
        ("mul_mat f16 weights, batched", |c| {
            let w = (c.new_tensor(Type::F16, &[32, 8, 2])?, Fill::Values);
            let x = f32_input(c, &[32, 3, 2])?;
            let out = c.mul_mat(&w.0, &x.0)?;
            Ok((vec![w, x], out))
        }),
        ("norm rms_norm", |c| {
            let a = f32_input(c, &[16, 6])?;
            let out = c.rms_norm(&c.norm(&a.0, 1e-5)?, 1e-6)?;
            Ok((vec![a], out))
        }),
        ("soft_max in place", |c| {
            let a = f32_input(c, &[10, 4, 2])?;
            let s = c.scale(&a.0, 3.0)?;
            let out = c.soft_max_inplace(&s)?;
            Ok((vec![a], out))
        }),
        ("sum sum_rows mean", |c| {
            let a = f32_input(c, &[9, 7])?;
            let rows = c.sum_rows(&a.0)?;
            let m = c.mean(&a.0)?;
            let out = c.add1(&c.add(&rows, &m)?, &c.sum(&a.0)?)?;
            Ok((vec![a], out))
        }),
        ("argmax", |c| {
            let a = f32_input(c, &[9, 7])?;
            let out = c.argmax(&a.0)?;
            Ok((vec![a], out))
        }),
        ("get_rows repeat concat", |c| {
            let a = f32_input(c, &[5, 8])?;
            let ids = (c.new_tensor(Type::I32, &[6])?, Fill::Indices(8));
            let rows = c.get_rows(&a.0, &ids.0)?; // [5, 6]
            let b = f32_input(c, &[5, 2])?;
            let rep = c.repeat(&b.0, &rows)?;
            let out = c.concat(&rows, &rep, 1)?; // [5, 12]
            Ok((vec![a, ids, b], out))
        }),
        ("views: permute, transpose, view_2d, cpy into a view", |c| {
            let a = f32_input(c, &[4, 3, 2, 2])?;
            let p = c.cont(&c.permute(&a.0, 2, 0, 3, 1)?)?;
            let t = c.cont(&c.transpose(&c.reshape_2d(&p, 12, 4)?)?)?; // [4, 12]
            let v = c.view_2d(&t, 3, 4, t.nb()[1], 4)?; // 3 of each row, from element 1
            let dst = f32_input(c, &[3, 4])?;
            let out = c.cpy(&c.cont(&v)?, &dst.0)?;
            Ok((vec![a, dst], out))
        }),
        ("cast and dup", |c| {
            let a = f32_input(c, &[11, 3])?;
            let h = c.cast(&a.0, Type::F16)?;
            let out = c.cast(&c.dup(&h)?, Type::F32)?;
            Ok((vec![a], out))
        }),
    ]
}

fn fill(inputs: &[(Tensor, Fill)]) {
    for (k, (t, f)) in inputs.iter().enumerate() {
        let n = t.nelements() as usize;
        match f {
            Fill::Values => t.set_f32(&input(n, 17 + k as u32)).unwrap(),
            Fill::Indices(m) => t
                .set_i32(&(0..n as i32).map(|i| (i * 5 + 3) % m).collect::<Vec<_>>())
                .unwrap(),
        }
    }
}

/// The output's bytes for `build` on the CPU and on `dev`.
fn both(build: Build, dev: &ggml::Backend, cpu: &ggml::Backend) -> (Vec<u8>, Vec<u8>) {
    let cctx = Context::init(1 << 22, false).unwrap();
    let (cin, cout) = build(&cctx).unwrap();
    let cg = cctx.build_forward_expand(&cout).unwrap();
    fill(&cin);
    cpu.graph_compute(&cg).unwrap();

    let dctx = Context::init(1 << 22, true).unwrap();
    let (din, dout) = build(&dctx).unwrap();
    let dg = dctx.build_forward_expand(&dout).unwrap();
    let buf = backend::alloc_ctx_tensors(&dctx, dev).unwrap();
    assert!(buf.get_base().is_none());
    fill(&din);
    dev.graph_compute(&dg).unwrap();
    (cout.to_bytes().unwrap(), dout.to_bytes().unwrap())
}

#[test]
fn every_op_family_agrees_bit_for_bit_with_the_cpu() {
    let server = Server::start("ops").unwrap();
    let dev = server.device("TestDevOps0").init(None).unwrap();
    let cpu = backend::cpu_init().unwrap();
    for (name, build) in cases() {
        let (want, got) = both(build, &dev, &cpu);
        assert!(!want.is_empty(), "{name}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn every_unary_op_the_cpu_computes_agrees_bit_for_bit() {
    let server = Server::start("unary").unwrap();
    let device = server.device("TestDevUnary0");
    let dev = device.init(None).unwrap();
    let cpu = backend::cpu_init().unwrap();
    let mut tested = 0;
    for op in (0..64).filter_map(UnaryOp::from_i32) {
        let cctx = Context::init(1 << 20, false).unwrap();
        let a = cctx.new_tensor_2d(Type::F32, 13, 3).unwrap();
        // Ops that take parameters cannot be built this way; the rest must be computable.
        let Ok(probe) = cctx.unary(&a, op) else {
            continue;
        };
        if !device.supports_op(&probe) {
            continue;
        }
        let cy = cctx
            .unary_inplace(&cctx.scale(&a, 1.0).unwrap(), op)
            .unwrap();
        let cg = cctx.build_forward_expand(&cy).unwrap();
        a.set_f32(&input(39, op as u32)).unwrap();
        cpu.graph_compute(&cg).unwrap();

        let dctx = Context::init(1 << 20, true).unwrap();
        let da = dctx.new_tensor_2d(Type::F32, 13, 3).unwrap();
        let dy = dctx
            .unary_inplace(&dctx.scale(&da, 1.0).unwrap(), op)
            .unwrap();
        let dg = dctx.build_forward_expand(&dy).unwrap();
        let _buf = backend::alloc_ctx_tensors(&dctx, &dev).unwrap();
        da.set_f32(&input(39, op as u32)).unwrap();
        dev.graph_compute(&dg).unwrap();
        assert_eq!(
            dy.to_bytes().unwrap(),
            cy.to_bytes().unwrap(),
            "{}",
            op.name()
        );
        tested += 1;
    }
    assert!(tested >= 20, "only {tested} unary ops tested");
}
