//! The console lines of `test-backend-ops perf`: the case name, padding to a tab stop, then
//! runs, time per run, and either FLOPs (decimal prefixes, "GFLOPS") or bandwidth ("GB/s",
//! binary GiB, with the op's kB per run).

/// What one case measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Op runs timed in total (graph computations × op nodes per graph).
    pub runs: u64,
    /// Microseconds per op run.
    pub us_per_run: f64,
    /// The rate.
    pub rate: Rate,
}

/// The rate of a measurement: compute-bound ops report FLOPs, the others bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Rate {
    /// FLOPs of one run and FLOPs per second.
    Flops { per_run: u64, per_second: f64 },
    /// Bytes of one run (`op_size`) and GiB per second.
    Bandwidth {
        bytes_per_run: usize,
        gib_per_second: f64,
    },
}

/// `  NAME(vars): `, the start of a case's line (printed before the case runs).
pub fn prefix(full_name: &str) -> String {
    format!("  {full_name}: ")
}

/// Spaces that take a line of `len` characters to the next multiple of 8 at least 5 away, so
/// the numbers of most cases line up.
pub fn padding(len: usize) -> String {
    let mut last = len.div_ceil(8) * 8;
    if last - len < 5 {
        last += 8;
    }
    " ".repeat(last - len)
}

/// `12.34 GFLOP`: a count with GGML's decimal prefix.
fn si_flops(x: f64) -> String {
    let (div, unit) = [(1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")]
        .into_iter()
        .find(|&(d, _)| x >= d)
        .unwrap_or((1e3, "kFLOP"));
    format!("{:6.2} {unit}", x / div)
}

/// The rest of a measured case's line (after the prefix and padding); with `color` the rate is
/// bold blue, as GGML prints it.
pub fn measured(m: &Measurement, color: bool) -> String {
    let (on, off) = if color {
        ("\x1b[1;34m", "\x1b[0m")
    } else {
        ("", "")
    };
    let rate = match m.rate {
        Rate::Flops {
            per_run,
            per_second,
        } => format!(
            "{}/run - {on}{}S{off}",
            si_flops(per_run as f64),
            si_flops(per_second)
        ),
        Rate::Bandwidth {
            bytes_per_run,
            gib_per_second,
        } => format!(
            "{:8} kB/run - {on}{gib_per_second:7.2} GB/s{off}",
            bytes_per_run / 1024
        ),
    };
    format!(
        "    {:8} runs - {:8.2} us/run - {rate}",
        m.runs, m.us_per_run
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_ggml_layout() {
        let p = prefix("ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1])");
        assert_eq!(p.len(), 46);
        assert_eq!(padding(p.len()).len(), 10, "46 → 48 is too close: 56");
        assert_eq!(padding(43).len(), 5, "43 → 48 is 5 away: enough");
        assert_eq!(padding(44).len(), 12, "44 → 48 is 4 away: next stop");
        let flops = Measurement {
            runs: 69,
            us_per_run: 19879.523,
            rate: Rate::Flops {
                per_run: 117_440_512,
                per_second: 5.91e9,
            },
        };
        assert_eq!(
            measured(&flops, false),
            "          69 runs - 19879.52 us/run - 117.44 MFLOP/run -   5.91 GFLOPS"
        );
        let bytes = Measurement {
            runs: 16380,
            us_per_run: 61.824,
            rate: Rate::Bandwidth {
                bytes_per_run: 49152,
                gib_per_second: 0.7412,
            },
        };
        assert_eq!(
            measured(&bytes, false),
            "       16380 runs -    61.82 us/run -       48 kB/run -    0.74 GB/s"
        );
        assert!(measured(&bytes, true).contains("\x1b[1;34m   0.74 GB/s\x1b[0m"));
        assert!(measured(&flops, false).ends_with("5.91 GFLOPS"));
    }

    #[test]
    fn flop_prefixes_are_decimal() {
        assert_eq!(si_flops(2.5e12), "  2.50 TFLOP");
        assert_eq!(si_flops(999e6), "999.00 MFLOP");
        assert_eq!(si_flops(512.0), "  0.51 kFLOP");
    }
}
