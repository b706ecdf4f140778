//! What a benchmark result records about the CPU it was measured on.

/// The vector extensions the executors can dispatch to on this CPU, detected at run time, so that
/// a result says which kernels produced it.
pub(crate) fn cpu_isa() -> Vec<&'static str> {
    let mut isa = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! probe {
            ($($feature:tt),*) => {
                $(if std::arch::is_x86_feature_detected!($feature) {
                    isa.push($feature);
                })*
            };
        }
        probe!(
            "avx2",
            "fma",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512bf16",
            "avx512fp16"
        );
    }
    // AMX's detection macro is not stable yet; the kernel reports it in /proc/cpuinfo.
    #[cfg(target_os = "linux")]
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
        for (flag, name) in [(" amx_tile", "amx-tile"), (" amx_bf16", "amx-bf16")] {
            if flags.contains(flag) {
                isa.push(name);
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            isa.push("neon");
        }
    }
    isa
}

pub(crate) fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
