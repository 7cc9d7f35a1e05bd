//! `ggml gguf quantize IN OUT TYPE [--imatrix FILE] [--threads N]`: writes a copy of a GGUF
//! file with its weight matrices quantized to TYPE. As llama.cpp does, 1-D tensors (norms,
//! biases) are kept in F32, a weight whose rows are not a whole number of TYPE's blocks gets
//! llama.cpp's fallback type (IQ4_NL for most 256-block types, Q5_0 for Q4_K, Q5_1 for Q5_K,
//! Q8_0 for Q6_K; F16 when nothing fits), and integer tensors are copied unchanged. Rows are quantized on several threads, with a
//! progress bar on stderr when it is a terminal.

use std::ffi::OsString;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::time::Instant;

use ggml::gguf::{GgufFile, GgufWriter, TensorInfo};
use ggml::{quants, Type};

use crate::imatrix::{self, Imatrix};
use crate::CliError;

pub const USAGE: &str = "usage: ggml gguf quantize IN OUT TYPE [--imatrix FILE] [--threads N]

  Writes OUT, a copy of IN with every weight matrix quantized to TYPE (q4_0, q8_0, q4_K, iq4_xs,
  …); 1-D tensors stay in F32. Types that need an importance matrix (iq2_xxs, iq2_xs, iq1_s, …)
  take one with --imatrix (llama.cpp's GGUF or legacy .dat format).";

struct Options {
    input: PathBuf,
    output: PathBuf,
    ty: Type,
    imatrix: Option<PathBuf>,
    threads: usize,
}

fn parse(args: &[OsString]) -> Result<Options, CliError> {
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{USAGE}"));
    let mut positional = Vec::new();
    let mut imatrix = None;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--imatrix") => {
                let v = it
                    .next()
                    .ok_or_else(|| usage("--imatrix needs a FILE".into()))?;
                imatrix = Some(PathBuf::from(v));
            }
            Some("--threads") => {
                let v = it.next().and_then(|v| v.to_str()).unwrap_or("");
                threads = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    usage(format!("--threads needs a positive number, got {v:?}"))
                })?;
            }
            Some(flag) if flag.starts_with("--") => {
                return Err(usage(format!("unknown option {flag}")))
            }
            _ => positional.push(a.clone()),
        }
    }
    let [input, output, ty] = positional.as_slice() else {
        return Err(usage(format!(
            "quantize needs IN OUT TYPE ({} given)",
            positional.len()
        )));
    };
    let ty_name = ty.to_string_lossy();
    let ty = Type::from_name(&ty_name).map_err(|e| usage(e.to_string()))?;
    if !ty.is_quantized() && !matches!(ty, Type::F16 | Type::BF16 | Type::F32) {
        return Err(usage(format!(
            "{ty_name} is not a type weights can be stored in"
        )));
    }
    Ok(Options {
        input: PathBuf::from(input),
        output: PathBuf::from(output),
        ty,
        imatrix,
        threads,
    })
}

/// Runs the command.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    if args.iter().any(crate::is_help) {
        println!("{USAGE}");
        return Ok(());
    }
    let opts = parse(args)?;
    let failed = |m: String| CliError::Failed(m);
    // The library's file errors already name the path.
    let file = GgufFile::open(&opts.input).map_err(|e| failed(e.to_string()))?;
    let imatrix = match &opts.imatrix {
        Some(p) => Some(imatrix::load(p).map_err(failed)?),
        None => None,
    };
    if quants::quantize_requires_imatrix(opts.ty) && imatrix.is_none() {
        return Err(failed(format!(
            "{} needs an importance matrix: pass --imatrix FILE",
            opts.ty
        )));
    }

    // Every tensor's type is decided (and the imatrix checked) before anything is converted;
    // the converted bytes are made one tensor at a time while the file is written, and tensors
    // kept as they are are borrowed from the input's mapping.
    let plans = file
        .tensors()
        .iter()
        .map(|info| plan(info, opts.ty, imatrix.as_ref()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    let start = Instant::now();
    let mut progress = Progress::new(
        plans
            .iter()
            .filter(|p| matches!(p, Plan::Convert { .. }))
            .count(),
    );
    let mut writer = GgufWriter::new();
    writer.set_kv(&file).map_err(|e| failed(e.to_string()))?;
    writer
        .set("general.quantization_version", 2u32)
        .map_err(|e| failed(e.to_string()))?;
    let (mut bytes_in, mut bytes_out) = (0usize, 0usize);
    for (info, plan) in file.tensors().iter().zip(&plans) {
        bytes_in += info.size();
        let added = match *plan {
            Plan::Keep => {
                bytes_out += info.size();
                writer.add_tensor(info.name(), info.ty(), &info.ne(), file.data_of(info))
            }
            Plan::Convert { ty, .. } => {
                bytes_out += ty.row_size(info.n_elements()).unwrap_or(0);
                writer.add_tensor_info(info.name(), ty, &info.ne())
            }
        };
        added.map_err(|e| failed(e.to_string()))?;
    }
    // Only converted tensors were added without data, so `i` indexes one of them.
    writer
        .write_to_file_with(&opts.output, |i| {
            let info = &file.tensors()[i];
            let Plan::Convert { ty, weights } = plans[i] else {
                return Ok(file.data_of(info).to_vec());
            };
            progress.step(info.name());
            convert(&file, info, ty, weights, opts.threads)
                .map_err(|e| ggml::Error::Compute(format!("converting {}: {e}", info.name())))
        })
        .map_err(|e| failed(e.to_string()))?;
    progress.finish();
    eprintln!(
        "quantized {} tensors to {} in {:.1}s: {:.1} MiB -> {:.1} MiB",
        file.n_tensors(),
        opts.ty,
        start.elapsed().as_secs_f64(),
        bytes_in as f64 / (1 << 20) as f64,
        bytes_out as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// What a tensor becomes in the output.
#[derive(Clone, Copy)]
enum Plan<'m> {
    /// Its bytes are copied unchanged (integer tensors, and tensors already of the target type).
    Keep,
    /// Converted to `ty`, with the imatrix entry `weights` (one row, or one per matrix) when
    /// there is one.
    Convert {
        ty: Type,
        weights: Option<&'m [f32]>,
    },
}

/// Decides a tensor's output type and checks that the imatrix covers it.
fn plan<'m>(
    info: &TensorInfo,
    wanted: Type,
    imatrix: Option<&'m Imatrix>,
) -> Result<Plan<'m>, String> {
    let convertible =
        info.ty().is_quantized() || matches!(info.ty(), Type::F32 | Type::F16 | Type::BF16);
    if !convertible {
        return Ok(Plan::Keep);
    }
    let n_per_row = info.ne()[0] as usize;
    let ty = if info.n_dims() >= 2 {
        weight_type(wanted, n_per_row)
    } else {
        Type::F32
    };
    if ty == info.ty() {
        return Ok(Plan::Keep);
    }
    if ty == Type::F32 {
        return Ok(Plan::Convert { ty, weights: None });
    }
    let weights = imatrix.and_then(|m| m.get(info.name()));
    if let Some(w) = weights {
        // One importance row for all matrices, or one per matrix (per expert of a MoE weight,
        // as llama.cpp's imatrix stores them).
        let matrices = (info.ne()[2] * info.ne()[3]) as usize;
        if w.len() != n_per_row && w.len() != n_per_row * matrices {
            return Err(format!(
                "imatrix entry for {} has {} values; rows have {n_per_row} (× {matrices} \
                 matrices)",
                info.name(),
                w.len()
            ));
        }
    }
    if quants::quantize_requires_imatrix(ty) && weights.is_none() {
        return Err(format!("the imatrix has no entry for {}", info.name()));
    }
    Ok(Plan::Convert {
        ty,
        weights: weights.map(Vec::as_slice),
    })
}

/// The bytes of `info`'s tensor converted to `ty`.
fn convert(
    file: &GgufFile,
    info: &TensorInfo,
    ty: Type,
    weights: Option<&[f32]>,
    threads: usize,
) -> ggml::Result<Vec<u8>> {
    let values = file.tensor_data_f32(info.name())?;
    if ty == Type::F32 {
        return Ok(values.iter().flat_map(|v| v.to_le_bytes()).collect());
    }
    if values.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = vec![0u8; ty.row_size(values.len() as i64)?];
    let n_per_row = info.ne()[0] as usize;
    // Matrix by matrix, so each gets its own importance row when the imatrix has one per matrix.
    let matrix_values = n_per_row * info.ne()[1] as usize;
    let matrix_bytes = out.len() / (values.len() / matrix_values.max(1)).max(1);
    for (m, (src, dst)) in values
        .chunks(matrix_values.max(1))
        .zip(out.chunks_mut(matrix_bytes.max(1)))
        .enumerate()
    {
        let w = weights.map(|w| match w.len() == n_per_row {
            true => w,
            false => &w[m * n_per_row..(m + 1) * n_per_row],
        });
        quantize_parallel(ty, src, dst, n_per_row, w, threads)?;
    }
    Ok(out)
}

/// The type a weight with rows of `n_per_row` gets: `wanted` when the rows are whole blocks of
/// it, else llama.cpp's fallback for that type (a 32-block type of similar size), else F16.
fn weight_type(wanted: Type, n_per_row: usize) -> Type {
    let fits = |t: Type| n_per_row % t.blck_size() == 0;
    if fits(wanted) {
        return wanted;
    }
    let fallback = match wanted {
        Type::Q4_K => Type::Q5_0,
        Type::Q5_K => Type::Q5_1,
        Type::Q6_K => Type::Q8_0,
        t if t.blck_size() == ggml::QK_K => Type::IQ4_NL,
        _ => Type::F16,
    };
    if fits(fallback) {
        fallback
    } else {
        Type::F16
    }
}

/// Quantizes rows on `threads` threads, each a contiguous run of rows.
fn quantize_parallel(
    ty: Type,
    src: &[f32],
    dst: &mut [u8],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
    threads: usize,
) -> ggml::Result<()> {
    let n_rows = src.len() / n_per_row;
    let row_size = dst.len() / n_rows.max(1);
    let per = n_rows.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let jobs: Vec<_> = src
            .chunks(per * n_per_row)
            .zip(dst.chunks_mut(per * row_size))
            .map(|(src, dst)| {
                s.spawn(move || {
                    let rows = src.len() / n_per_row;
                    quants::quantize_chunk(ty, src, dst, 0, rows, n_per_row, imatrix).map(|_| ())
                })
            })
            .collect();
        jobs.into_iter().try_for_each(|j| {
            j.join().unwrap_or_else(|_| {
                Err(ggml::Error::Compute("a quantizing thread panicked".into()))
            })
        })
    })
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
struct Progress {
    total: usize,
    done: usize,
    tty: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn step(&mut self, name: &str) {
        self.done += 1;
        if !self.tty {
            return;
        }
        const WIDTH: usize = 30;
        let filled = WIDTH * self.done / self.total.max(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {}/{} {:<40.40}",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled),
            self.done,
            self.total,
            name
        );
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}
