//! The model commands: `ggml run` (generate text), `ggml embed` (sentence embeddings as JSON)
//! and `ggml bench-model` (prompt processing and generation speed, in llama-bench's table).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use ggml_llm::sampling::{Chain, Params, Rng};
use ggml_llm::session::ProgressFn;
use ggml_llm::{LoadOptions, Model, Pooling, Session, SessionOptions};

use crate::args::{self, Args};
use crate::progress::Progress;
use crate::CliError;

/// The usage lines of the options the model commands share: `device` (every command),
/// `repack` (where the weights live; every command) and `flash_attn` (`run`, `bench-model`).
macro_rules! shared_usage {
    (device) => {
        "  --device DEV           the device to run on with the CPU, through the scheduler (WGPU0, …;
                         default: the CPU alone)
"
    };
    (repack) => {
        "  --repack               put the weights MUL_MAT reads, of a type with a layout, in the
                         CPU_REPACK buffer type (default off: more memory, not faster yet)
  -nr, --no-repack       keep every weight in the mapped file (the default)
"
    };
    (flash_attn) => {
        "  --no-flash-attn        attention by MUL_MAT and SOFT_MAX instead of FLASH_ATTN_EXT, as
                         llama.cpp's -fa off (slower here; flash attention is the default)
"
    };
}

const RUN_USAGE: &str = concat!(
    "usage: ggml run MODEL.gguf -p PROMPT [options]

  -p, --prompt TEXT      the prompt
  -n, --n-predict N      tokens to generate (default 128)
  --temp T               temperature (default 0.8; 0 is greedy)
  --top-k K              top-k (default 40; 0 is off)
  --top-p P              top-p (default 0.95; 1 is off)
  --min-p P              min-p (default 0.05; 0 is off)
  --repeat-penalty R     repetition penalty over the last 64 tokens (default 1: off)
  --seed S               the sampler's seed (default 0)
  -t, --threads N        CPU threads (default: every core)
  -c, --ctx-size N       context size (default 4096, at most the model's)
  -b, --batch-size N     prompt tokens per graph (default 512)
",
    shared_usage!(device),
    shared_usage!(flash_attn),
    shared_usage!(repack),
    "
The generated text goes to stdout as it comes; prompt and generation speed go to stderr."
);

const EMBED_USAGE: &str = concat!(
    "usage: ggml embed MODEL.gguf -p TEXT [-p TEXT…] [options]

  -p, --prompt TEXT      a text to embed (repeat for more)
  --pooling P            mean, cls, last or none (one vector per token); default: the model's
  --normalize            scale each embedding to unit Euclidean length
  -t, --threads N        CPU threads (default: every core)
",
    shared_usage!(device),
    shared_usage!(repack),
    "
Prints one JSON object: {\"model\", \"pooling\", \"normalized\", \"n_embd\", \"data\": [{\"text\",
\"n_tokens\", \"embedding\"}]}; with --pooling none each embedding is a list of per-token vectors."
);

const BENCH_USAGE: &str = concat!(
    "usage: ggml bench-model MODEL.gguf [options]

  -p, --n-prompt N       prompt tokens of the pp test (default 512; 0 skips it)
  -n, --n-gen N          generated tokens of the tg test (default 128; 0 skips it)
  -t, --threads N,M,…    thread counts to test (default: every core)
  -r, --repetitions N    runs per test, after one warm-up run (default 5)
  -b, --batch-size N     prompt tokens per graph (default 512)
",
    shared_usage!(device),
    shared_usage!(flash_attn),
    shared_usage!(repack),
    "
Prints a table in llama-bench's markdown format (t/s is the mean ± standard deviation over the
runs)."
);

/// What every model command parses: the model path, the options it shares, and the rest.
struct Common {
    model: Option<PathBuf>,
    device: Option<String>,
    flash_attn: bool,
    repack: bool,
}

impl Common {
    fn new() -> Common {
        Common {
            model: None,
            device: None,
            flash_attn: true,
            repack: false,
        }
    }

    /// Takes `flag` if it is a shared option or the model path; `Ok(false)` when it is not.
    fn take(&mut self, flag: &str, a: &mut Args<'_>) -> Result<bool, String> {
        match flag {
            "--device" => self.device = Some(a.value(flag)?),
            "--flash-attn" | "-fa" => self.flash_attn = true,
            "--no-flash-attn" => self.flash_attn = false,
            "--repack" => self.repack = true,
            "--no-repack" | "-nr" => self.repack = false,
            f if f.starts_with('-') && f.len() > 1 => return Ok(false),
            _ if self.model.is_some() => return Err(format!("more than one MODEL given ({flag})")),
            _ => self.model = Some(PathBuf::from(a.current_os())),
        }
        Ok(true)
    }

    fn load(&self, command: &str, usage: &str) -> Result<Model, CliError> {
        let path = self
            .model
            .as_ref()
            .ok_or_else(|| CliError::Usage(format!("{command} needs a MODEL.gguf\n\n{usage}")))?;
        crate::register_wgpu_if_named(self.device.as_deref())?;
        let options = LoadOptions {
            device: self.device.clone(),
            repack: self.repack,
        };
        // A terminal sees the weights' bytes bound (copied, for a device that cannot use the
        // mapped file) when it takes more than a moment.
        let mut bar = Progress::new(0.0);
        let model = Model::load_with_progress(path, &options, |done, total| {
            let mib = |b: usize| b as f64 / 1048576.0;
            let now = format!("loading: {:.0} of {:.0} MiB", mib(done), mib(total));
            bar.set(done as f64, total as f64, &now);
        });
        bar.clear();
        model.map_err(failed)
    }
}

/// A report of the prompt's tokens processed, on stderr while it is a terminal, erased when
/// the prompt is done (before the first generated text).
fn prompt_progress() -> ProgressFn {
    let mut bar = Progress::new(0.0);
    Box::new(move |done, total| {
        if done < total {
            let now = format!("prompt: {done} of {total} tokens");
            bar.set(done as f64, total as f64, &now);
        } else {
            bar.clear();
        }
    })
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag} needs a number, got {v:?}"))
}

fn failed(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(e.to_string())
}

/// Whether any argument asks for help.
fn wants_help(args: &[OsString]) -> bool {
    args.iter().any(crate::is_help)
}

/// The session options for `model`: `n_ctx` capped at the model's context.
fn session_options(
    model: &Model,
    n_ctx: usize,
    threads: usize,
    batch: usize,
    fa: bool,
) -> SessionOptions {
    let train = model.hparams().n_ctx_train;
    SessionOptions {
        n_ctx: if train > 0 { n_ctx.min(train) } else { n_ctx },
        n_threads: threads,
        n_batch: batch,
        flash_attn: fa,
        ..SessionOptions::default()
    }
}

/// Runs `ggml run ARGS…`.
pub fn run(argv: &[OsString]) -> Result<(), CliError> {
    if wants_help(argv) {
        println!("{RUN_USAGE}");
        return Ok(());
    }
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{RUN_USAGE}"));
    let mut common = Common::new();
    let (mut prompt, mut n_predict, mut params) = (None, 128usize, Params::default());
    let (mut threads, mut n_ctx, mut batch) = (args::default_threads(), 4096usize, 512usize);
    let mut a = Args::new(argv);
    while let Some(flag) = a.next() {
        let r: Result<(), String> = (|| {
            match flag.as_str() {
                "-p" | "--prompt" => prompt = Some(a.value(&flag)?),
                "-n" | "--n-predict" => n_predict = parse_num(&flag, &a.value(&flag)?)?,
                "--temp" => params.temp = parse_num(&flag, &a.value(&flag)?)?,
                "--top-k" => params.top_k = parse_num(&flag, &a.value(&flag)?)?,
                "--top-p" => params.top_p = parse_num(&flag, &a.value(&flag)?)?,
                "--min-p" => params.min_p = parse_num(&flag, &a.value(&flag)?)?,
                "--repeat-penalty" => params.repeat_penalty = parse_num(&flag, &a.value(&flag)?)?,
                "--seed" => params.seed = parse_num(&flag, &a.value(&flag)?)?,
                "-t" | "--threads" => threads = args::threads(&flag, &a.value(&flag)?)?,
                "-c" | "--ctx-size" => n_ctx = parse_num(&flag, &a.value(&flag)?)?,
                "-b" | "--batch-size" => batch = parse_num(&flag, &a.value(&flag)?)?,
                f => {
                    if !common.take(f, &mut a)? {
                        return Err(format!("unknown option {f}"));
                    }
                }
            }
            Ok(())
        })();
        r.map_err(usage)?;
    }
    let prompt = prompt.ok_or_else(|| usage("run needs -p PROMPT".into()))?;
    let model = common.load("run", RUN_USAGE)?;
    let vocab = model.vocab();
    let tokens = vocab
        .tokenize(&prompt, vocab.add_bos(), true)
        .map_err(failed)?;
    let opts = session_options(&model, n_ctx, threads, batch, common.flash_attn);
    let mut session = model.session(opts).map_err(failed)?;
    session.set_progress(Some(prompt_progress()));
    let mut sampler = Chain::from_params(&params).map_err(failed)?;
    let mut stdout = std::io::stdout().lock();
    let mut broken_pipe = false;
    let g = session
        .generate(&tokens, n_predict, &mut sampler, |tok| {
            let piece = vocab.token_to_piece(tok, false)?;
            // A closed stdout (`| head`) ends the generation quietly.
            if stdout
                .write_all(piece)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                broken_pipe = true;
                return Ok(false);
            }
            Ok(true)
        })
        .map_err(failed)?;
    if !broken_pipe {
        let _ = stdout.write_all(b"\n").and_then(|()| stdout.flush());
    }
    drop(stdout);
    let st = session.stats();
    eprintln!(
        "prompt:     {:5} tokens in {:8.3} s = {:8.2} tokens/s",
        g.n_prompt,
        g.prompt_time.as_secs_f64(),
        g.prompt_tps()
    );
    eprintln!(
        "generation: {:5} tokens in {:8.3} s = {:8.2} tokens/s",
        g.n_generated,
        g.gen_time.as_secs_f64(),
        g.gen_tps()
    );
    eprintln!(
        "graphs: {} built, {} reused, {} split(s); compute buffer {:.2} MiB reserved once ({} \
         growths); KV cache {:.2} MiB; weights {}",
        st.graphs_built,
        st.graphs_reused,
        st.n_splits,
        st.compute_buffer_bytes as f64 / 1048576.0,
        st.compute_buffer_grows,
        st.kv_cache_bytes as f64 / 1048576.0,
        match (model.is_mapped(), model.device_bytes()) {
            (true, _) if model.repacked_bytes() > 0 => format!(
                "memory-mapped, {:.2} MiB repacked for the CPU",
                model.repacked_bytes() as f64 / 1048576.0
            ),
            (true, _) => "memory-mapped (no copy)".to_string(),
            (false, 0) => "copied".to_string(),
            (false, n) => format!(
                "{:.2} MiB copied to {} (the rest mapped on the CPU)",
                n as f64 / 1048576.0,
                model.device().name()
            ),
        }
    );
    Ok(())
}

fn pooling_name(p: Pooling) -> &'static str {
    match p {
        Pooling::None => "none",
        Pooling::Mean => "mean",
        Pooling::Cls => "cls",
        Pooling::Last => "last",
    }
}

fn push_vector(out: &mut String, v: &[f32]) {
    crate::json::list(out, v, |o, &x| {
        if x.is_finite() {
            let _ = write!(o, "{x:?}");
        } else {
            crate::json::float(o, f64::from(x));
        }
    });
}

/// Runs `ggml embed ARGS…`.
pub fn embed(argv: &[OsString]) -> Result<(), CliError> {
    if wants_help(argv) {
        println!("{EMBED_USAGE}");
        return Ok(());
    }
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{EMBED_USAGE}"));
    let mut common = Common::new();
    let (mut texts, mut pooling, mut normalize) = (Vec::new(), None, false);
    let mut threads = args::default_threads();
    let mut a = Args::new(argv);
    while let Some(flag) = a.next() {
        let r: Result<(), String> = (|| {
            match flag.as_str() {
                "-p" | "--prompt" => texts.push(a.value(&flag)?),
                "--pooling" => {
                    pooling = Some(Pooling::from_name(&a.value(&flag)?).map_err(|e| e.to_string())?)
                }
                "--normalize" => normalize = true,
                "-t" | "--threads" => threads = args::threads(&flag, &a.value(&flag)?)?,
                f => {
                    if !common.take(f, &mut a)? {
                        return Err(format!("unknown option {f}"));
                    }
                }
            }
            Ok(())
        })();
        r.map_err(usage)?;
    }
    if texts.is_empty() {
        return Err(usage("embed needs at least one -p TEXT".into()));
    }
    let model = common.load("embed", EMBED_USAGE)?;
    if !model.hparams().arch.is_encoder() {
        return Err(failed(format!(
            "{}: {} is not an encoder (embed runs bert models)",
            common
                .model
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
            model.hparams().arch.name()
        )));
    }
    let pooling = pooling.unwrap_or(model.hparams().pooling);
    let mut out = String::from("{");
    crate::json::key(&mut out, "model", true);
    crate::json::string(&mut out, model.description());
    crate::json::key(&mut out, "pooling", false);
    crate::json::string(&mut out, pooling_name(pooling));
    crate::json::key(&mut out, "normalized", false);
    out.push_str(if normalize { "true" } else { "false" });
    crate::json::key(&mut out, "n_embd", false);
    let _ = write!(out, "{}", model.hparams().n_embd);
    crate::json::key(&mut out, "data", false);
    out.push('[');
    for (i, text) in texts.iter().enumerate() {
        let ids = model.vocab().tokenize(text, true, true).map_err(failed)?;
        let emb = model
            .embed_with_threads(&ids, pooling, normalize, threads)
            .map_err(|e| failed(format!("text {i}: {e}")))?;
        if i > 0 {
            out.push(',');
        }
        out.push('{');
        crate::json::key(&mut out, "text", true);
        crate::json::string(&mut out, text);
        crate::json::key(&mut out, "n_tokens", false);
        let _ = write!(out, "{}", ids.len());
        crate::json::key(&mut out, "embedding", false);
        if pooling == Pooling::None {
            crate::json::list(&mut out, &emb, |o, v| push_vector(o, v));
        } else {
            push_vector(&mut out, &emb[0]);
        }
        out.push('}');
    }
    out.push_str("]}\n");
    crate::write_stdout(&out)
}

/// Mean and sample standard deviation.
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// One timed run of a test from an empty cache: `n_prompt` tokens in batches, or `n_gen`
/// tokens one at a time; random token ids as llama-bench uses.
fn bench_once(
    session: &mut Session,
    n_prompt: usize,
    n_gen: usize,
    rng: &mut Rng,
) -> Result<f64, CliError> {
    let n_vocab = session.model().n_vocab() as u64;
    let mut tok = || (rng.next_u64() % n_vocab) as u32;
    session.clear();
    let t0 = Instant::now();
    if n_prompt > 0 {
        let tokens: Vec<u32> = (0..n_prompt).map(|_| tok()).collect();
        session.eval(&tokens, false).map_err(failed)?;
    }
    for _ in 0..n_gen {
        let t = tok();
        session.eval(&[t], false).map_err(failed)?;
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs `ggml bench-model ARGS…`.
pub fn bench_model(argv: &[OsString]) -> Result<(), CliError> {
    if wants_help(argv) {
        println!("{BENCH_USAGE}");
        return Ok(());
    }
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{BENCH_USAGE}"));
    let mut common = Common::new();
    let (mut n_prompt, mut n_gen, mut reps, mut batch) = (512usize, 128usize, 5usize, 512usize);
    let mut thread_list = vec![args::default_threads()];
    let mut a = Args::new(argv);
    while let Some(flag) = a.next() {
        let r: Result<(), String> = (|| {
            match flag.as_str() {
                "-p" | "--n-prompt" => n_prompt = parse_num(&flag, &a.value(&flag)?)?,
                "-n" | "--n-gen" => n_gen = parse_num(&flag, &a.value(&flag)?)?,
                "-r" | "--repetitions" => reps = parse_num(&flag, &a.value(&flag)?)?,
                "-b" | "--batch-size" => batch = parse_num(&flag, &a.value(&flag)?)?,
                "-t" | "--threads" => {
                    thread_list = a
                        .value(&flag)?
                        .split(',')
                        .map(|t| args::threads(&flag, t))
                        .collect::<Result<_, _>>()?
                }
                f => {
                    if !common.take(f, &mut a)? {
                        return Err(format!("unknown option {f}"));
                    }
                }
            }
            Ok(())
        })();
        r.map_err(usage)?;
    }
    if reps == 0 {
        return Err(usage("-r needs at least 1 repetition".into()));
    }
    let model = common.load("bench-model", BENCH_USAGE)?;
    let backend = model.device().name().to_uppercase();
    let mut tests = Vec::new();
    for &t in &thread_list {
        if n_prompt > 0 {
            tests.push((t, n_prompt, 0));
        }
        if n_gen > 0 {
            tests.push((t, 0, n_gen));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {:<30} | {:>10} | {:>10} | {:<10} | {:>7} | {:>15} | {:>20} |",
        "model", "size", "params", "backend", "threads", "test", "t/s"
    );
    let _ = writeln!(
        out,
        "| {} | {}: | {}: | {} | {}: | {}: | {}: |",
        "-".repeat(30),
        "-".repeat(9),
        "-".repeat(9),
        "-".repeat(10),
        "-".repeat(6),
        "-".repeat(14),
        "-".repeat(19)
    );
    crate::write_stdout(&out)?;
    let total_runs = tests.len() * (reps + 1);
    let mut progress = Progress::new(total_runs as f64);
    let mut rng = Rng::new(42);
    for &(threads, pp, tg) in &tests {
        let n = (pp + tg).max(1);
        let opts = session_options(&model, n.max(pp + tg), threads, batch, common.flash_attn);
        let mut session = model.session(opts).map_err(failed)?;
        let name = if pp > 0 {
            format!("pp{pp}")
        } else {
            format!("tg{tg}")
        };
        let mut tps = Vec::with_capacity(reps);
        for r in 0..=reps {
            progress.advance(0.0, &format!("{name} t={threads} run {r}/{reps}"));
            let secs = bench_once(&mut session, pp, tg, &mut rng)?;
            // Run 0 warms up (page faults of the mapping, caches) and is not counted.
            if r > 0 {
                tps.push((pp + tg) as f64 / secs);
            }
            progress.advance(1.0, &name);
        }
        let (mean, sd) = mean_sd(&tps);
        let size = model.n_bytes() as f64;
        let size = if size < 1024.0 * 1024.0 * 1024.0 {
            format!("{:.2} MiB", size / 1048576.0)
        } else {
            format!("{:.2} GiB", size / 1073741824.0)
        };
        let params = model.n_params() as f64;
        let params = if params < 1e9 {
            format!("{:.2} M", params / 1e6)
        } else {
            format!("{:.2} B", params / 1e9)
        };
        progress.clear();
        let line = format!(
            "| {:<30} | {:>10} | {:>10} | {:<10} | {:>7} | {:>15} | {:>20} |\n",
            model.description(),
            size,
            params,
            backend,
            threads,
            name,
            format!("{mean:.2} ± {sd:.2}")
        );
        crate::write_stdout(&line)?;
    }
    Ok(())
}
