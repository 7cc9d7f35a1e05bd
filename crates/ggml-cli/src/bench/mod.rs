//! `ggml bench [-o OPS] [-p PATTERN] [-b BACKEND] [-t THREADS] [--quick]`: times ops on a device,
//! as `test-backend-ops perf` does, and prints one line per case in its format. A selection that
//! matches no case is an error; when stderr is a terminal a progress line estimates the time
//! left.
//!
//! The cases are those of the conformance suite (`ggml_conformance`, the cases of
//! `ggml test-ops`, with the same names and the same `-o`/`-p` selection), then a list of
//! larger ones sized for timing: MUL_MAT over GGML's weight types, ADD/MUL with broadcasting,
//! the norms, SOFT_MAX with and without a mask, SCALE, SILU/GELU, GET_ROWS, CPY, CONT of a
//! transposed tensor, SUM_ROWS. Each case's output node is put into its graph as many times
//! as a work target asks (8 GFLOP for matrix products, 8 GiB of traffic for the others; a
//! suite case's graph has room for 256 nodes) and whole-graph computations are timed for at
//! least a second. Matrix products, convolutions and attention report FLOPs
//! ([`measure::suite_flops`]), the others bandwidth: GGML's `op_size` (the result's bytes plus
//! its operands', three times the result for ADD/MUL of the timing list, result and source for
//! CPY). Cases the device does not support say so. `--quick` uses small sizes for the timing
//! list and small targets (a few milliseconds a case). Unlike `test-backend-ops`, inputs come
//! from a fixed seed (the suite's), and the default device is the best one (a CPU included)
//! rather than every non-CPU device.
//!
//! An excerpt of `ggml bench` (release build, 2 threads of a shared 2-vCPU VM; the whole list
//! took 1 min 53 s):
//!
//! ```text
//! Backend: CPU (Intel(R) Xeon(R) Processor)
//!   Device memory: 24105 MB (23413 MB free), 2 threads
//!
//!   MUL_MAT(type_a=f16,type_b=f32,m=4096,n=1,k=4096,bs=[1,1],nr=[1,1],per=[0,1,2,3],v=0):                  239 runs -  5389.41 us/run -  33.55 MFLOP/run -   6.23 GFLOPS
//!   MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=4096,bs=[1,1],nr=[1,1],per=[0,1,2,3],v=0): not supported
//!   MUL_MAT(type_a=f32,type_b=f32,m=512,n=512,k=512,bs=[1,1],nr=[1,1],per=[0,1,2,3],v=0):                  240 runs -  4557.92 us/run - 268.44 MFLOP/run -  58.89 GFLOPS
//!   ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1]):                 196608 runs -     5.23 us/run -       48 kB/run -    8.75 GB/s
//!   ADD(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1]):                 1710 runs -   644.49 us/run -    24576 kB/run -   36.37 GB/s
//!   RMS_NORM(type=f32,ne=[4096,512,1,1],v=0,eps=0.000001):                1539 runs -   684.87 us/run -    16384 kB/run -   22.81 GB/s
//!   SOFT_MAX(type=f32,ne=[1024,1024,10,1],mask=1,m_prec=f32,scale=1.000000,max_bias=0.000000):                      98 runs - 17014.65 us/run -    86016 kB/run -    4.82 GB/s
//!   SILU(type=f32,ne_a=[4096,512,1,1],v=0):                513 runs - 16701.74 us/run -    16384 kB/run -    0.94 GB/s
//!   CPY(type_src=f32,type_dst=f16,ne=[512,3072,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0]):                  911 runs -  3440.47 us/run -     9216 kB/run -    2.55 GB/s
//! ```

mod cases;
mod fill;
mod measure;
mod report;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{IsTerminal, Write as _};

use ggml::{backend, Device, DeviceType};

use crate::args::{self, Args};
use crate::progress::Progress;
use crate::CliError;
use cases::Case;
use ggml_conformance::{rng::DEFAULT_SEED, Filter, Target};
use measure::{Outcome, Targets};

pub const USAGE: &str =
    "usage: ggml bench [-o OPS] [-p PATTERN] [-b BACKEND] [-t THREADS] [--quick]

  Times ops as test-backend-ops perf does and prints, per case, the runs, the time per run and
  GFLOPS (matrix products) or GB/s (the other ops).
    -o, --ops OPS           comma-separated op names (ADD,MUL_MAT,silu,…; case-insensitive)
    -p, --params PATTERN    cases whose name matches PATTERN, a regex subset as in test-ops
                            (. [..] * + ? ^ $ |, \\d \\w; escape ( ) [ with \\)
    -b, --backend BACKEND   the device to run on, by name (default: the best device)
    -t, --threads N         threads to compute with (default: all cores)
    --quick                 small sizes and targets: a quick check that everything runs";

/// The parsed command line.
#[derive(Debug)]
struct Options {
    ops: Option<String>,
    filter: Filter,
    device: Option<String>,
    threads: Option<usize>,
    quick: bool,
}

fn parse(args: &[OsString]) -> Result<Options, CliError> {
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{USAGE}"));
    let (mut ops, mut pattern) = (None, None);
    let (mut device, mut threads, mut quick) = (None, None, false);
    let mut a = Args::new(args);
    while let Some(flag) = a.next() {
        match flag.as_str() {
            "-o" | "--ops" => ops = Some(a.value(&flag).map_err(usage)?),
            "-p" | "--params" => {
                let p = a.value(&flag).map_err(usage)?;
                if p.is_empty() {
                    return Err(usage(format!("{flag} needs a non-empty pattern")));
                }
                pattern = Some(p);
            }
            "-b" | "--backend" => device = Some(a.value(&flag).map_err(usage)?),
            "-t" | "--threads" => {
                let v = a.value(&flag).map_err(usage)?;
                threads = Some(args::threads(&flag, &v).map_err(usage)?);
            }
            "--quick" => quick = true,
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    let filter = Filter::new(ops.as_deref(), pattern.as_deref()).map_err(usage)?;
    Ok(Options {
        ops,
        filter,
        device,
        threads,
        quick,
    })
}

/// A case to time: one of the conformance suite or of the timing list.
enum Item {
    Suite(ggml_conformance::Case),
    Timing(Case),
}

impl Item {
    fn op(&self) -> &str {
        match self {
            Item::Suite(c) => c.op(),
            Item::Timing(c) => c.op_name(),
        }
    }

    fn name(&self) -> String {
        match self {
            Item::Suite(c) => c.name().to_string(),
            Item::Timing(c) => c.full_name(),
        }
    }
}

/// Every case, the suite's first (but those whose computation must fail: nothing to time); a
/// timing-list case named as a suite case is the same case and appears once, as the suite's.
fn all_items(quick: bool) -> Vec<Item> {
    let mut items: Vec<Item> = ggml_conformance::cases::all()
        .into_iter()
        .filter(|c| !matches!(c.metric, ggml_conformance::Metric::ComputeFails(_)))
        .map(Item::Suite)
        .collect();
    let names: BTreeSet<String> = items.iter().map(Item::name).collect();
    items.extend(
        cases::all(quick)
            .into_iter()
            .filter(|c| !names.contains(&c.full_name()))
            .map(Item::Timing),
    );
    items
}

/// Every op name some case has, sorted.
fn known_ops() -> BTreeSet<String> {
    all_items(true).iter().map(|i| i.op().to_string()).collect()
}

/// The cases `-o` and `-p` select; `Err` when they select none.
fn select(opts: &Options) -> Result<Vec<Item>, CliError> {
    let selected: Vec<Item> = all_items(opts.quick)
        .into_iter()
        .filter(|i| opts.filter.selects_name(i.op(), &i.name()))
        .collect();
    if selected.is_empty() {
        return Err(CliError::Usage(format!(
            "-o/-p select no case{}; list the cases with `ggml test-ops --list` (and the timing \
             list with `ggml bench --quick`), select by op name with -o and by name with -p \
             (e.g. -o MUL_MAT -p type_a=q4_K)\n\n{USAGE}",
            if opts.quick { " of --quick" } else { "" }
        )));
    }
    Ok(selected)
}

/// The device named `name`, or the best one: the first GPU, else integrated GPU, else CPU (the
/// order of `ggml_backend_init_best`).
fn pick_device(name: Option<&str>) -> Result<Device, CliError> {
    crate::register_wgpu_if_named(name)?;
    match name {
        Some(name) => backend::dev_by_name(name).ok_or_else(|| {
            let names: Vec<String> = backend::devices().iter().map(Device::name).collect();
            CliError::Usage(format!(
                "unknown backend {name:?} for -b; devices: {}\n\n{USAGE}",
                names.join(", ")
            ))
        }),
        None => [DeviceType::Gpu, DeviceType::Igpu, DeviceType::Cpu]
            .into_iter()
            .find_map(backend::dev_by_type)
            .ok_or_else(|| CliError::Failed("no device is registered".into())),
    }
}

/// Runs the command.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    if args.iter().any(crate::is_help) {
        println!("{USAGE}");
        return Ok(());
    }
    let opts = parse(args)?;
    if let Some(ops) = &opts.ops {
        let known = known_ops();
        let is_known = |op: &str| known.iter().any(|k| k.eq_ignore_ascii_case(op));
        if let Some(bad) = ops.split(',').map(str::trim).find(|op| !is_known(op)) {
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            return Err(CliError::Usage(format!(
                "unknown op {bad:?} for -o; ops: {}\n\n{USAGE}",
                list.join(", ")
            )));
        }
    }
    let selected = select(&opts)?;
    let dev = pick_device(opts.device.as_deref())?;
    let failed = |m: String| CliError::Failed(m);
    let target = Target::new(dev.clone()).map_err(failed)?;
    let backend = &target.backend;
    let threads = match opts.threads {
        Some(n) => {
            backend
                .set_n_threads(n)
                .map_err(|e| failed(format!("-t {n}: {e}")))?;
            Some(n)
        }
        // As test-backend-ops: all cores, where the backend has a thread setting.
        None => std::thread::available_parallelism()
            .ok()
            .map(|n| n.get())
            .filter(|&n| backend.set_n_threads(n).is_ok()),
    };

    let (free, total) = dev.memory();
    println!("Backend: {} ({})", dev.name(), dev.description());
    println!(
        "  Device memory: {} MB ({} MB free){}",
        total >> 20,
        free >> 20,
        threads.map_or(String::new(), |n| format!(", {n} threads"))
    );
    println!();

    let targets = Targets::new(dev.dev_type() == DeviceType::Cpu, opts.quick);
    let color = std::io::stdout().is_terminal();
    let mut errors = 0usize;
    let mut progress = Progress::new(selected.len() as f64);
    // With a live progress line on the terminal, a case's line is printed whole when it is
    // measured; otherwise its name shows while it runs.
    let name_first = !progress.is_live();
    for item in &selected {
        let name = item.name();
        let prefix = report::prefix(&name);
        progress.advance(0.0, &name);
        if name_first {
            print!("{prefix}");
            // A closed stdout only loses output.
            let _ = std::io::stdout().flush();
        }
        let result = match item {
            Item::Suite(case) => measure::run_suite_case(case, &target, DEFAULT_SEED, targets),
            Item::Timing(case) => measure::run_case(case, &dev, backend, targets),
        };
        progress.clear();
        if !name_first {
            print!("{prefix}");
        }
        match result {
            Ok(Outcome::NotSupported) => println!("not supported"),
            Ok(Outcome::Measured(m)) => println!(
                "{}{}",
                report::padding(prefix.len()),
                report::measured(&m, color)
            ),
            Err(e) => {
                println!("error: {e}");
                errors += 1;
            }
        }
        let _ = std::io::stdout().flush();
        progress.advance(1.0, &name);
    }
    progress.clear();
    if errors > 0 {
        return Err(failed(format!("{errors} case(s) failed to run")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    fn usage_error(s: &[&str]) -> String {
        match parse(&args(s)) {
            Err(CliError::Usage(m)) => m,
            Err(CliError::Failed(m)) => panic!("{s:?}: not a usage error: {m}"),
            Ok(o) => panic!("{s:?} parsed: {o:?}"),
        }
    }

    #[test]
    fn parses_every_option() {
        let command_line = args(&["-o", "ADD,SILU", "-b", "CPU", "-t", "3", "--quick"]);
        let Ok(o) = parse(&command_line) else {
            panic!("a valid command line was refused");
        };
        assert!(o.quick);
        assert_eq!(o.threads, Some(3));
        assert_eq!(o.device.as_deref(), Some("CPU"));
        assert_eq!(o.filter, Filter::new(Some("ADD,SILU"), None).unwrap());
        assert!(o.filter.selects_name("silu", "SILU(type=f32)"));
        assert!(!o.filter.selects_name("MUL", "MUL(type=f32)"));
    }

    #[test]
    fn bad_options_are_usage_errors_naming_the_value() {
        assert!(usage_error(&["-t", "0"]).contains("got \"0\""));
        assert!(usage_error(&["-t", "many"]).contains("got \"many\""));
        assert!(usage_error(&["-t"]).contains("-t needs a value"));
        assert!(usage_error(&["-o", "ADD,,MUL"]).contains("is empty"));
        assert!(usage_error(&["-p", "(x"]).contains("-p"));
        assert!(usage_error(&["--fast"]).contains("unknown argument \"--fast\""));
    }

    #[test]
    fn known_ops_cover_the_timing_list_and_the_suite() {
        let ops = known_ops();
        for op in [
            "MUL_MAT",
            "ADD",
            "MUL",
            "RMS_NORM",
            "NORM",
            "SOFT_MAX",
            "SCALE",
            "SILU",
            "GELU",
            "GET_ROWS",
            "CPY",
            "CONT",
            "SUM_ROWS",
            "CONV_2D",
            "SSM_SCAN",
            "FLASH_ATTN_EXT",
        ] {
            assert!(ops.contains(op), "{op}");
        }
    }

    #[test]
    fn flops_of_matrix_products_and_convolutions() {
        let ctx = ggml::Context::init(1 << 20, true).unwrap();
        let a = ctx.new_tensor_2d(ggml::Type::F32, 64, 10).unwrap();
        let b = ctx.new_tensor_2d(ggml::Type::F32, 64, 3).unwrap();
        // 10×3 results, 64 multiply-adds each.
        assert_eq!(
            measure::suite_flops(&ctx.mul_mat(&a, &b).unwrap()),
            2 * 64 * 30
        );
        let k = ctx.new_tensor_4d(ggml::Type::F32, 3, 3, 2, 5).unwrap();
        let img = ctx.new_tensor_4d(ggml::Type::F32, 8, 8, 2, 1).unwrap();
        let c = ctx.conv_2d_direct(&k, &img, 1, 1, 1, 1, 1, 1).unwrap();
        assert_eq!(c.ne(), [8, 8, 5, 1, 1]);
        assert_eq!(measure::suite_flops(&c), 2 * 3 * 3 * 2 * 8 * 8 * 5);
        assert_eq!(measure::suite_flops(&ctx.add(&a, &a).unwrap()), 0);
    }
}
