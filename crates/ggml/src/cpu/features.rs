//! What the processor is and has: model name, memory, last-level cache, SIMD features
//! (detected at run time).

use std::path::Path;
use std::sync::OnceLock;

/// The processor's model name, from /proc/cpuinfo where there is one.
pub(crate) fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// (free, total) physical memory in bytes; free = available memory (0 when unknown).
pub(crate) fn memory() -> (usize, usize) {
    let Ok(s) = std::fs::read_to_string("/proc/meminfo") else {
        return (0, 0);
    };
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("MemAvailable:"), field("MemTotal:"))
}

/// The SIMD features this processor has, with GGML's names, each with value "1", then
/// `LLC_BYTES` with the last-level cache's size where it is known ([`llc_bytes`]).
pub(crate) fn features() -> Vec<(String, String)> {
    let simd = detected()
        .into_iter()
        .map(|n| (n.to_string(), "1".to_string()));
    let llc = llc_bytes().map(|b| ("LLC_BYTES".to_string(), b.to_string()));
    simd.chain(llc).collect()
}

/// The size in bytes of the last-level cache that holds data (the highest level of type
/// Data or Unified) of the first CPU: from Linux's sysfs, else from CPUID (leaf 0x8000001D on
/// AMD and Hygon, leaf 4 elsewhere); `None` when neither tells. Read once per process.
pub(crate) fn llc_bytes() -> Option<usize> {
    static LLC: OnceLock<Option<usize>> = OnceLock::new();
    *LLC.get_or_init(|| {
        llc_from_sysfs(Path::new("/sys/devices/system/cpu/cpu0/cache")).or_else(llc_from_cpuid)
    })
}

/// The last-level data cache's size from a sysfs cache directory (`index*/{level,type,size}`).
fn llc_from_sysfs(dir: &Path) -> Option<usize> {
    let read = |index: &Path, name: &str| std::fs::read_to_string(index.join(name)).ok();
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| {
            let index = entry.ok()?.path();
            let named_index = index
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("index"));
            if !named_index || !holds_data(read(&index, "type")?.trim()) {
                return None;
            }
            let level = read(&index, "level")?.trim().parse::<u32>().ok()?;
            Some((level, cache_size(read(&index, "size")?.trim())?))
        })
        .max()
        .map(|(_, size)| size)
}

/// Whether a cache of sysfs type `ty` holds data.
fn holds_data(ty: &str) -> bool {
    ty == "Data" || ty == "Unified"
}

/// Bytes of a sysfs cache size: a number with an optional `K`, `M` or `G` suffix (powers of
/// 1024).
fn cache_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// The last-level data cache's size from CPUID's deterministic cache parameters: leaf
/// 0x8000001D on AMD and Hygon (where the topology extensions are listed), leaf 4 elsewhere;
/// each subleaf describes one cache until one of type 0.
#[cfg(target_arch = "x86_64")]
fn llc_from_cpuid() -> Option<usize> {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    let vendor = __cpuid(0);
    let amd = matches!(
        (vendor.ebx, vendor.edx, vendor.ecx),
        // "AuthenticAMD", "HygonGenuine"
        (0x6874_7541, 0x6974_6e65, 0x444d_4163) | (0x6f67_7948, 0x6e65_476e, 0x656e_6975)
    );
    let leaf = if amd {
        let topology =
            __cpuid(0x8000_0000).eax >= 0x8000_001d && __cpuid(0x8000_0001).ecx & (1 << 22) != 0;
        topology.then_some(0x8000_001d)?
    } else {
        (vendor.eax >= 4).then_some(4)?
    };
    (0..16)
        .map(|sub| __cpuid_count(leaf, sub))
        .take_while(|r| r.eax & 0x1f != 0)
        .filter_map(|r| cache_of_cpuid(r.eax, r.ebx, r.ecx))
        .max()
        .map(|(_, size)| size)
}

/// No CPUID off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn llc_from_cpuid() -> Option<usize> {
    None
}

/// (level, bytes) of the cache a CPUID cache-parameters subleaf describes (its EAX, EBX and
/// ECX), where it holds data (type 1, data, or 3, unified; not 2, instructions): ways ×
/// partitions × line size × sets, each field stored minus one.
#[cfg_attr(not(target_arch = "x86_64"), cfg(test))]
fn cache_of_cpuid(eax: u32, ebx: u32, ecx: u32) -> Option<(u32, usize)> {
    if !matches!(eax & 0x1f, 1 | 3) {
        return None;
    }
    let field = |v: u32, shift: u32, bits: u32| ((v >> shift) & ((1 << bits) - 1)) as usize + 1;
    let bytes = field(ebx, 22, 10) * field(ebx, 12, 10) * field(ebx, 0, 12) * (ecx as usize + 1);
    Some(((eax >> 5) & 7, bytes))
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn detected() -> Vec<&'static str> {
    let mut v = Vec::new();
    macro_rules! probe {
        ($($feat:tt => $name:literal),*) => {
            $(if std::arch::is_x86_feature_detected!($feat) { v.push($name); })*
        };
    }
    probe!("sse3" => "SSE3", "ssse3" => "SSSE3", "avx" => "AVX", "avxvnni" => "AVX_VNNI",
           "avx2" => "AVX2", "f16c" => "F16C", "fma" => "FMA", "bmi2" => "BMI2",
           "avx512f" => "AVX512", "avx512vbmi" => "AVX512_VBMI", "avx512vnni" => "AVX512_VNNI",
           "avx512bf16" => "AVX512_BF16");
    // AMX int8 where this process may run it (CPUID, the OS's tile state and Linux's
    // permission, asked for here if not yet), whatever GGML_CPU_FORCE selects.
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::quant_dot::amx::granted() {
        v.push("AMX_INT8");
    }
    v
}

#[cfg(target_arch = "aarch64")]
fn detected() -> Vec<&'static str> {
    let mut v = vec!["NEON", "ARM_FMA"];
    macro_rules! probe {
        ($($feat:tt => $name:literal),*) => {
            $(if std::arch::is_aarch64_feature_detected!($feat) { v.push($name); })*
        };
    }
    probe!("fp16" => "FP16_VA", "i8mm" => "MATMUL_INT8", "sve" => "SVE", "dotprod" => "DOTPROD");
    v
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64")))]
fn detected() -> Vec<&'static str> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes as sysfs writes them.
    #[test]
    fn cache_sizes_parse() {
        assert_eq!(cache_size("32K"), Some(32 << 10));
        assert_eq!(cache_size("32768K"), Some(32 << 20));
        assert_eq!(cache_size("2M"), Some(2 << 20));
        assert_eq!(cache_size("1G"), Some(1 << 30));
        assert_eq!(cache_size("4096"), Some(4096));
        assert_eq!(cache_size(""), None);
        assert_eq!(cache_size("K"), None);
        assert_eq!(cache_size("12X"), None);
    }

    /// The highest level of a data or unified cache, from a directory laid out as sysfs's
    /// (an instruction cache and entries that are not caches do not count).
    #[test]
    fn the_last_level_data_cache_is_read_from_sysfs() {
        let dir = std::env::temp_dir().join(format!("ggml-llc-test-{}", std::process::id()));
        let caches = [
            ("index0", "1", "Data", "48K"),
            ("index1", "1", "Instruction", "32K"),
            ("index2", "2", "Unified", "2048K"),
            ("index3", "3", "Unified", "32768K"),
            ("index4", "4", "Instruction", "64M"),
        ];
        for (name, level, ty, size) in caches {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.join("uevent")).unwrap();
        assert_eq!(llc_from_sysfs(&dir), Some(32 << 20));
        std::fs::remove_dir_all(dir.join("index3")).unwrap();
        assert_eq!(llc_from_sysfs(&dir), Some(2 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(llc_from_sysfs(&dir), None);
    }

    /// CPUID's cache parameters: a Zen 3 L3 (16 ways, 1 partition, 64-byte lines, 32768
    /// sets: 32 MiB) and L1 instruction cache.
    #[test]
    fn cpuid_cache_parameters_give_the_size() {
        let l3 = (3 | 3 << 5, 15 << 22 | 63, 32767);
        assert_eq!(cache_of_cpuid(l3.0, l3.1, l3.2), Some((3, 32 << 20)));
        let l1i = (2 | 1 << 5, 7 << 22 | 63, 63);
        assert_eq!(cache_of_cpuid(l1i.0, l1i.1, l1i.2), None);
    }
}
