//! `cublas`: matmul, batched matmul and linear on CUDA through cuBLASLt, in f32 (TF32 only when
//! the `tf32` option is on), f16 and bf16, with the bias epilogue for `linear` and the GELU
//! epilogue for a `linear` followed by a tanh `gelu`. One handle and workspace per device.
//!
//! Without a CUDA driver or cuBLASLt it loads, reports itself unavailable and claims nothing.
//! cuDNN (conv2d, attention) is not done yet.
//!
//! Options: `tf32 = true` (default false), `workspace_mb = 32`.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

mod lt;
pub mod shape;

use thunder_abi::export::{option_bool, option_int, CompiledRegion, Executor};
use thunder_abi::{
    DeviceKind, ExecContext, HostServices, OptionValue, PluginError, PluginInfo, RegionSpec,
    TensorDesc, TraceView, ABI_VERSION,
};

pub const NAME: &str = "cublas";

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "cuBLASLt matmul, bmm and linear (bias/GELU epilogues) on CUDA".into(),
        devices: vec!["cuda".into()].into(),
        symbols: vec![
            "prims.matmul".into(),
            "ltorch.linear".into(),
            "ltorch.gelu".into(),
        ]
        .into(),
    }
}

pub struct Cublas {
    tf32: bool,
    workspace_bytes: usize,
}

impl Cublas {
    pub fn create(
        _services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        for (key, _) in options {
            if key != "tf32" && key != "workspace_mb" {
                return Err(PluginError::invalid(format!(
                    "{NAME}: unknown option `{key}` (expected tf32 or workspace_mb)"
                )));
            }
        }
        let mb = option_int(options, "workspace_mb")?.unwrap_or(32);
        if !(0..=4096).contains(&mb) {
            return Err(PluginError::invalid(format!(
                "{NAME}: option `workspace_mb`: expected 0..=4096, got {mb}"
            )));
        }
        Ok(Cublas {
            tf32: option_bool(options, "tf32")?.unwrap_or(false),
            workspace_bytes: mb as usize * (1 << 20),
        })
    }
}

/// The regions claimed in `view`: each product alone, or a `linear` with the tanh `gelu` that
/// directly follows it and is its only use.
pub fn claims(view: &TraceView) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < view.ops.len() {
        let op = &view.ops[i];
        if !op.claimed && shape::gemm_of(view, op).is_some() {
            let next = view.ops.get(i + 1);
            let fuse = &*op.symbol == "ltorch.linear"
                && next
                    .is_some_and(|g| !g.claimed && shape::is_tanh_gelu_of(view, g, op.outputs[0]));
            if fuse {
                out.push(vec![i as u32, i as u32 + 1]);
                i += 2;
                continue;
            }
            out.push(vec![i as u32]);
        }
        i += 1;
    }
    out
}

impl Executor for Cublas {
    fn available(&self) -> Result<(), String> {
        lt::availability().map(|_| ())
    }

    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        if lt::availability().is_err() {
            return Ok(Vec::new());
        }
        Ok(claims(view))
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        lt::availability().map_err(PluginError::unsupported)?;
        let first = *region
            .ops
            .first()
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: empty region")))?;
        let op = &view.ops[first as usize];
        let mut g = shape::gemm_of(view, op)
            .ok_or_else(|| PluginError::unsupported(format!("{NAME}: cannot run {}", op.symbol)))?;
        g.gelu = region.ops.len() == 2;
        let out = *region
            .outputs
            .first()
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: region without an output")))?;
        let ordinal = view.values[out as usize].device.index;
        let operands: Vec<u32> = op.input_values().collect();
        let prepared = lt::prepare(g, ordinal, self.tf32, self.workspace_bytes)
            .map_err(PluginError::internal)?;
        Ok(Box::new(Product {
            prepared,
            operands,
            region_inputs: region.inputs.to_vec(),
            ordinal,
        }))
    }
}

struct Product {
    prepared: lt::Prepared,
    /// The op's tensor operands: lhs, rhs (and bias), as trace values.
    operands: Vec<u32>,
    region_inputs: Vec<u32>,
    ordinal: u32,
}

impl CompiledRegion for Product {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        if ctx.device.kind != DeviceKind::Cuda || ctx.device.index != self.ordinal {
            return Err(PluginError::invalid(format!(
                "{NAME}: compiled for cuda:{}, run on {:?}",
                self.ordinal, ctx.device
            )));
        }
        let ptr_of = |v: u32| -> Result<u64, PluginError> {
            let i = self
                .region_inputs
                .iter()
                .position(|&x| x == v)
                .ok_or_else(|| PluginError::internal(format!("{NAME}: t{v} is not an input")))?;
            let d = &inputs[i];
            if !d.is_contiguous() {
                return Err(PluginError::invalid(format!(
                    "{NAME}: t{v} is not contiguous"
                )));
            }
            Ok(d.data as u64 + d.byte_offset)
        };
        let lhs = ptr_of(self.operands[0])?;
        let rhs = ptr_of(self.operands[1])?;
        let bias = match self.operands.get(2) {
            Some(&b) => Some(ptr_of(b)?),
            None => None,
        };
        let out = outputs
            .first()
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: no output buffer")))?;
        // SAFETY: the host passes the primary context of the region's device.
        unsafe { cudarc::driver::result::ctx::set_current(ctx.context as _) }
            .map_err(|e| PluginError::internal(format!("{NAME}: cuCtxSetCurrent: {e:?}")))?;
        self.prepared
            .run(
                lhs,
                rhs,
                bias,
                out.data as u64 + out.byte_offset,
                ctx.stream,
            )
            .map_err(PluginError::internal)
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: Cublas::create,
}
