//! # ggml-conformance
//!
//! The op conformance suite of ggml-rs, in the manner of GGML's `test-backend-ops`: every case
//! is an op invocation named `OP(var=value,…)` with GGML's parameter spelling
//! (`ADD(type=f32,ne=[10,5,4,3],nr=[2,1,1,1])`), deterministic seeded inputs, a deliberately
//! plain f64 reference (scalar loops over logical indices) and GGML's error metric. The suite
//! uses the public API of `ggml` only, so it runs unchanged on every registered device.
//!
//! ## What a run does
//!
//! For each case on a [`Target`] (a device and a backend on it):
//! 1. the inputs are created in a metadata-only context (views of larger or permuted tensors
//!    where the case's [`Layout`] says so) and their values drawn from the case's seed, which
//!    is derived from the base seed and the case's name ([`rng::case_seed`]); quantized inputs
//!    are f32 values quantized with `ggml::quantize_chunk`, and the reference reads them
//!    dequantized;
//! 2. the builder makes the graph; if the device's `supports_op` refuses any tensor of the case,
//!    the case is "not supported" (reported, not failed);
//! 3. every tensor that owns memory is placed in one buffer of the device's buffer type with an
//!    `F32[1024]` guard tensor before the first and after each, filled with a pattern; computed
//!    tensors are filled with `0xff` bytes (NaN), so that an element left unwritten fails;
//! 4. inputs are written with the tensor set API, the graph is computed by the backend, outputs
//!    are read back with the get API, and the guards must be byte-identical;
//! 5. each output is compared with the reference rounded to the output's type (for a quantized
//!    output: each row through GGML's reference quantizer and back, what the type can hold;
//!    [`host::round_host`]) by [`compare()`]:
//!    a NaN on either side fails, infinities must agree in position and sign, then NMSE within
//!    the case's threshold — GGML's 1e-7 by default, 5e-4 for mul_mat/out_prod/convolutions/
//!    attention, 1e-6 for soft_max — or an exact match (argmax, argsort, count_equal, copies
//!    between equal types), or for top_k the same set of indices in each row (GGML's metric:
//!    its kernel does not order the `k` indices).
//!
//! Results are [`CaseResult`] values (case, device, status, error, threshold, message), shared
//! by the `ggml test-ops` command and the tests.
//!
//! ## Adding a family for a new op
//!
//! Write one file `src/cases/NAME.rs` with a function `pub fn cases() -> Vec<Case>` and add it
//! to [`cases::FAMILIES`] (one line in `src/cases/mod.rs`). Each case is
//!
//! ```
//! use ggml::Type;
//! use ggml_conformance::{Case, Host, Input, Layout, Vars};
//!
//! fn cases() -> Vec<Case> {
//!     let mut out = Vec::new();
//!     for ty in [Type::F32, Type::F16] {
//!         for view in [false, true] {
//!             let ne = [7i64, 5, 3, 2];
//!             out.push(Case::new(
//!                 "NEG",
//!                 Vars::new().ty("type", ty).list("ne", &ne).flag("v", view),
//!                 vec![Input::new(ty, &ne).uniform(-10.0, 10.0).padded_if(view)],
//!                 |ctx, x| ctx.neg(&x[0]),
//!                 |x| Host::from_fn(x[0].ne, |i| -x[0].at(i)),
//!             ));
//!         }
//!     }
//!     out
//! }
//! # assert_eq!(cases()[3].name(), "NEG(type=f16,ne=[7,5,3,2],v=1)");
//! ```
//!
//! - the op name is GGML's `ggml_op_desc` (`ADD`, `MUL_MAT`; a unary or GLU op's own name), and
//!   the vars are GGML's for the same test struct where there is one, in its order;
//! - grids: odd sizes, broadcasting, non-contiguous inputs ([`Layout::Permuted`],
//!   [`Layout::Transposed`], [`Layout::Padded`]) and every type the op has in GGML; a type the
//!   device does not support is reported "not supported", so list them all;
//! - the builder gets the inputs in order and returns the output (use [`Case::new_multi`] for
//!   several). Use only the public builder API; tensors it creates itself (a `cpy` destination)
//!   start as NaN bytes, so every value the op reads must come from an [`Input`];
//! - the reference gets the inputs' logical values ([`Host`], f64, dimension 0 fastest) and
//!   returns the expected outputs in f64 — plain loops over indices, no cleverness, nothing from
//!   the library; the runner rounds them to the output type;
//! - the name must be unique in the suite (the fixtures find cases by name), and inputs depend
//!   only on the base seed and the name, so renaming a case changes its inputs; a unit test
//!   (`cases::tests`) checks uniqueness and that each graph computes the op its case names;
//! - set the metric with [`Case::metric`] when GGML's test sets another threshold;
//! - keep the family fast (a few seconds on 2 cores in release) and check
//!   `ggml test-ops -o NAME` passes on the CPU.
//!
//! ## GGML fixtures
//!
//! `ggml test-ops --export FILE` writes every case whose tensors have at most 4 dimensions in
//! the exchange format (JSON Lines, [`export`]); `tools/op_fixtures/run_ggml.py` computes them
//! with the real GGML's CPU backend and writes the binary fixture read by [`fixture`]. The
//! committed fixture is `crates/ggml/tests/fixtures/ops/ggml_ops.bin`; regenerate it (after a
//! case changes, which the suite reports as "stale") with
//!
//! ```text
//! cargo run --release -p ggml-cli -- test-ops --export /tmp/ops.jsonl
//! python3 tools/op_fixtures/run_ggml.py /tmp/ops.jsonl --out crates/ggml/tests/fixtures/ops/ggml_ops.bin
//! ```
//!
//! (the runner needs the llama.cpp build whose readiness marker is
//! `$HOME/.cache/ggml-rs/llama-cpp-READY`). `ggml test-ops --fixtures FILE` and the
//! `ggml_fixtures` test compare our results with GGML's, case by case, with the same metric.
//!
//! ## Where the suite differs from `test-backend-ops`
//!
//! - The reference is a plain f64 implementation, not GGML's CPU backend, so the CPU is tested
//!   like every other device; inputs come from a fixed, printed seed instead of
//!   `std::random_device`.
//! - The NMSE divides by the reference's `Σ want²` (GGML divides by the tested side's, so an
//!   all-zero wrong result gives 0/0 and passes there).
//! - The custom-op cases (MAP_CUSTOM1/2/3, CUSTOM) run Rust closures; they are not exported
//!   to GGML, and are checked against their references only. The composite convolutions
//!   (`conv_1d`, `conv_1d_dw`, `conv_2d`, `conv_2d_dw`, `conv_3d`) are named after their first
//!   node (`IM2COL(…,via=conv_2d)`, `IM2COL_3D(…,via=conv_3d)`): select them with `-o IM2COL`.
//! - Only the outputs are compared, not every intermediate node; computed tensors start as NaN
//!   bytes, so an element a kernel skips fails.
//! - Cases the library computes and GGML's CPU refuses (the fixture's status 1, skipped in the
//!   comparison): SCALE and ARGMAX on F16, MUL_MAT of F32/BF16 weights with F16 activations,
//!   CPY into IQ2_XXS/IQ2_XS/IQ2_S/IQ3_XXS/IQ3_S/IQ1_S/IQ1_M, GET_ROWS, SET_ROWS and
//!   ADD_ID with an index outside its range and MUL_MAT_ID with an expert id outside the
//!   experts (a compute error here, `Metric::ComputeFails`; an assert or crash in GGML);
//!   ARGSORT, TOP_K,
//!   GROUP_NORM and L2_NORM on F16/BF16 and SWIGLU_OAI on F16/BF16 (F32 only in GGML's CPU);
//!   CUMSUM, GROUP_NORM, L2_NORM, XIELU and the GLU ops on inputs whose rows are not
//!   contiguous (GGML asserts); MUL_MAT_ID with F16/BF16 activations or non-contiguous
//!   operands; OUT_PROD with F16/BF16 activations, with F16/BF16 weights, or with quantized
//!   weights and transposed activations (not supported by GGML's CPU); IM2COL with BF16
//!   input and IM2COL_3D with F16 input (GGML's CPU asserts F32); the composite `conv_2d_dw`
//!   with an F32 kernel (GGML's own graph multiplies F32 weights by its F16 im2col, which its
//!   CPU does not support); CONV_2D_DW on a padded input (GGML aborts on non-contiguous
//!   layouts other than channels-innermost); GET_REL_POS of an F32 table (GGML aborts).
//! - A GGML bug: RWKV_WKV7 with head size 32 or 7 corrupts GGML's heap on an AVX-512 CPU
//!   (`malloc(): corrupted top size`; its SIMD loop steps `GGML_F32_STEP` = 64 floats with no
//!   tail); those cases are reported refused, the head-size-64 case agrees.
//! - A GGML bug: OUT_PROD of Q4_K weights `[512,5,2]` by F32 `[3,5,2]` corrupts GGML's heap
//!   (`free(): invalid size`, the process aborts); the case is reported refused.
//! - BF16 GLU results are judged with NMSE 1e-5: computed in f32, a BF16 result lands one BF16
//!   step from the rounded f64 reference where the two straddle a rounding boundary, alone
//!   above 1e-7 in a small case (GGML's grid has no BF16 GLU case).
//! - GGML bugs ([`fixture::GGML_BUGS`]; those cases are reported skipped in the comparison
//!   with GGML, and pass against the f64 reference): CLAMP and LEAKY_RELU on a view with
//!   padded planes, ARGSORT on padded, permuted and transposed views and TOP_K on a padded one
//!   (GGML's kernels step through rows as `i·nb1` and read them as contiguous); COUNT_EQUAL on
//!   strided inputs (GGML splits the row index wrongly: `ir − i3·ne3` for `ir − i3·ne2·ne1`);
//!   SOLVE_TRI with a padded or transposed `b` (GGML indexes b and x as packed matrices);
//!   GROUP_NORM with n_groups = i32::MAX (GGML's int `(ne2 + n_groups − 1) / n_groups`
//!   overflows); IM2COL on a padded input (GGML reads the input planes as packed rows,
//!   ignoring nb1); POOL_1D and POOL_2D on BF16 (GGML decodes every non-F32 input as F16);
//!   GET_REL_POS of a BF16 table (GGML copies its bits into the F16 result unconverted);
//!   ROPE with rows of odd length (GGML copies the unrotated channels in pairs, one element
//!   past each row: past the tensor on the last row, and with two threads a row can overwrite
//!   its neighbour's first element).
//! - Apart from those, no case GGML computes differs from ours beyond its threshold.
#![warn(missing_docs)]

pub mod case;
pub mod cases;
pub mod compare;
pub mod export;
pub mod filter;
pub mod fixture;
pub mod host;
mod instance;
pub mod reference;
pub mod rng;
pub mod runner;

pub use case::{Case, Init, Input, Layout, Metric, Vars};
pub use compare::compare;
pub use filter::Filter;
pub use host::{Host, Shape};
pub use runner::{devices, CaseResult, Prepared, Status, Summary, Target};
