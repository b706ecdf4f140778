//! `cuda-fuser`: generates a CUDA kernel for each fusible part of a region, compiles it with
//! NVRTC for the device's architecture and runs it on the host's stream.
//!
//! - It claims maximal runs of elementwise ops, broadcasts, reshapes and sum/amax reductions on
//!   CUDA tensors ([`support`]); a region becomes as few kernels as its shapes allow
//!   ([`plan`]), each generated as CUDA C++ ([`codegen`]).
//! - Kernels are cached in memory and on disk, keyed by source hash, arch, driver and NVRTC
//!   version ([`nvrtc`]), and each distinct one is loaded into a module once per process and
//!   device (`device::load_once`): the same kernel in every layer shares it.
//! - Without a CUDA driver or NVRTC the plugin still loads, reports itself unavailable with the
//!   reason and claims nothing.
//!
//! Options (plugins.toml): `cache_dir = "path"` (default `~/.cache/thunder/cuda-fuser`),
//! `disk_cache = false` to keep kernels in memory only, `dump_dir = "path"` to write each
//! generated kernel's source (with its launch as a first comment line) there as
//! `<kernel>-<key>.cu`, for reading what a region became on the device.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

mod c_types;
pub mod claim;
pub mod codegen;
mod col_kernel;
mod compiled;
pub mod emulate;
pub mod plan;
mod reduce_layout;
mod row_kernel;
mod row_vector;
pub mod support;
mod tiled;

// The driver/NVRTC helpers live in `thunder-cuda-common`, shared with `cuda-kernels`.
use thunder_cuda_common::device;
pub use thunder_cuda_common::nvrtc;

use compiled::{device_of, CompiledKernel, FusedRegion};
use std::collections::HashMap;
use std::path::PathBuf;
use thunder_abi::export::{option_bool, CompiledRegion, Executor, HostLogger};
use thunder_abi::prims::Prim;
use thunder_abi::{
    HostServices, LogLevel, OptionValue, PluginError, PluginInfo, RegionSpec, TraceView,
    ABI_VERSION,
};

pub const NAME: &str = "cuda-fuser";

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "NVRTC-generated kernels for elementwise and row-reduction regions on CUDA"
            .into(),
        devices: vec!["cuda".into()].into(),
        symbols: Prim::ALL
            .iter()
            .filter(|p| support::claimable(**p))
            .map(|p| p.id().into())
            .collect(),
    }
}

pub struct CudaFuser {
    services: HostServices,
    log: HostLogger,
    compiler: nvrtc::Compiler,
    dump_dir: Option<PathBuf>,
}

impl CudaFuser {
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        for (key, _) in options {
            if key != "cache_dir" && key != "disk_cache" && key != "dump_dir" {
                return Err(PluginError::invalid(format!(
                    "{NAME}: unknown option `{key}` (expected cache_dir, disk_cache or dump_dir)"
                )));
            }
        }
        let cache_dir = match options.iter().find(|(k, _)| k == "cache_dir") {
            None => nvrtc::default_cache_dir(),
            Some((_, OptionValue::Str(s))) => Some(PathBuf::from(s.as_str())),
            Some((_, other)) => {
                return Err(PluginError::invalid(format!(
                    "{NAME}: option `cache_dir`: expected a path string, got {other:?}"
                )))
            }
        };
        let disk = option_bool(options, "disk_cache")?.unwrap_or(true);
        let dump_dir = match options.iter().find(|(k, _)| k == "dump_dir") {
            None => None,
            Some((_, OptionValue::Str(s))) => Some(PathBuf::from(s.as_str())),
            Some((_, other)) => {
                return Err(PluginError::invalid(format!(
                    "{NAME}: option `dump_dir`: expected a path string, got {other:?}"
                )))
            }
        };
        Ok(CudaFuser {
            services,
            log: HostLogger {
                services,
                plugin: NAME,
            },
            compiler: nvrtc::Compiler::new(if disk { cache_dir } else { None }),
            dump_dir,
        })
    }

    fn region_device(view: &TraceView, region: &RegionSpec) -> Result<u32, PluginError> {
        region
            .inputs
            .iter()
            .chain(region.outputs.iter())
            .filter_map(|&v| view.values.get(v as usize))
            .find_map(|m| device_of(m.device))
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: region has no CUDA tensor")))
    }
}

impl Executor for CudaFuser {
    fn available(&self) -> Result<(), String> {
        device::runtime().map(|_| ())
    }

    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        if device::runtime().is_err() {
            return Ok(Vec::new());
        }
        // The converts and reshapes cuda-kernels runs inside its cross-entropy kernels.
        let left = thunder_cuda_common::cross_entropy::joined_ops(view);
        Ok(claim::runs(view, |op| {
            support::accepts(view, op) && !left.iter().any(|&i| std::ptr::eq(&view.ops[i], op))
        }))
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let runtime = device::runtime().map_err(PluginError::unsupported)?;
        let ordinal = Self::region_device(view, region)?;
        if ordinal as i32 >= runtime.device_count {
            return Err(PluginError::invalid(format!(
                "{NAME}: cuda:{ordinal} does not exist ({} devices)",
                runtime.device_count
            )));
        }
        let props = device::props(ordinal).map_err(PluginError::internal)?;
        let target = codegen::Target::for_device(
            props.compute_capability,
            u32::try_from(props.max_shared_optin).unwrap_or(0),
        );
        let kernels = plan::plan(view, &region.ops, &region.outputs)?;
        device::make_current(ordinal).map_err(PluginError::internal)?;
        let mut compiled = Vec::with_capacity(kernels.len());
        let mut bytes = HashMap::new();
        for (i, k) in kernels.iter().enumerate() {
            let generated = codegen::generate_for(k, &format!("thunder_fused_{i}"), target);
            let key = nvrtc::CacheKey::new(
                &generated.source,
                props.compute_capability,
                runtime.driver_version,
                runtime.nvrtc_version,
            );
            let (image, origin) = self
                .compiler
                .image(
                    &generated.source,
                    &generated.name,
                    &key,
                    props.compute_capability,
                )
                .map_err(PluginError::internal)?;
            self.log.log(
                LogLevel::Debug,
                &format!("{}: {:?} ({})", generated.name, origin, key.0),
            );
            if let Some(dir) = &self.dump_dir {
                let path = dir.join(format!("{}-{}.cu", generated.name, key.0));
                let text = format!("// launch: {:?}\n{}", generated.launch, generated.source);
                if let Err(e) =
                    std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, text))
                {
                    self.log.log(
                        LogLevel::Warn,
                        &format!("{NAME}: dump_dir: {}: {e}", path.display()),
                    );
                }
            }
            let function = device::load_once(ordinal, &image, &generated.name)
                .map_err(PluginError::internal)?;
            device::allow_shared(function, generated.launch.shared_bytes())
                .map_err(PluginError::internal)?;
            for v in k
                .inputs
                .iter()
                .map(|i| i.value)
                .chain(k.outputs.iter().map(|o| o.value))
            {
                let meta = &view.values[v as usize];
                let n: i64 = meta.shape.iter().map(|&d| d.max(0)).product();
                bytes.insert(v, n as usize * meta.dtype.size_bytes());
            }
            compiled.push(CompiledKernel {
                inputs: k.inputs.iter().map(|i| i.value).collect(),
                outputs: k.outputs.iter().map(|o| o.value).collect(),
                generated,
                function,
            });
        }
        Ok(Box::new(FusedRegion {
            kernels: compiled,
            region_inputs: region.inputs.to_vec(),
            region_outputs: region.outputs.to_vec(),
            bytes,
            ordinal,
            sm_count: props.sm_count.max(1) as u32,
            services: self.services,
        }))
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: CudaFuser::create,
}
