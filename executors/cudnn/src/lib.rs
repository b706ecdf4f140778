//! `cudnn`: `prims.convolution` on CUDA through cuDNN 9 (loaded at run time), with 1, 2 or 3
//! spatial dims, any stride, padding, dilation and groups, with or without bias, in f32 (FMA
//! math, no TF32), f16 and bf16 (f32 accumulation) and f64. Convolution's VJP is made of
//! forward convolutions of padded, flipped and transposed tensors, so this forward kernel runs
//! the data and weight gradients too.
//!
//! Each convolution is one region. At compile time its descriptors are built and the forward
//! algorithm is picked once for its shape (`cudnnGetConvolutionForwardAlgorithm_v7`, within the
//! workspace limit); at run time its workspace comes from the host's pool. Operands that are not
//! packed row-major are copied packed first (`cudnnTransformTensor`). An empty batch launches
//! nothing; a convolution whose windows are all empty (no input elements) writes its bias.
//!
//! Without a CUDA driver or without cuDNN it loads, reports itself unavailable and claims nothing.
//!
//! Options: `workspace_mb = 512` (the most workspace an algorithm may ask for).
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

pub mod dnn;
pub mod shape;

use thunder_abi::export::{option_int, CompiledRegion, Executor};
use thunder_abi::{
    DeviceKind, ExecContext, HostServices, OptionValue, PluginError, PluginInfo, RegionSpec,
    TensorDesc, TraceView, ABI_VERSION,
};

pub use shape::claims;

pub const NAME: &str = "cudnn";

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "cuDNN convolution (1-3 spatial dims, groups, bias) on CUDA".into(),
        devices: vec!["cuda".into()].into(),
        symbols: thunder_abi::prims::Prim::ALL
            .iter()
            .filter(|p| shape::claimable(**p))
            .map(|p| p.id().into())
            .collect::<Vec<_>>()
            .into(),
    }
}

pub struct Cudnn {
    services: HostServices,
    workspace_bytes: usize,
}

impl Cudnn {
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        for (key, _) in options {
            if key != "workspace_mb" {
                return Err(PluginError::invalid(format!(
                    "{NAME}: unknown option `{key}` (expected workspace_mb)"
                )));
            }
        }
        let mb = option_int(options, "workspace_mb")?.unwrap_or(512);
        if !(0..=65536).contains(&mb) {
            return Err(PluginError::invalid(format!(
                "{NAME}: option `workspace_mb`: expected 0..=65536, got {mb}"
            )));
        }
        Ok(Cudnn {
            services,
            workspace_bytes: mb as usize * (1 << 20),
        })
    }
}

impl Executor for Cudnn {
    fn available(&self) -> Result<(), String> {
        dnn::availability().map(|_| ())
    }

    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        if dnn::availability().is_err() {
            return Ok(Vec::new());
        }
        Ok(claims(view))
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        dnn::availability().map_err(|e| PluginError::unsupported(format!("{NAME}: {e}")))?;
        let [only] = region.ops.as_slice() else {
            return Err(PluginError::invalid(format!(
                "{NAME}: a region is one convolution, got {} ops",
                region.ops.len()
            )));
        };
        let op = view
            .ops
            .get(*only as usize)
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: op {only} is not in the view")))?;
        let conv = shape::conv_of(view, op)
            .map_err(|e| PluginError::unsupported(format!("{NAME}: {}: {e}", op.symbol)))?;
        let operands: Vec<u32> = op.input_values().collect();
        let prepared = dnn::prepare(conv, self.workspace_bytes).map_err(|e| {
            PluginError::internal(format!("{NAME}: {} {:?}: {e}", op.symbol, op.args))
        })?;
        Ok(Box::new(Convolution {
            prepared,
            operands,
            region_inputs: region.inputs.to_vec(),
            services: self.services,
        }))
    }
}

struct Convolution {
    prepared: dnn::Prepared,
    /// The op's tensor operands: input, weight (and bias), as trace values.
    operands: Vec<u32>,
    region_inputs: Vec<u32>,
    services: HostServices,
}

impl Convolution {
    fn operand<'a>(
        &self,
        inputs: &'a [TensorDesc<'a>],
        v: u32,
    ) -> Result<&'a TensorDesc<'a>, PluginError> {
        let i = self
            .region_inputs
            .iter()
            .position(|&x| x == v)
            .ok_or_else(|| PluginError::internal(format!("{NAME}: t{v} is not an input")))?;
        inputs.get(i).ok_or_else(|| {
            PluginError::invalid(format!(
                "{NAME}: {} inputs, t{v} is number {i}",
                inputs.len()
            ))
        })
    }
}

impl CompiledRegion for Convolution {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        let conv = &self.prepared.conv;
        let err = |e: String| PluginError::invalid(format!("{NAME}: prims.convolution: {e}"));
        if ctx.device.kind != DeviceKind::Cuda || ctx.device.index != conv.device {
            return Err(err(format!(
                "compiled for cuda:{}, run on {:?}",
                conv.device, ctx.device
            )));
        }
        let out = outputs
            .first()
            .ok_or_else(|| err("no output buffer".into()))?;
        if out.shape.as_slice() != conv.y_shape() || out.dtype != conv.dtype {
            return Err(err(format!(
                "output buffer {} {:?}, expected {} {:?}",
                out.dtype.short_name(),
                out.shape.as_slice(),
                conv.dtype.short_name(),
                conv.y_shape()
            )));
        }
        if !out.is_contiguous() {
            return Err(err("the output buffer is not contiguous".into()));
        }
        let mut ops = Vec::with_capacity(3);
        for (k, (&v, expected)) in self
            .operands
            .iter()
            .zip([conv.x_shape(), conv.w_shape(), vec![conv.c_out]])
            .enumerate()
        {
            let d = self.operand(inputs, v)?;
            if d.shape.as_slice() != expected || d.dtype != conv.dtype {
                return Err(err(format!(
                    "operand t{v} is {} {:?}, expected {} {expected:?}",
                    d.dtype.short_name(),
                    d.shape.as_slice(),
                    conv.dtype.short_name()
                )));
            }
            let strides = if k == 2 {
                conv.bias_strides(&d.strides)
            } else {
                conv.dnn_strides(&d.shape, &d.strides)
            }
            .map_err(|e| err(format!("operand t{v}: {e}")))?;
            ops.push(dnn::Operand {
                ptr: d.base_ptr() as u64,
                strides,
            });
        }
        let (x, w) = match ops.as_slice() {
            [x, w, ..] => (x, w),
            _ => return Err(err("expected an input and a weight".into())),
        };
        if conv.work() == shape::Work::Nothing {
            return Ok(());
        }
        // SAFETY: the host passes the primary context of the region's device.
        unsafe { cudarc::driver::result::ctx::set_current(ctx.context as _) }
            .map_err(|e| PluginError::internal(format!("{NAME}: cuCtxSetCurrent: {e:?}")))?;
        self.prepared
            .run(
                self.services,
                x,
                w,
                ops.get(2),
                out.base_ptr() as u64,
                ctx.stream,
            )
            .map_err(|e| {
                PluginError::internal(format!(
                    "{NAME}: prims.convolution {:?}: {e}",
                    self.prepared.geometry
                ))
            })
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: Cudnn::create,
}
