//! The suite on the CPU: every family's cases must pass — all of them in release builds
//! (`cargo test --release`, about 2.5 s on 2 cores), every fourth in the default test profile.

use ggml_conformance::{cases, rng::DEFAULT_SEED, Status, Summary, Target};

#[test]
fn every_family_passes_on_the_cpu() {
    let cpu = ggml::backend::dev_by_type(ggml::DeviceType::Cpu).expect("a CPU device");
    let target = Target::new(cpu).unwrap();
    let mut failures = Vec::new();
    let mut total = Summary::default();
    for (family, make) in cases::FAMILIES {
        let cases = make();
        assert!(!cases.is_empty(), "family {family} has no cases");
        let step = if cfg!(debug_assertions) { 4 } else { 1 };
        let start = std::time::Instant::now();
        let mut s = Summary::default();
        for case in cases.iter().step_by(step) {
            let r = target.run(case, DEFAULT_SEED);
            s.add(&r);
            total.add(&r);
            if r.status == Status::Fail {
                failures.push(r.to_string());
            }
        }
        eprintln!("{family}: {s} in {:.2?}", start.elapsed());
    }
    eprintln!("total: {total}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
