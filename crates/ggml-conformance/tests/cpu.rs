//! The suite on the CPU: every family's cases must pass — all of them in release builds
//! (`cargo test --release`), every fourth in the default test profile — with the backend's
//! default thread count and again with 3 threads (another split of the work).

use ggml_conformance::{cases, rng::DEFAULT_SEED, Status, Summary, Target};

#[test]
fn every_family_passes_on_the_cpu() {
    let cpu = ggml::backend::dev_by_type(ggml::DeviceType::Cpu).expect("a CPU device");
    let target = Target::new(cpu).unwrap();
    let mut failures = Vec::new();
    let mut total = Summary::default();
    for threads in [None, Some(3)] {
        if let Some(n) = threads {
            target.backend.set_n_threads(n).unwrap();
        }
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
                    failures.push(format!("{r} (threads: {threads:?})"));
                }
            }
            eprintln!(
                "{family} (threads {threads:?}): {s} in {:.2?}",
                start.elapsed()
            );
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
