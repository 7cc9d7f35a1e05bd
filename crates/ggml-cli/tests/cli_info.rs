use std::process::Command;

fn ggml(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .expect("the ggml binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn info_lists_the_cpu_registry_and_device() {
    let (ok, out, _) = ggml(&["info"]);
    assert!(ok);
    assert!(out.contains("registry 0: CPU"), "{out}");
    assert!(out.contains("device 0: CPU"), "{out}");
    assert!(out.contains("async_compute=true"), "{out}");
    assert!(out.contains("events=true"), "{out}");
    assert!(out.contains("buffer type: CPU (alignment 32"), "{out}");
}

#[test]
fn unknown_command_fails_with_usage() {
    let (ok, _, err) = ggml(&["frobnicate"]);
    assert!(!ok);
    assert!(err.contains("unknown command \"frobnicate\""), "{err}");
    assert!(err.contains("usage: ggml"), "{err}");
}
