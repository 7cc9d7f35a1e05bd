//! RMS_NORM × MUL fusion on the CPU: the fused pass gives the bits of the two nodes computed
//! one at a time, and the RMS_NORM is still computed when something else needs it.

use ggml::{backend, Backend, Context, Tensor, Type};

fn fill(t: &Tensor, salt: usize) {
    let n = t.nelements() as usize;
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % 2003) as f32 / 101.5 - 9.8)
        .collect();
    t.set_f32(&v).unwrap();
}

fn compute(cpu: &Backend, ctx: &Context, t: &Tensor) {
    cpu.graph_compute(&ctx.build_forward_expand(t).unwrap())
        .unwrap();
}

/// x [1000, 7, 3], w broadcast from [1000, 1, 3] or of x's shape, and w as either operand.
#[test]
fn fused_rms_norm_mul_matches_the_nodes_one_at_a_time() {
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(2).unwrap();
    let ctx = Context::init(8 << 20, false).unwrap();
    let x = ctx.new_tensor_3d(Type::F32, 1000, 7, 3).unwrap();
    fill(&x, 1);
    for (w_rows, w_first) in [(1, false), (7, false), (7, true), (1, true)] {
        let w = ctx.new_tensor_3d(Type::F32, 1000, w_rows, 3).unwrap();
        fill(&w, 2);
        let norm = ctx.rms_norm(&x, 1e-6).unwrap();
        // w first needs w of the full shape (the second operand is the one broadcast)
        let fused = match (w_first, w_rows) {
            (true, 7) => ctx.mul(&w, &norm).unwrap(),
            _ => ctx.mul(&norm, &w).unwrap(),
        };
        compute(&cpu, &ctx, &fused);
        let got = fused.get_f32().unwrap();

        // The same two nodes, each in a graph of its own: no fusion.
        let norm_alone = ctx.rms_norm(&x, 1e-6).unwrap();
        compute(&cpu, &ctx, &norm_alone);
        let mul_alone = ctx.mul(&norm_alone, &w).unwrap();
        compute(&cpu, &ctx, &mul_alone);
        let want = mul_alone.get_f32().unwrap();
        let same = got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "w rows {w_rows}, w first {w_first}: fused result differs"
        );
    }
}

/// An RMS_NORM used twice, or flagged as an output, is computed (not fused away).
#[test]
fn an_rms_norm_needed_elsewhere_is_still_written() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 64, 4).unwrap();
    let w = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    fill(&x, 3);
    fill(&w, 4);
    let want = {
        let n = ctx.rms_norm(&x, 1e-5).unwrap();
        compute(&cpu, &ctx, &n);
        n.get_f32().unwrap()
    };
    // used by the MUL and by an ADD
    let norm = ctx.rms_norm(&x, 1e-5).unwrap();
    let out = ctx.add(&ctx.mul(&norm, &w).unwrap(), &norm).unwrap();
    compute(&cpu, &ctx, &out);
    assert_eq!(norm.get_f32().unwrap(), want);
    // an output
    let norm = ctx.rms_norm(&x, 1e-5).unwrap();
    norm.set_output();
    let out = ctx.mul(&norm, &w).unwrap();
    compute(&cpu, &ctx, &out);
    assert_eq!(norm.get_f32().unwrap(), want);
}
