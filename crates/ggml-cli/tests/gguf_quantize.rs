//! `ggml gguf quantize`: llama-quantize's file types, per-tensor rules, tensor order and
//! metadata; bytes equal to `quantize_chunk`'s; imatrix files in both formats; refusals.

use std::path::{Path, PathBuf};
use std::process::Command;

use ggml::gguf::{Array, GgufFile, GgufWriter};
use ggml::{quants, Type};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ggml-cli-quantize-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 2.0
        })
        .collect()
}

fn le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| ggml::f16::from_f32(*x).to_le_bytes())
        .collect()
}

/// The metadata llama.cpp's rules read: a one-layer llama.
fn model_writer<'a>() -> GgufWriter<'a> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama").unwrap();
    w.set("general.name", "tiny").unwrap();
    w.set("general.file_type", 1u32).unwrap();
    w.set("llama.block_count", 1u32).unwrap();
    w.set("llama.attention.head_count", 2u32).unwrap();
    w
}

/// A model, its tensors in an order llama.cpp changes: a norm, an output and token embedding,
/// attention weights (one F16), an ffn_down whose rows of 96 are not whole 256-blocks, and an
/// I32 tensor.
fn write_model(dir: &Path) -> PathBuf {
    let mut w = model_writer();
    w.add_tensor(
        "blk.0.attn_v.weight",
        Type::F32,
        &[256, 4],
        le(&values(1024, 1)),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.attn_q.weight",
        Type::F16,
        &[256, 2],
        f16_bytes(&values(512, 2)),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.attn_norm.weight",
        Type::F32,
        &[256],
        le(&values(256, 3)),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn_down.weight",
        Type::F32,
        &[96, 2],
        le(&values(192, 4)),
    )
    .unwrap();
    w.add_tensor("output.weight", Type::F32, &[256, 2], le(&values(512, 5)))
        .unwrap();
    w.add_tensor(
        "token_embd.weight",
        Type::F32,
        &[256, 2],
        le(&values(512, 6)),
    )
    .unwrap();
    let ids: Vec<u8> = (0..4i32).flat_map(|i| i.to_le_bytes()).collect();
    w.add_tensor("blk.0.ids", Type::I32, &[4], ids).unwrap();
    let path = dir.join("model.gguf");
    w.write_to_file(&path).unwrap();
    path
}

fn ggml(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn quantize(input: &Path, output: &Path, ty: &str, extra: &[&str]) -> (bool, String) {
    let mut args: Vec<&std::ffi::OsStr> = vec!["gguf".as_ref(), "quantize".as_ref()];
    args.extend(extra.iter().map(|a| a.as_ref() as &std::ffi::OsStr));
    args.extend([input.as_os_str(), output.as_os_str(), ty.as_ref()]);
    ggml(&args)
}

/// `values` quantized to `ty` with rows of `n_per_row`, as GGML does.
fn quantized(ty: Type, values: &[f32], n_per_row: usize, imatrix: Option<&[f32]>) -> Vec<u8> {
    let rows = values.len() / n_per_row;
    let mut out = vec![0u8; ty.row_size(n_per_row as i64).unwrap() * rows];
    quants::quantize_chunk(ty, values, &mut out, 0, rows, n_per_row, imatrix).unwrap();
    out
}

#[test]
fn q4_k_m_follows_llama_cpp_rules_order_and_metadata() {
    let dir = tmpdir("mix");
    let input = write_model(&dir);
    let output = dir.join("q4km.gguf");
    let (ok, err) = quantize(&input, &output, "q4_k_m", &["-t", "2"]);
    assert!(ok, "{err}");

    let out = GgufFile::open(&output).unwrap();
    assert_eq!(out.get_val_str("general.name").unwrap(), "tiny");
    assert_eq!(out.get_val_u32("general.file_type").unwrap(), 15, "Q4_K_M");
    // As llama-quantize: the version and file type are set last, in that order.
    let keys: Vec<&str> = out.metadata().map(|(k, _)| k).collect();
    assert_eq!(
        keys[keys.len() - 2..],
        ["general.quantization_version", "general.file_type"]
    );
    // llama.cpp's order: outside blk.N first, then by layer, each by name.
    let names: Vec<&str> = out.tensor_names().collect();
    assert_eq!(
        names,
        [
            "output.weight",
            "token_embd.weight",
            "blk.0.attn_norm.weight",
            "blk.0.attn_q.weight",
            "blk.0.attn_v.weight",
            "blk.0.ffn_down.weight",
            "blk.0.ids",
        ]
    );
    let ty = |name: &str| out.tensor_info(name).unwrap().ty();
    assert_eq!(ty("output.weight"), Type::Q6_K);
    assert_eq!(ty("token_embd.weight"), Type::Q4_K);
    assert_eq!(ty("blk.0.attn_q.weight"), Type::Q4_K, "F16 source");
    assert_eq!(
        ty("blk.0.attn_v.weight"),
        Type::Q6_K,
        "a layer with more bits"
    );
    assert_eq!(
        ty("blk.0.ffn_down.weight"),
        Type::Q8_0,
        "q6_K's fallback for rows of 96"
    );
    assert_eq!(ty("blk.0.attn_norm.weight"), Type::F32, "norms are kept");
    assert_eq!(ty("blk.0.ids"), Type::I32);

    let want = quantized(Type::Q6_K, &values(1024, 1), 256, None);
    assert_eq!(out.tensor_data("blk.0.attn_v.weight").unwrap(), &want[..]);
    let src_f16 = GgufFile::open(&input)
        .unwrap()
        .tensor_data_f32("blk.0.attn_q.weight")
        .unwrap();
    let want = quantized(Type::Q4_K, &src_f16, 256, None);
    assert_eq!(out.tensor_data("blk.0.attn_q.weight").unwrap(), &want[..]);
    let want = quantized(Type::Q8_0, &values(192, 4), 96, None);
    assert_eq!(out.tensor_data("blk.0.ffn_down.weight").unwrap(), &want[..]);
    assert_eq!(
        out.tensor_data("blk.0.attn_norm.weight").unwrap(),
        &le(&values(256, 3))[..]
    );

    // The log names every tensor with its change; the summary counts fallbacks honestly.
    assert!(err.contains("[1/7] output.weight"), "{err}");
    assert!(err.contains("f32 -> q6_K"), "{err}");
    assert!(
        err.contains("(fallback: rows of 96 are not whole q6_K blocks)"),
        "{err}"
    );
    assert!(
        err.contains("Q4_K_M (Q4_K - Medium): converted 5 of 7 tensors, kept 2"),
        "{err}"
    );
    assert!(
        err.contains(
            "1 tensor(s) fell back because their rows are not whole blocks: 1 q6_K -> q8_0"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn options_change_the_mix() {
    let dir = tmpdir("options");
    let input = write_model(&dir);
    let run = |ty: &str, extra: &[&str]| {
        let output = dir.join(format!("{ty}-{}.gguf", extra.join("")));
        let (ok, err) = quantize(&input, &output, ty, extra);
        assert!(ok, "{err}");
        GgufFile::open(&output).unwrap()
    };
    let ty = |f: &GgufFile, name: &str| f.tensor_info(name).unwrap().ty();
    let pure = run("Q4_K_M", &["--pure"]);
    assert_eq!(ty(&pure, "output.weight"), Type::Q4_K);
    assert_eq!(ty(&pure, "blk.0.attn_v.weight"), Type::Q4_K);
    assert_eq!(
        ty(&pure, "blk.0.ffn_down.weight"),
        Type::Q5_0,
        "q4_K's fallback"
    );
    let leave = run("q4_k_m", &["--leave-output-tensor"]);
    assert_eq!(ty(&leave, "output.weight"), Type::F32);
    let set = run(
        "Q4_K_M",
        &[
            "--output-tensor-type",
            "q8_0",
            "--token-embedding-type",
            "F16",
        ],
    );
    assert_eq!(ty(&set, "output.weight"), Type::Q8_0);
    assert_eq!(ty(&set, "token_embd.weight"), Type::F16);
    let q8 = run("7", &["--threads", "1"]);
    assert_eq!(
        q8.get_val_u32("general.file_type").unwrap(),
        7,
        "Q8_0 by number"
    );
    assert_eq!(ty(&q8, "blk.0.attn_q.weight"), Type::Q8_0);
    let copy = run("COPY", &[]);
    assert_eq!(
        copy.get_val_u32("general.file_type").unwrap(),
        1,
        "the input's"
    );
    assert_eq!(ty(&copy, "blk.0.attn_q.weight"), Type::F16);
    assert_eq!(ty(&copy, "output.weight"), Type::F32);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn requantizing_needs_allow_requantize() {
    let dir = tmpdir("requant");
    let input = write_model(&dir);
    let q8 = dir.join("q8.gguf");
    assert!(quantize(&input, &q8, "Q8_0", &[]).0);
    let out = dir.join("q4.gguf");
    let (ok, err) = quantize(&q8, &out, "Q4_K_M", &[]);
    assert!(!ok);
    assert!(err.contains("already quantized (q8_0)"), "{err}");
    assert!(err.contains("--allow-requantize"), "{err}");
    assert!(!out.exists(), "nothing is written");
    let (ok, err) = quantize(&q8, &out, "Q4_K_M", &["--allow-requantize"]);
    assert!(ok, "{err}");
    // Q8_0 dequantized, then quantized to Q4_K.
    let src = GgufFile::open(&q8).unwrap();
    let v = src.tensor_data_f32("blk.0.attn_q.weight").unwrap();
    let got = GgufFile::open(&out).unwrap();
    assert_eq!(
        got.tensor_data("blk.0.attn_q.weight").unwrap(),
        &quantized(Type::Q4_K, &v, 256, None)[..]
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn never_writes_over_its_input() {
    let dir = tmpdir("same");
    let input = write_model(&dir);
    let before = std::fs::read(&input).unwrap();
    let link = dir.join("link.gguf");
    std::fs::hard_link(&input, &link).unwrap();
    let dotted = dir.join(".").join("model.gguf");
    for out in [&input, &link, &dotted] {
        let (ok, err) = quantize(&input, out, "Q8_0", &[]);
        assert!(!ok, "{}", out.display());
        assert!(err.contains("is the input file"), "{err}");
    }
    assert_eq!(std::fs::read(&input).unwrap(), before);
    // A failure part-way leaves no output: an unconvertible imatrix entry is found first, and
    // a failing write removes its temporary file.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A legacy `.dat` imatrix: per entry name length, name, calls, value count, sums.
fn legacy_imatrix(entries: &[(&str, i32, &[f32])]) -> Vec<u8> {
    let mut dat = (entries.len() as i32).to_le_bytes().to_vec();
    for (name, calls, sums) in entries {
        dat.extend((name.len() as i32).to_le_bytes());
        dat.extend(name.as_bytes());
        dat.extend(calls.to_le_bytes());
        dat.extend((sums.len() as i32).to_le_bytes());
        dat.extend(le(sums));
    }
    dat
}

#[test]
fn imatrix_mixes_need_an_imatrix_in_either_format() {
    let dir = tmpdir("imatrix");
    let input = write_model(&dir);
    let output = dir.join("iq2.gguf");
    let (ok, err) = quantize(&input, &output, "IQ2_XXS", &[]);
    assert!(!ok);
    assert!(err.contains("IQ2_XXS needs an importance matrix"), "{err}");
    assert!(!output.exists());

    let importance: Vec<f32> = (0..256).map(|i| 1.0 + i as f32 / 256.0).collect();
    let sums: Vec<f32> = importance.iter().map(|v| v * 4.0).collect();
    let ffn: Vec<f32> = vec![1.0; 96];
    let dat = legacy_imatrix(&[
        ("blk.0.attn_v.weight", 4, &sums),
        ("blk.0.attn_q.weight", 4, &sums),
        ("blk.0.ffn_down.weight", 1, &ffn),
    ]);
    let dat_path = dir.join("imatrix.dat");
    std::fs::write(&dat_path, &dat).unwrap();
    let dat_arg = dat_path.to_str().unwrap();
    let (ok, err) = quantize(&input, &output, "IQ2_XXS", &["--imatrix", dat_arg]);
    assert!(ok, "{err}");
    let out = GgufFile::open(&output).unwrap();
    // One layer with 2 query heads: attn_v in Q2_K, ffn_down of the first eighth (none of one
    // layer) in IQ2_XXS then its fallback IQ4_NL, attn_q in IQ2_XXS.
    let ty = |name: &str| out.tensor_info(name).unwrap().ty();
    assert_eq!(ty("blk.0.attn_q.weight"), Type::IQ2_XXS);
    assert_eq!(ty("blk.0.attn_v.weight"), Type::Q2_K);
    assert_eq!(ty("blk.0.ffn_down.weight"), Type::IQ4_NL);
    assert_eq!(ty("output.weight"), Type::Q5_K);
    assert_eq!(ty("token_embd.weight"), Type::Q2_K);
    let src = GgufFile::open(&input).unwrap();
    let q = src.tensor_data_f32("blk.0.attn_q.weight").unwrap();
    assert_eq!(
        out.tensor_data("blk.0.attn_q.weight").unwrap(),
        &quantized(Type::IQ2_XXS, &q, 256, Some(&importance))[..]
    );
    assert_eq!(out.get_val_str("quantize.imatrix.file").unwrap(), dat_arg);
    assert_eq!(
        out.get_val_u32("quantize.imatrix.entries_count").unwrap(),
        3
    );
    assert!(
        out.get("quantize.imatrix.chunks_count").is_none(),
        "no chunk count given"
    );

    // The GGUF format: in_sum2 / counts, with llama.cpp's metadata, which the output records.
    let mut g = GgufWriter::new();
    g.set("imatrix.datasets", Array::from(vec!["wiki.txt"]))
        .unwrap();
    g.set("imatrix.chunk_count", 12u32).unwrap();
    g.set("imatrix.chunk_size", 512u32).unwrap();
    for (name, s, c) in [
        ("blk.0.attn_v.weight", &sums[..], 4.0f32),
        ("blk.0.attn_q.weight", &sums[..], 4.0),
        ("blk.0.ffn_down.weight", &ffn[..], 1.0),
    ] {
        g.add_tensor(
            &format!("{name}.in_sum2"),
            Type::F32,
            &[s.len() as i64],
            le(s),
        )
        .unwrap();
        g.add_tensor(&format!("{name}.counts"), Type::F32, &[1], le(&[c]))
            .unwrap();
    }
    let gguf_path = dir.join("imatrix.gguf");
    g.write_to_file(&gguf_path).unwrap();
    let output2 = dir.join("iq2b.gguf");
    let (ok, err) = quantize(
        &input,
        &output2,
        "iq2_xxs",
        &["--imatrix", gguf_path.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    let out2 = GgufFile::open(&output2).unwrap();
    assert_eq!(
        out2.tensor_data("blk.0.attn_q.weight").unwrap(),
        out.tensor_data("blk.0.attn_q.weight").unwrap()
    );
    assert_eq!(
        out2.get_val_str("quantize.imatrix.dataset").unwrap(),
        "wiki.txt"
    );
    assert_eq!(
        out2.get_val_u32("quantize.imatrix.chunks_count").unwrap(),
        12
    );

    // An imatrix without the tensor it needs is refused before anything is written.
    let partial = legacy_imatrix(&[("blk.0.attn_v.weight", 1, &sums)]);
    std::fs::write(&dat_path, &partial).unwrap();
    let output3 = dir.join("iq2c.gguf");
    let (ok, err) = quantize(&input, &output3, "IQ2_XXS", &["--imatrix", dat_arg]);
    assert!(!ok);
    assert!(err.contains("no entry for blk.0.attn_q.weight"), "{err}");
    assert!(!output3.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn empty_weights_quantize_to_empty_tensors() {
    let dir = tmpdir("empty");
    let mut w = model_writer();
    w.add_tensor("blk.0.attn_q.weight", Type::F32, &[0, 4], Vec::new())
        .unwrap();
    w.add_tensor("blk.0.attn_k.weight", Type::F16, &[256, 0], Vec::new())
        .unwrap();
    let input = dir.join("empty.gguf");
    w.write_to_file(&input).unwrap();
    let output = dir.join("out.gguf");
    let (ok, err) = quantize(&input, &output, "q4_k_s", &[]);
    assert!(ok, "{err}");
    let out = GgufFile::open(&output).unwrap();
    for name in ["blk.0.attn_q.weight", "blk.0.attn_k.weight"] {
        let t = out.tensor_info(name).unwrap();
        assert_eq!((t.ty(), t.size()), (Type::Q4_K, 0), "{name}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_arguments_fail_clearly() {
    let dir = tmpdir("bad");
    let input = write_model(&dir);
    let output = dir.join("x.gguf");
    let (ok, err) = quantize(&input, &output, "q9_9", &[]);
    assert!(!ok);
    assert!(
        err.contains("\"q9_9\" is not a llama.cpp file type"),
        "{err}"
    );
    assert!(err.contains("Q4_K_M"), "the list of types: {err}");
    let (ok, err) = quantize(&dir.join("missing.gguf"), &output, "q8_0", &[]);
    assert!(!ok);
    assert!(err.contains("missing.gguf: no such file"), "{err}");
    let (ok, err) = quantize(&dir, &output, "q8_0", &[]);
    assert!(!ok);
    assert!(err.contains("is a directory"), "{err}");
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"junk").unwrap();
    let (ok, err) = quantize(&junk, &output, "q8_0", &[]);
    assert!(!ok);
    assert_eq!(err.matches("junk.gguf").count(), 1, "{err}");
    assert!(err.contains("header: magic"), "{err}");
    let (ok, err) = quantize(&input, &output, "q8_0", &["--threads", "0"]);
    assert!(!ok);
    assert!(err.contains("--threads needs a positive number"), "{err}");
    let (ok, err) = quantize(&input, &output, "q8_0", &["--output-tensor-type", "q4_K_M"]);
    assert!(!ok);
    assert!(
        err.contains("--output-tensor-type needs a GGML type name"),
        "{err}"
    );
    let (ok, err) = quantize(
        &input,
        &output,
        "q8_0",
        &["--imatrix", "/nonexistent/imatrix.dat"],
    );
    assert!(!ok);
    assert!(err.contains("imatrix"), "{err}");
    // A file without the metadata llama.cpp's rules read.
    let mut w = GgufWriter::new();
    w.add_tensor("w.weight", Type::F32, &[32, 2], le(&values(64, 1)))
        .unwrap();
    let bare = dir.join("bare.gguf");
    w.write_to_file(&bare).unwrap();
    let (ok, err) = quantize(&bare, &output, "q8_0", &[]);
    assert!(!ok);
    assert!(err.contains("general.architecture"), "{err}");
    assert!(!output.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn moe_weights_use_one_imatrix_row_per_expert() {
    let dir = tmpdir("moe");
    let (k, rows, experts) = (256usize, 2usize, 3usize);
    let w = values(k * rows * experts, 11);
    let mut model = model_writer();
    model.set("llama.expert_count", experts as u32).unwrap();
    let name = "blk.0.ffn_up_exps.weight";
    model
        .add_tensor(
            name,
            Type::F32,
            &[k as i64, rows as i64, experts as i64],
            le(&w),
        )
        .unwrap();
    let input = dir.join("moe.gguf");
    model.write_to_file(&input).unwrap();

    let imatrix: Vec<f32> = (0..k * experts).map(|i| 1.0 + (i % 13) as f32).collect();
    let im_path = dir.join("imatrix.dat");
    std::fs::write(&im_path, legacy_imatrix(&[(name, 1, &imatrix)])).unwrap();
    let output = dir.join("out.gguf");
    let (ok, err) = quantize(
        &input,
        &output,
        "IQ2_XS",
        &["--imatrix", im_path.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    let row = Type::IQ2_XS.row_size(k as i64).unwrap();
    let mut want = Vec::with_capacity(row * rows * experts);
    for e in 0..experts {
        let src = &w[e * k * rows..(e + 1) * k * rows];
        want.extend(quantized(
            Type::IQ2_XS,
            src,
            k,
            Some(&imatrix[e * k..(e + 1) * k]),
        ));
    }
    let out = GgufFile::open(&output).unwrap();
    assert_eq!(out.tensor_data(name).unwrap(), &want[..]);

    // An entry of the wrong length is refused before anything is written.
    std::fs::write(&im_path, legacy_imatrix(&[(name, 1, &imatrix[..k * 2])])).unwrap();
    let bad = dir.join("bad.gguf");
    let (ok, err) = quantize(
        &input,
        &bad,
        "IQ2_XS",
        &["--imatrix", im_path.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(
        err.contains("has 512 values; the tensor needs 768"),
        "{err}"
    );
    assert!(!bad.exists());
    std::fs::remove_dir_all(&dir).ok();
}
