//! `ggml gguf inspect` on the committed fixtures: text and JSON output, compared with what the
//! `gguf` Python package read from the same file.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ggml/tests/fixtures/gguf")
        .join(name)
}

fn ggml(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn inspect_text() {
    let path = fixture("py_every_type.gguf");
    let out = stdout(&ggml(&[
        "gguf".as_ref(),
        "inspect".as_ref(),
        path.as_os_str(),
    ]));
    for needle in [
        "version:     3",
        "tensors:     33",
        "kv pairs:    28",
        "alignment:   32",
        "data offset: ",
        "t.u64",
        "18446744073709551610",
        "\"héllo wörld\"",
        "(not UTF-8)",
        // 50 elements: 8 shown, the rest elided.
        "arr[u32; 50]",
        "[0, 1, 2, 3, 4, 5, 6, 7, … 42 more]",
        "[[1, 2], [3]]",
        "blk.9.q4_k",
        "q4_K",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    let row = out.lines().find(|l| l.contains("blk.9.q4_k")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[2], "q4_K", "{row}");
}

#[test]
fn inspect_json_matches_gguf_py() {
    for name in ["py_every_type", "py_aligned", "ours_every_type"] {
        let path = fixture(&format!("{name}.gguf"));
        let out = stdout(&ggml(&[
            "gguf".as_ref(),
            "inspect".as_ref(),
            path.as_os_str(),
            "--json".as_ref(),
        ]));
        let ours: serde_json::Value = serde_json::from_str(&out).unwrap();
        let text = std::fs::read_to_string(fixture(&format!("{name}.json"))).unwrap();
        let py: serde_json::Value = serde_json::from_str(&text).unwrap();
        for k in ["version", "alignment", "data_offset"] {
            assert_eq!(ours[k], py[k], "{name}: {k}");
        }
        assert_eq!(ours["n_kv"], py["kv"].as_array().unwrap().len());
        // Metadata uses the dump's value encoding: complete arrays, exact floats.
        assert_eq!(ours["metadata"], py["kv"], "{name}: metadata");
        let (ot, pt) = (
            ours["tensors"].as_array().unwrap(),
            py["tensors"].as_array().unwrap(),
        );
        assert_eq!(ot.len(), pt.len());
        for (o, p) in ot.iter().zip(pt) {
            assert_eq!(o["name"], p["name"]);
            assert_eq!(o["type_id"], p["type_id"]);
            assert_eq!(o["ne"], p["ne"]);
            assert_eq!(o["offset"], p["offset"]);
            assert_eq!(o["size"], p["n_bytes"]);
            assert_eq!(
                o["file_offset"].as_u64().unwrap(),
                py["data_offset"].as_u64().unwrap() + p["offset"].as_u64().unwrap()
            );
        }
    }
}

#[test]
fn errors_and_usage() {
    let o = ggml(&["gguf".as_ref(), "inspect".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("usage: ggml gguf inspect"));
    assert_eq!(ggml(&["nope".as_ref()]).status.code(), Some(2));
    assert_eq!(
        ggml(&["gguf".as_ref(), "frob".as_ref()]).status.code(),
        Some(2)
    );
    assert!(ggml(&["--help".as_ref()]).status.success());

    let missing = fixture("no-such-file.gguf");
    let o = ggml(&["gguf".as_ref(), "inspect".as_ref(), missing.as_os_str()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-file.gguf"));

    // A hostile file: the error names the field and offset.
    let dir = std::env::temp_dir().join(format!("ggml-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.gguf");
    let mut bytes = std::fs::read(fixture("py_aligned.gguf")).unwrap();
    bytes[8..16].copy_from_slice(&(-3i64).to_le_bytes());
    std::fs::write(&bad, &bytes).unwrap();
    let o = ggml(&["gguf".as_ref(), "inspect".as_ref(), bad.as_os_str()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("n_tensors") && err.contains("at offset 8"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn inspect_decodes_llama_cpp_enums() {
    use ggml::gguf::GgufWriter;
    let dir = std::env::temp_dir().join(format!("ggml-cli-inspect-enums-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = GgufWriter::new();
    w.set("general.architecture", "bert").unwrap();
    w.set("general.file_type", 15u32).unwrap();
    w.set("bert.pooling_type", 1i32).unwrap();
    w.set("bert.expert_gating_func", 2u32).unwrap();
    w.set("tokenizer.ggml.token_type", vec![1i32, 1, 3, 6, 6, 6, 9])
        .unwrap();
    let path = dir.join("enums.gguf");
    w.write_to_file(&path).unwrap();

    let text = stdout(&ggml(&[
        "gguf".as_ref(),
        "inspect".as_ref(),
        path.as_os_str(),
    ]));
    for needle in [
        "= 15  (Q4_K - Medium)",
        "= 1  (mean)",
        "= 2  (sigmoid)",
        "(2 normal, 1 control, 3 byte, 1 unknown type)",
        "= \"bert\"  (rope type neox)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let json = stdout(&ggml(&[
        "gguf".as_ref(),
        "inspect".as_ref(),
        "--json".as_ref(),
        path.as_os_str(),
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let decoded = |key: &str| {
        v["metadata"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == key)
            .map(|e| e["decoded"].clone())
            .unwrap()
    };
    assert_eq!(decoded("general.file_type"), "Q4_K - Medium");
    assert_eq!(decoded("bert.pooling_type"), "mean");
    assert_eq!(decoded("general.architecture"), "rope type neox");

    // A directory, or a path that is not there, is explained.
    let o = ggml(&["gguf".as_ref(), "inspect".as_ref(), dir.as_os_str()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("is a directory; give the path of a .gguf file"),
        "{err}"
    );
    let missing = dir.join("missing.gguf");
    let o = ggml(&["gguf".as_ref(), "inspect".as_ref(), missing.as_os_str()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.gguf: no such file"));
    std::fs::remove_dir_all(&dir).ok();
}
