//! Triton's `metadata.json`: the fields a launch depends on, validated. Packages that need
//! launch features this plugin does not implement are refused here, with the field named.

use crate::package::{err, PackageError};
use serde::Deserialize;
use std::path::Path;

/// The fields of Triton's metadata that launching depends on. Keys that Triton versions added
/// over time are optional: their absence means the older behaviour (no scratch parameter).
#[derive(Debug, Clone, Deserialize)]
struct RawMetadata {
    name: String,
    num_warps: u32,
    shared: u32,
    target: RawTarget,
    #[serde(default = "one")]
    num_ctas: u32,
    #[serde(default)]
    global_scratch_size: Option<u64>,
    #[serde(default)]
    global_scratch_align: Option<u64>,
    #[serde(default)]
    profile_scratch_size: Option<u64>,
    #[serde(default)]
    profile_scratch_align: Option<u64>,
    #[serde(default)]
    launch_cooperative_grid: bool,
    #[serde(default)]
    launch_pdl: bool,
    #[serde(default)]
    tensordesc_meta: Option<serde_json::Value>,
    #[serde(default)]
    triton_version: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
struct RawTarget {
    backend: String,
    arch: serde_json::Value,
    #[serde(default = "warp32")]
    warp_size: u32,
}

fn warp32() -> u32 {
    32
}

/// Which scratch buffers the kernel's trailing parameters point at, as Triton's launcher
/// (`backends/nvidia/driver.py`, `CudaLauncher`) passes them: after the kernel's own arguments
/// come the global scratch pointer, then the profile scratch pointer, each null when its size
/// is 0 and otherwise a buffer of `size * grid_x * grid_y * grid_z * num_ctas` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scratch {
    pub size: u64,
    pub align: u64,
}

/// Triton's metadata, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub name: String,
    pub num_warps: u32,
    pub num_ctas: u32,
    pub shared: u32,
    /// Compute capability as major*10+minor (`target.arch`, 90 for sm_90).
    pub arch: u32,
    /// `None` when the Triton that built it had no such parameter (the PTX has one fewer).
    pub global_scratch: Option<Scratch>,
    pub profile_scratch: Option<Scratch>,
    pub triton_version: Option<String>,
}

impl Metadata {
    /// Threads per block: Triton's launcher uses `32 * num_warps`.
    pub fn block(&self) -> u32 {
        32 * self.num_warps
    }

    /// How many pointer parameters Triton appends after the kernel's own arguments.
    pub fn trailing_params(&self) -> usize {
        usize::from(self.global_scratch.is_some()) + usize::from(self.profile_scratch.is_some())
    }
}

pub(crate) fn load_metadata(path: &Path) -> Result<Metadata, PackageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(path, "(file)", format!("cannot read: {e}")))?;
    let raw: RawMetadata = serde_json::from_str(&text).map_err(|e| {
        let msg = e.to_string();
        let field = msg
            .split_once("field `")
            .and_then(|(_, r)| r.split_once('`'))
            .map_or("(json)".to_string(), |(f, _)| f.to_string());
        err(path, field, msg)
    })?;
    if raw.target.backend != "cuda" {
        return Err(err(
            path,
            "target.backend",
            format!("`{}`: only cuda kernels are supported", raw.target.backend),
        ));
    }
    let arch = match &raw.target.arch {
        serde_json::Value::Number(n) => n.as_u64().and_then(|a| u32::try_from(a).ok()),
        // Older Triton wrote e.g. "sm90"; accept either.
        serde_json::Value::String(s) => s
            .trim_start_matches("sm_")
            .trim_start_matches("sm")
            .trim_end_matches('a')
            .parse()
            .ok(),
        _ => None,
    }
    .ok_or_else(|| {
        err(
            path,
            "target.arch",
            format!(
                "`{}` is not a compute capability such as 90",
                raw.target.arch
            ),
        )
    })?;
    if raw.target.warp_size != 32 {
        return Err(err(path, "target.warp_size", "must be 32"));
    }
    if raw.num_warps == 0 || raw.num_warps > 32 {
        return Err(err(
            path,
            "num_warps",
            format!("{} (1 to 32 warps: at most 1024 threads)", raw.num_warps),
        ));
    }
    // Cluster launches, cooperative grids, programmatic dependent launch and TMA descriptors
    // all need cuLaunchKernelEx attributes or host-built descriptors that this launcher does
    // not implement; refuse the package rather than launch it wrongly.
    if raw.num_ctas != 1 {
        return Err(err(
            path,
            "num_ctas",
            format!(
                "{}: cluster launches are not supported (compile with num_ctas=1)",
                raw.num_ctas
            ),
        ));
    }
    if raw.launch_cooperative_grid {
        return Err(err(
            path,
            "launch_cooperative_grid",
            "cooperative launches are not supported",
        ));
    }
    if raw.launch_pdl {
        return Err(err(
            path,
            "launch_pdl",
            "programmatic dependent launch is not supported",
        ));
    }
    if raw.tensordesc_meta.as_ref().is_some_and(|t| {
        !matches!(t, serde_json::Value::Null) && t.as_array().is_none_or(|a| !a.is_empty())
    }) {
        return Err(err(
            path,
            "tensordesc_meta",
            "TMA tensor descriptors are not supported",
        ));
    }
    let scratch = |size: Option<u64>,
                   align: Option<u64>,
                   field: &str|
     -> Result<Option<Scratch>, PackageError> {
        match size {
            None => Ok(None),
            Some(size) => {
                let align = align.unwrap_or(1).max(1);
                if !align.is_power_of_two() {
                    return Err(err(
                        path,
                        format!("{field}_align"),
                        format!("{align} is not a power of two"),
                    ));
                }
                Ok(Some(Scratch { size, align }))
            }
        }
    };
    Ok(Metadata {
        name: raw.name,
        num_warps: raw.num_warps,
        num_ctas: raw.num_ctas,
        shared: raw.shared,
        arch,
        global_scratch: scratch(
            raw.global_scratch_size,
            raw.global_scratch_align,
            "global_scratch",
        )?,
        profile_scratch: scratch(
            raw.profile_scratch_size,
            raw.profile_scratch_align,
            "profile_scratch",
        )?,
        triton_version: raw.triton_version,
    })
}
