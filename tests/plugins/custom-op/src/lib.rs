//! A plugin that adds two ops to the language and runs them on contiguous CPU f32:
//! `mylib.rms_norm(x, w)` (with a decomposition, so any executor can run it and autograd can
//! differentiate it) and `mylib.opaque_square(x)` (no decomposition). Option `claim = false`
//! makes it declare the ops without claiming them.

use thunder_abi::abi_stable::std_types::RVec;
use thunder_abi::claim::contiguous_runs;
use thunder_abi::export::{option_bool, CompiledRegion, CustomOp, Executor};
use thunder_abi::{
    ArgView, DTypeCode, DeviceKind, ExecContext, HostServices, OptionValue, PluginError,
    PluginInfo, RegionSpec, TensorDesc, TraceView, ValueMeta, ABI_VERSION,
};

const EPS: f32 = 1e-6;

const RMS_NORM_DECOMPOSITION: &str = "def rms_norm(x, w):
  # x: \"cpu f32[2, 8]\"
  # w: \"cpu f32[8]\"
  t0 = ltorch.mul(x, x)
  t1 = ltorch.mean(t0, [-1], True)
  t2 = ltorch.add(t1, 1e-06)
  t3 = ltorch.rsqrt(t2)
  t4 = ltorch.mul(x, t3)
  t5 = ltorch.mul(t4, w)
  return (t5,)
";

fn tensor_meta<'a>(
    op: &str,
    args: &[ArgView],
    values: &'a [ValueMeta],
    i: usize,
) -> Result<&'a ValueMeta, PluginError> {
    match args.get(i) {
        Some(ArgView::Value(v)) => values
            .get(*v as usize)
            .ok_or_else(|| PluginError::invalid(format!("{op}: bad value index"))),
        other => Err(PluginError::invalid(format!(
            "{op}: argument {i} must be a tensor, got {other:?}"
        ))),
    }
}

fn rms_norm_meta(args: &[ArgView], values: &[ValueMeta]) -> Result<Vec<ValueMeta>, PluginError> {
    if args.len() != 2 {
        return Err(PluginError::invalid(format!(
            "expected (x, w), got {} arguments",
            args.len()
        )));
    }
    let x = tensor_meta("mylib.rms_norm", args, values, 0)?;
    let w = tensor_meta("mylib.rms_norm", args, values, 1)?;
    let last = x.shape.last().copied();
    if x.shape.is_empty()
        || w.shape.as_slice() != [last.unwrap_or(0)]
        || x.dtype != w.dtype
        || !x.dtype.is_float()
    {
        return Err(PluginError::invalid(format!(
            "expected x [..., C] and w [C] of one float dtype, got x {:?} {:?} and w {:?} {:?}",
            x.shape.as_slice(),
            x.dtype,
            w.shape.as_slice(),
            w.dtype
        )));
    }
    Ok(vec![ValueMeta {
        requires_grad: false,
        ..x.clone()
    }])
}

fn opaque_square_meta(
    args: &[ArgView],
    values: &[ValueMeta],
) -> Result<Vec<ValueMeta>, PluginError> {
    let x = tensor_meta("mylib.opaque_square", args, values, 0)?;
    Ok(vec![ValueMeta {
        requires_grad: false,
        ..x.clone()
    }])
}

fn ops() -> Vec<CustomOp> {
    vec![
        CustomOp {
            id: "mylib.rms_norm".into(),
            description: "x / sqrt(mean(x^2, -1) + 1e-6) * w".into(),
            meta: rms_norm_meta,
            decomposition: Some(RMS_NORM_DECOMPOSITION.into()),
        },
        CustomOp {
            id: "mylib.opaque_square".into(),
            description: "x * x, with no decomposition".into(),
            meta: opaque_square_meta,
            decomposition: None,
        },
    ]
}

fn info() -> PluginInfo {
    PluginInfo {
        name: "custom-op".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "test plugin declaring mylib.rms_norm and mylib.opaque_square".into(),
        devices: RVec::from(vec!["cpu".into()]),
        symbols: RVec::from(vec!["mylib.rms_norm".into(), "mylib.opaque_square".into()]),
    }
}

struct CustomOpExecutor {
    claim: bool,
}

impl CustomOpExecutor {
    fn create(_host: HostServices, options: &[(String, OptionValue)]) -> Result<Self, PluginError> {
        Ok(CustomOpExecutor {
            claim: option_bool(options, "claim")?.unwrap_or(true),
        })
    }
}

fn cpu_f32(view: &TraceView, v: u32) -> bool {
    view.values
        .get(v as usize)
        .is_some_and(|m| m.dtype == DTypeCode::F32 && m.device.kind == DeviceKind::Cpu)
}

impl Executor for CustomOpExecutor {
    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        if !self.claim {
            return Ok(Vec::new());
        }
        // One region per op: each compiled region runs exactly one of our ops.
        let runs = contiguous_runs(view, |op| {
            matches!(op.symbol.as_str(), "mylib.rms_norm" | "mylib.opaque_square")
                && op
                    .input_values()
                    .chain(op.outputs.iter().copied())
                    .all(|v| cpu_f32(view, v))
        });
        Ok(runs.into_iter().flatten().map(|i| vec![i]).collect())
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let [op] = region.ops.as_slice() else {
            return Err(PluginError::unsupported("one op per region"));
        };
        let op = &view.ops[*op as usize];
        let kind = match op.symbol.as_str() {
            "mylib.rms_norm" => Kind::RmsNorm,
            "mylib.opaque_square" => Kind::Square,
            other => return Err(PluginError::unsupported(format!("cannot run {other}"))),
        };
        // Map the op's tensor arguments to positions in the region's inputs.
        let inputs: Vec<usize> = op
            .input_values()
            .map(|v| {
                region
                    .inputs
                    .iter()
                    .position(|&r| r == v)
                    .ok_or_else(|| PluginError::internal("input not in region"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Box::new(Compiled { kind, inputs }))
    }
}

enum Kind {
    RmsNorm,
    Square,
}

struct Compiled {
    kind: Kind,
    inputs: Vec<usize>,
}

fn f32s<'a>(t: &TensorDesc<'a>) -> Result<&'a [f32], PluginError> {
    if t.dtype != DTypeCode::F32 || !t.is_contiguous() {
        return Err(PluginError::invalid("expected contiguous f32"));
    }
    if t.numel() == 0 {
        return Ok(&[]);
    }
    // SAFETY: the host passes a live, contiguous f32 buffer of numel elements.
    Ok(unsafe { std::slice::from_raw_parts(t.base_ptr() as *const f32, t.numel()) })
}

impl CompiledRegion for Compiled {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        _ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        let out_desc = outputs
            .first()
            .ok_or_else(|| PluginError::invalid("no output"))?;
        let x = f32s(
            inputs
                .get(self.inputs[0])
                .ok_or_else(|| PluginError::invalid("missing x"))?,
        )?;
        let n = x.len();
        let mut out = vec![0f32; n];
        match self.kind {
            Kind::Square => out.iter_mut().zip(x).for_each(|(o, v)| *o = v * v),
            Kind::RmsNorm => {
                let w = f32s(
                    inputs
                        .get(self.inputs[1])
                        .ok_or_else(|| PluginError::invalid("missing w"))?,
                )?;
                let c = w.len().max(1);
                for (row_out, row) in out.chunks_mut(c).zip(x.chunks(c)) {
                    let mean_sq = row.iter().map(|v| v * v).sum::<f32>() / c as f32;
                    let scale = 1.0 / (mean_sq + EPS).sqrt();
                    for ((o, v), wi) in row_out.iter_mut().zip(row).zip(w) {
                        *o = v * scale * wi;
                    }
                }
            }
        }
        if out_desc.numel() != n {
            return Err(PluginError::invalid("output size differs from input"));
        }
        if n > 0 {
            // SAFETY: the output is a host-allocated contiguous f32 buffer of n elements.
            unsafe {
                std::ptr::copy_nonoverlapping(out.as_ptr(), out_desc.base_ptr() as *mut f32, n)
            };
        }
        Ok(())
    }
}

thunder_abi::export_executor! {
    info: info,
    create: CustomOpExecutor::create,
    custom_ops: ops,
}
