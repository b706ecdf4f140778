//! `cuda-kernels`: the CUDA kernel library for the prims that are neither elementwise nor a
//! row reduction (so not cuda-fuser's), each op its own region:
//!
//! - `take` / `take_along_axis` (gathers) and `scatter_add` / `index_add` (a copy, then atomic
//!   adds: float results depend on the order the atomics land in, so they are not bitwise
//!   deterministic; ints and b8 are; the `deterministic` option trades the atomics for a
//!   gather in index order);
//! - `sum` / `prod` / `amax` / `amin` over any dims for every dtype the interpreter takes
//!   (floats accumulate in f64 as the interpreter does, ints wrap in 64 bits), `argmax` /
//!   `argmin` (first extreme, NaN wins), `var_mean` (two passes in f64);
//! - `cumsum` (a blocked scan), `sort` / `topk` (bitonic in shared memory, rows up to
//!   [`spec::MAX_SORT`]; longer rows are not claimed);
//! - `full`, `iota` (every dtype), `uniform` / `normal` (Philox4x32-10 with the interpreter's
//!   counter mapping: the same numbers on CPU and GPU), `matmul` (ints, and the float cases
//!   cuBLAS does not claim, summed in f64), `pad` with interior
//!   padding, and `floor_divide` (integer division by zero is a device error);
//! - cross-entropy's op pair `ltorch.cross_entropy_lse` / `ltorch.cross_entropy_bwd` ([`ce`]),
//!   one region each with the bf16/f16 <-> f32 converts and reshapes around them (found by
//!   `thunder_cuda_common::cross_entropy`, which cuda-fuser leaves them for): one pass per row
//!   over the 16-bit logits, the loss summed without atomics; a target outside `0..C` is a
//!   device error.
//!
//! Index and division errors are written to a device flag and turned into an error naming the
//! op: on an op's first run at once, on later runs by the op's next run, so that a training
//! loop's host never waits for the GPU ([`flag`]; `sync_checks` makes every run wait). Kernels are generated as CUDA C++ ([`codegen`]) and
//! compiled with NVRTC through `thunder-cuda-common` (shared with cuda-fuser), cached in
//! memory and on disk. Without a driver or NVRTC the plugin loads, says why and claims nothing.
//!
//! Options: `cache_dir = "path"` (default `~/.cache/thunder/cuda-kernels`), `disk_cache = false`,
//! `deterministic = true` (scatter_add / index_add without atomics: each output element sums
//! its sources in index order in f64, bit-identical to the interpreter; slow when the index
//! dim is long, as in an embedding's gradient), `sync_checks = true` (every run waits for its
//! error flag and reports at once; also `THUNDER_CUDA_SYNC_CHECKS=1`).
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

pub mod ce;
pub mod codegen;
mod flag;
mod run;
pub mod spec;

use std::path::PathBuf;
use thunder_abi::export::{option_bool, CompiledRegion, Executor, HostLogger};
use thunder_abi::prims::Prim;
use thunder_abi::{
    DeviceKind, HostServices, LogLevel, OpView, OptionValue, PluginError, PluginInfo, RegionSpec,
    TraceView, ABI_VERSION,
};
use thunder_cuda_common::{device, nvrtc};

pub const NAME: &str = "cuda-kernels";

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "CUDA kernel library: gathers, scatters, reductions, scans, sorts, RNG".into(),
        devices: vec!["cuda".into()].into(),
        symbols: Prim::ALL
            .iter()
            .filter(|p| spec::claimable(**p))
            .map(|p| p.id().into())
            .chain([ce::FWD.into(), ce::BWD.into()])
            .collect(),
    }
}

/// Whether the library runs `op`: exactly when it decodes (so a claim always compiles).
pub fn accepts(view: &TraceView, op: &OpView) -> bool {
    spec::decode(view, op).is_ok()
}

/// The cross-entropy regions ([`ce`]: the op with the converts around it), then one region
/// per other accepted, unclaimed op.
pub fn claims(view: &TraceView) -> Vec<Vec<u32>> {
    let mut regions = ce::claims(view);
    let taken: Vec<u32> = regions.iter().flatten().copied().collect();
    regions.extend(
        view.ops
            .iter()
            .enumerate()
            .filter(|(i, op)| !op.claimed && !taken.contains(&(*i as u32)) && accepts(view, op))
            .map(|(i, _)| vec![i as u32]),
    );
    regions
}

pub struct CudaKernels {
    /// scatter_add / index_add without atomics, bit-identical to the interpreter.
    deterministic: bool,
    sync_checks: bool,
    services: HostServices,
    log: HostLogger,
    compiler: nvrtc::Compiler,
}

impl CudaKernels {
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        for (key, _) in options {
            if !["cache_dir", "disk_cache", "deterministic", "sync_checks"].contains(&key.as_str())
            {
                return Err(PluginError::invalid(format!(
                    "{NAME}: unknown option `{key}` (expected cache_dir, disk_cache, deterministic \
                     or sync_checks)"
                )));
            }
        }
        let cache_dir = match options.iter().find(|(k, _)| k == "cache_dir") {
            None => nvrtc::cache_dir_for(NAME),
            Some((_, OptionValue::Str(s))) => Some(PathBuf::from(s.as_str())),
            Some((_, other)) => {
                return Err(PluginError::invalid(format!(
                    "{NAME}: option `cache_dir`: expected a path string, got {other:?}"
                )))
            }
        };
        let disk = option_bool(options, "disk_cache")?.unwrap_or(true);
        Ok(CudaKernels {
            deterministic: option_bool(options, "deterministic")?.unwrap_or(false),
            sync_checks: option_bool(options, "sync_checks")?.unwrap_or(false)
                || flag::sync_checks_from_env(),
            services,
            log: HostLogger {
                services,
                plugin: NAME,
            },
            compiler: nvrtc::Compiler::new(if disk { cache_dir } else { None }),
        })
    }
}

impl Executor for CudaKernels {
    fn available(&self) -> Result<(), String> {
        device::runtime().map(|_| ())
    }

    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        if device::runtime().is_err() {
            return Ok(Vec::new());
        }
        Ok(claims(view))
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let runtime =
            device::runtime().map_err(|e| PluginError::unsupported(format!("{NAME}: {e}")))?;
        let (symbol, spec, outputs) = decode_region(view, region, self.deterministic)?;
        let ordinal = outputs
            .iter()
            .filter_map(|(v, _, _)| v.and_then(|v| view.values.get(v as usize)))
            .find(|m| m.device.kind == DeviceKind::Cuda)
            .map(|m| m.device.index)
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: {symbol}: no CUDA output")))?;
        if ordinal as i32 >= runtime.device_count {
            return Err(PluginError::invalid(format!(
                "{NAME}: cuda:{ordinal} does not exist ({} devices)",
                runtime.device_count
            )));
        }
        let props = device::props(ordinal).map_err(PluginError::internal)?;
        let outs: Vec<_> = outputs.iter().map(|(_, d, _)| *d).collect();
        let base = format!(
            "thunder_{}",
            symbol
                .trim_start_matches("prims.")
                .trim_start_matches("ltorch.")
        );
        let generated = codegen::generate(&spec, &outs, &base);
        device::make_current(ordinal).map_err(PluginError::internal)?;
        let mut kernels = Vec::with_capacity(generated.len());
        for kernel in generated {
            let key = nvrtc::CacheKey::new(
                &kernel.source,
                props.compute_capability,
                runtime.driver_version,
                runtime.nvrtc_version,
            );
            let (image, origin) = self
                .compiler
                .image(&kernel.source, &kernel.name, &key, props.compute_capability)
                .map_err(|e| PluginError::internal(format!("{NAME}: {symbol}: {e}")))?;
            self.log.log(
                LogLevel::Debug,
                &format!("{}: {origin:?} ({})", kernel.name, key.0),
            );
            let function =
                device::load_once(ordinal, &image, &kernel.name).map_err(PluginError::internal)?;
            kernels.push(run::Loaded { kernel, function });
        }
        let operand_slots = spec
            .operands()
            .iter()
            .map(|o| {
                region
                    .inputs
                    .iter()
                    .position(|&v| v == o.value)
                    .ok_or_else(|| {
                        PluginError::invalid(format!("{NAME}: t{} is not a region input", o.value))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(o) = region
            .outputs
            .iter()
            .find(|&&o| !outputs.iter().any(|(v, _, _)| *v == Some(o)))
        {
            return Err(PluginError::invalid(format!(
                "{NAME}: {symbol}: the region returns t{o}, which its kernels do not write"
            )));
        }
        let output_slots = outputs
            .iter()
            .map(|&(v, dtype, n)| {
                v.and_then(|v| region.outputs.iter().position(|&o| o == v))
                    .ok_or(n * dtype.size_bytes())
            })
            .collect();
        Ok(Box::new(run::CompiledOp {
            symbol,
            spec,
            kernels,
            operand_slots,
            output_slots,
            n_inputs: region.inputs.len(),
            n_outputs: region.outputs.len(),
            ordinal,
            sm_count: props.sm_count.max(1) as u32,
            services: self.services,
            sync_checks: self.sync_checks,
            checked_once: Default::default(),
            deferred: Default::default(),
        }))
    }
}

/// A region's op symbol, spec and kernel outputs `(value, dtype, elements)` (`None`: a
/// scratch buffer): one op, or a cross-entropy region ([`ce`]).
type Decoded = (
    String,
    spec::Spec,
    Vec<(Option<u32>, thunder_abi::DTypeCode, usize)>,
);

fn decode_region(
    view: &TraceView,
    region: &RegionSpec,
    deterministic: bool,
) -> Result<Decoded, PluginError> {
    let op_at = |i: u32| {
        view.ops
            .get(i as usize)
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: op {i} is not in the view")))
    };
    if let Some(&i) = region
        .ops
        .iter()
        .find(|&&i| op_at(i).is_ok_and(|o| [ce::FWD, ce::BWD].contains(&o.symbol.as_str())))
    {
        let symbol = op_at(i)?.symbol.to_string();
        // Decoded as at claim time (the ops were unclaimed then).
        let mut unclaimed = view.clone();
        for op in unclaimed.ops.iter_mut() {
            op.claimed = false;
        }
        let r = ce::decode_region(&unclaimed, i as usize)
            .map_err(|e| PluginError::unsupported(format!("{NAME}: {symbol}: {e}")))?;
        if r.ops != region.ops.as_slice() {
            return Err(PluginError::invalid(format!(
                "{NAME}: {symbol}: region {:?} is not the claimed {:?}",
                region.ops.as_slice(),
                r.ops
            )));
        }
        return Ok((symbol, r.spec, r.outputs));
    }
    let [only] = region.ops.as_slice() else {
        return Err(PluginError::invalid(format!(
            "{NAME}: a region is one op, got {}",
            region.ops.len()
        )));
    };
    let op = op_at(*only)?;
    let mut spec = spec::decode(view, op)
        .map_err(|e| PluginError::unsupported(format!("{NAME}: {}: {e}", op.symbol)))?;
    if let spec::Spec::ScatterAdd {
        deterministic: d, ..
    } = &mut spec
    {
        *d = deterministic;
    }
    let outputs = op
        .outputs
        .iter()
        .map(|&v| {
            let m = &view.values[v as usize];
            let n: i64 = m.shape.iter().map(|&d| d.max(0)).product();
            (Some(v), m.dtype, n as usize)
        })
        .collect();
    Ok((op.symbol.to_string(), spec, outputs))
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: CudaKernels::create,
}
