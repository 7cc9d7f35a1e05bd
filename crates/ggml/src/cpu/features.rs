//! What the processor is and has: model name, memory, SIMD features (detected at run time).

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

/// The SIMD features this processor has, with GGML's names, each with value "1".
pub(crate) fn features() -> Vec<(String, String)> {
    detected()
        .into_iter()
        .map(|n| (n.to_string(), "1".to_string()))
        .collect()
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
