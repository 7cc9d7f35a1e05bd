//! Backends in shared libraries (`ggml_backend_load`, `_unload`, `_load_all`).
//!
//! A loadable backend is a `cdylib` crate that depends on this crate and exports, with
//! [`crate::backend_dl_impl!`], the C-ABI entry point `ggml_backend_init` (and optionally,
//! with [`crate::backend_dl_score_impl!`], `ggml_backend_score`: 0 = not usable on this
//! machine), as GGML's `GGML_BACKEND_DL_IMPL`. The entry point returns a [`BackendEntry`]: the
//! interface version ([`BACKEND_API_VERSION`]), the build it was made with ([`build_id`]: this
//! crate's version, the compiler and the target) and the registry. Rust values cross the
//! boundary, so [`load`] accepts a library only when both match this build and refuses it with
//! an `Err` naming the mismatch otherwise — before it touches the registry.
//!
//! [`unload`] removes the registry and its devices from the lists; devices of an unloaded
//! library refuse to start streams (an `Err`) and report no support for anything. Its code
//! stays mapped until the process ends (GGML too leaks loaded libraries at exit): buffers and
//! streams made from it may still be alive, and they keep working rather than calling into
//! unmapped memory.

use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::tensor::{lock, Tensor};

use super::traits::{BackendImpl, DeviceImpl, RegistryImpl};
use super::{BufferType, Device, DeviceCaps, DeviceType, Registry};

/// Version of the loadable-backend interface ([`BackendEntry`] and the entry points), as
/// GGML's `GGML_BACKEND_API_VERSION`.
pub const BACKEND_API_VERSION: u32 = 1;

/// What `ggml_backend_init` returns (C layout; `api_version` first, so any version can be
/// read). Made by [`crate::backend_dl_impl!`].
#[repr(C)]
pub struct BackendEntry {
    /// [`BACKEND_API_VERSION`] of the library's build.
    pub api_version: u32,
    /// [`build_id`] of the library's build, NUL-terminated.
    pub build: *const c_char,
    /// The library's registry: a `*const Registry` valid for the library's lifetime. Only
    /// read when `api_version` and `build` match.
    pub registry: *const c_void,
}

/// [`build_id`] with a NUL at the end.
const BUILD_ID_C: &str = concat!(
    "ggml-rs ",
    env!("CARGO_PKG_VERSION"),
    "; ",
    env!("GGML_RS_RUSTC"),
    "; ",
    env!("GGML_RS_TARGET"),
    "\0"
);

/// This build's identity: crate version, compiler and target. A library is loaded only when
/// its own equals the loader's.
pub fn build_id() -> &'static str {
    &BUILD_ID_C[..BUILD_ID_C.len() - 1]
}

/// [`build_id`] as a C string, for [`BackendEntry::build`].
#[doc(hidden)]
pub fn build_id_c() -> *const c_char {
    BUILD_ID_C.as_ptr().cast()
}

/// Exports `ggml_backend_init` from a `cdylib` crate: `$reg` is an expression of type
/// [`Registry`], evaluated once (`GGML_BACKEND_DL_IMPL`).
#[macro_export]
macro_rules! backend_dl_impl {
    ($reg:expr) => {
        /// The loadable backend's entry point (see `ggml::backend::load`).
        #[no_mangle]
        pub extern "C" fn ggml_backend_init() -> *const $crate::backend::BackendEntry {
            static REG: ::std::sync::OnceLock<$crate::backend::Registry> =
                ::std::sync::OnceLock::new();
            let reg: &'static $crate::backend::Registry = REG.get_or_init(|| $reg);
            // One small entry per call (a library is initialised once per load).
            let entry = ::std::boxed::Box::new($crate::backend::BackendEntry {
                api_version: $crate::backend::BACKEND_API_VERSION,
                build: $crate::backend::build_id_c(),
                registry: (reg as *const $crate::backend::Registry).cast(),
            });
            ::std::boxed::Box::leak(entry)
        }
    };
}

/// Exports `ggml_backend_score` from a `cdylib` crate: `$score` is an expression of type `i32`
/// (0 = not usable on this machine; higher is better) (`GGML_BACKEND_DL_SCORE_IMPL`).
#[macro_export]
macro_rules! backend_dl_score_impl {
    ($score:expr) => {
        /// How well the backend fits this machine (0 = not at all).
        #[no_mangle]
        pub extern "C" fn ggml_backend_score() -> i32 {
            $score
        }
    };
}

type InitFn = unsafe extern "C" fn() -> *const BackendEntry;
type ScoreFn = unsafe extern "C" fn() -> i32;

/// A library loaded by [`load`].
struct Loaded {
    path: PathBuf,
    registry: Registry,
    alive: Arc<AtomicBool>,
}

fn loaded() -> &'static Mutex<Vec<Loaded>> {
    static L: OnceLock<Mutex<Vec<Loaded>>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(Vec::new()))
}

/// The libraries loaded and not unloaded: `(path, registry)`.
pub fn loaded_libraries() -> Vec<(PathBuf, Registry)> {
    lock(loaded())
        .iter()
        .map(|l| (l.path.clone(), l.registry.clone()))
        .collect()
}

/// Opens `path` and finds its score, if it exports one.
fn open(path: &Path) -> Result<(libloading::Library, Option<i32>)> {
    // SAFETY: opening a library runs its initialisers; loading a library is what the caller
    // asked for, and a library built for this interface has none beyond Rust's own.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| Error::invalid(format!("load: cannot open {}: {e}", path.display())))?;
    // SAFETY: the symbol, when present, has the signature `GGML_BACKEND_DL_SCORE_IMPL` gives it.
    let score = unsafe { lib.get::<ScoreFn>(b"ggml_backend_score\0") }
        .ok()
        // SAFETY: as above; the function takes nothing and returns an int.
        .map(|f| unsafe { f() });
    Ok((lib, score))
}

/// Loads the backend library at `path` and registers its registry (`ggml_backend_load`).
/// `Err` when the file cannot be opened, its `ggml_backend_score` says 0, it has no
/// `ggml_backend_init`, the entry is null, or it was built for another interface version or
/// with another build of this crate (another version, compiler or target): each with a
/// message naming the path and the mismatch.
pub fn load(path: impl AsRef<Path>) -> Result<Registry> {
    let path = path.as_ref();
    let (lib, score) = open(path)?;
    if score == Some(0) {
        return Err(Error::unsupported(format!(
            "load: {} says it is not usable on this machine (ggml_backend_score = 0)",
            path.display()
        )));
    }
    // SAFETY: `ggml_backend_init` has the signature `backend_dl_impl!` gives it (GGML's is
    // the same shape: no arguments, one pointer returned).
    let init = unsafe { lib.get::<InitFn>(b"ggml_backend_init\0") }.map_err(|_| {
        Error::invalid(format!(
            "load: {} has no ggml_backend_init entry point",
            path.display()
        ))
    })?;
    // SAFETY: as above.
    let entry = unsafe { init() };
    if entry.is_null() {
        return Err(Error::invalid(format!(
            "load: ggml_backend_init of {} returned no registry",
            path.display()
        )));
    }
    // SAFETY: a non-null entry starts with its interface version (a u32) in every version.
    let version = unsafe { std::ptr::read(entry.cast::<u32>()) };
    check_version(path, version)?;
    // SAFETY: version 1 entries are `BackendEntry`s whose `build` is a NUL-terminated string.
    let (build, reg) = unsafe {
        let e = &*entry;
        (
            CStr::from_ptr(e.build).to_string_lossy().into_owned(),
            e.registry,
        )
    };
    check_build(path, &build)?;
    if reg.is_null() {
        return Err(Error::invalid(format!(
            "load: ggml_backend_init of {} returned a null registry",
            path.display()
        )));
    }
    // SAFETY: the build matches, so `reg` is a `*const Registry` of this very type, valid for
    // as long as the library is mapped — which is for the rest of the process (below).
    let inner = unsafe { (*reg.cast::<Registry>()).clone() };
    // The code stays mapped: values made by it may outlive an unload.
    std::mem::forget(lib);
    let alive = Arc::new(AtomicBool::new(true));
    let registry = Registry::new(LoadedRegistry::new(inner, alive.clone()));
    super::register(registry.clone());
    lock(loaded()).push(Loaded {
        path: path.to_path_buf(),
        registry: registry.clone(),
        alive,
    });
    Ok(registry)
}

/// `Err` naming `path` unless a library's interface version is this library's.
fn check_version(path: &Path, version: u32) -> Result<()> {
    if version != BACKEND_API_VERSION {
        return Err(Error::invalid(format!(
            "load: {} implements backend interface version {version}; this library implements \
             version {BACKEND_API_VERSION}",
            path.display()
        )));
    }
    Ok(())
}

/// `Err` naming `path` unless a library's build id is this library's.
fn check_build(path: &Path, build: &str) -> Result<()> {
    if build != build_id() {
        return Err(Error::invalid(format!(
            "load: {} was built as \"{build}\"; this library is \"{}\" (rebuild the backend \
             with the same ggml version, compiler and target)",
            path.display(),
            build_id()
        )));
    }
    Ok(())
}

/// Unloads a registry returned by [`load`] (`ggml_backend_unload`): it and its devices leave
/// the lists, and its devices refuse new streams. `Err` if `reg` was not loaded by [`load`] or
/// is already unloaded.
pub fn unload(reg: Registry) -> Result<()> {
    let mut l = lock(loaded());
    let Some(i) = l.iter().position(|x| x.registry == reg) else {
        return Err(Error::invalid(format!(
            "unload: registry {} was not loaded with backend::load (or is already unloaded)",
            reg.name()
        )));
    };
    let entry = l.remove(i);
    entry.alive.store(false, Ordering::SeqCst);
    super::registry::deregister(&entry.registry);
    Ok(())
}

/// Backend names `load_all` looks for, in GGML's order.
const NAMES: [&str; 15] = [
    "blas", "zendnn", "cann", "cuda", "hip", "metal", "rpc", "sycl", "vulkan", "virtgpu", "opencl",
    "hexagon", "musa", "openvino", "cpu",
];

#[cfg(windows)]
const PREFIX: &str = "ggml-";
#[cfg(not(windows))]
const PREFIX: &str = "libggml-";
const EXT: &str = std::env::consts::DLL_SUFFIX;

/// Finds and loads the best library of backend `name` in `dirs` (`ggml_backend_load_best`):
/// of the files `<prefix><name>-<variant><ext>` that export a score, the one with the highest
/// score above 0; else the plain `<prefix><name><ext>`. `None` when there is none.
fn load_best(name: &str, dirs: &[PathBuf]) -> Option<Result<Registry>> {
    let mut best: Option<(i32, PathBuf)> = None;
    let stem = format!("{PREFIX}{name}-");
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().and_then(|f| f.to_str()).is_some_and(|f| {
                    f.starts_with(&stem) && f.ends_with(EXT) && f.len() > stem.len() + EXT.len()
                })
            })
            .collect();
        files.sort();
        for f in files {
            let Ok((lib, Some(score))) = open(&f) else {
                continue;
            };
            drop(lib);
            if score > 0 && best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, f));
            }
        }
    }
    if let Some((_, p)) = best {
        return Some(load(p));
    }
    let plain = format!("{PREFIX}{name}{EXT}");
    dirs.iter()
        .map(|d| d.join(&plain))
        .find(|p| p.is_file())
        .map(load)
}

/// Loads every backend library found in the executable's directory, then the working
/// directory, and then the one named by the environment variable `GGML_BACKEND_PATH`
/// (`ggml_backend_load_all`). Returns the registries loaded; libraries that fail to load are
/// skipped.
pub fn load_all() -> Vec<Registry> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(d);
    }
    if let Ok(d) = std::env::current_dir() {
        dirs.push(d);
    }
    load_all_in(&dirs)
}

/// [`load_all`] searching only `dir` (`ggml_backend_load_all_from_path`); `GGML_BACKEND_PATH`
/// is still loaded last.
pub fn load_all_from_path(dir: impl AsRef<Path>) -> Vec<Registry> {
    load_all_in(&[dir.as_ref().to_path_buf()])
}

fn load_all_in(dirs: &[PathBuf]) -> Vec<Registry> {
    let mut out: Vec<Registry> = NAMES
        .iter()
        .filter_map(|n| load_best(n, dirs))
        .flatten()
        .collect();
    if let Some(p) = std::env::var_os("GGML_BACKEND_PATH") {
        if let Ok(r) = load(PathBuf::from(p)) {
            out.push(r);
        }
    }
    out
}

/// A loaded library's registry: its devices wrapped so that they stop after [`unload`].
struct LoadedRegistry {
    name: String,
    inner: Registry,
    devices: Vec<Device>,
}

impl LoadedRegistry {
    fn new(inner: Registry, alive: Arc<AtomicBool>) -> LoadedRegistry {
        let devices = inner
            .devices()
            .into_iter()
            .map(|d| {
                Device::new(LoadedDevice {
                    inner: d,
                    alive: alive.clone(),
                })
            })
            .collect();
        LoadedRegistry {
            name: inner.name(),
            inner,
            devices,
        }
    }
}

impl RegistryImpl for LoadedRegistry {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn devices(&self) -> Vec<Device> {
        self.devices.clone()
    }
    fn features(&self) -> Vec<(String, String)> {
        self.inner.features()
    }
}

/// A loaded library's device; after [`unload`] it starts no stream and supports nothing.
struct LoadedDevice {
    inner: Device,
    alive: Arc<AtomicBool>,
}

impl LoadedDevice {
    fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

impl DeviceImpl for LoadedDevice {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn description(&self) -> String {
        self.inner.description()
    }
    fn memory(&self) -> (usize, usize) {
        self.inner.memory()
    }
    fn dev_type(&self) -> DeviceType {
        self.inner.dev_type()
    }
    fn device_id(&self) -> Option<String> {
        self.inner.imp().device_id()
    }
    fn caps(&self) -> DeviceCaps {
        self.inner.imp().caps()
    }
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        if !self.alive() {
            return Err(Error::invalid(format!(
                "device {}: its backend library was unloaded",
                self.inner.name()
            )));
        }
        self.inner.imp().init_backend(params)
    }
    fn buffer_type(&self) -> BufferType {
        self.inner.buffer_type()
    }
    fn host_buffer_type(&self) -> Option<BufferType> {
        self.inner.host_buffer_type()
    }
    unsafe fn buffer_from_host_ptr(
        &self,
        ptr: std::ptr::NonNull<u8>,
        size: usize,
        max_tensor_size: usize,
    ) -> Result<Box<dyn super::BufferImpl>> {
        if !self.alive() {
            return Err(Error::invalid(format!(
                "device {}: its backend library was unloaded",
                self.inner.name()
            )));
        }
        // SAFETY: the caller's promise about `ptr` is passed on unchanged.
        unsafe {
            self.inner
                .imp()
                .buffer_from_host_ptr(ptr, size, max_tensor_size)
        }
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        self.alive() && self.inner.supports_op(op)
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        self.alive() && self.inner.supports_buft(buft)
    }
    fn offload_op(&self, op: &Tensor) -> bool {
        self.alive() && self.inner.offload_op(op)
    }
    fn features(&self) -> Vec<(String, String)> {
        self.inner.features()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatched_versions_and_builds_are_refused_by_name() {
        let p = Path::new("/x/libggml-foo.so");
        assert!(check_version(p, BACKEND_API_VERSION).is_ok());
        let e = check_version(p, BACKEND_API_VERSION + 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/x/libggml-foo.so"), "{e}");
        assert!(
            e.contains(&format!("version {}", BACKEND_API_VERSION + 1)),
            "{e}"
        );
        assert!(check_build(p, build_id()).is_ok());
        let e = check_build(p, "ggml-rs 0.0.1; rustc 1.0.0; x86_64-unknown-linux-gnu")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"ggml-rs 0.0.1; rustc 1.0.0"), "{e}");
        assert!(e.contains(build_id()), "{e}");
    }

    #[test]
    fn the_build_id_names_version_compiler_and_target() {
        let id = build_id();
        assert!(
            id.starts_with(concat!("ggml-rs ", env!("CARGO_PKG_VERSION"), "; rustc ")),
            "{id}"
        );
        assert!(!id.contains('\0'));
        // SAFETY: `build_id_c` points at a static NUL-terminated string.
        let c = unsafe { CStr::from_ptr(build_id_c()) };
        assert_eq!(c.to_str().unwrap(), id);
    }
}
