//! The op conformance suite on the wgpu device: every case the device claims (its
//! `supports_op` accepts) must pass — all cases in release builds, every fifth in the default
//! test profile — and each family the device has kernels for must have passing cases.

mod common;

use ggml_conformance::{cases, rng::DEFAULT_SEED, Metric, Status, Summary, Target};

/// Families the device has kernels for.
const FAMILIES: &[&str] = &[
    "binary", "unary", "glu", "copy", "norm", "softmax", "rope", "rows", "set_rows", "matmul",
    "arith", "moe", "sort", "conv", "pool",
];

#[test]
fn the_suite_passes_on_the_wgpu_device_for_every_case_it_claims() {
    let Some(dev) = common::device() else {
        return;
    };
    let target = Target::new(dev).unwrap();
    let step = if cfg!(debug_assertions) { 5 } else { 1 };
    let mut failures = Vec::new();
    // Cases whose computation must fail (an index out of range) and did, naming it.
    let mut faults = 0;
    let mut total = Summary::default();
    for (family, make) in cases::FAMILIES {
        let start = std::time::Instant::now();
        let mut s = Summary::default();
        for case in make().iter().step_by(step) {
            let r = target.run(case, DEFAULT_SEED);
            s.add(&r);
            total.add(&r);
            let must_fail = matches!(case.metric, Metric::ComputeFails(_));
            if r.status == Status::Fail {
                failures.push(r.to_string());
            } else if must_fail && r.status == Status::Pass {
                faults += 1;
            }
        }
        eprintln!("{family}: {s} in {:.2?}", start.elapsed());
        if FAMILIES.contains(family) {
            assert!(s.passed > 0, "family {family}: no case passed ({s})");
        }
    }
    eprintln!("total: {total}");
    // GET_ROWS' and SET_ROWS' index faults (every case in release builds).
    if step == 1 {
        assert!(faults >= 3, "{faults} index-fault cases passed");
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
