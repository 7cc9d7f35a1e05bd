//! `ggml test-ops`: its lines, closing line and exit status, its filters, and the export.

use std::process::{Command, Output};

fn test_ops(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ggml"))
        .arg("test-ops")
        .args(args)
        .output()
        .expect("the ggml binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn one_line_per_case_and_the_closing_line() {
    let out = test_ops(&["-o", "add1,Scale"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("seed: 7451044419894145825 ("),
        "{stdout}"
    );
    assert!(lines[1].starts_with("device CPU: "), "{stdout}");
    let cases: Vec<&str> = lines[2..lines.len() - 1].to_vec();
    assert_eq!(cases.len(), 13, "{stdout}");
    assert!(cases
        .iter()
        .all(|l| (l.starts_with("  ADD1(") || l.starts_with("  SCALE(")) && l.ends_with("): OK")));
    assert!(
        cases.contains(&"  ADD1(type=f16,ne=[7,3,5,2],v=1): OK"),
        "{stdout}"
    );
    assert_eq!(*lines.last().unwrap(), "13 passed, 0 failed, 0 skipped");
}

#[test]
fn verbose_pattern_seed_and_not_supported() {
    let out = test_ops(&[
        "-o",
        "cpy",
        "-p",
        "type_src=[fb].*type_dst=iq2_xxs.*permute_src=\\[0,1",
        "-v",
        "--seed",
        "0x10",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("seed: 16 (3 cases)\n"), "{stdout}");
    assert!(stdout.contains(
        "  CPY(type_src=f32,type_dst=iq2_xxs,ne_src=[256,2,3,1],permute_src=[0,1,2,3]): not supported\n      refused: CPY of iq2_xxs from [f32, iq2_xxs]\n"
    ), "{stdout}");
    assert!(
        stdout.ends_with("0 passed, 0 failed, 3 skipped\n"),
        "{stdout}"
    );
    let out = test_ops(&["-o", "mul_mat", "-p", "type_a=q4_0.*n=5,", "-v"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("): OK\n      output 0 (f32 [16, 5, 1, 1, 1]): nmse="),
        "{stdout}"
    );
    assert!(stdout.contains("(threshold 5e-4), max |diff| "), "{stdout}");
}

#[test]
fn filters_that_match_nothing_and_bad_arguments() {
    let out = test_ops(&["-o", "NO_SUCH_OP"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no case matches -o NO_SUCH_OP"));
    let out = test_ops(&["-p", "ne=[10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("a '[' is not closed"));
    let out = test_ops(&["-d", "NoSuchDevice", "-o", "add1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("device \"NoSuchDevice\" is not registered (devices: CPU"));
    for bad in [
        &["--seed", "x"][..],
        &["--bogus"],
        &["-o"],
        &["--export", "a", "--fixtures", "b"],
    ] {
        assert_eq!(test_ops(bad).status.code(), Some(2), "{bad:?}");
    }
    let out = test_ops(&["--fixtures", "/nonexistent/ops.bin"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/ops.bin"));
    assert_eq!(test_ops(&["--help"]).status.code(), Some(0));
    let list = test_ops(&["-o", "argmax", "-p", "f32", "--list"]);
    assert_eq!(
        text(&list.stdout),
        "ARGMAX(type=f32,ne=[32,1,1,1])\nARGMAX(type=f32,ne=[100,10,1,1])\n\
         ARGMAX(type=f32,ne=[1024,12,1,1])\nARGMAX(type=f32,ne=[5,7,1,1])\n4 cases\n"
    );
}

#[test]
fn export_writes_one_json_object_per_case() {
    let dir = std::env::temp_dir().join(format!("ggml-test-ops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ops.jsonl");
    let out = test_ops(&[
        "-o",
        "soft_max",
        "-p",
        "causal",
        "--export",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("exported 2 cases (seed 7451044419894145825) to "));
    let body = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for case in &lines {
        assert!(case["name"].as_str().unwrap().starts_with("SOFT_MAX("));
        assert_eq!(case["hash"].as_str().unwrap().len(), 16);
        let tensors = case["tensors"].as_array().unwrap();
        // a, mask, and the SOFT_MAX node (op 46) reading both, with GGML's scale parameter.
        assert_eq!(tensors.len(), 3);
        let node = &tensors[2];
        assert_eq!(node["op"], 46);
        assert_eq!(node["src"], serde_json::json!([0, 1]));
        assert_eq!(
            node["params"][0].as_i64().unwrap() as i32,
            0.125f32.to_bits() as i32
        );
        assert_eq!(case["outputs"], serde_json::json!([2]));
        let data = tensors[0]["data"].as_str().unwrap();
        assert_eq!(data.len(), (9 * 9 * 2 * 4usize).div_ceil(3) * 4);
        assert!(node["data"].is_null());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
