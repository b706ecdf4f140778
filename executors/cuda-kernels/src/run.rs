//! A compiled op: its kernels, where each parameter comes from, and the run: strides read from
//! the descriptors, outputs the op has but the region does not return in scratch memory, and
//! the device error flag zeroed before the launches that have one and read after them, at
//! once on an op's first run and from the next run on later ones ([`crate::flag`]).

use crate::codegen::{self, Kernel, Param, ERR_DIV_ZERO, ERR_INDEX, ERR_NEG_POW};
use crate::flag::DeferredFlag;
use crate::spec::Spec;
use cudarc::driver::{result, sys};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use thunder_abi::{DeviceDesc, DeviceKind, ExecContext, HostServices, PluginError, TensorDesc};
use thunder_cuda_common::device::{self, Function};

pub struct Loaded {
    pub kernel: Kernel,
    pub function: Function,
}

pub struct CompiledOp {
    pub symbol: String,
    pub spec: Spec,
    pub kernels: Vec<Loaded>,
    /// Per spec operand: its position among the region's inputs.
    pub operand_slots: Vec<usize>,
    /// Per op output: its position among the region's outputs, or its byte size (scratch).
    pub output_slots: Vec<Result<usize, usize>>,
    pub n_inputs: usize,
    pub n_outputs: usize,
    pub ordinal: u32,
    pub sm_count: u32,
    pub services: HostServices,
    /// Every run waits for the error flag (`sync_checks`), not only the first.
    pub sync_checks: bool,
    /// Set once a run has waited for the flag and found it clear: later runs read it late.
    pub checked_once: AtomicBool,
    pub deferred: Mutex<Option<DeferredFlag>>,
}

/// How this run reads the error flag.
enum FlagRead {
    /// Scratch flag (device pointer), read after the launches, waiting for them.
    Now(u64),
    /// The op's deferred flag, copied back behind the kernels.
    Later(u64),
}

impl FlagRead {
    fn pointer(&self) -> u64 {
        match *self {
            FlagRead::Now(p) | FlagRead::Later(p) => p,
        }
    }
}

/// Host-pool memory freed when the run ends (stream-ordered, as cuda-fuser's scratch).
struct Scratch<'a> {
    services: &'a HostServices,
    device: DeviceDesc,
    live: Vec<(u64, usize)>,
}

impl Scratch<'_> {
    fn alloc(&mut self, bytes: usize) -> Result<u64, PluginError> {
        let p = (self.services.alloc)(self.device, bytes.max(16), 256) as u64;
        if p == 0 {
            return Err(PluginError::internal(format!(
                "cuda-kernels: out of device memory for {bytes} bytes of scratch"
            )));
        }
        self.live.push((p, bytes.max(16)));
        Ok(p)
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        for (p, bytes) in std::mem::take(&mut self.live) {
            (self.services.free)(self.device, p as *mut std::ffi::c_void, bytes, 256);
        }
    }
}

pub(crate) fn cu(
    what: &str,
    r: Result<(), cudarc::driver::DriverError>,
) -> Result<(), PluginError> {
    r.map_err(|e| PluginError::internal(format!("cuda-kernels: {what}: {e:?}")))
}

impl CompiledOp {
    /// The error a device flag stands for, naming the op; `late`: found by a later run.
    fn device_error(&self, code: i64, value: i64, late: bool) -> PluginError {
        let what = match (&self.spec, code) {
            (Spec::Take { a, dim, .. }, ERR_INDEX)
            | (Spec::ScatterAdd { a, dim, .. }, ERR_INDEX) => {
                format!(
                    "index {value} is out of bounds for dim {dim} with size {}",
                    a.shape[*dim]
                )
            }
            (Spec::CrossEntropy { logits, .. }, ERR_INDEX) => format!(
                "target {value} is out of bounds for {} classes",
                logits.shape[1]
            ),
            (_, ERR_DIV_ZERO) => "integer division by zero".to_string(),
            (_, ERR_NEG_POW) => format!("integer to the negative power {value}"),
            _ => format!("device error {code} (value {value})"),
        };
        let when = if late {
            " (in an earlier run of this op: after its first run, device errors are reported \
             by the op's next run, as CUDA reports device faults asynchronously; set \
             THUNDER_CUDA_SYNC_CHECKS=1 or the cuda-kernels option `sync_checks = true` to have \
             each run report its own)"
        } else {
            ""
        };
        PluginError::invalid(format!("cuda-kernels: {}: {what}{when}", self.symbol))
    }

    /// Arms the error flag for this run: a scratch flag read at once on the first run (or
    /// every run with `sync_checks`), else the op's deferred flag, after reporting what an
    /// earlier run left in it.
    fn arm_flag(
        &self,
        scratch: &mut Scratch<'_>,
        ctx: &ExecContext,
        deferred: &mut Option<DeferredFlag>,
    ) -> Result<FlagRead, PluginError> {
        let stream = ctx.stream as sys::CUstream;
        // Made before the runs that use it: a run captured into a CUDA graph must not allocate
        // what outlives it (the graph owns the capture's memory).
        if deferred.is_none() && !self.sync_checks {
            *deferred = Some(DeferredFlag::new(
                self.services,
                ctx.device,
                ctx.context,
                ctx.stream,
            )?);
        }
        if self.sync_checks || !self.checked_once.load(Ordering::Acquire) {
            let p = scratch.alloc(16)?;
            // SAFETY: 16 bytes of device memory just allocated, on the run's stream.
            cu("cuMemsetD8Async", unsafe {
                result::memset_d8_async(p, 0, 16, stream)
            })?;
            return Ok(FlagRead::Now(p));
        }
        let Some(flag) = deferred.as_ref() else {
            return Err(PluginError::internal("cuda-kernels: error flag missing"));
        };
        if let Some((code, value)) = flag.take_found() {
            return Err(self.device_error(code, value, true));
        }
        Ok(FlagRead::Later(flag.arm()?))
    }
}

impl thunder_abi::export::CompiledRegion for CompiledOp {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        let sym = &self.symbol;
        if ctx.device.kind != DeviceKind::Cuda || ctx.context.is_null() {
            return Err(PluginError::invalid(format!(
                "cuda-kernels: {sym}: run without a CUDA context"
            )));
        }
        if ctx.device.index != self.ordinal {
            return Err(PluginError::invalid(format!(
                "cuda-kernels: {sym}: compiled for cuda:{} run on cuda:{}",
                self.ordinal, ctx.device.index
            )));
        }
        if inputs.len() != self.n_inputs || outputs.len() != self.n_outputs {
            return Err(PluginError::invalid(format!(
                "cuda-kernels: {sym}: expected {} inputs and {} outputs, got {} and {}",
                self.n_inputs,
                self.n_outputs,
                inputs.len(),
                outputs.len()
            )));
        }
        let operands = self.spec.operands();
        for (k, (&slot, o)) in self.operand_slots.iter().zip(&operands).enumerate() {
            let d = &inputs[slot];
            if d.device.kind != DeviceKind::Cuda
                || d.shape.as_slice() != o.shape.as_slice()
                || d.strides.len() != o.rank()
            {
                return Err(PluginError::invalid(format!(
                    "cuda-kernels: {sym}: operand {k} is {:?} {:?}, expected a CUDA tensor {:?}",
                    d.device,
                    d.shape.as_slice(),
                    o.shape
                )));
            }
        }
        let mut scratch = Scratch {
            services: &self.services,
            device: ctx.device,
            live: Vec::new(),
        };
        let mut out_ptr = Vec::with_capacity(self.output_slots.len());
        for (j, slot) in self.output_slots.iter().enumerate() {
            out_ptr.push(match *slot {
                Ok(i) => {
                    let d = &outputs[i];
                    if d.device.kind != DeviceKind::Cuda || !d.is_contiguous() {
                        return Err(PluginError::invalid(format!(
                            "cuda-kernels: {sym}: output {j} must be a contiguous CUDA tensor"
                        )));
                    }
                    d.base_ptr() as u64
                }
                Err(bytes) => scratch.alloc(bytes)?,
            });
        }
        // SAFETY: the host passes the primary context of the region's device.
        cu("cuCtxSetCurrent", unsafe {
            result::ctx::set_current(ctx.context as _)
        })?;
        let stream = ctx.stream as sys::CUstream;
        // Held for the run, so that concurrent runs of one op take turns with its flag.
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        let flag = if self.kernels.iter().any(|k| k.kernel.has_flag()) {
            Some(self.arm_flag(&mut scratch, ctx, &mut deferred)?)
        } else {
            None
        };
        for k in &self.kernels {
            if !codegen::has_work(k.kernel.launch) {
                continue;
            }
            let mut args = Vec::new();
            for p in &k.kernel.params {
                match *p {
                    Param::Input(i) => {
                        let d = &inputs[self.operand_slots[i]];
                        args.push(d.base_ptr() as u64);
                        args.extend(d.strides.iter().map(|&s| s as u64));
                    }
                    Param::Output(j) => args.push(out_ptr[j]),
                    Param::Flag => args.push(flag.as_ref().map_or(0, FlagRead::pointer)),
                }
            }
            let (g, b) = codegen::grid(k.kernel.launch, self.sm_count);
            device::launch(k.function, g, b, ctx.stream, &args).map_err(|e| {
                PluginError::internal(format!("cuda-kernels: {sym}: {}: {e}", k.kernel.name))
            })?;
        }
        match flag {
            Some(FlagRead::Now(p)) => {
                let mut word = [0i64; 2];
                // SAFETY: reads the 16 flag bytes after the kernels on the same stream, then
                // waits.
                unsafe {
                    cu(
                        "cuMemcpyDtoHAsync",
                        result::memcpy_dtoh_async(&mut word[..], p, stream),
                    )?;
                    cu("cuStreamSynchronize", result::stream::synchronize(stream))?;
                }
                if word[0] != 0 {
                    return Err(self.device_error(word[0], word[1], false));
                }
                self.checked_once.store(true, Ordering::Release);
            }
            Some(FlagRead::Later(_)) => {
                if let Some(f) = deferred.as_ref() {
                    f.collect()?;
                }
            }
            None => {}
        }
        Ok(())
    }
}
