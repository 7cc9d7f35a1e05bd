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
    // The CPU comes last, after the wgpu devices when there is an adapter.
    let named = |what: &str, name: &str| {
        out.lines().any(|l| {
            l.starts_with(what) && l.split(": ").nth(1).is_some_and(|n| n.starts_with(name))
        })
    };
    assert!(named("registry ", "CPU ("), "{out}");
    assert!(named("device ", "CPU"), "{out}");
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

/// The example backend library (`crates/ggml-backend-example`), built with cargo into the
/// workspace's target directory (where this test's ggml crate is already built: quick).
fn example_library() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The test binary is target/<profile>/deps/cli_info-*.
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(&root)
        .args(["build", "-q", "-p", "ggml-backend-example", "--lib"]);
    if profile_dir.ends_with("release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo runs").success());
    profile_dir.join(format!(
        "{}ggml_backend_example{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

#[test]
fn info_lists_loaded_libraries() {
    let (ok, out, _) = ggml(&["info"]);
    assert!(ok);
    assert!(out.contains("loaded libraries: none"), "{out}");

    let lib = example_library();
    let (ok, out, err) = ggml(&["info", "--load", lib.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("(registry Example)"), "{out}");
    assert!(out.contains("registry 0: Example (1 device(s))"), "{out}");
    assert!(out.contains("device 0: Example0"), "{out}");

    let (ok, _, err) = ggml(&["info", "--load", "/nonexistent/libggml-x.so"]);
    assert!(!ok);
    assert!(
        err.contains("cannot open /nonexistent/libggml-x.so"),
        "{err}"
    );
}

#[test]
fn info_lists_meta_devices() {
    let (ok, out, _) = ggml(&["info"]);
    assert!(ok);
    assert!(out.contains("meta devices: none"), "{out}");
    let (ok, out, err) = ggml(&["info", "--meta", "CPU,CPU", "--meta", "cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("meta device 0: Meta(CPU,CPU)"), "{out}");
    assert!(out.contains("meta device 1: Meta(CPU)"), "{out}");
    assert!(out.contains("type: Meta"), "{out}");
    assert!(
        out.contains("buffer type: Meta(CPU,CPU) (alignment 32"),
        "{out}"
    );
    let (ok, _, err) = ggml(&["info", "--meta", "CPU,Nope"]);
    assert!(!ok);
    assert!(err.contains("no device named \"Nope\""), "{err}");
    let many = vec!["CPU"; 17].join(",");
    let (ok, _, err) = ggml(&["info", "--meta", &many]);
    assert!(!ok);
    assert!(err.contains("at most 16"), "{err}");
}
