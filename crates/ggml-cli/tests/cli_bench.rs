//! `ggml bench`: the shape of its output lines and its errors (never timing values).

use std::process::Command;

/// Runs the binary: (exit code, stdout, stderr).
fn ggml(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .expect("the ggml binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A measured case line, taken apart:
/// `  NAME(vars):   <runs> runs - <t> us/run - <per run> - <rate> <unit>`.
struct Line {
    op: String,
    vars: String,
    runs: u64,
    us_per_run: f64,
    rate: f64,
    unit: String,
}

fn parse_measured(line: &str) -> Option<Line> {
    let rest = line.strip_prefix("  ")?;
    let (name, numbers) = rest.split_once("): ")?;
    let (op, vars) = name.split_once('(')?;
    let fields: Vec<&str> = numbers.trim().split(" - ").collect();
    let [runs, time, _per_run, rate] = fields.as_slice() else {
        return None;
    };
    let runs = runs.strip_suffix(" runs")?.trim().parse().ok()?;
    let us_per_run = time.strip_suffix(" us/run")?.trim().parse().ok()?;
    let (value, unit) = rate.trim().split_once(' ')?;
    Some(Line {
        op: op.to_string(),
        vars: vars.to_string(),
        runs,
        us_per_run,
        rate: value.parse().ok()?,
        unit: unit.to_string(),
    })
}

#[test]
fn quick_run_prints_one_line_per_case_in_ggml_format() {
    // Suite cases (ADD with broadcasting, MUL_MAT batches) and the timing list's (4096 wide).
    let (code, out, err) = ggml(&[
        "bench",
        "--quick",
        "-o",
        "ADD,MUL_MAT,CONV_2D",
        "-p",
        r"type=f32,ne=\[10,5,4,3\],nr=\[2|ne=\[256,1,1,1\]|type_a=f32,type_b=f32,m=16,n=|ne_input=\[13",
        "-t",
        "2",
    ]);
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(out.starts_with("Backend: CPU"), "{out}");
    assert!(out.contains(", 2 threads"), "{out}");

    let cases: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains("): "))
        .collect();
    let measured: Vec<Line> = cases.iter().filter_map(|l| parse_measured(l)).collect();
    let unsupported = cases
        .iter()
        .filter(|l| l.ends_with("): not supported"))
        .count();
    assert_eq!(
        measured.len() + unsupported,
        cases.len(),
        "every case line parses:\n{out}"
    );
    assert!(
        cases.iter().all(|l| l.starts_with("  ADD(")
            || l.starts_with("  MUL_MAT(")
            || l.starts_with("  CONV_2D(")),
        "-o keeps only ADD, MUL_MAT and CONV_2D:\n{out}"
    );

    for l in &measured {
        assert!(l.runs >= 1, "{}", l.op);
        assert!(l.us_per_run > 0.0 && l.us_per_run.is_finite(), "{}", l.op);
        assert!(
            l.rate > 0.0 && l.rate.is_finite(),
            "{} rate {}",
            l.op,
            l.rate
        );
        let want_unit = if l.op == "ADD" { "GB/s" } else { "FLOPS" };
        assert!(l.unit.ends_with(want_unit), "{} {}", l.op, l.unit);
    }
    let adds: Vec<&Line> = measured.iter().filter(|l| l.op == "ADD").collect();
    // The suite's broadcast case in three types, and the timing list's 256-wide one.
    assert!(
        adds.iter()
            .any(|l| l.vars == "type=f32,ne=[10,5,4,3],nr=[2,1,1,1],v=0"),
        "{out}"
    );
    assert!(adds
        .iter()
        .any(|l| l.vars.starts_with("type=f32,ne=[256,1,1,1],nr=[1,1,")));
    assert!(measured.iter().any(|l| l.op == "CONV_2D"), "{out}");

    // F32 weights are computed on the CPU; every MUL_MAT line names its types and sizes.
    let f32_mm = measured
        .iter()
        .find(|l| l.op == "MUL_MAT" && l.vars.starts_with("type_a=f32,type_b=f32,m="));
    assert!(f32_mm.is_some(), "{out}");
    assert!(cases
        .iter()
        .filter(|l| l.starts_with("  MUL_MAT("))
        .all(|l| l.contains(",n=") && l.contains(",k=") && l.contains("per=[")));
}

/// The case names of the measured or unsupported lines of `out`.
fn case_names(out: &str) -> Vec<&str> {
    out.lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_once("): ").map(|(n, _)| n))
        .collect()
}

#[test]
fn a_pattern_selects_one_case_by_its_full_name() {
    let (code, out, err) = ggml(&[
        "bench",
        "--quick",
        "-p",
        r"^ADD\(type=f32,ne=\[256,1,1,1\],nr=\[1,1,1,1\]\)$|^SILU\(type=f32,ne_a=\[128,2,2,2\],v=0\)$",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let names = case_names(&out);
    assert_eq!(
        names,
        [
            "SILU(type=f32,ne_a=[128,2,2,2],v=0",
            "ADD(type=f32,ne=[256,1,1,1],nr=[1,1,1,1]"
        ],
        "{out}"
    );
}

#[test]
fn bad_options_are_usage_errors() {
    for (args, message) in [
        (&["bench", "-o", "FROB"][..], "unknown op \"FROB\" for -o"),
        (
            &["bench", "-o", "ADD,FROB"][..],
            "unknown op \"FROB\" for -o",
        ),
        (
            &["bench", "-b", "NoSuchDevice"][..],
            "unknown backend \"NoSuchDevice\"",
        ),
        (
            &["bench", "-t", "0"][..],
            "-t needs a positive number of threads, got \"0\"",
        ),
        (&["bench", "-t", "x"][..], "got \"x\""),
        (&["bench", "-o"][..], "-o needs a value"),
        (&["bench", "--slow"][..], "unknown argument \"--slow\""),
        (
            &["bench", "-o", "MUL_MAT", "-p", "type_a=nothing"][..],
            "-o/-p select no case",
        ),
        (&["bench", "-p", "MUL_MAT("][..], "-p"),
        (
            &["bench", "--quick", "-o", "ADD", "-p", "type_a=q4_K"][..],
            "select no case of --quick",
        ),
        (&["bench", "-p", ""][..], "-p needs a non-empty pattern"),
    ] {
        let (code, out, err) = ggml(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(err.contains("usage: ggml bench"), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} ran: {out}");
    }
}

#[test]
fn device_names_are_accepted() {
    let (code, out, err) = ggml(&["bench", "--quick", "-b", "CPU", "-o", "SUM_ROWS"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.lines().any(|l| l.starts_with("  SUM_ROWS(")), "{out}");
}

#[test]
fn op_names_ignore_case_and_params_select_cases() {
    let (code, out, err) = ggml(&[
        "bench",
        "--quick",
        "--ops",
        "mul_mat",
        "--params",
        "^MUL_MAT\\(type_a=q4_0,type_b=f32,m=16,",
        "--threads",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let names = case_names(&out);
    assert!(!names.is_empty(), "{out}");
    assert!(
        names.iter().all(|n| n.starts_with("MUL_MAT(type_a=q4_0,")),
        "{out}"
    );
    assert!(out.contains(", 1 threads"), "{out}");
    // Not a terminal: no progress line on stderr.
    assert!(err.is_empty(), "{err}");
}
