//! The device the tests run on: the first wgpu adapter (Mesa's lavapipe in CI).

/// The environment variable that makes a missing adapter a failure instead of a skip (set by
/// `.ci/run`, which installs lavapipe).
pub const REQUIRE: &str = "GGML_WGPU_REQUIRE_ADAPTER";

/// The first wgpu device, or `None` (after saying why) when there is no adapter and
/// [`REQUIRE`] is not set.
pub fn device() -> Option<ggml::Device> {
    match ggml_wgpu::register() {
        Ok(reg) => reg.dev_get(0),
        Err(e) => {
            assert!(
                std::env::var_os(REQUIRE).is_none(),
                "{REQUIRE} is set but there is no wgpu adapter: {e}"
            );
            eprintln!("SKIPPED: no wgpu adapter ({e})");
            None
        }
    }
}
