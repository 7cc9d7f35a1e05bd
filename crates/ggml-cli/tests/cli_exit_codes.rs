//! Every command answers the same way: `-h`/`--help` prints its usage on stdout and exits 0, a
//! bad command line prints the usage on stderr and exits 2, a command that fails exits 1.

use std::process::Command;

/// Runs the binary: (exit code, stdout, stderr).
fn ggml(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .expect("the ggml binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const COMMANDS: [&[&str]; 6] = [
    &[],
    &["info"],
    &["bench"],
    &["gguf"],
    &["gguf", "inspect"],
    &["gguf", "quantize"],
];

#[test]
fn help_prints_usage_and_succeeds() {
    for command in COMMANDS {
        for flag in ["-h", "--help"] {
            let args = [command, &[flag]].concat();
            let (code, out, err) = ggml(&args);
            assert_eq!(code, Some(0), "{args:?}: {err}");
            assert!(out.starts_with("usage: ggml"), "{args:?}: {out}");
        }
    }
}

#[test]
fn bad_command_lines_exit_2_with_usage() {
    for command in COMMANDS {
        let args = [command, &["--no-such-option"]].concat();
        let (code, _, err) = ggml(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("ggml: "), "{args:?}: {err}");
        assert!(err.contains("no-such-option"), "{args:?}: {err}");
        assert!(err.contains("usage: ggml"), "{args:?}: {err}");
    }
}

#[test]
fn failures_exit_1_naming_the_file_once() {
    let missing =
        std::env::temp_dir().join(format!("ggml-cli-missing-{}.gguf", std::process::id()));
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["gguf", "inspect", missing],
        vec!["gguf", "quantize", missing, "out.gguf", "q8_0"],
    ] {
        let (code, _, err) = ggml(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.starts_with("ggml: "), "{args:?}: {err}");
        assert_eq!(err.matches(missing).count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn version_is_printed() {
    for flag in ["--version", "-V", "version"] {
        let (code, out, err) = ggml(&[flag]);
        assert_eq!(code, Some(0), "{flag}: {err}");
        assert_eq!(
            out,
            format!("ggml {}\n", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
    }
}
