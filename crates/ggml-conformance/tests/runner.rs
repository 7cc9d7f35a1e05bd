//! The runner judges: a wrong reference fails with the NMSE and where, NaN fails, an output
//! left unwritten fails (computed memory starts as NaN bytes), an op the device refuses is
//! "not supported", and results carry case, device and threshold.

use ggml::Type;
use ggml_conformance::{
    rng::DEFAULT_SEED, Case, Host, Init, Input, Metric, Status, Summary, Target, Vars,
};

fn cpu() -> Target {
    Target::new(ggml::backend::dev_by_type(ggml::DeviceType::Cpu).unwrap()).unwrap()
}

fn neg_case(reference: fn(f64) -> f64) -> Case {
    Case::new(
        "NEG",
        Vars::new().ty("type", Type::F32),
        vec![Input::new(Type::F32, &[8, 3])],
        |ctx, x| ctx.neg(&x[0]),
        move |x| Host::from_fn(x[0].ne, |i| reference(x[0].at(i))),
    )
}

#[test]
fn right_and_wrong_references() {
    let t = cpu();
    let ok = t.run(&neg_case(|x| -x), DEFAULT_SEED);
    assert_eq!(ok.status, Status::Pass, "{ok}");
    assert_eq!(ok.to_string(), "NEG(type=f32): OK");
    assert_eq!((ok.error, ok.threshold), (Some(0.0), 1e-7));
    assert_eq!(ok.device, "CPU");
    let bad = t.run(&neg_case(|x| -x * 1.01), DEFAULT_SEED);
    assert_eq!(bad.status, Status::Fail);
    let line = bad.to_string();
    assert!(
        line.starts_with("NEG(type=f32): FAIL (nmse=9.803e-5 > 1e-7, max |diff| "),
        "{line}"
    );
    assert!(
        line.contains("max |diff|") && line.contains("at ["),
        "{line}"
    );
    assert!(
        bad.detail[0].starts_with("output 0 (f32 [8, 3, 1, 1, 1]): nmse="),
        "{:?}",
        bad.detail
    );
}

#[test]
fn nan_and_unwritten_outputs_fail() {
    let t = cpu();
    let log = Case::new(
        "LOG",
        Vars::new(),
        vec![Input::new(Type::F32, &[4]).init(Init::Uniform(-2.0, -1.0))],
        |ctx, x| ctx.log(&x[0]),
        |x| x[0].clone(),
    );
    let r = t.run(&log, DEFAULT_SEED);
    assert_eq!(r.status, Status::Fail);
    assert!(r.message.contains("NaN at [0,0,0,0]"), "{}", r.message);
    // A builder returning a tensor nothing computes: its memory is the poison (NaN) bytes.
    let unwritten = Case::new(
        "NONE",
        Vars::new(),
        vec![Input::new(Type::F32, &[4])],
        |ctx, _| ctx.new_tensor_1d(Type::F32, 4),
        |_| Host {
            ne: [4, 1, 1, 1, 1],
            v: vec![0.0; 4],
        },
    );
    let r = t.run(&unwritten, DEFAULT_SEED);
    assert!(r.status == Status::Fail && r.message.contains("NaN"), "{r}");
    let broken = Case::new(
        "ADD",
        Vars::new(),
        vec![Input::new(Type::F32, &[4]), Input::new(Type::F32, &[3])],
        |ctx, x| ctx.add(&x[0], &x[1]),
        |x| x[0].clone(),
    );
    let r = t.run(&broken, DEFAULT_SEED);
    assert!(
        r.status == Status::Fail && r.message.contains("building the graph failed"),
        "{r}"
    );
}

#[test]
fn exact_metric_and_summary() {
    let t = cpu();
    let c = Case::new(
        "ARGMAX",
        Vars::new(),
        vec![Input::new(Type::F32, &[6, 2]).init(Init::Distinct(0.0, 6.0))],
        |ctx, x| ctx.argmax(&x[0]),
        |x| {
            Host::from_fn([2, 1, 1, 1, 1], |i| {
                let row = x[0].row([0, i[0], 0, 0, 0]);
                row.iter().position(|&v| v == 5.0).unwrap() as f64
            })
        },
    )
    .metric(Metric::Exact);
    let r = t.run(&c, DEFAULT_SEED);
    assert_eq!((r.status, r.threshold), (Status::Pass, 0.0), "{r}");
    let mut s = Summary::default();
    s.add(&r);
    s.add(&t.run(&neg_case(|x| x), DEFAULT_SEED));
    assert_eq!(s.to_string(), "1 passed, 1 failed, 0 skipped");
}

#[test]
fn refused_ops_are_not_supported_not_failed() {
    let c = Case::new(
        "NEG",
        Vars::new().ty("type", Type::Q4_0),
        vec![Input::new(Type::Q4_0, &[32, 2])],
        |ctx, x| ctx.neg(&x[0]),
        |x| x[0].clone(),
    );
    let r = cpu().run(&c, DEFAULT_SEED);
    assert_eq!(r.status, Status::NotSupported, "{r}");
    assert_eq!(r.to_string(), "NEG(type=q4_0): not supported");
    assert_eq!(r.message, "UNARY of q4_0 from [q4_0]");
    let mut s = Summary::default();
    s.add(&r);
    assert_eq!(s.to_string(), "0 passed, 0 failed, 1 skipped");
}

#[test]
fn a_panicking_case_fails_alone() {
    let c = Case::new(
        "NEG",
        Vars::new(),
        vec![Input::new(Type::F32, &[4])],
        |ctx, x| ctx.neg(&x[0]),
        |x| {
            let _ = x[7].at([0; 5]);
            unreachable!()
        },
    );
    let r = cpu().run(&c, DEFAULT_SEED);
    assert_eq!(r.status, Status::Fail);
    assert!(
        r.message
            .starts_with("the reference panicked: index out of bounds"),
        "{}",
        r.message
    );
    let c = Case::new(
        "NEG",
        Vars::new(),
        vec![],
        |_, x| Ok(x[0].clone()),
        |x| x[0].clone(),
    );
    let r = cpu().run(&c, DEFAULT_SEED);
    assert!(
        r.message
            .starts_with("building the graph failed: panicked: index out of bounds"),
        "{}",
        r.message
    );
}

#[test]
fn cases_and_targets_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Case>();
    check::<Target>();
    check::<ggml_conformance::CaseResult>();
    check::<ggml_conformance::fixture::Fixture>();
}

#[test]
fn inputs_the_graph_computes_into_are_not_flagged() {
    // CPY into input 1 and NEG in place change an input, as the graph says they do.
    let into_input = Case::new(
        "CPY",
        Vars::new(),
        vec![Input::new(Type::F32, &[4]), Input::new(Type::F32, &[4])],
        |ctx, x| ctx.cpy(&x[0], &x[1]),
        |x| x[0].clone(),
    );
    let r = cpu().run(&into_input, DEFAULT_SEED);
    assert_eq!(r.status, Status::Pass, "{r}");
    let inplace = Case::new(
        "NEG",
        Vars::new(),
        vec![Input::new(Type::F32, &[4])],
        |ctx, x| ctx.neg_inplace(&x[0]),
        |x| Host::from_fn(x[0].ne, |i| -x[0].at(i)),
    );
    assert_eq!(cpu().run(&inplace, DEFAULT_SEED).status, Status::Pass);
}
