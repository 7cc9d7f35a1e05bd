//! The op conformance suite on the wgpu device: every case the device claims (its
//! `supports_op` accepts) must pass — all cases in release builds, every fifth in the default
//! test profile — and each family the device has kernels for must have passing cases.

mod common;

use ggml_conformance::{cases, rng::DEFAULT_SEED, Status, Summary, Target};

/// Families the device has kernels for.
const FAMILIES: &[&str] = &[
    "binary", "unary", "glu", "copy", "norm", "softmax", "rope", "rows", "set_rows", "matmul",
];

#[test]
fn the_suite_passes_on_the_wgpu_device_for_every_case_it_claims() {
    let Some(dev) = common::device() else {
        return;
    };
    let target = Target::new(dev).unwrap();
    let step = if cfg!(debug_assertions) { 5 } else { 1 };
    let mut failures = Vec::new();
    let mut total = Summary::default();
    for (family, make) in cases::FAMILIES {
        let start = std::time::Instant::now();
        let mut s = Summary::default();
        for case in make().iter().step_by(step) {
            let r = target.run(case, DEFAULT_SEED);
            s.add(&r);
            total.add(&r);
            if r.status == Status::Fail {
                failures.push(r.to_string());
            }
        }
        eprintln!("{family}: {s} in {:.2?}", start.elapsed());
        if FAMILIES.contains(family) {
            assert!(s.passed > 0, "family {family}: no case passed ({s})");
        }
    }
    eprintln!("total: {total}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
