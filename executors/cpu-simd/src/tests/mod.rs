//! Unit tests that need no host: traces are built by hand, compiled and run on host-like
//! services backed by the global allocator.

mod attn;
#[cfg(target_arch = "x86_64")]
mod attn_tile;
mod chain;
mod chain_aot;
mod chain_fuse;
mod conv;
mod conv_bench;
mod fold_rows;
mod ftz;
pub(crate) mod gelu_bench;
mod gemm_epi;
mod gemm_fold;
mod gemm_pair;
mod gemm_run;
mod gemm_stream;
mod gemm_sum;
mod gemm_t;
#[cfg(target_arch = "x86_64")]
mod gemv;
mod half_gemm;
mod layer_norm;
mod layout;
mod math;
mod movement;
mod on_worker;
mod pool;
#[cfg(target_arch = "x86_64")]
mod prepack;
mod region;
mod sdpa;
#[cfg(target_arch = "x86_64")]
mod vmath;

use crate::region::Region;
use std::ffi::c_void;
use thunder_abi::abi_stable::std_types::RStr;
use thunder_abi::export::CompiledRegion;
use thunder_abi::{
    ArgView, DTypeCode, DeviceDesc, ExecContext, HostServices, LogLevel, OpView, RegionSpec,
    TensorDesc, TraceView, ValueMeta,
};

extern "C" fn alloc(_: DeviceDesc, bytes: usize, align: usize) -> *mut c_void {
    match std::alloc::Layout::from_size_align(bytes.max(1), align) {
        // SAFETY: the layout has a non-zero size.
        Ok(l) => unsafe { std::alloc::alloc(l) as *mut c_void },
        Err(_) => std::ptr::null_mut(),
    }
}

extern "C" fn free(_: DeviceDesc, p: *mut c_void, bytes: usize, align: usize) {
    if let Ok(l) = std::alloc::Layout::from_size_align(bytes.max(1), align) {
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { std::alloc::dealloc(p as *mut u8, l) }
    }
}

extern "C" fn log(_: LogLevel, _: RStr<'_>, _: RStr<'_>) {}

pub(crate) fn services() -> HostServices {
    HostServices { alloc, free, log }
}

/// A trace under construction.
#[derive(Default)]
pub(crate) struct Tb {
    values: Vec<ValueMeta>,
    ops: Vec<OpView>,
}

impl Tb {
    pub(crate) fn value(&mut self, dtype: DTypeCode, shape: &[i64]) -> u32 {
        self.values.push(ValueMeta {
            shape: shape.to_vec().into(),
            dtype,
            device: DeviceDesc::CPU,
            requires_grad: false,
        });
        (self.values.len() - 1) as u32
    }

    pub(crate) fn op(
        &mut self,
        prim: &str,
        args: Vec<ArgView>,
        dtype: DTypeCode,
        shape: &[i64],
    ) -> u32 {
        let out = self.value(dtype, shape);
        self.ops.push(OpView {
            symbol: format!("prims.{prim}").into(),
            args: args.into(),
            outputs: vec![out].into(),
            claimed: false,
            composite: false,
        });
        out
    }

    pub(crate) fn view(&self, inputs: &[u32], outputs: &[u32]) -> TraceView {
        TraceView {
            values: self.values.clone().into(),
            ops: self.ops.clone().into(),
            inputs: inputs.to_vec().into(),
            outputs: outputs.to_vec().into(),
        }
    }

    /// All ops compiled as one region with these inputs and outputs.
    pub(crate) fn compile(&self, inputs: &[u32], outputs: &[u32]) -> Region {
        self.compile_static(inputs, outputs, &[])
    }

    /// As [`Tb::compile`], with the inputs at positions `statics` promised static.
    pub(crate) fn compile_static(
        &self,
        inputs: &[u32],
        outputs: &[u32],
        statics: &[u32],
    ) -> Region {
        let view = self.view(inputs, outputs);
        let spec = RegionSpec {
            ops: (0..self.ops.len() as u32).collect(),
            inputs: inputs.to_vec().into(),
            outputs: outputs.to_vec().into(),
        };
        Region::compile(&view, &spec, services(), statics).expect("compile")
    }

    /// Compiles all ops as one region with the inputs at positions `statics` promised static
    /// and runs it `runs` times on the same f32 inputs; returns each run's outputs.
    pub(crate) fn run_static(
        &self,
        inputs: &[(u32, Vec<f32>)],
        outputs: &[u32],
        statics: &[u32],
        runs: usize,
    ) -> Vec<Vec<Vec<f32>>> {
        let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
        let region = self.compile_static(&ids, outputs, statics);
        (0..runs)
            .map(|_| {
                self.run_region(&region, DTypeCode::F32, inputs, outputs)
                    .expect("run")
            })
            .collect()
    }

    /// Compiles all ops as one region and runs it on f32 inputs; returns the f32 outputs.
    pub(crate) fn run(&self, inputs: &[(u32, Vec<f32>)], outputs: &[u32]) -> Vec<Vec<f32>> {
        self.try_run(inputs, outputs).expect("run")
    }

    /// As [`Tb::run`], with the run's error.
    pub(crate) fn try_run(
        &self,
        inputs: &[(u32, Vec<f32>)],
        outputs: &[u32],
    ) -> Result<Vec<Vec<f32>>, thunder_abi::PluginError> {
        self.try_run_as(DTypeCode::F32, inputs, outputs)
    }

    /// As [`Tb::try_run`] for inputs and outputs of one element type `T` (`dtype`).
    pub(crate) fn try_run_as<T: crate::ops::Real>(
        &self,
        dtype: DTypeCode,
        inputs: &[(u32, Vec<T>)],
        outputs: &[u32],
    ) -> Result<Vec<Vec<T>>, thunder_abi::PluginError> {
        let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
        let region = self.compile(&ids, outputs);
        self.run_region(&region, dtype, inputs, outputs)
    }

    /// Runs a compiled region on inputs and outputs of one element type `T` (`dtype`).
    pub(crate) fn run_region<T: crate::ops::Real>(
        &self,
        region: &Region,
        dtype: DTypeCode,
        inputs: &[(u32, Vec<T>)],
        outputs: &[u32],
    ) -> Result<Vec<Vec<T>>, thunder_abi::PluginError> {
        let shapes: Vec<Vec<i64>> = outputs
            .iter()
            .map(|&o| self.values[o as usize].shape.to_vec())
            .collect();
        // NaN where nothing is written, so a result never stored shows.
        let mut outs: Vec<Vec<T>> = shapes
            .iter()
            .map(|s| vec![T::NAN; s.iter().product::<i64>() as usize])
            .collect();
        let in_shapes: Vec<Vec<i64>> = inputs
            .iter()
            .map(|(id, _)| self.values[*id as usize].shape.to_vec())
            .collect();
        fn desc(p: *mut c_void, dtype: DTypeCode, shape: &[i64]) -> TensorDesc<'_> {
            TensorDesc {
                data: p,
                byte_offset: 0,
                device: DeviceDesc::CPU,
                dtype,
                shape: shape.into(),
                strides: (&[][..]).into(),
            }
        }
        let in_descs: Vec<TensorDesc<'_>> = inputs
            .iter()
            .zip(&in_shapes)
            .map(|((_, v), s)| desc(v.as_ptr() as *mut c_void, dtype, s))
            .collect();
        let out_descs: Vec<TensorDesc<'_>> = outs
            .iter_mut()
            .zip(&shapes)
            .map(|(v, s)| desc(v.as_mut_ptr() as *mut c_void, dtype, s))
            .collect();
        region.run(&in_descs, &out_descs, &ExecContext::CPU)?;
        Ok(outs)
    }
}

/// CPU time each of this process's threads has used so far, in nanoseconds, by thread id
/// (`/proc/self/task/*/schedstat`); empty where that is not readable.
pub(crate) fn cpu_clock() -> std::collections::HashMap<String, u64> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Default::default();
    };
    dir.flatten()
        .filter_map(|t| {
            let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            let ns = s.split_whitespace().next()?.parse::<u64>().ok()?;
            Some((t.file_name().to_string_lossy().into_owned(), ns))
        })
        .collect()
}

/// Seconds of CPU time this process's threads used since `start` (a [`cpu_clock`] reading).
/// A thread that exited meanwhile is left out (its share is lost) rather than subtracted:
/// summing over whichever threads are alive at each reading went negative when one exited.
pub(crate) fn cpu_seconds_since(start: &std::collections::HashMap<String, u64>) -> f64 {
    let used: u64 = cpu_clock()
        .iter()
        .map(|(tid, &ns)| ns.saturating_sub(start.get(tid).copied().unwrap_or(0)))
        .sum();
    used as f64 * 1e-9
}

/// A contiguous f32 tensor on the CPU at `p`.
pub(crate) fn f32_desc(p: *const f32, shape: &[i64]) -> TensorDesc<'_> {
    TensorDesc {
        data: p as *mut c_void,
        byte_offset: 0,
        device: DeviceDesc::CPU,
        dtype: DTypeCode::F32,
        shape: shape.into(),
        strides: (&[][..]).into(),
    }
}

pub(crate) fn ints(v: &[i64]) -> ArgView {
    ArgView::Ints(v.to_vec().into())
}

/// Deterministic values in [-1, 1).
pub(crate) fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub(crate) fn assert_close(got: &[f32], want: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g as f64 - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}
