//! `triton`: runs ahead-of-time compiled Triton kernels for the symbols they implement, with no
//! Python at run time.
//!
//! - A kernel package ([`package`]) is a folder with a manifest (`kernel.toml`), the cubin (and
//!   PTX) and Triton's `metadata.json`; `scripts/triton/compile_kernels.py` writes them and the
//!   repo ships attention and RMSNorm packages in `executors/triton/kernels/`.
//! - The plugin claims a composite op (`ltorch.scaled_dot_product_attention`,
//!   `ltorch.rms_norm`, or any symbol a package names) only when a package covers its dtypes,
//!   shapes and attributes ([`bind`]); otherwise the host decomposes it and other executors run
//!   the pieces.
//! - Launches follow Triton's own launcher: block = num_warps × 32, dynamic shared memory from
//!   the metadata, and the trailing global/profile scratch pointers ([`device`]).
//! - Without a CUDA driver the plugin still loads, reports itself unavailable with the reason
//!   and claims nothing.
//!
//! Options (plugins.toml): `kernel_dirs = "dir1:dir2"` (package folders, in addition to the
//! bundled ones; separated like `PATH`, since plugin options are scalars), `bundled = false` to
//! leave the bundled packages out.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

pub mod binary;
pub mod bind;
mod device;
pub mod expr;
mod kernel;
mod metadata;
pub mod package;

use bind::{Param, Plan};
pub use device::{DeviceProps, Runtime};
use package::Package;
use std::path::PathBuf;
use thunder_abi::export::{option_bool, CompiledRegion, Executor, HostLogger};
use thunder_abi::{
    DeviceDesc, DeviceKind, ExecContext, HostServices, LogLevel, OptionValue, PluginError,
    PluginInfo, RegionSpec, TensorDesc, TraceView, ABI_VERSION,
};

pub const NAME: &str = "triton";

/// The packages shipped with the crate. Baked in at build time: a plugin built from this repo
/// finds them wherever its `.so` is loaded from, as long as the checkout stays.
pub const BUNDLED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels");

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "ahead-of-time compiled Triton kernels (cubin packages) for the composite ops they implement".into(),
        devices: vec!["cuda".into()].into(),
        symbols: vec![
            "ltorch.scaled_dot_product_attention".into(),
            "ltorch.sdpa_fwd_lse".into(),
            "ltorch.sdpa_bwd".into(),
            "ltorch.rms_norm".into(),
        ]
        .into(),
    }
}

pub struct Triton {
    services: HostServices,
    log: HostLogger,
    packages: Vec<Package>,
    /// Packages that failed to load: `file: field: message`, reported at creation and by
    /// [`Triton::package_errors`].
    errors: Vec<String>,
}

/// Parses the plugin's options into the package folders to load.
pub fn kernel_dirs(options: &[(String, OptionValue)]) -> Result<Vec<PathBuf>, PluginError> {
    for (key, _) in options {
        if key != "kernel_dirs" && key != "bundled" {
            return Err(PluginError::invalid(format!(
                "{NAME}: unknown option `{key}` (expected kernel_dirs or bundled)"
            )));
        }
    }
    let mut dirs = Vec::new();
    if option_bool(options, "bundled")
        .map_err(|e| PluginError::invalid(format!("{NAME}: {}", e.message)))?
        .unwrap_or(true)
    {
        // The checkout the plugin was built from, else `executors/triton/kernels` under the
        // working directory (a copy of the repo at another path, as on a lent GPU machine).
        // Neither existing is not an error: the user's folders may be all there is.
        if let Some(d) = [
            PathBuf::from(BUNDLED_DIR),
            PathBuf::from("executors/triton/kernels"),
        ]
        .into_iter()
        .find(|d| d.is_dir())
        {
            dirs.push(d);
        }
    }
    match options.iter().find(|(k, _)| k == "kernel_dirs") {
        None => {}
        Some((_, OptionValue::Str(s))) => {
            dirs.extend(std::env::split_paths(s.as_str()).filter(|p| !p.as_os_str().is_empty()))
        }
        Some((_, other)) => {
            return Err(PluginError::invalid(format!(
                "{NAME}: option `kernel_dirs`: expected a string of folders separated by `:` (as PATH), got {other:?}"
            )))
        }
    }
    Ok(dirs)
}

impl Triton {
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        let dirs = kernel_dirs(options)?;
        let log = HostLogger {
            services,
            plugin: NAME,
        };
        let mut packages = Vec::new();
        let mut errors = Vec::new();
        for dir in &dirs {
            let (good, bad) = package::load_dir(dir);
            packages.extend(good);
            errors.extend(bad.iter().map(|e| e.to_string()));
        }
        // A broken package is not fatal: the others still run, and the error names the file
        // and field to fix.
        for e in &errors {
            log.log(LogLevel::Warn, &format!("skipping kernel package: {e}"));
        }
        log.log(
            LogLevel::Debug,
            &format!(
                "{} kernel packages from {}",
                packages.len(),
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        Ok(Triton {
            services,
            log,
            packages,
            errors,
        })
    }

    pub fn packages(&self) -> &[Package] {
        &self.packages
    }

    pub fn package_errors(&self) -> &[String] {
        &self.errors
    }

    /// The first package that covers `op` on a device of the right arch (packages are tried in
    /// folder order, so a user's folder listed in `kernel_dirs` comes after the bundled one;
    /// set `bundled = false` to prefer your own).
    fn find(&self, view: &TraceView, op: &thunder_abi::OpView) -> Result<&Package, String> {
        self.find_on(device::runtime()?, view, op)
    }

    /// [`Self::find`] for a given driver and devices (pure: tests pass a described H100).
    pub fn find_on(
        &self,
        runtime: &Runtime,
        view: &TraceView,
        op: &thunder_abi::OpView,
    ) -> Result<&Package, String> {
        let mut why = Vec::new();
        for p in self
            .packages
            .iter()
            .filter(|p| p.symbol == op.symbol.as_str())
        {
            match bind::covers(p, view, op) {
                Ok(ordinal) => match compatible(p, runtime, ordinal) {
                    Ok(()) => return Ok(p),
                    Err(e) => why.push(format!("{}: {e}", p.name())),
                },
                Err(e) => why.push(format!("{}: {e}", p.name())),
            }
        }
        if why.is_empty() {
            Err(format!("no package implements {}", op.symbol))
        } else {
            Err(why.join("; "))
        }
    }

    /// The regions [`Executor::claim`] returns on `runtime`: one op each, for every unclaimed
    /// op some package covers; the others are logged with the reason and left to the host,
    /// which decomposes them.
    pub fn claim_on(&self, runtime: &Runtime, view: &TraceView) -> Vec<Vec<u32>> {
        let mut claims = Vec::new();
        for (i, op) in view.ops.iter().enumerate() {
            if op.claimed || !self.packages.iter().any(|p| p.symbol == op.symbol.as_str()) {
                continue;
            }
            match self.find_on(runtime, view, op) {
                Ok(p) => {
                    self.log.log(
                        LogLevel::Debug,
                        &format!("claiming op {i} ({}) with {}", op.symbol, p.name()),
                    );
                    claims.push(vec![i as u32]);
                }
                Err(why) => self.log.log(
                    LogLevel::Debug,
                    &format!("not claiming op {i} ({}): {why}", op.symbol),
                ),
            }
        }
        claims
    }
}

/// Whether `pkg`'s cubin can run on device `ordinal`: a cubin runs only on the compute
/// capability it was built for (sm_90a code is not forward compatible), and only on a driver
/// of at least the CUDA major version that built it.
pub fn compatible(pkg: &Package, runtime: &device::Runtime, ordinal: u32) -> Result<(), String> {
    let dev = runtime.devices.get(ordinal as usize).ok_or_else(|| {
        format!(
            "cuda:{ordinal} does not exist ({} devices)",
            runtime.devices.len()
        )
    })?;
    check_arch(pkg, dev.arch, runtime.driver_version)
}

/// The pure part of [`compatible`]: `arch` as major*10+minor, `driver` as cuDriverGetVersion.
pub fn check_arch(pkg: &Package, arch: u32, driver: i32) -> Result<(), String> {
    if pkg.arch() != arch {
        return Err(format!(
            "built for sm_{} but the device is sm_{arch} (compute capability {}.{}): recompile with `scripts/triton/compile_kernels.py --arch {arch}`",
            pkg.arch(),
            arch / 10,
            arch % 10
        ));
    }
    if let Some((major, minor)) = pkg.min_cuda() {
        let (dmajor, dminor) = ((driver / 1000) as u32, ((driver % 1000) / 10) as u32);
        if dmajor < major {
            return Err(format!(
                "built with CUDA {major}.{minor} (PTX ISA {}.{}) but the driver supports CUDA {dmajor}.{dminor}: update the driver or recompile with an older ptxas",
                pkg.ptx_isa.map_or(0, |v| v.0),
                pkg.ptx_isa.map_or(0, |v| v.1),
            ));
        }
    }
    Ok(())
}

impl Executor for Triton {
    fn available(&self) -> Result<(), String> {
        let runtime = device::runtime()?;
        if self.packages.is_empty() {
            return Err(if self.errors.is_empty() {
                "no kernel packages found (see the kernel_dirs option)".into()
            } else {
                format!("no usable kernel packages: {}", self.errors.join("; "))
            });
        }
        let archs: Vec<u32> = runtime.devices.iter().map(|d| d.arch).collect();
        if !self.packages.iter().any(|p| archs.contains(&p.arch())) {
            let mut built: Vec<u32> = self.packages.iter().map(Package::arch).collect();
            built.sort();
            built.dedup();
            return Err(format!(
                "no kernel package was built for this machine's devices (sm_{}); packages are for sm_{}: recompile with scripts/triton/compile_kernels.py --arch N",
                archs.iter().map(u32::to_string).collect::<Vec<_>>().join(", sm_"),
                built.iter().map(u32::to_string).collect::<Vec<_>>().join(", sm_"),
            ));
        }
        Ok(())
    }

    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        match device::runtime() {
            Ok(runtime) => Ok(self.claim_on(runtime, view)),
            Err(_) => Ok(Vec::new()),
        }
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let runtime = device::runtime().map_err(PluginError::unsupported)?;
        let op = match region.ops.as_slice() {
            [i] => view.ops.get(*i as usize),
            _ => None,
        }
        .ok_or_else(|| {
            PluginError::invalid(format!(
                "{NAME}: regions are single ops, got {:?}",
                region.ops
            ))
        })?;
        let pkg = self
            .find(view, op)
            .map_err(|e| PluginError::unsupported(format!("{NAME}: {e}")))?;
        let plan = bind::plan(pkg, view, op, &region.inputs, &region.outputs)
            .map_err(|e| PluginError::invalid(format!("{NAME}: {}: {e}", pkg.name())))?;
        let props = runtime.devices[plan.device as usize];
        device::make_current(plan.device).map_err(PluginError::internal)?;
        let mut functions = Vec::with_capacity(pkg.launches.len());
        for (k, lp) in pkg.launches.iter().zip(&plan.launches) {
            functions.push(
                device::load_file_once(
                    plan.device,
                    &k.cubin,
                    &k.kernel,
                    lp.shared,
                    lp.block,
                    props,
                )
                .map_err(|e| PluginError::internal(format!("{NAME}: {}: {e}", pkg.name())))?,
            );
        }
        Ok(Box::new(Launch {
            name: pkg.name(),
            plan,
            functions,
            inputs: region.inputs.len(),
            outputs: region.outputs.len(),
            services: self.services,
        }))
    }
}

/// One compiled op: its loaded kernels and their launches, fixed but for the tensors' and
/// scratch buffers' addresses.
struct Launch {
    name: String,
    plan: Plan,
    functions: Vec<device::Function>,
    inputs: usize,
    outputs: usize,
    services: HostServices,
}

/// Scratch buffers for one run, returned to the host's pool when the launches are queued.
/// Stream-ordered: the pool hands a block out again only to work queued after these kernels.
struct ScratchBuffers {
    services: HostServices,
    device: DeviceDesc,
    live: Vec<(u64, usize, usize)>,
}

impl ScratchBuffers {
    fn alloc(&mut self, bytes: u64, align: u64) -> Result<u64, String> {
        if bytes == 0 {
            // Triton passes a null pointer when the kernel needs no scratch.
            return Ok(0);
        }
        let (b, a) = (bytes as usize, align.max(1) as usize);
        let p = (self.services.alloc)(self.device, b, a) as u64;
        if p == 0 {
            return Err(format!("out of device memory for {bytes} bytes of scratch"));
        }
        self.live.push((p, b, a));
        Ok(p)
    }
}

impl Drop for ScratchBuffers {
    fn drop(&mut self) {
        for (p, b, a) in std::mem::take(&mut self.live) {
            (self.services.free)(self.device, p as *mut std::ffi::c_void, b, a);
        }
    }
}

/// Scratch buffers shared by a package's launches are aligned for any vector access.
const SHARED_SCRATCH_ALIGN: u64 = 256;

impl CompiledRegion for Launch {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        let fail = |m: String| PluginError::invalid(format!("{NAME}: {}: {m}", self.name));
        if ctx.device.kind != DeviceKind::Cuda || ctx.context.is_null() {
            return Err(fail("run without a CUDA context".into()));
        }
        if ctx.device.index != self.plan.device {
            return Err(fail(format!(
                "compiled for cuda:{} but run on cuda:{}",
                self.plan.device, ctx.device.index
            )));
        }
        if inputs.len() != self.inputs || outputs.len() != self.outputs {
            return Err(fail(format!(
                "expected {} inputs and {} outputs, got {} and {}",
                self.inputs,
                self.outputs,
                inputs.len(),
                outputs.len()
            )));
        }
        // The kernels index their tensors as contiguous arrays, and were compiled assuming
        // the package's pointer alignment (vector loads fault on a misaligned address).
        let align = self.plan.pointer_align.max(1);
        for (what, i, d) in inputs
            .iter()
            .enumerate()
            .map(|(i, d)| ("input", i, d))
            .chain(outputs.iter().enumerate().map(|(i, d)| ("output", i, d)))
        {
            if d.device.kind != DeviceKind::Cuda || !d.is_contiguous() {
                return Err(fail(format!(
                    "{what} {i}: every tensor must be a contiguous CUDA tensor"
                )));
            }
            if d.numel() > 0 && !(d.base_ptr() as u64).is_multiple_of(align) {
                return Err(fail(format!(
                    "{what} {i}: address {:#x} is not a multiple of {align} bytes (the package's pointer_align)",
                    d.base_ptr() as u64
                )));
            }
        }
        if self.plan.launches.iter().all(|l| !l.has_work()) {
            return Ok(());
        }
        // SAFETY: the host passes the primary context of the region's device.
        unsafe { cudarc::driver::result::ctx::set_current(ctx.context as _) }
            .map_err(|e| PluginError::internal(format!("{NAME}: cuCtxSetCurrent: {e:?}")))?;
        let mut scratch = ScratchBuffers {
            services: self.services,
            device: ctx.device,
            live: Vec::new(),
        };
        let shared: Vec<u64> = self
            .plan
            .scratch
            .iter()
            .map(|s| scratch.alloc(s.bytes, SHARED_SCRATCH_ALIGN))
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        for (plan, function) in self.plan.launches.iter().zip(&self.functions) {
            if !plan.has_work() {
                continue;
            }
            // One address per parameter (0 for the scalars, which carry their own value).
            let mut addrs = Vec::with_capacity(plan.params.len());
            for p in &plan.params {
                addrs.push(match *p {
                    Param::Input(i) => inputs[i].base_ptr() as u64,
                    Param::Output(i) => outputs[i].base_ptr() as u64,
                    Param::Scratch(i) => shared[i],
                    Param::GlobalScratch { bytes, align }
                    | Param::ProfileScratch { bytes, align } => {
                        scratch.alloc(bytes, align).map_err(fail)?
                    }
                    _ => 0,
                });
            }
            let slots = bind::param_slots(&plan.params, &addrs);
            device::launch(*function, plan, ctx.stream, slots)
                .map_err(|e| PluginError::internal(format!("{NAME}: {}: {e}", self.name)))?;
        }
        drop(scratch);
        Ok(())
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: Triton::create,
}
