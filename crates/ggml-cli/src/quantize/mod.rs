//! `ggml gguf quantize [OPTIONS] IN OUT TYPE`: writes a copy of a GGUF model quantized as
//! llama.cpp's `llama-quantize` does, byte for byte: TYPE is one of its file types (`Q4_K_M`,
//! `Q5_K_S`, `IQ4_XS`, `Q8_0`, `F16`, … or `COPY`), and each tensor gets the type llama.cpp's rules
//! give it ([`rules`]); the output has llama.cpp's tensor order and metadata (`general.file_type`
//! set to the mix, and the imatrix facts when one is used).
//!
//! It refuses to write over its input (the same file by identity, not only by name), to
//! requantize an already quantized tensor without `--allow-requantize`, and any tensor the rules
//! leave without the importance data it needs; all of that is checked before anything is
//! written, and the output appears only when complete. Each tensor is logged (shape, types,
//! sizes, fallbacks) and a summary ends the run; a progress line with an estimate is drawn on
//! stderr when it is a terminal.

mod ftype;
mod rules;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ggml::gguf::{GgufFile, GgufWriter, TensorInfo};
use ggml::{quants, Type};

use crate::args::{self, Args};
use crate::imatrix::{self, Imatrix};
use crate::progress::Progress;
use crate::CliError;
pub use ftype::describe_file_type;
use ftype::{Choice, Ftype, QUANTIZE_NAMES};
use rules::{Fallback, Model, Planner};

pub const USAGE: &str = "usage: ggml gguf quantize [OPTIONS] IN OUT TYPE

  Writes OUT, IN quantized as llama.cpp's llama-quantize does (the same bytes): TYPE is one of
  its file types, whose rules give each tensor its type (see the list below).

  --allow-requantize           allow requantizing tensors that are already quantized (this
                               loses more quality than quantizing from F16 or F32)
  --pure                       every quantized tensor gets TYPE's type (no per-tensor mix)
  --leave-output-tensor        leave output.weight as it is
  --output-tensor-type T       the type of output.weight (a GGML type name: q8_0, f16, …)
  --token-embedding-type T     the type of token_embd.weight
  --imatrix FILE               importance matrix (llama.cpp's GGUF or legacy .dat format);
                               IQ1_*, IQ2_*, IQ3_XXS and Q2_K_S need one
  -t, --threads N              threads to quantize with (default: all cores)";

/// The parsed command line.
#[derive(Debug)]
struct Options {
    input: PathBuf,
    output: PathBuf,
    choice: Choice,
    rules: rules::Options,
    imatrix: Option<PathBuf>,
    allow_requantize: bool,
    threads: usize,
}

/// The usage text with the list of file types.
fn usage_with_types() -> String {
    let mut s = format!("{USAGE}\n\n  TYPE (case-insensitive, or the file type number):\n");
    for (name, f, help) in QUANTIZE_NAMES {
        s.push_str(&format!("    {name:<10} {:>2}  {help}\n", f as u32));
    }
    s
}

fn parse(args: &[OsString]) -> Result<Options, CliError> {
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{USAGE}"));
    let ggml_type = |flag: &str, v: String| {
        Type::from_name(&v).map_err(|_| usage(format!("{flag} needs a GGML type name, got {v:?}")))
    };
    let mut a = Args::new(args);
    let mut positional = Vec::new();
    let mut imatrix = None;
    let mut threads = args::default_threads();
    let (mut pure, mut leave_output, mut allow_requantize) = (false, false, false);
    let (mut output_type, mut token_embd_type) = (None, None);
    while let Some(arg) = a.next() {
        match arg.as_str() {
            "--allow-requantize" => allow_requantize = true,
            "--pure" => pure = true,
            "--leave-output-tensor" => leave_output = true,
            "--output-tensor-type" => {
                output_type = Some(ggml_type(&arg, a.value(&arg).map_err(usage)?)?)
            }
            "--token-embedding-type" => {
                token_embd_type = Some(ggml_type(&arg, a.value(&arg).map_err(usage)?)?)
            }
            "--imatrix" => imatrix = Some(PathBuf::from(a.value(&arg).map_err(usage)?)),
            "-t" | "--threads" => {
                threads = args::threads(&arg, &a.value(&arg).map_err(usage)?).map_err(usage)?
            }
            flag if flag.starts_with('-') && flag.len() > 1 => {
                return Err(usage(format!("unknown option {flag}")))
            }
            _ => positional.push(a.current_os().clone()),
        }
    }
    let [input, output, ty] = positional.as_slice() else {
        return Err(usage(format!(
            "quantize needs IN OUT TYPE ({} given)",
            positional.len()
        )));
    };
    let ty_name = ty.to_string_lossy();
    let choice = Ftype::parse(&ty_name).ok_or_else(|| {
        CliError::Usage(format!(
            "TYPE {ty_name:?} is not a llama.cpp file type\n\n{}",
            usage_with_types()
        ))
    })?;
    Ok(Options {
        input: PathBuf::from(input),
        output: PathBuf::from(output),
        rules: rules::Options {
            ftype: choice.ftype,
            pure,
            quantize_output: !leave_output,
            output_type,
            token_embd_type,
            only_copy: choice.only_copy,
        },
        choice,
        imatrix,
        allow_requantize,
        threads,
    })
}

/// Whether `a` and `b` are the same file (the same device and inode, so hard links and other
/// spellings of one path count); `false` when either does not exist.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// What one tensor becomes.
struct Planned<'f> {
    info: &'f TensorInfo,
    to: Type,
    fallback: Option<Fallback>,
    /// Importance weights: one row, or one per expert.
    weights: Option<&'f [f32]>,
}

impl Planned<'_> {
    fn converts(&self) -> bool {
        self.to != self.info.ty()
    }

    fn new_size(&self) -> usize {
        // The shape was checked when the file was read and the type's blocks fit the rows.
        self.to.row_size(self.info.n_elements()).unwrap_or(0)
    }
}

/// Decides every tensor's type, in llama.cpp's order, and checks everything that could stop
/// the conversion: requantizing, missing or mis-sized importance data, types with no converter.
fn plan<'f>(
    file: &'f GgufFile,
    opts: &Options,
    imatrix: Option<&'f Imatrix>,
) -> Result<Vec<Planned<'f>>, String> {
    let model = Model::from_gguf(file)?;
    let mut infos: Vec<&TensorInfo> = file.tensors().iter().collect();
    infos.sort_by(|a, b| rules::llama_order(a.name(), b.name()));
    let mut planner = Planner::new(
        &model,
        &opts.rules,
        imatrix.is_some(),
        infos.iter().map(|t| t.name()),
    );
    let mut planned = Vec::with_capacity(infos.len());
    for info in infos {
        let name = info.name();
        let ne = info.ne();
        let ne4 = [ne[0], ne[1], ne[2], ne[3]];
        let (to, fallback) = planner.target(name, info.ty(), &ne4)?;
        let mut p = Planned {
            info,
            to,
            fallback,
            weights: None,
        };
        if p.converts() {
            p.weights = check_conversion(&p, opts, imatrix)?;
        }
        planned.push(p);
    }
    Ok(planned)
}

/// Checks that `p`'s conversion can run; returns the importance weights it uses.
fn check_conversion<'f>(
    p: &Planned<'f>,
    opts: &Options,
    imatrix: Option<&'f Imatrix>,
) -> Result<Option<&'f [f32]>, String> {
    let (name, from, to) = (p.info.name(), p.info.ty(), p.to);
    if from.is_quantized() && !opts.allow_requantize {
        return Err(format!(
            "tensor {name} is already quantized ({from}); requantizing it to {to} loses more \
             quality than quantizing from F16/F32: pass --allow-requantize to do it anyway"
        ));
    }
    if !quants::has_to_float(from) || !quants::has_quantizer(to) {
        return Err(format!("tensor {name}: GGML cannot convert {from} to {to}"));
    }
    let ne = p.info.ne();
    let experts = (ne[2] * ne[3]) as usize;
    let want = ne[0] as usize * experts;
    let weights = match imatrix.and_then(|m| m.get(name)) {
        Some(w) if w.len() == want => Some(w),
        // llama.cpp ignores a token embedding's entry of the wrong size.
        Some(_) if matches!(name, "token_embd.weight" | "per_layer_token_embd.weight") => None,
        Some(w) => {
            return Err(format!(
                "the imatrix entry for {name} has {} values; the tensor needs {want} ({} per \
                 row × {experts} matrices)",
                w.len(),
                ne[0]
            ))
        }
        None => None,
    };
    let needs = rules::requires_imatrix(name, to, opts.choice.ftype)
        || quants::quantize_requires_imatrix(to);
    if needs && weights.is_none() {
        return Err(match imatrix {
            None => format!(
                "{} needs an importance matrix ({name} becomes {to}): pass --imatrix FILE",
                opts.choice.name
            ),
            Some(_) => format!("the imatrix has no entry for {name}, which becomes {to}"),
        });
    }
    Ok(weights)
}

/// The metadata of the output: the input's, with llama-quantize's changes, in its order.
fn metadata<'a>(
    file: &GgufFile,
    opts: &Options,
    planned: &[Planned],
    imatrix: Option<&Imatrix>,
) -> ggml::Result<GgufWriter<'a>> {
    let mut w = GgufWriter::new();
    w.set_kv(file)?;
    w.set("general.quantization_version", 2u32)?;
    let file_type = if opts.choice.only_copy {
        // COPY keeps the input's file type, or the one llama.cpp guesses from the tensors.
        match file.get_val_u32("general.file_type") {
            Ok(id) => id,
            Err(_) => ftype::guess(planned.iter().map(|p| p.info.ty())),
        }
    } else {
        opts.choice.ftype as u32
    };
    w.set("general.file_type", file_type)?;
    for key in ["split.no", "split.count", "split.tensors.count"] {
        w.remove_key(key);
    }
    if let (Some(m), Some(path)) = (imatrix, &opts.imatrix) {
        // llama-quantize records these as it got them, strings cut to 127 bytes.
        w.set(
            "quantize.imatrix.file",
            cut(path.to_string_lossy().as_bytes()),
        )?;
        if let Some(d) = m.datasets.first() {
            w.set("quantize.imatrix.dataset", cut(d.as_bytes()))?;
        }
        w.set("quantize.imatrix.entries_count", m.entries.len() as u32)?;
        if m.chunk_count > 0 {
            w.set("quantize.imatrix.chunks_count", m.chunk_count)?;
        }
    }
    Ok(w)
}

/// The first 127 bytes of `s` (llama.cpp's override strings hold 128 with the terminator).
fn cut(s: &[u8]) -> ggml::gguf::GgufString {
    s[..s.len().min(127)].into()
}

/// Runs the command.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    if args.iter().any(crate::is_help) {
        println!("{}", usage_with_types());
        return Ok(());
    }
    let opts = parse(args)?;
    let failed = CliError::Failed;
    let file = crate::gguf_cmd::open(&opts.input)?;
    if same_file(&opts.input, &opts.output) {
        return Err(failed(format!(
            "the output {} is the input file: give another OUT",
            opts.output.display()
        )));
    }
    let imatrix = match &opts.imatrix {
        Some(p) => Some(imatrix::load(p).map_err(failed)?),
        None => None,
    };
    let planned = plan(&file, &opts, imatrix.as_ref()).map_err(failed)?;

    let mut writer =
        metadata(&file, &opts, &planned, imatrix.as_ref()).map_err(|e| failed(e.to_string()))?;
    for p in &planned {
        let info = p.info;
        let added = if p.converts() {
            writer.add_tensor_info(info.name(), p.to, &info.ne())
        } else {
            writer.add_tensor(info.name(), info.ty(), &info.ne(), file.data_of(info))
        };
        added.map_err(|e| failed(e.to_string()))?;
    }

    let start = Instant::now();
    let work: usize = planned
        .iter()
        .filter(|p| p.converts())
        .map(|p| p.info.size())
        .sum();
    let mut progress = Progress::new(work as f64);
    let mut logged = 0;
    let n = planned.len();
    let mut log_through = |end: usize, progress: &mut Progress| {
        for (i, p) in planned.iter().enumerate().take(end).skip(logged) {
            progress.println(&log_line(i, n, p));
        }
        logged = logged.max(end);
    };
    writer
        .write_to_file_with(&opts.output, |i| {
            let p = &planned[i];
            log_through(i, &mut progress);
            progress.advance(0.0, p.info.name());
            let bytes = convert(&file, p, opts.threads)
                .map_err(|e| ggml::Error::Compute(format!("converting {}: {e}", p.info.name())));
            log_through(i + 1, &mut progress);
            progress.advance(p.info.size() as f64, p.info.name());
            bytes
        })
        .map_err(|e| failed(e.to_string()))?;
    log_through(n, &mut progress);
    progress.clear();
    eprintln!(
        "{}",
        summary(&opts, &planned, start.elapsed().as_secs_f64())
    );
    Ok(())
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// One tensor's line: index, name, shape, type change, sizes, fallback.
fn log_line(i: usize, n: usize, p: &Planned) -> String {
    let info = p.info;
    let shape: Vec<String> = info.shape().iter().map(i64::to_string).collect();
    let width = n.to_string().len();
    let mut line = format!(
        "[{:>width$}/{n}] {:<36} {:<16} {:>7}",
        i + 1,
        info.name(),
        format!("[{}]", shape.join(", ")),
        info.ty().name()
    );
    if p.converts() {
        line += &format!(
            " -> {:<7} {:8.2} MiB -> {:8.2} MiB",
            p.to.name(),
            mib(info.size()),
            mib(p.new_size())
        );
    } else {
        line += &format!(" (kept)  {:8.2} MiB", mib(info.size()));
    }
    if let Some(f) = &p.fallback {
        line += &format!(
            " (fallback: rows of {} are not whole {} blocks)",
            info.ne()[0],
            f.wanted
        );
    }
    line
}

/// The last lines: what the tensors became, what fell back, sizes and time.
fn summary(opts: &Options, planned: &[Planned], secs: f64) -> String {
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    let mut fallbacks: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let (mut size_in, mut size_out, mut elements) = (0usize, 0usize, 0i64);
    for p in planned {
        *by_type.entry(p.to.name()).or_default() += 1;
        if let Some(f) = &p.fallback {
            *fallbacks
                .entry((f.wanted.name(), f.got.name()))
                .or_default() += 1;
        }
        size_in += p.info.size();
        size_out += if p.converts() {
            p.new_size()
        } else {
            p.info.size()
        };
        elements += p.info.n_elements();
    }
    let converted = planned.iter().filter(|p| p.converts()).count();
    let list = |m: BTreeMap<String, usize>| {
        m.into_iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let types = list(
        by_type
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    );
    let mut s = format!(
        "{} ({}): converted {converted} of {} tensors, kept {} as they were; now {types}",
        opts.choice.name,
        opts.choice.ftype.description(),
        planned.len(),
        planned.len() - converted,
    );
    let n_fallback: usize = fallbacks.values().sum();
    if n_fallback > 0 {
        let fb = list(
            fallbacks
                .into_iter()
                .map(|((w, g), v)| (format!("{w} -> {g}"), v))
                .collect(),
        );
        s += &format!(
            "\n{n_fallback} tensor(s) fell back because their rows are not whole blocks: {fb}"
        );
    }
    let bpw = |b: usize| b as f64 * 8.0 / elements.max(1) as f64;
    s += &format!(
        "\n{:.2} MiB ({:.2} BPW) -> {:.2} MiB ({:.2} BPW) in {secs:.1}s",
        mib(size_in),
        bpw(size_in),
        mib(size_out),
        bpw(size_out)
    );
    s
}

/// The bytes of `p`'s tensor converted to its new type: GGML's `to_float` of the source, then
/// `ggml_quantize_chunk`, matrix by matrix with each matrix's importance row.
fn convert(file: &GgufFile, p: &Planned, threads: usize) -> ggml::Result<Vec<u8>> {
    let info = p.info;
    let values = file.tensor_data_f32(info.name())?;
    let mut out = vec![0u8; p.new_size()];
    let n_per_row = info.ne()[0] as usize;
    let matrix_values = n_per_row * info.ne()[1] as usize;
    if values.is_empty() || matrix_values == 0 {
        return Ok(out);
    }
    let matrix_bytes = out.len() / (values.len() / matrix_values);
    for (m, (src, dst)) in values
        .chunks(matrix_values)
        .zip(out.chunks_mut(matrix_bytes))
        .enumerate()
    {
        let w = p.weights.map(|w| &w[m * n_per_row..(m + 1) * n_per_row]);
        quantize_parallel(p.to, src, dst, n_per_row, w, threads)?;
    }
    Ok(out)
}

/// Quantizes rows on `threads` threads, each a contiguous run of rows (every row is quantized
/// on its own, so the bytes do not depend on the split).
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
