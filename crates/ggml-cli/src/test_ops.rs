//! `ggml test-ops`: the op conformance suite (`ggml_conformance`) on every registered device,
//! or one, as GGML's `test-backend-ops` test mode — but each device is checked against the
//! suite's f64 references (or, with `--fixtures`, against the real GGML's results), so the CPU
//! is tested too.
//!
//! Output: the seed, then per device a header and one line per case (`NAME: OK`,
//! `NAME: FAIL (nmse=…, max …)`, `NAME: not supported`, `NAME: skipped (why)`), and the closing
//! line `N passed, M failed, K skipped`. The exit status is 1 when a case failed.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;

use ggml_conformance::{
    cases, devices, export::export_case, fixture, rng::DEFAULT_SEED, Case, CaseResult, Filter,
    Summary, Target,
};

use crate::CliError;

pub const USAGE: &str =
    "usage: ggml test-ops [-o OP[,OP…]] [-d DEVICE] [-p PATTERN] [-v] [--seed N]
                     [--export FILE] [--fixtures FILE] [--list]

  Runs the op conformance suite on every registered device (or one) and compares each case
  with its f64 reference; prints one line per case and `N passed, M failed, K skipped`.
    -o OPS           comma-separated op names (ADD,MUL_MAT,SILU,…; case-insensitive)
    -p PATTERN       cases whose name matches PATTERN, a regex subset (. [..] * + ? ^ $ |,
                     \\d \\w; escape ( ) [ with \\)
    -d DEVICE        only the device named DEVICE
    -v               per output: NMSE, threshold and the largest difference
    --seed N         base seed of the inputs (default: the fixtures' seed)
    --export FILE    write the selected cases for GGML (JSON Lines) instead of running them
    --fixtures FILE  compare with GGML's results in FILE instead of the f64 references
    --list           print the selected cases' names instead of running them";

#[derive(Debug, Default)]
struct Options {
    ops: Option<String>,
    pattern: Option<String>,
    device: Option<String>,
    verbose: bool,
    seed: Option<u64>,
    export: Option<PathBuf>,
    fixtures: Option<PathBuf>,
    list: bool,
}

fn parse_seed(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn parse(args: &[OsString]) -> Result<Options, CliError> {
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{USAGE}"));
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let flag = a.to_string_lossy();
        let mut value = || {
            it.next()
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match flag.as_ref() {
            "-o" => o.ops = Some(value()?),
            "-p" => o.pattern = Some(value()?),
            "-d" => o.device = Some(value()?),
            "-v" => o.verbose = true,
            "--list" => o.list = true,
            "--seed" => {
                let v = value()?;
                o.seed = Some(parse_seed(&v).ok_or_else(|| {
                    usage(format!(
                        "--seed needs an unsigned integer (decimal or 0x…), got {v:?}"
                    ))
                })?);
            }
            "--export" => o.export = Some(PathBuf::from(value()?)),
            "--fixtures" => o.fixtures = Some(PathBuf::from(value()?)),
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    if o.export.is_some() && o.fixtures.is_some() {
        return Err(usage("--export and --fixtures exclude each other".into()));
    }
    Ok(o)
}

/// `ggml test-ops …`.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    if args.iter().any(crate::is_help) {
        println!("{USAGE}");
        return Ok(());
    }
    let o = parse(args)?;
    let filter = Filter::new(o.ops.as_deref(), o.pattern.as_deref())
        .map_err(|m| CliError::Usage(format!("{m}\n\n{USAGE}")))?;
    let selected = filter.apply(cases::all()).map_err(CliError::Failed)?;
    let seed = o.seed.unwrap_or(DEFAULT_SEED);
    if o.list {
        let mut out = std::io::stdout().lock();
        for c in &selected {
            let _ = writeln!(out, "{}", c.name());
        }
        let _ = writeln!(out, "{} cases", selected.len());
        return Ok(());
    }
    if let Some(path) = &o.export {
        return export(&selected, seed, path);
    }
    let fixture = match &o.fixtures {
        Some(p) => Some(fixture::Fixture::read(p).map_err(CliError::Failed)?),
        None => None,
    };
    crate::register_wgpu_if_named(o.device.as_deref())?;
    let devs = devices(o.device.as_deref()).map_err(CliError::Failed)?;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "seed: {seed} ({} cases)", selected.len());
    if let Some(f) = &fixture {
        let meta: Vec<String> = f.meta.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "fixture: {} cases; {}", f.cases.len(), meta.join(", "));
    }
    let mut total = Summary::default();
    for dev in devs {
        let _ = writeln!(out, "device {}: {}", dev.name(), dev.description());
        let target = Target::new(dev).map_err(CliError::Failed)?;
        for case in &selected {
            let r = match &fixture {
                Some(f) => fixture::compare_with_fixture(&target, case, seed, f),
                None => target.run(case, seed),
            };
            total.add(&r);
            print_result(&mut out, &r, o.verbose);
        }
    }
    let _ = writeln!(out, "{total}");
    if total.failed > 0 {
        // The lines above say which; the status is what scripts read.
        return Err(CliError::Failed(format!(
            "{} of the cases failed",
            total.failed
        )));
    }
    Ok(())
}

fn print_result(out: &mut impl std::io::Write, r: &CaseResult, verbose: bool) {
    let _ = writeln!(out, "  {r}");
    if verbose {
        if r.status == ggml_conformance::Status::NotSupported {
            let _ = writeln!(out, "      refused: {}", r.message);
        }
        for d in &r.detail {
            let _ = writeln!(out, "      {d}");
        }
    }
}

fn export(cases: &[Case], seed: u64, path: &PathBuf) -> Result<(), CliError> {
    let fail = |e: String| CliError::Failed(format!("{}: {e}", path.display()));
    let mut text = String::new();
    let (mut written, mut left_out) = (0usize, 0usize);
    for case in cases {
        match export_case(case, seed).map_err(|e| fail(format!("{}: {e}", case.name())))? {
            Some(e) => {
                text.push_str(&e.line);
                text.push('\n');
                written += 1;
            }
            None => left_out += 1,
        }
    }
    std::fs::write(path, text).map_err(|e| fail(e.to_string()))?;
    println!(
        "exported {written} cases (seed {seed}) to {}; {left_out} left out (a 5th dimension or a custom op's closure)",
        path.display()
    );
    Ok(())
}
