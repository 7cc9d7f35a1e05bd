//! Tiny random-weight models of every architecture, built in memory: the graphs against an
//! f64 forward pass, batched prompt processing against token-by-token evaluation with the KV
//! cache, graph reuse and reserved compute memory, embeddings, and the errors for bad input.

mod tiny;

use ggml::gguf::Value;
use ggml::Type;
use ggml_llm::sampling::Chain;
use ggml_llm::{Error, LoadOptions, Model, Pooling, SessionOptions};
use tiny::{nmse, Spec, Tiny};

const PROMPT: [u32; 12] = [1, 5, 9, 33, 7, 7, 21, 4, 38, 12, 3, 30];

fn load(t: &Tiny) -> Model {
    Model::from_file(t.file(), &LoadOptions::default()).unwrap()
}

fn opts(n_batch: usize, flash_attn: bool, kv_type: Type) -> SessionOptions {
    SessionOptions {
        n_ctx: 64,
        n_threads: 2,
        n_batch,
        flash_attn,
        kv_type,
    }
}

/// The logits of every position of PROMPT, evaluated in one go.
fn all_logits(model: &Model, o: SessionOptions) -> Vec<f32> {
    model.session(o).unwrap().eval(&PROMPT, true).unwrap()
}

fn as_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

fn check_reference(spec: Spec) {
    let t = Tiny::new(spec.clone());
    let want = t.reference(&PROMPT);
    let model = load(&t);
    for fa in [false, true] {
        let got = all_logits(&model, opts(512, fa, Type::F32));
        let e = nmse(&got, &want);
        assert!(
            e <= 1e-6,
            "{} flash_attn={fa}: NMSE {e:e} against the f64 reference",
            spec.arch
        );
    }
    // With llama.cpp's F16 cache the keys and values are rounded: close, not equal.
    let got = all_logits(&model, opts(512, true, Type::F16));
    let e = nmse(&got, &want);
    assert!(e <= 1e-4, "{} F16 cache: NMSE {e:e}", spec.arch);
}

#[test]
fn llama_matches_the_f64_reference() {
    check_reference(Spec::new("llama"));
    check_reference(Spec {
        n_layer: 1,
        n_head_kv: 4,
        ..Spec::new("llama")
    });
}

#[test]
fn qwen2_and_qwen3_match_the_f64_reference() {
    check_reference(Spec::new("qwen2"));
    check_reference(Spec::new("qwen3"));
}

#[test]
fn gemma3_matches_the_f64_reference() {
    // Two layers: one sliding (window 4, base 10000) and one global (base 1e6); tied output.
    check_reference(Spec::new("gemma3"));
    check_reference(Spec {
        softcap: Some(3.0),
        n_head_kv: 1,
        ..Spec::new("gemma3")
    });
}

#[test]
fn bert_hidden_states_and_pooling_match_the_f64_reference() {
    let t = Tiny::new(Spec::new("bert"));
    let model = load(&t);
    let ids = [2u32, 8, 17, 30, 5, 3];
    let want = t.reference(&ids);
    let e = model.hparams().n_embd;
    let rows = model.embed(&ids, Pooling::None, false).unwrap();
    assert_eq!(rows.len(), ids.len());
    let err = nmse(&rows.concat(), &want);
    assert!(err <= 1e-6, "hidden states: NMSE {err:e}");
    let mean: Vec<f64> = (0..e)
        .map(|d| want.chunks(e).map(|r| r[d]).sum::<f64>() / ids.len() as f64)
        .collect();
    let norm = mean.iter().map(|x| x * x).sum::<f64>().sqrt();
    let unit: Vec<f64> = mean.iter().map(|x| x / norm).collect();
    let got = model.embed(&ids, Pooling::Mean, true).unwrap();
    assert_eq!(got.len(), 1);
    assert!(nmse(&got[0], &unit) <= 1e-6);
    let len: f64 = got[0].iter().map(|&x| f64::from(x).powi(2)).sum::<f64>();
    assert!((len - 1.0).abs() < 1e-5, "normalized length² {len}");
    let cls = model.embed(&ids, Pooling::Cls, false).unwrap();
    assert!(nmse(&cls[0], &want[..e]) <= 1e-6);
    let last = model.embed(&ids, Pooling::Last, false).unwrap();
    assert!(nmse(&last[0], &want[want.len() - e..]) <= 1e-6);
    // The tokenizer and the file's pooling.
    assert_eq!(model.hparams().pooling, Pooling::Mean);
    assert_eq!(
        model.vocab().tokenize("t8 t17", true, true).unwrap(),
        [2, 8, 17, 3]
    );
}

/// Batched prompt processing (whole prompt, or chunks of 5) gives the logits of
/// token-by-token evaluation with the KV cache.
#[test]
fn batched_prompt_equals_token_by_token_for_every_architecture() {
    for arch in ["llama", "qwen2", "qwen3", "gemma3"] {
        for weight_type in [Type::F32, Type::Q8_0] {
            let t = Tiny::new(Spec {
                weight_type,
                ..Spec::new(arch)
            });
            let model = load(&t);
            for fa in [false, true] {
                let batched = all_logits(&model, opts(512, fa, Type::F16));
                let chunked = all_logits(&model, opts(5, fa, Type::F16));
                let mut s = model.session(opts(512, fa, Type::F16)).unwrap();
                let mut single = Vec::new();
                for &tok in &PROMPT {
                    single.extend(s.eval(&[tok], true).unwrap());
                }
                let what = format!("{arch} {} flash_attn={fa}", weight_type.name());
                // Quantized products of one column and of many take different kernels
                // (VNNI dots, band products, AMX tiles), which sum each block's scaled
                // integers in another f32 order; the activations' re-quantization at every
                // product then flips a few Q8 levels, so the bound is wider there.
                let bound = if weight_type.is_quantized() {
                    1e-4
                } else {
                    1e-6
                };
                let e = nmse(&batched, &as_f64(&single));
                assert!(e <= bound, "{what}: batched vs token by token NMSE {e:e}");
                let e = nmse(&chunked, &as_f64(&single));
                assert!(
                    e <= bound,
                    "{what}: chunks of 5 vs token by token NMSE {e:e}"
                );
                // Last-token logits are the last row of all of them.
                let mut s = model.session(opts(512, fa, Type::F16)).unwrap();
                let last = s.eval(&PROMPT, false).unwrap();
                assert_eq!(last.len(), model.n_vocab());
                let e = nmse(&last, &as_f64(&batched[batched.len() - model.n_vocab()..]));
                assert!(e <= 1e-6, "{what}: last-token logits NMSE {e:e}");
            }
        }
    }
}

/// Generation reuses one graph per step shape and never grows the compute memory reserved
/// when the session was made; greedy generation is deterministic and seeded sampling repeats.
#[test]
fn generation_reuses_graphs_without_reallocating() {
    let t = Tiny::new(Spec::new("gemma3"));
    let model = load(&t);
    let mut s = model.session(opts(8, true, Type::F16)).unwrap();
    let reserved = s.stats().compute_buffer_bytes;
    assert!(reserved > 0);
    let mut greedy = Chain::from_params(&ggml_llm::sampling::Params {
        temp: 0.0,
        ..Default::default()
    })
    .unwrap();
    let mut out = Vec::new();
    let g = s
        .generate(&PROMPT, 20, &mut greedy, |tok| {
            out.push(tok);
            Ok(true)
        })
        .unwrap();
    // The EOS token (2) may end it early; every token generated was reported.
    assert_eq!(g.n_generated, out.len().min(20));
    let st = s.stats();
    assert_eq!(st.compute_buffer_grows, 0, "{st:?}");
    assert_eq!(st.compute_buffer_bytes, reserved);
    // The prompt in chunks of 8 (two shapes), then one-token steps of one shape.
    assert!(st.graphs_built <= 3, "{st:?}");
    // The sliding-window layer has window 4 + batch 8 cells, the global one n_ctx = 64:
    // 2 × 32 (K and V rows of 2 heads × 8) × 4 bytes per cell.
    assert_eq!(st.kv_cache_bytes, (12 + 64) * 2 * 16 * 2);
    assert!(st.graphs_reused + 3 >= out.len(), "{st:?}");
    // The greedy tokens are the argmax of a fresh evaluation of the same sequence.
    if let Some(&first) = out.first() {
        let logits = model
            .session(opts(8, true, Type::F16))
            .unwrap()
            .eval(&PROMPT, false)
            .unwrap();
        let argmax = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .unwrap() as u32;
        assert_eq!(first, argmax);
    }
    let sample = |seed| {
        let mut chain = Chain::from_params(&ggml_llm::sampling::Params {
            temp: 1.0,
            seed,
            ..Default::default()
        })
        .unwrap();
        let mut s = model.session(opts(8, true, Type::F16)).unwrap();
        let mut v = Vec::new();
        s.generate(&PROMPT, 10, &mut chain, |tok| {
            v.push(tok);
            Ok(true)
        })
        .unwrap();
        v
    };
    assert_eq!(sample(5), sample(5));
}

/// `t` written to a file of its own in a new temporary directory `ggml-llm-NAME-PID`: the
/// directory and the file (to be memory-mapped).
fn write_file(t: &Tiny, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("ggml-llm-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("tiny-{}.gguf", t.spec.arch));
    std::fs::write(&path, &t.bytes).unwrap();
    (dir, path)
}

#[test]
fn a_memory_mapped_file_is_not_copied() {
    let t = Tiny::new(Spec::new("llama"));
    let (dir, path) = write_file(&t, "mapped");
    let mapped = Model::load(&path, &LoadOptions::default()).unwrap();
    assert!(mapped.is_mapped());
    assert!(!load(&t).is_mapped());
    let a = all_logits(&mapped, opts(512, true, Type::F16));
    let b = all_logits(&load(&t), opts(512, true, Type::F16));
    assert_eq!(a, b);
    // No general.file_type: the type of most weight bytes names it.
    assert_eq!(mapped.description(), "llama ?B f32");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Loading reports the weights' bytes bound; a prompt reports its tokens after each chunk,
/// one-token steps nothing.
#[test]
fn loads_and_prompts_report_their_progress() {
    let t = Tiny::new(Spec::new("qwen3"));
    let (dir, path) = write_file(&t, "progress");
    let mut bytes = Vec::new();
    let model = Model::load_with_progress(&path, &LoadOptions::default(), |done, total| {
        bytes.push((done, total))
    })
    .unwrap();
    let total = model.n_bytes() as usize;
    assert!(total > 0);
    // Mapped: every byte at once.
    assert_eq!(bytes, [(total, total)]);

    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut s = model.session(opts(5, true, Type::F16)).unwrap();
    let seen = calls.clone();
    s.set_progress(Some(Box::new(move |done, total| {
        seen.lock().unwrap().push((done, total))
    })));
    s.eval(&PROMPT, false).unwrap();
    assert_eq!(*calls.lock().unwrap(), [(5, 12), (10, 12), (12, 12)]);
    s.eval(&[3], false).unwrap();
    assert_eq!(calls.lock().unwrap().len(), 3);
    s.clear();
    calls.lock().unwrap().clear();
    let mut greedy = Chain::from_params(&ggml_llm::sampling::Params {
        temp: 0.0,
        ..Default::default()
    })
    .unwrap();
    s.generate(&PROMPT[..7], 4, &mut greedy, |_| Ok(true))
        .unwrap();
    assert_eq!(*calls.lock().unwrap(), [(5, 7), (7, 7)]);
    s.set_progress(None);
    s.clear();
    s.eval(&PROMPT, false).unwrap();
    assert_eq!(calls.lock().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn err_of<T: std::fmt::Debug>(r: ggml_llm::Result<T>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn bad_input_gets_errors_that_name_it() {
    // Not a model: not GGUF at all, and a GGUF without an architecture.
    let dir = std::env::temp_dir().join(format!("ggml-llm-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"this is not a model").unwrap();
    let e = err_of(Model::load(&junk, &LoadOptions::default()));
    assert!(e.contains("not a GGUF model"), "{e}");
    let e = err_of(Model::load(
        dir.join("absent.gguf"),
        &LoadOptions::default(),
    ));
    assert!(e.contains("absent.gguf"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    let bare =
        ggml::gguf::GgufFile::from_vec(ggml::gguf::GgufWriter::new().to_bytes().unwrap()).unwrap();
    let e = err_of(Model::from_file(bare, &LoadOptions::default()));
    assert!(e.contains("general.architecture"), "{e}");

    // An architecture this crate does not run.
    let t = Tiny::with_kv(
        Spec::new("llama"),
        &[("general.architecture", Value::from("gpt2"))],
    );
    let r = Model::from_file(t.file(), &LoadOptions::default());
    assert!(matches!(r, Err(Error::Unsupported(_))));
    assert!(err_of(r).contains("\"gpt2\""));

    // A rope scaling this crate does not implement; `none` ignores the factor.
    let scaled = |kind: &str| {
        Tiny::with_kv(
            Spec::new("qwen2"),
            &[
                ("qwen2.rope.scaling.type", Value::from(kind)),
                ("qwen2.rope.scaling.factor", Value::from(4.0f32)),
            ],
        )
    };
    let r = Model::from_file(scaled("longrope").file(), &LoadOptions::default());
    assert!(matches!(r, Err(Error::Unsupported(_))));
    let e = err_of(r);
    assert!(
        e.contains("\"longrope\"") && e.contains("qwen2.rope.scaling.type"),
        "{e}"
    );
    let hp = load(&scaled("none")).hparams().clone();
    assert_eq!((hp.rope_freq_scale, hp.rope_ext_factor), (1.0, 0.0));
    let hp = load(&scaled("linear")).hparams().clone();
    assert_eq!((hp.rope_freq_scale, hp.rope_ext_factor), (0.25, 0.0));
    // No original_context_length: YaRN's is the training context.
    let hp = load(&scaled("yarn")).hparams().clone();
    assert_eq!((hp.rope_freq_scale, hp.rope_ext_factor), (0.25, 1.0));
    assert_eq!(hp.rope_n_ctx_orig, hp.n_ctx_train);

    // A missing required key and a tensor of the wrong shape.
    let t = Tiny::with_kv(
        Spec::new("llama"),
        &[("llama.embedding_length", Value::from(48u32))],
    );
    let e = err_of(Model::from_file(t.file(), &LoadOptions::default()));
    assert!(
        e.contains("token_embd.weight") && e.contains("[48, 40]"),
        "{e}"
    );

    // An unknown device.
    let t = Tiny::new(Spec::new("llama"));
    let o = LoadOptions {
        device: Some("NoSuchDevice".into()),
        ..LoadOptions::default()
    };
    let e = err_of(Model::from_file(t.file(), &o));
    assert!(e.contains("NoSuchDevice"), "{e}");

    // A prompt longer than the context, an empty one, an id outside the vocabulary.
    let model = load(&t);
    let mut s = model
        .session(SessionOptions {
            n_ctx: 8,
            ..opts(512, true, Type::F16)
        })
        .unwrap();
    let e = err_of(s.eval(&PROMPT, true));
    assert!(
        e.contains("n_ctx = 8") && e.contains("longer than the context"),
        "{e}"
    );
    assert_eq!(s.n_past(), 0, "nothing was evaluated");
    assert!(err_of(s.eval(&[], true)).contains("empty"));
    let e = err_of(s.eval(&[1, 40], true));
    assert!(e.contains("tokens[1] = 40"), "{e}");
    let mut chain = Chain::greedy(vec![]).unwrap();
    let e = err_of(s.generate(&PROMPT[..4], 5, &mut chain, |_| Ok(true)));
    assert!(e.contains("n_predict = 5"), "{e}");
    // Bad options.
    let e = err_of(model.session(SessionOptions {
        n_batch: 0,
        ..opts(512, true, Type::F16)
    }));
    assert!(e.contains("n_batch = 0"), "{e}");
    let e = err_of(model.session(opts(512, true, Type::Q4_0)));
    assert!(e.contains("kv_type = q4_0"), "{e}");

    // Encoders and decoders used the wrong way round.
    assert!(err_of(model.embed(&[1, 2], Pooling::Mean, true)).contains("not an encoder"));
    let bert = load(&Tiny::new(Spec::new("bert")));
    assert!(err_of(bert.session(SessionOptions::default())).contains("encoder"));
    let long: Vec<u32> = vec![5; 129];
    let e = err_of(bert.embed(&long, Pooling::Mean, false));
    assert!(e.contains("longer than the context"), "{e}");
}

#[test]
fn weights_repacked_for_the_cpu_give_the_same_logits() {
    for arch in ["llama", "gemma3"] {
        let t = Tiny::new(Spec {
            weight_type: Type::Q5_0,
            ..Spec::new(arch)
        });
        let (dir, path) = write_file(&t, &format!("repack-{arch}"));
        let repack = LoadOptions {
            repack: true,
            ..LoadOptions::default()
        };
        let repacked = Model::load(&path, &repack).unwrap();
        let mapped = Model::load(&path, &LoadOptions::default()).unwrap();
        assert!(repacked.repacked_bytes() > 0, "{arch}");
        assert_eq!(mapped.repacked_bytes(), 0, "{arch}");
        assert!(repacked.is_mapped() && mapped.is_mapped(), "{arch}");
        let bits = |m: &Model| -> Vec<u32> {
            let l = all_logits(m, opts(512, true, Type::F16));
            l.iter().map(|v| v.to_bits()).collect()
        };
        assert_eq!(bits(&repacked), bits(&mapped), "{arch}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
