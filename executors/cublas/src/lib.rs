//! `cublas`: matmul, batched matmul and linear on CUDA through cuBLASLt, in f32 (TF32 only when
//! the `tf32` option is on), f16 and bf16, with the bias epilogue for `linear` and the GELU
//! epilogue for a `linear` followed by a tanh `gelu`. A product also claims the transposes and
//! reshapes that only re-read its operands or re-write its output, and runs them as operand
//! layouts (`layout.rs`): they are never materialized. One handle and workspace per device.
//!
//! Without a CUDA driver or cuBLASLt it loads, reports itself unavailable and claims nothing.
//! cuDNN (conv2d, attention) is not done yet.
//!
//! Options: `tf32 = true` (default false), `workspace_mb = 32`.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

pub mod layout;
mod lt;
mod lt_api;
pub mod shape;

pub use layout::Plan;
use std::collections::HashSet;
use thunder_abi::export::{option_bool, option_int, CompiledRegion, Executor};
use thunder_abi::prims::Prim;
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

/// The regions claimed in `view`: each product with the transposes and reshapes that only
/// re-read its operands or re-write its output (see `layout.rs`), or a `linear` with the tanh
/// `gelu` that directly follows it and is its only use.
pub fn claims(view: &TraceView) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut taken: HashSet<u32> = HashSet::new();
    // Built once (and kept for the compiles of the same view): a backward has a hundred
    // products over thousands of ops.
    let uses = layout::uses_of(view);
    for (i, op) in view.ops.iter().enumerate() {
        let i = i as u32;
        if op.claimed || taken.contains(&i) || shape::gemm_of(view, op).is_none() {
            continue;
        }
        let region = if &*op.symbol == "ltorch.linear" {
            let next = view.ops.get(i as usize + 1);
            let fuse = next.is_some_and(|g| {
                !g.claimed
                    && !taken.contains(&(i + 1))
                    && shape::is_tanh_gelu_of(view, g, op.outputs[0])
            });
            if fuse {
                vec![i, i + 1]
            } else {
                vec![i]
            }
        } else {
            let free = |j: u32| !view.ops[j as usize].claimed && !taken.contains(&j);
            match layout::plan_matmul(view, &uses, i, &free) {
                Some(plan) => plan.ops,
                None => continue,
            }
        };
        taken.extend(region.iter().copied());
        out.push(region);
    }
    out
}

/// How the region `ops` (a claim of [`claims`]) runs: the product, the buffers it reads and
/// the one it writes.
pub fn plan_region(view: &TraceView, region: &RegionSpec) -> Result<Plan, PluginError> {
    let ops = &region.ops;
    let first = *ops
        .first()
        .ok_or_else(|| PluginError::invalid(format!("{NAME}: empty region")))?;
    let op = view
        .ops
        .get(first as usize)
        .ok_or_else(|| PluginError::invalid(format!("{NAME}: op {first} out of range")))?;
    let out = match region.outputs.as_slice() {
        [o] => *o,
        other => {
            return Err(PluginError::invalid(format!(
                "{NAME}: a region writes one value, this one {}",
                other.len()
            )))
        }
    };
    if &*op.symbol == "ltorch.linear" {
        let mut gemm = shape::gemm_of(view, op)
            .ok_or_else(|| PluginError::unsupported(format!("{NAME}: cannot run {}", op.symbol)))?;
        gemm.gelu = ops.len() == 2;
        let mut tensors = op.input_values();
        let (lhs, rhs) = tensors
            .next()
            .zip(tensors.next())
            .ok_or_else(|| PluginError::invalid(format!("{NAME}: linear without a weight")))?;
        return Ok(Plan {
            gemm,
            lhs,
            rhs,
            bias: tensors.next(),
            out,
            ops: ops.to_vec(),
        });
    }
    let matmuls: Vec<u32> = ops
        .iter()
        .copied()
        .filter(|&i| {
            view.ops
                .get(i as usize)
                .is_some_and(|o| o.symbol.as_str() == Prim::Matmul.id())
        })
        .collect();
    let [i] = matmuls.as_slice() else {
        return Err(PluginError::unsupported(format!(
            "{NAME}: a region runs one product, this one has {}",
            matmuls.len()
        )));
    };
    let member = |j: u32| ops.contains(&j);
    let plan = layout::plan_matmul(view, &layout::uses_of(view), *i, &member).ok_or_else(|| {
        PluginError::unsupported(format!("{NAME}: cannot run op {i} ({})", Prim::Matmul.id()))
    })?;
    let mut sorted = ops.to_vec();
    sorted.sort_unstable();
    if plan.ops != sorted || plan.out != out {
        return Err(PluginError::internal(format!(
            "{NAME}: region {sorted:?} writing t{out} does not fold into one product (ops {:?}, writes t{})",
            plan.ops, plan.out
        )));
    }
    Ok(plan)
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
        let plan = plan_region(view, region)?;
        let ordinal = view.values[plan.out as usize].device.index;
        let operands: Vec<u32> = [plan.lhs, plan.rhs].into_iter().chain(plan.bias).collect();
        lt::warm_up(ordinal, self.workspace_bytes);
        let prepared = lt::prepare(plan.gemm, ordinal, self.tf32, self.workspace_bytes)
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
    /// The buffers read as lhs, rhs (and bias), as trace values.
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
