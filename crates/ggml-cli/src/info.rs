//! `ggml info`: what the backend system sees on this machine.

use std::ffi::OsString;

use ggml::backend;

use crate::CliError;

const USAGE: &str = "usage: ggml info [--load LIBRARY]... [--rpc HOST:PORT[,HOST:PORT...]]...
                  [--meta DEV,DEV[,...]]...

  Loads the backend libraries found as GGML finds them (libggml-<name>[-variant].so in the
  executable's directory and the working directory, then GGML_BACKEND_PATH) and each LIBRARY
  given, connects to each RPC server given (GGML's rpc-server or `ggml rpc-server`; also
  those of GGML_RPC_SERVERS), then prints the loaded libraries, every registry with its
  features, and every device with its properties (remote devices are RPC0, RPC1, ...; wgpu
  devices WGPU0, ...). Each --meta makes a meta device over the named devices (tensor
  parallelism; up to 16, a device may repeat); meta devices are not registered, and are listed
  after the registered ones.";

/// Loads backend libraries, then prints them, every registry with its features, and every
/// device with its properties.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    let mut libs = Vec::new();
    let mut metas = Vec::new();
    let mut rpc = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if crate::is_help(a) {
            println!("{USAGE}");
            return Ok(());
        }
        if a == "--load" {
            let Some(p) = it.next() else {
                return Err(CliError::Usage(format!(
                    "info: --load needs a library path\n\n{USAGE}"
                )));
            };
            libs.push(std::path::PathBuf::from(p));
            continue;
        }
        if a == "--meta" {
            let Some(list) = it.next() else {
                return Err(CliError::Usage(format!(
                    "info: --meta needs a list of device names\n\n{USAGE}"
                )));
            };
            metas.push(list.to_string_lossy().into_owned());
            continue;
        }
        if a == "--rpc" {
            let Some(list) = it.next() else {
                return Err(CliError::Usage(format!(
                    "info: --rpc needs HOST:PORT[,HOST:PORT...]\n\n{USAGE}"
                )));
            };
            rpc.push(list.to_string_lossy().into_owned());
            continue;
        }
        return Err(CliError::Usage(format!(
            "info: unknown argument {:?}\n\n{USAGE}",
            a.to_string_lossy()
        )));
    }
    backend::load_all();
    for p in &libs {
        backend::load(p).map_err(|e| CliError::Failed(e.to_string()))?;
    }
    for list in &rpc {
        crate::rpc_server::add_servers(list, "info --rpc")?;
    }
    // The wgpu devices, after the libraries (one per Vulkan, Metal or DX12 adapter); none is not an error here.
    if let Err(e) = ggml_wgpu::register() {
        println!("wgpu: {e}");
    }
    println!(
        "ggml {} — {} registries, {} devices",
        env!("CARGO_PKG_VERSION"),
        backend::reg_count(),
        backend::dev_count()
    );
    let loaded = backend::loaded_libraries();
    if loaded.is_empty() {
        println!("\nloaded libraries: none");
    } else {
        println!("\nloaded libraries:");
        for (path, reg) in &loaded {
            println!("  {} (registry {})", path.display(), reg.name());
        }
    }
    for i in 0..backend::reg_count() {
        let Some(reg) = backend::reg_get(i) else {
            continue;
        };
        println!(
            "\nregistry {i}: {} ({} device(s))",
            reg.name(),
            reg.dev_count()
        );
        let features = reg.features();
        if !features.is_empty() {
            let list: Vec<String> = features
                .iter()
                .map(|(k, v)| {
                    if v == "1" {
                        k.clone()
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            println!("  features: {}", list.join(" "));
        }
    }
    for i in 0..backend::dev_count() {
        if let Some(dev) = backend::dev_get(i) {
            print_device(&format!("device {i}"), &dev);
        }
    }
    // Kept alive until printed: meta devices live as long as a handle does.
    let made = metas
        .iter()
        .map(|list| make_meta(list))
        .collect::<Result<Vec<_>, _>>()?;
    let meta = backend::meta_devices();
    if meta.is_empty() {
        println!("\nmeta devices: none (make one with --meta DEV,DEV)");
    }
    for (i, dev) in meta.iter().enumerate() {
        print_device(&format!("meta device {i}"), dev);
    }
    drop(made);
    Ok(())
}

/// A meta device over the devices named in `list` (comma-separated), every tensor mirrored.
fn make_meta(list: &str) -> Result<ggml::Device, CliError> {
    let members = list
        .split(',')
        .map(|name| {
            backend::dev_by_name(name.trim()).ok_or_else(|| {
                CliError::Usage(format!("info: --meta: no device named {name:?}\n\n{USAGE}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    backend::meta_device(&members, |_, _| backend::SplitState::mirrored())
        .map_err(|e| CliError::Failed(e.to_string()))
}

/// Prints a device's properties and buffer type under `label`.
fn print_device(label: &str, dev: &ggml::Device) {
    let p = dev.get_props();
    let buft = dev.buffer_type();
    println!("\n{label}: {}", p.name);
    println!("  description: {}", p.description);
    println!("  type: {:?}", p.dev_type);
    println!(
        "  memory: {} free of {} total",
        human(p.memory_free),
        human(p.memory_total)
    );
    if let Some(id) = &p.device_id {
        println!("  device id: {id}");
    }
    println!(
        "  caps: async_compute={} host_buffer={} buffer_from_host_ptr={} events={}",
        p.caps.async_compute, p.caps.host_buffer, p.caps.buffer_from_host_ptr, p.caps.events
    );
    println!(
        "  buffer type: {} (alignment {}, max size {}, host {})",
        buft.name(),
        buft.get_alignment(),
        if buft.get_max_size() == usize::MAX {
            "unlimited".to_string()
        } else {
            human(buft.get_max_size())
        },
        buft.is_host()
    );
}

fn human(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
