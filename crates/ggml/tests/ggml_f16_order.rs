//! MUL_MAT with F16 or BF16 weights gives GGML's results bit for bit, against GGML built
//! with `-march=native` for the same CPU: on the AVX-512 path, GGML built for an AVX-512 CPU
//! (for BF16, one with AVX-512 BF16); on the AVX2 path, GGML built for an AVX2 CPU without
//! AVX-512 (the cases come from such a machine, or from GGML built for AVX2 only and this
//! test run with `GGML_CPU_FORCE=avx2`). The cases are what
//! `tools/f16_order/ggml_f16_mul_mat.py` writes from GGML's own libraries, each computed here
//! on 1 and 2 threads.
//!
//! Ignored by default (they need GGML's libraries, which the workspace does not build); run
//! them with the cases' folders in `GGML_F16_CASES` and `GGML_BF16_CASES`:
//!
//! ```text
//! tools/f16_order/ggml_f16_mul_mat.py --lib-dir <GGML build/bin> --out /tmp/f16cases
//! tools/f16_order/ggml_f16_mul_mat.py --lib-dir <GGML build/bin> --out /tmp/bf16cases --type bf16
//! GGML_F16_CASES=/tmp/f16cases GGML_BF16_CASES=/tmp/bf16cases \
//!     cargo test -p ggml --release --test ggml_f16_order -- --ignored
//! ```

use ggml::{backend, Context, Type};

#[test]
#[ignore = "needs GGML's results: GGML_F16_CASES from tools/f16_order/ggml_f16_mul_mat.py"]
fn f16_weights_match_ggml_bit_for_bit() {
    check(Type::F16, "GGML_F16_CASES");
}

#[test]
#[ignore = "needs GGML's results: GGML_BF16_CASES from tools/f16_order/ggml_f16_mul_mat.py"]
fn bf16_weights_match_ggml_bit_for_bit() {
    check(Type::BF16, "GGML_BF16_CASES");
}

/// Every case file in the folder named by `var` (weights of type `weights`), computed on 1 and
/// 2 threads, gives GGML's bits.
fn check(weights: Type, var: &str) {
    let dir = std::env::var(var).unwrap_or_else(|_| panic!("{var} names the cases' folder"));
    let mut cases = 0;
    let mut differ = Vec::new();
    while let Ok(bytes) = std::fs::read(format!("{dir}/case{cases}.bin")) {
        let q = |o: usize| i64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
        let (m, k, n) = (q(0), q(8), q(16));
        let bty = match q(24) {
            0 => Type::F32,
            30 => Type::BF16,
            1 => Type::F16,
            t => panic!("case {cases}: activations of type {t}"),
        };
        let (a_bytes, rest) = bytes[32..].split_at((2 * m * k) as usize);
        let (b_bytes, want) = rest.split_at(bty.type_size() * (n * k) as usize);
        assert_eq!(
            want.len(),
            (4 * m * n) as usize,
            "case {cases}: file length"
        );
        for threads in [1, 2] {
            let ctx = Context::init(64 << 20, false).unwrap();
            let a = ctx.new_tensor_2d(weights, k, m).unwrap();
            let b = ctx.new_tensor_2d(bty, k, n).unwrap();
            a.set_bytes(a_bytes, 0).unwrap();
            b.set_bytes(b_bytes, 0).unwrap();
            let c = ctx.mul_mat(&a, &b).unwrap();
            let graph = ctx.build_forward_expand(&c).unwrap();
            let be = backend::cpu_init().unwrap();
            be.set_n_threads(threads).unwrap();
            be.graph_compute(&graph).unwrap();
            let got = c.get_f32().unwrap();
            let wrong = got
                .iter()
                .zip(want.chunks_exact(4))
                .filter(|(g, w)| g.to_bits() != u32::from_le_bytes((*w).try_into().unwrap()))
                .count();
            if wrong > 0 {
                differ.push(format!(
                    "case {cases} (m {m}, k {k}, n {n}, b {bty}, {threads} threads): {wrong} of {}",
                    m * n
                ));
            }
        }
        cases += 1;
    }
    assert!(cases > 0, "no case files in {dir}");
    assert!(
        differ.is_empty(),
        "results that differ from GGML's: {differ:?}"
    );
}
