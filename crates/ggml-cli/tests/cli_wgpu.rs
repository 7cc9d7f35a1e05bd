//! `ggml info` lists the wgpu devices and `ggml test-ops -d WGPU0` runs the suite on one (skipped
//! without an adapter, unless GGML_WGPU_REQUIRE_ADAPTER is set, as in CI).

use std::process::Command;

fn ggml(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .expect("the ggml binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Whether there is a wgpu adapter (`ggml info` says so).
fn adapter(info: &str) -> bool {
    let found = info.contains("registry 0: WGPU");
    if !found {
        assert!(
            std::env::var_os("GGML_WGPU_REQUIRE_ADAPTER").is_none(),
            "no wgpu adapter:\n{info}"
        );
        eprintln!("SKIPPED: no wgpu adapter");
    }
    found
}

#[test]
fn info_lists_wgpu_devices_and_test_ops_runs_on_one() {
    let (ok, info) = ggml(&["info"]);
    assert!(ok);
    if !adapter(&info) {
        assert!(info.contains("wgpu: "), "{info}");
        return;
    }
    assert!(info.contains("device 0: WGPU0"), "{info}");
    assert!(info.contains("buffer type: WGPU0 (alignment 32"), "{info}");
    let (ok, out) = ggml(&["test-ops", "-d", "wgpu0", "-o", "ADD,MUL_MAT,ARGSORT"]);
    assert!(ok, "{out}");
    assert!(out.contains("device WGPU0: "), "{out}");
    assert!(out.contains("0 failed"), "{out}");
    assert!(
        out.contains("ADD(type=f32,ne=[1,1,8,1],nr=[1,1,1,1],v=0): OK"),
        "{out}"
    );
    assert!(
        out.contains("ARGSORT(") && out.contains(": not supported"),
        "{out}"
    );
}
