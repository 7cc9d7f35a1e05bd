//! `ggml run`, `ggml embed` and `ggml bench-model` on tiny random-weight models written to
//! temporary files (the generator of `crates/ggml-llm/tests/tiny`): the output against the
//! library's, the table's format, and the errors for bad models and prompts.

use std::path::PathBuf;
use std::process::Command;

use ggml_llm::sampling::{Chain, Params};
use ggml_llm::{LoadOptions, Model, Pooling, SessionOptions};

#[allow(dead_code)]
#[path = "../../ggml-llm/tests/tiny/mod.rs"]
mod tiny;

fn ggml(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn model_file(spec: tiny::Spec, name: &str) -> PathBuf {
    let t = tiny::Tiny::new(spec);
    let path = std::env::temp_dir().join(format!(
        "ggml-cli-models-{}-{name}.gguf",
        std::process::id()
    ));
    std::fs::write(&path, &t.bytes).unwrap();
    path
}

#[test]
fn run_streams_the_greedy_continuation_and_reports_speed() {
    let path = model_file(tiny::Spec::new("gemma3"), "run");
    let p = path.to_str().unwrap();
    let (code, out, err) = ggml(&[
        "run",
        p,
        "-p",
        "t5 t9 t33",
        "-n",
        "6",
        "--temp",
        "0",
        "-t",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    // The same continuation from the library.
    let model = Model::load(&path, &LoadOptions::default()).unwrap();
    let ids = model.vocab().tokenize("t5 t9 t33", true, true).unwrap();
    let mut s = model
        .session(SessionOptions {
            n_ctx: 128,
            n_threads: 1,
            ..Default::default()
        })
        .unwrap();
    let mut chain = Chain::from_params(&Params {
        temp: 0.0,
        ..Default::default()
    })
    .unwrap();
    let mut want = Vec::new();
    s.generate(&ids, 6, &mut chain, |t| {
        want.extend_from_slice(model.vocab().token_to_piece(t, false)?);
        Ok(true)
    })
    .unwrap();
    assert_eq!(out, format!("{}\n", String::from_utf8_lossy(&want)));
    assert!(err.contains("tokens/s") && err.contains("reused"), "{err}");

    // A prompt longer than the context, and sampling options out of range.
    let (code, _, err) = ggml(&["run", p, "-p", "t5 t9 t33 t4 t7", "-c", "4", "-n", "1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("n_ctx = 4"), "{err}");
    let (code, _, err) = ggml(&["run", p, "-p", "t5", "--top-p", "-1"]);
    assert_eq!(code, Some(1), "{err}");
    let (code, _, err) = ggml(&["run", p]);
    assert_eq!(code, Some(2));
    assert!(err.contains("-p PROMPT"), "{err}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn embed_prints_one_json_embedding_per_text() {
    let path = model_file(tiny::Spec::new("bert"), "embed");
    let p = path.to_str().unwrap();
    let (code, out, err) = ggml(&["embed", p, "-p", "t8 t17", "-p", "t30", "--normalize"]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["pooling"], "mean");
    assert_eq!(j["normalized"], true);
    assert_eq!(j["n_embd"], 32);
    let data = j["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1]["text"], "t30");
    let model = Model::load(&path, &LoadOptions::default()).unwrap();
    for (d, text) in data.iter().zip(["t8 t17", "t30"]) {
        let ids = model.vocab().tokenize(text, true, true).unwrap();
        assert_eq!(d["n_tokens"], ids.len());
        let want = model.embed(&ids, Pooling::Mean, true).unwrap();
        let got: Vec<f32> = d["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(got, want[0]);
    }
    let (code, out, _) = ggml(&["embed", p, "-p", "t8 t17", "--pooling", "none"]);
    assert_eq!(code, Some(0));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    // [CLS] t8 t17 [SEP]: one vector per token.
    assert_eq!(j["data"][0]["embedding"].as_array().unwrap().len(), 4);
    let (code, _, err) = ggml(&["embed", p, "-p", "x", "--pooling", "max"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("\"max\""), "{err}");
    // A decoder cannot embed.
    let dec = model_file(tiny::Spec::new("llama"), "embed-dec");
    let (code, _, err) = ggml(&["embed", dec.to_str().unwrap(), "-p", "t5"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not an encoder"), "{err}");
    std::fs::remove_file(path).unwrap();
    std::fs::remove_file(dec).unwrap();
}

#[test]
fn bench_model_prints_llama_bench_table() {
    let path = model_file(tiny::Spec::new("qwen3"), "bench");
    let p = path.to_str().unwrap();
    let (code, out, err) = ggml(&[
        "bench-model",
        p,
        "-p",
        "8",
        "-n",
        "4",
        "-r",
        "2",
        "-t",
        "1,2",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert_eq!(
        lines[0],
        "| model                          |       size |     params | backend    | threads |            test |                  t/s |"
    );
    assert_eq!(
        lines[1],
        "| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |"
    );
    let cells = |l: &str| -> Vec<String> { l.split('|').map(|c| c.trim().to_string()).collect() };
    let tests: Vec<(String, String)> = lines[2..]
        .iter()
        .map(|l| {
            let c = cells(l);
            assert_eq!(c[1], "qwen3 ?B f32");
            assert_eq!(c[4], "CPU");
            assert!(c[7].contains(" ± "), "{l}");
            // Every row is as wide as the header (± is one character).
            assert_eq!(l.chars().count(), lines[0].chars().count(), "{l}");
            (c[5].clone(), c[6].clone())
        })
        .collect();
    let want: Vec<(String, String)> = [("1", "pp8"), ("1", "tg4"), ("2", "pp8"), ("2", "tg4")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(tests, want);
    std::fs::remove_file(path).unwrap();
}

#[test]
fn bad_models_are_clear_errors() {
    let junk = std::env::temp_dir().join(format!("ggml-cli-models-{}-junk", std::process::id()));
    std::fs::write(&junk, b"not a gguf").unwrap();
    let j = junk.to_str().unwrap();
    for args in [
        vec!["run", j, "-p", "x"],
        vec!["embed", j, "-p", "x"],
        vec!["bench-model", j],
    ] {
        let cmd = args[0];
        let (code, _, err) = ggml(&args);
        assert_eq!(code, Some(1), "{cmd}");
        assert!(err.contains("not a GGUF model"), "{cmd}: {err}");
    }
    std::fs::remove_file(junk).unwrap();
    let spec = tiny::Spec::new("llama");
    let t = tiny::Tiny::with_kv(spec, &[("general.architecture", "mamba".into())]);
    let path =
        std::env::temp_dir().join(format!("ggml-cli-models-{}-mamba.gguf", std::process::id()));
    std::fs::write(&path, &t.bytes).unwrap();
    let (code, _, err) = ggml(&["run", path.to_str().unwrap(), "-p", "x"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("\"mamba\"") && err.contains("unsupported"),
        "{err}"
    );
    std::fs::remove_file(path).unwrap();
}

/// `ggml run` with stderr on a pseudo-terminal (made by util-linux's `script`): the prompt's
/// progress is drawn there (once the work has run for a second) and erased before the text;
/// with stderr a pipe, no report at all.
#[test]
fn run_reports_prompt_progress_on_a_terminal_only() {
    // Wide enough that a prompt evaluated one token per graph takes seconds.
    let spec = tiny::Spec {
        n_embd: 256,
        n_head: 4,
        n_head_kv: 4,
        head_dim: 64,
        n_ff: 1024,
        n_ctx_train: 1024,
        ..tiny::Spec::new("llama")
    };
    let path = model_file(spec, "progress");
    let p = path.to_str().unwrap();
    let prompt = "t5 ".repeat(200);
    let model = Model::load(&path, &LoadOptions::default()).unwrap();
    let n = model.vocab().tokenize(&prompt, true, true).unwrap().len();
    let report = format!(" of {n} tokens");
    let args = [
        "run", p, "-p", &prompt, "-b", "1", "-c", "1024", "-n", "2", "--temp", "0", "-t", "1",
    ];
    // A pipe: the text and the speed lines, no report and no terminal control codes.
    let (code, out, err) = ggml(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains(&report) && !err.contains('\r') && !err.contains('\x1b'));
    assert!(err.contains("tokens/s"), "{err}");
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("no `script` to make a terminal with; the terminal half is not checked");
        std::fs::remove_file(path).unwrap();
        return;
    }
    let mut line = String::from(env!("CARGO_BIN_EXE_ggml"));
    for a in &args[..2] {
        line.push(' ');
        line.push_str(a);
    }
    line.push_str(&format!(" -p '{prompt}'"));
    for a in &args[4..] {
        line.push(' ');
        line.push_str(a);
    }
    let t0 = std::time::Instant::now();
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert!(tty.status.success());
    let shown = String::from_utf8_lossy(&tty.stdout).into_owned();
    // The report appears only once the prompt has taken a second.
    if secs > 1.5 {
        let at = shown
            .find(&report)
            .unwrap_or_else(|| panic!("no report in {shown:?}"));
        assert!(shown[..at].contains("prompt: "), "{shown}");
    }
    // Erased before the generated text, which is the same as through the pipe.
    let text = out.trim_end_matches('\n');
    let at = shown.find(text).expect("the generated text");
    if let Some(last_report) = shown.rfind(" tokens\r") {
        assert!(last_report < at);
        assert!(shown[last_report..at].contains("\x1b[2K"), "{shown}");
    }
    std::fs::remove_file(path).unwrap();
}
