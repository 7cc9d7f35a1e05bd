//! `ggml gguf quantize`: types chosen per tensor as llama.cpp chooses them, bytes equal to
//! `quantize_chunk`'s, imatrix files in both formats, clear failures.

use std::path::{Path, PathBuf};
use std::process::Command;

use ggml::gguf::{GgufFile, GgufWriter};
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

/// A model: a 2-D F32 weight, a 2-D F16 weight, a 1-D bias, a 2-D weight whose rows are not a
/// whole number of 256-blocks, and an I32 tensor.
fn write_model(dir: &Path) -> PathBuf {
    let mut w = GgufWriter::new();
    w.set("general.name", "tiny").unwrap();
    w.add_tensor("blk.0.w", Type::F32, &[256, 4], le(&values(1024, 1)))
        .unwrap();
    let h: Vec<u8> = values(512, 2)
        .iter()
        .flat_map(|x| ggml::f16::from_f32(*x).to_le_bytes())
        .collect();
    w.add_tensor("blk.0.h", Type::F16, &[256, 2], h).unwrap();
    w.add_tensor("blk.0.bias", Type::F32, &[256], le(&values(256, 3)))
        .unwrap();
    w.add_tensor("odd", Type::F32, &[96, 2], le(&values(192, 4)))
        .unwrap();
    let ids: Vec<u8> = (0..4i32).flat_map(|i| i.to_le_bytes()).collect();
    w.add_tensor("ids", Type::I32, &[4], ids).unwrap();
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
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "gguf".as_ref(),
        "quantize".as_ref(),
        input.as_os_str(),
        output.as_os_str(),
        ty.as_ref(),
    ];
    args.extend(extra.iter().map(|a| a.as_ref() as &std::ffi::OsStr));
    ggml(&args)
}

#[test]
fn quantizes_weights_and_keeps_vectors_in_f32() {
    let dir = tmpdir("basic");
    let input = write_model(&dir);
    let output = dir.join("q4k.gguf");
    let (ok, err) = quantize(&input, &output, "q4_K", &["--threads", "2"]);
    assert!(ok, "{err}");
    assert!(err.contains("quantized 5 tensors to q4_K"), "{err}");

    let src = GgufFile::open(&input).unwrap();
    let out = GgufFile::open(&output).unwrap();
    assert_eq!(out.get_val_str("general.name").unwrap(), "tiny");
    assert_eq!(out.get_val_u32("general.quantization_version").unwrap(), 2);
    let ty = |name: &str| out.tensor_info(name).unwrap().ty();
    assert_eq!(ty("blk.0.w"), Type::Q4_K);
    assert_eq!(ty("blk.0.h"), Type::Q4_K);
    assert_eq!(ty("blk.0.bias"), Type::F32);
    assert_eq!(
        ty("odd"),
        Type::Q5_0,
        "rows of 96 are not whole q4_K blocks: llama.cpp's fallback"
    );
    assert_eq!(ty("ids"), Type::I32);

    // Bytes are exactly quantize_chunk's on the source values.
    let w = values(1024, 1);
    let mut want = vec![0u8; Type::Q4_K.row_size(256).unwrap() * 4];
    quants::quantize_chunk(Type::Q4_K, &w, &mut want, 0, 4, 256, None).unwrap();
    assert_eq!(out.tensor_data("blk.0.w").unwrap(), &want[..]);
    // Vectors and integers are untouched.
    assert_eq!(
        out.tensor_data("blk.0.bias").unwrap(),
        src.tensor_data("blk.0.bias").unwrap()
    );
    assert_eq!(
        out.tensor_data("ids").unwrap(),
        src.tensor_data("ids").unwrap()
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn imatrix_types_need_an_imatrix_in_either_format() {
    let dir = tmpdir("imatrix");
    let input = write_model(&dir);
    let output = dir.join("iq2.gguf");
    let (ok, err) = quantize(&input, &output, "iq2_xxs", &[]);
    assert!(!ok);
    assert!(err.contains("needs an importance matrix"), "{err}");
    assert!(!output.exists());

    // Legacy .dat: count, then per entry name length, name, calls, values count, sums.
    let mut dat = Vec::new();
    dat.extend(2i32.to_le_bytes());
    for name in ["blk.0.w", "blk.0.h"] {
        dat.extend((name.len() as i32).to_le_bytes());
        dat.extend(name.as_bytes());
        dat.extend(4i32.to_le_bytes()); // calls
        dat.extend(256i32.to_le_bytes());
        for i in 0..256 {
            dat.extend((4.0f32 * (1.0 + i as f32 / 256.0)).to_le_bytes());
        }
    }
    let dat_path = dir.join("imatrix.dat");
    std::fs::write(&dat_path, &dat).unwrap();
    let (ok, err) = quantize(
        &input,
        &output,
        "iq2_xxs",
        &["--imatrix", dat_path.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    let out = GgufFile::open(&output).unwrap();
    assert_eq!(out.tensor_info("blk.0.w").unwrap().ty(), Type::IQ2_XXS);
    let imatrix: Vec<f32> = (0..256).map(|i| 1.0 + i as f32 / 256.0).collect();
    let w = values(1024, 1);
    let mut want = vec![0u8; Type::IQ2_XXS.row_size(256).unwrap() * 4];
    quants::quantize_chunk(Type::IQ2_XXS, &w, &mut want, 0, 4, 256, Some(&imatrix)).unwrap();
    assert_eq!(out.tensor_data("blk.0.w").unwrap(), &want[..]);

    // The GGUF imatrix format gives the same importance (in_sum2 / counts).
    let mut g = GgufWriter::new();
    for name in ["blk.0.w", "blk.0.h"] {
        let sums: Vec<f32> = imatrix.iter().map(|v| v * 8.0).collect();
        g.add_tensor(&format!("{name}.in_sum2"), Type::F32, &[256], le(&sums))
            .unwrap();
        g.add_tensor(&format!("{name}.counts"), Type::F32, &[1], le(&[8.0]))
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
    assert_eq!(
        GgufFile::open(&output2)
            .unwrap()
            .tensor_data("blk.0.w")
            .unwrap(),
        &want[..]
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn empty_weights_quantize_to_empty_tensors() {
    let dir = tmpdir("empty");
    let mut w = GgufWriter::new();
    w.add_tensor("no_cols", Type::F32, &[0, 4], Vec::new())
        .unwrap();
    w.add_tensor("no_rows", Type::F16, &[256, 0], Vec::new())
        .unwrap();
    let input = dir.join("empty.gguf");
    w.write_to_file(&input).unwrap();
    let output = dir.join("out.gguf");
    let (ok, err) = quantize(&input, &output, "q4_K", &[]);
    assert!(ok, "{err}");
    let out = GgufFile::open(&output).unwrap();
    for name in ["no_cols", "no_rows"] {
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
    assert!(err.contains("q9_9"), "{err}");
    let (ok, err) = quantize(&dir.join("missing.gguf"), &output, "q8_0", &[]);
    assert!(!ok);
    assert_eq!(err.matches("missing.gguf").count(), 1, "{err}");
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"junk").unwrap();
    let (ok, err) = quantize(&junk, &output, "q8_0", &[]);
    assert!(!ok);
    assert_eq!(err.matches("junk.gguf").count(), 1, "{err}");
    assert!(err.contains("header: magic"), "{err}");
    let (ok, err) = quantize(&input, &output, "q8_0", &["--threads", "0"]);
    assert!(!ok);
    assert!(err.contains("--threads"), "{err}");
    let (ok, err) = quantize(
        &input,
        &output,
        "q8_0",
        &["--imatrix", "/nonexistent/imatrix.dat"],
    );
    assert!(!ok);
    assert!(err.contains("imatrix"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn moe_weights_use_one_imatrix_row_per_expert() {
    let dir = tmpdir("moe");
    let (k, rows, experts) = (256usize, 2usize, 3usize);
    let w = values(k * rows * experts, 11);
    let mut model = GgufWriter::new();
    model
        .add_tensor(
            "blk.0.ffn_up_exps.weight",
            Type::F32,
            &[k as i64, rows as i64, experts as i64],
            le(&w),
        )
        .unwrap();
    let input = dir.join("moe.gguf");
    model.write_to_file(&input).unwrap();

    // GGUF imatrix with one row of importance per expert.
    let imatrix: Vec<f32> = (0..k * experts).map(|i| 1.0 + (i % 13) as f32).collect();
    let mut g = GgufWriter::new();
    g.add_tensor(
        "blk.0.ffn_up_exps.weight.in_sum2",
        Type::F32,
        &[(k * experts) as i64],
        le(&imatrix),
    )
    .unwrap();
    g.add_tensor(
        "blk.0.ffn_up_exps.weight.counts",
        Type::F32,
        &[1],
        le(&[1.0]),
    )
    .unwrap();
    let im_path = dir.join("imatrix.gguf");
    g.write_to_file(&im_path).unwrap();

    let output = dir.join("out.gguf");
    let (ok, err) = quantize(
        &input,
        &output,
        "iq2_xs",
        &["--imatrix", im_path.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    let row = Type::IQ2_XS.row_size(k as i64).unwrap();
    let mut want = vec![0u8; row * rows * experts];
    for e in 0..experts {
        let src = &w[e * k * rows..(e + 1) * k * rows];
        let dst = &mut want[e * row * rows..(e + 1) * row * rows];
        let imx = &imatrix[e * k..(e + 1) * k];
        quants::quantize_chunk(Type::IQ2_XS, src, dst, 0, rows, k, Some(imx)).unwrap();
    }
    let out = GgufFile::open(&output).unwrap();
    assert_eq!(
        out.tensor_data("blk.0.ffn_up_exps.weight").unwrap(),
        &want[..]
    );

    // An entry of the wrong length is refused before anything is written.
    let mut g = GgufWriter::new();
    g.add_tensor(
        "blk.0.ffn_up_exps.weight.in_sum2",
        Type::F32,
        &[(k * 2) as i64],
        le(&imatrix[..k * 2]),
    )
    .unwrap();
    g.add_tensor(
        "blk.0.ffn_up_exps.weight.counts",
        Type::F32,
        &[1],
        le(&[1.0]),
    )
    .unwrap();
    g.write_to_file(&im_path).unwrap();
    let bad = dir.join("bad.gguf");
    let (ok, err) = quantize(
        &input,
        &bad,
        "iq2_xs",
        &["--imatrix", im_path.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(err.contains("has 512 values"), "{err}");
    assert!(!bad.exists());
    std::fs::remove_dir_all(&dir).ok();
}
