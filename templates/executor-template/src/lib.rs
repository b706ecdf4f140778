//! A template executor plugin: runs `prims.neg` and `prims.mul` on contiguous CPU f32 tensors.
//!
//! Copy this crate to start your own executor. It shows every part of the plugin surface the
//! host uses, in the order the host calls it:
//!
//! 1. [`plugin_info`]: who the plugin is (name, version, ABI, devices, symbols). `thunder
//!    plugins` prints it.
//! 2. [`TemplateExecutor::create`]: called once at load time with the `[executor.options]` of
//!    plugins.toml.
//! 3. [`Executor::claim`]: which ops of a trace this executor takes, as regions of op indices.
//!    Claim only what `compile` accepts: here both use the same [`decode`].
//! 4. [`Executor::compile`]: turns one claimed region into a [`RegionProgram`].
//! 5. [`CompiledRegion::run`]: runs it on tensors the host owns.
//!
//! The plugin depends on `thunder-abi` alone. Nothing here may panic across the boundary, but
//! if it does, `export_executor!` catches the panic and the host reports it as an error.

use std::collections::HashMap;
use thunder_abi::claim::contiguous_runs;
use thunder_abi::export::{CompiledRegion, Executor, HostLogger};
use thunder_abi::prims::Prim;
use thunder_abi::{
    ArgView, DTypeCode, DeviceKind, ExecContext, HostServices, LogLevel, OpView, OptionValue,
    PluginError, PluginInfo, RegionSpec, TensorDesc, TraceView, ValueMeta, ABI_VERSION,
};

/// The executor's name: the `name` of its `[[executor]]` entry in plugins.toml, shown in
/// execution traces as `template.region0(...)`. Rename it for your executor. Building with
/// `THUNDER_EXECUTOR_NAME=other cargo build --release` gives the same plugin another name, so
/// that several copies can be loaded side by side (two plugins of one name are refused).
pub const NAME: &str = match option_env!("THUNDER_EXECUTOR_NAME") {
    Some(name) => name,
    None => "template",
};

/// The prims this executor implements. The host lists them in `thunder plugins` and `thunder
/// examine` uses them to explain why an op is unsupported; claiming is what decides who runs
/// what.
const PRIMS: [Prim; 2] = [Prim::Neg, Prim::Mul];

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "template executor: prims.neg and prims.mul on contiguous CPU f32 tensors"
            .into(),
        devices: vec!["cpu".into()].into(),
        symbols: PRIMS.iter().map(|p| p.id().into()).collect(),
    }
}

pub struct TemplateExecutor {
    log: HostLogger,
}

impl TemplateExecutor {
    /// Called once when the host loads the plugin. Unknown options are refused so that a typo
    /// in plugins.toml does not pass silently; read yours with
    /// `thunder_abi::export::option_int(options, "key")` and friends.
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        if let Some((key, _)) = options.first() {
            return Err(PluginError::invalid(format!(
                "{NAME}: unknown option `{key}` (it takes none)"
            )));
        }
        Ok(TemplateExecutor {
            log: HostLogger {
                services,
                plugin: NAME,
            },
        })
    }
}

/// One operand of an op: a tensor value of the trace, or a scalar literal.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Operand {
    Value(u32),
    Scalar(f32),
}

/// One op of a region, decoded from the trace view.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Neg { x: u32, out: u32 },
    Mul { a: Operand, b: Operand, out: u32 },
}

impl Step {
    fn out(&self) -> u32 {
        match *self {
            Step::Neg { out, .. } | Step::Mul { out, .. } => out,
        }
    }
}

/// The value's metadata if it is a CPU f32 tensor.
fn cpu_f32(view: &TraceView, id: u32) -> Option<&ValueMeta> {
    view.values
        .get(id as usize)
        .filter(|v| v.dtype == DTypeCode::F32 && v.device.kind == DeviceKind::Cpu)
}

/// The op as a [`Step`] when this executor can run it, else `None`. Claim and compile both
/// use it, so a claimed op always compiles.
///
/// Prim arguments are canonical (see docs/writing-an-executor.md): the tensor operands of a
/// binary prim have the output's shape and dtype, and at most one operand is a scalar literal.
/// The checks are kept anyway: a plugin should never trust its input blindly.
fn decode(view: &TraceView, op: &OpView) -> Option<Step> {
    let prim = Prim::from_id(op.symbol.as_str())?;
    let &[out] = op.outputs.as_slice() else {
        return None;
    };
    let shape = &cpu_f32(view, out)?.shape;
    let operand = |arg: &ArgView| match arg {
        ArgView::Value(v) => cpu_f32(view, *v)
            .filter(|m| m.shape == *shape)
            .map(|_| Operand::Value(*v)),
        ArgView::Float(x) => Some(Operand::Scalar(*x as f32)),
        ArgView::Int(i) => Some(Operand::Scalar(*i as f32)),
        _ => None,
    };
    // `Prim` grows with new prims: keep a wildcard arm so that a new one does not break the
    // build. An id this executor does not know is simply not claimed.
    match (prim, op.args.as_slice()) {
        (Prim::Neg, [x]) => match operand(x)? {
            Operand::Value(x) => Some(Step::Neg { x, out }),
            Operand::Scalar(_) => None,
        },
        (Prim::Mul, [a, b]) => match (operand(a)?, operand(b)?) {
            (Operand::Scalar(_), Operand::Scalar(_)) => None,
            (a, b) => Some(Step::Mul { a, b, out }),
        },
        _ => None,
    }
}

impl Executor for TemplateExecutor {
    /// Maximal runs of consecutive ops this executor can run, one region each: a run of
    /// consecutive ops is always convex, so the host accepts it. Claim must be a pure, cheap
    /// function of the view: the host may ask several times per trace.
    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        let regions = contiguous_runs(view, |op| decode(view, op).is_some());
        self.log.log(
            LogLevel::Debug,
            &format!(
                "claiming {} ops in {} regions",
                regions.iter().map(Vec::len).sum::<usize>(),
                regions.len()
            ),
        );
        Ok(regions)
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        Ok(Box::new(RegionProgram::compile(view, region)?))
    }
}

/// A compiled region: its steps in trace order, and the element count of every value it
/// touches, so that `run` can check the tensors it is handed.
#[derive(Debug)]
pub struct RegionProgram {
    steps: Vec<Step>,
    /// Value ids, in the order of `run`'s `inputs` and `outputs`.
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    shapes: HashMap<u32, Vec<i64>>,
}

impl RegionProgram {
    fn compile(view: &TraceView, region: &RegionSpec) -> Result<Self, PluginError> {
        let mut steps = Vec::with_capacity(region.ops.len());
        let mut shapes = HashMap::new();
        let mut known: Vec<u32> = region.inputs.to_vec();
        for &i in region.ops.iter() {
            let op = view.ops.get(i as usize).ok_or_else(|| {
                PluginError::invalid(format!("{NAME}: op index {i} is out of range"))
            })?;
            let step = decode(view, op).ok_or_else(|| {
                PluginError::unsupported(format!("{NAME}: cannot run op {i} ({})", op.symbol))
            })?;
            let reads: Vec<u32> = match step {
                Step::Neg { x, .. } => vec![x],
                Step::Mul { a, b, .. } => [a, b]
                    .into_iter()
                    .filter_map(|o| match o {
                        Operand::Value(v) => Some(v),
                        Operand::Scalar(_) => None,
                    })
                    .collect(),
            };
            if let Some(v) = reads.iter().find(|v| !known.contains(v)) {
                return Err(PluginError::internal(format!(
                    "{NAME}: op {i} reads value {v}, which is neither a region input nor computed before it"
                )));
            }
            for v in reads.into_iter().chain([step.out()]) {
                shapes.insert(v, view.values[v as usize].shape.to_vec());
            }
            known.push(step.out());
            steps.push(step);
        }
        if let Some(v) = region.outputs.iter().find(|v| !known.contains(v)) {
            return Err(PluginError::internal(format!(
                "{NAME}: region output {v} is not computed by the region"
            )));
        }
        Ok(RegionProgram {
            steps,
            inputs: region.inputs.to_vec(),
            outputs: region.outputs.to_vec(),
            shapes,
        })
    }

    /// Checks that `desc` is a contiguous CPU f32 tensor of the shape the trace gave value `id`.
    fn check(&self, id: u32, desc: &TensorDesc<'_>) -> Result<usize, PluginError> {
        let shape = self.shapes.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        if desc.device.kind != DeviceKind::Cpu
            || desc.dtype != DTypeCode::F32
            || desc.shape.as_slice() != shape
        {
            return Err(PluginError::invalid(format!(
                "{NAME}: value {id}: expected a CPU f32 tensor of shape {shape:?}, got {:?} {:?} {:?}",
                desc.device.kind,
                desc.dtype,
                desc.shape.as_slice()
            )));
        }
        if !desc.is_contiguous() {
            return Err(PluginError::unsupported(format!(
                "{NAME}: value {id}: strided tensors are not supported"
            )));
        }
        let n = desc.numel();
        if n > 0 && !(desc.base_ptr() as *const f32).is_aligned() {
            return Err(PluginError::invalid(format!(
                "{NAME}: value {id}: data is not aligned for f32"
            )));
        }
        Ok(n)
    }
}

/// A value while a region runs: an input the host owns, or a result computed here.
enum Buffer<'a> {
    Input(&'a [f32]),
    Computed(Vec<f32>),
}

impl Buffer<'_> {
    fn as_slice(&self) -> &[f32] {
        match self {
            Buffer::Input(s) => s,
            Buffer::Computed(v) => v,
        }
    }
}

impl CompiledRegion for RegionProgram {
    /// Called from any thread, possibly from several at once, hence `&self`: keep run-time
    /// state on the stack. An error here is final for the call and names this plugin.
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        if ctx.device.kind != DeviceKind::Cpu {
            return Err(PluginError::invalid(format!(
                "{NAME}: runs on the CPU only"
            )));
        }
        if inputs.len() != self.inputs.len() || outputs.len() != self.outputs.len() {
            return Err(PluginError::invalid(format!(
                "{NAME}: expected {} inputs and {} outputs, got {} and {}",
                self.inputs.len(),
                self.outputs.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        let mut values: HashMap<u32, Buffer<'_>> = HashMap::new();
        for (&id, desc) in self.inputs.iter().zip(inputs) {
            let n = self.check(id, desc)?;
            let data: &[f32] = if n == 0 {
                &[] // `data` may be null for an empty tensor: never touch it
            } else {
                // SAFETY: checked above: a CPU f32 tensor of `n` contiguous, aligned elements,
                // which the host keeps alive and unchanged for the duration of this call.
                unsafe { std::slice::from_raw_parts(desc.base_ptr() as *const f32, n) }
            };
            values.insert(id, Buffer::Input(data));
        }
        for step in &self.steps {
            // `compile` checked that every value a step reads is an input or computed earlier.
            let get = |id: u32| values.get(&id).map_or(&[][..], Buffer::as_slice);
            let result: Vec<f32> = match *step {
                Step::Neg { x, .. } => get(x).iter().map(|v| -v).collect(),
                Step::Mul { a, b, .. } => match (a, b) {
                    (Operand::Value(a), Operand::Value(b)) => {
                        get(a).iter().zip(get(b)).map(|(x, y)| x * y).collect()
                    }
                    (Operand::Value(a), Operand::Scalar(s))
                    | (Operand::Scalar(s), Operand::Value(a)) => {
                        get(a).iter().map(|x| x * s).collect()
                    }
                    (Operand::Scalar(x), Operand::Scalar(y)) => vec![x * y],
                },
            };
            values.insert(step.out(), Buffer::Computed(result));
        }
        for (&id, desc) in self.outputs.iter().zip(outputs) {
            let n = self.check(id, desc)?;
            let src = values.get(&id).map_or(&[][..], Buffer::as_slice);
            if src.len() != n {
                return Err(PluginError::internal(format!(
                    "{NAME}: value {id}: computed {} elements for an output of {n}",
                    src.len()
                )));
            }
            if n == 0 {
                continue;
            }
            // SAFETY: checked above; outputs are fresh host buffers that alias no input, and
            // every element is written.
            let dst = unsafe { std::slice::from_raw_parts_mut(desc.base_ptr() as *mut f32, n) };
            dst.copy_from_slice(src);
        }
        Ok(())
    }
}

// Exports the entry symbol (`thunder_plugin_abi_version`) and the abi_stable root module.
thunder_abi::export_executor! {
    info: plugin_info,
    create: TemplateExecutor::create,
}

/// The executor can be tested without the host: build a `TraceView` by hand, then call
/// `claim`, `compile` and `run` directly (`cargo test`).
#[cfg(test)]
mod tests {
    use super::*;
    use thunder_abi::abi_stable::std_types::{RSlice, RStr};
    use thunder_abi::DeviceDesc;

    fn f32_value(shape: &[i64]) -> ValueMeta {
        ValueMeta {
            shape: shape.to_vec().into(),
            dtype: DTypeCode::F32,
            device: DeviceDesc::CPU,
            requires_grad: false,
        }
    }

    fn op(symbol: &str, args: Vec<ArgView>, out: u32) -> OpView {
        OpView {
            symbol: symbol.into(),
            args: args.into(),
            outputs: vec![out].into(),
            claimed: false,
            composite: false,
        }
    }

    #[test]
    fn claims_neg_and_mul_and_runs_them() {
        extern "C" fn alloc(_: DeviceDesc, _: usize, _: usize) -> *mut std::ffi::c_void {
            std::ptr::null_mut()
        }
        extern "C" fn free(_: DeviceDesc, _: *mut std::ffi::c_void, _: usize, _: usize) {}
        extern "C" fn log(_: LogLevel, _: RStr<'_>, _: RStr<'_>) {}
        let exec = TemplateExecutor::create(HostServices { alloc, free, log }, &[]).unwrap();
        // v0 = x, v1 = neg(x), v2 = mul(v1, 3.0), v3 = exp(v2) (not ours)
        let view = TraceView {
            values: vec![f32_value(&[3]); 4].into(),
            ops: vec![
                op("prims.neg", vec![ArgView::Value(0)], 1),
                op("prims.mul", vec![ArgView::Value(1), ArgView::Float(3.0)], 2),
                op("prims.exp", vec![ArgView::Value(2)], 3),
            ]
            .into(),
            inputs: vec![0].into(),
            outputs: vec![3].into(),
        };
        assert_eq!(exec.claim(&view).unwrap(), vec![vec![0, 1]]);
        let region = RegionSpec {
            ops: vec![0, 1].into(),
            inputs: vec![0].into(),
            outputs: vec![2].into(),
        };
        let program = exec.compile(&view, &region).unwrap();
        let mut x = [1.0f32, -2.0, 0.5];
        let mut y = [0.0f32; 3];
        let shape = [3i64];
        let strides = [1i64];
        let desc = |data: *mut f32| TensorDesc {
            data: data.cast(),
            byte_offset: 0,
            device: DeviceDesc::CPU,
            dtype: DTypeCode::F32,
            shape: RSlice::from_slice(&shape),
            strides: RSlice::from_slice(&strides),
        };
        program
            .run(
                &[desc(x.as_mut_ptr())],
                &[desc(y.as_mut_ptr())],
                &ExecContext::CPU,
            )
            .unwrap();
        assert_eq!(y, [-3.0, 6.0, -1.5]);
    }
}
