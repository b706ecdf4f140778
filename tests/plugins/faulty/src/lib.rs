//! Test fixture: an executor for `prims.neg`, `prims.exp` and `prims.add` on contiguous CPU f32
//! tensors that misbehaves on request. Its `[executor.options]` are
//!
//! - `fault = "<name>"` (default `"none"`): one of [`Fault`]'s names, e.g. `"panic_run"`;
//! - `run_log = "<path>"` (optional): every call of `run` appends a line to this file, so a
//!   test can count how often the host still runs this plugin's regions.
//!
//! With no fault it is a correct executor that wins claims when it has a higher priority than
//! the interpreter. Each fault breaks exactly one step, and the host must survive it.
#![deny(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Write;
use thunder_abi::export::{CompiledRegion, Executor, HostLogger};
use thunder_abi::{
    ArgView, DTypeCode, DeviceKind, ExecContext, HostServices, LogLevel, OpView, OptionValue,
    PluginError, PluginInfo, RegionSpec, TensorDesc, TraceView, ABI_VERSION,
};

const NAME: &str = "faulty";
const SYMBOLS: [&str; 3] = ["prims.neg", "prims.exp", "prims.add"];

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "test fixture: neg/exp/add on CPU f32 with a fault picked by options".into(),
        devices: vec!["cpu".into()].into(),
        symbols: SYMBOLS.iter().map(|s| (*s).into()).collect(),
    }
}

/// What goes wrong, picked by the `fault` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    PanicClaim,
    PanicCompile,
    PanicRun,
    ErrorCompile,
    ErrorRun,
    /// Claims an op index past the end of the trace.
    ClaimOutOfRange,
    /// Claims the first op of each run alone, then the whole run: the two regions overlap.
    ClaimOverlap,
    /// Claims every op it supports, ignoring the `claimed` flag.
    ClaimClaimed,
    /// Claims the first and the last op of each run of three or more, without the ops between.
    ClaimNonconvex,
}

impl Fault {
    const ALL: [(&'static str, Fault); 10] = [
        ("none", Fault::None),
        ("panic_claim", Fault::PanicClaim),
        ("panic_compile", Fault::PanicCompile),
        ("panic_run", Fault::PanicRun),
        ("error_compile", Fault::ErrorCompile),
        ("error_run", Fault::ErrorRun),
        ("claim_out_of_range", Fault::ClaimOutOfRange),
        ("claim_overlap", Fault::ClaimOverlap),
        ("claim_claimed", Fault::ClaimClaimed),
        ("claim_nonconvex", Fault::ClaimNonconvex),
    ];

    fn parse(name: &str) -> Result<Fault, PluginError> {
        Fault::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let names: Vec<&str> = Fault::ALL.iter().map(|(n, _)| *n).collect();
                PluginError::invalid(format!(
                    "{NAME}: unknown fault `{name}`; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

pub struct Faulty {
    fault: Fault,
    run_log: Option<String>,
    log: HostLogger,
}

impl Faulty {
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        let mut fault = Fault::None;
        let mut run_log = None;
        for (key, value) in options {
            match (key.as_str(), value) {
                ("fault", OptionValue::Str(s)) => fault = Fault::parse(s)?,
                ("run_log", OptionValue::Str(s)) => run_log = Some(s.to_string()),
                ("fault" | "run_log", other) => {
                    return Err(PluginError::invalid(format!(
                        "{NAME}: option `{key}` must be a string, got {other:?}"
                    )))
                }
                _ => {
                    return Err(PluginError::invalid(format!(
                        "{NAME}: unknown option `{key}` (it takes `fault` and `run_log`)"
                    )))
                }
            }
        }
        Ok(Faulty {
            fault,
            run_log,
            log: HostLogger {
                services,
                plugin: NAME,
            },
        })
    }
}

fn cpu_f32(view: &TraceView, id: u32) -> Option<&[i64]> {
    view.values
        .get(id as usize)
        .filter(|v| v.dtype == DTypeCode::F32 && v.device.kind == DeviceKind::Cpu)
        .map(|v| v.shape.as_slice())
}

/// Exactly what `compile` accepts: a supported prim whose operands are CPU f32 tensors of its
/// output's shape (no scalar literals).
fn supported(view: &TraceView, op: &OpView) -> bool {
    let arity = match op.symbol.as_str() {
        "prims.neg" | "prims.exp" => 1,
        "prims.add" => 2,
        _ => return false,
    };
    let [out] = op.outputs.as_slice() else {
        return false;
    };
    let Some(shape) = cpu_f32(view, *out) else {
        return false;
    };
    op.args.len() == arity
        && op
            .args
            .iter()
            .all(|a| matches!(a, ArgView::Value(v) if cpu_f32(view, *v) == Some(shape)))
}

/// Maximal runs of supported ops, in trace order; `respect_claimed` skips claimed ops.
fn runs(view: &TraceView, respect_claimed: bool) -> Vec<Vec<u32>> {
    let mut runs = Vec::new();
    let mut current = Vec::new();
    for (i, op) in view.ops.iter().enumerate() {
        if (!respect_claimed || !op.claimed) && supported(view, op) {
            current.push(i as u32);
        } else if !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

impl Executor for Faulty {
    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        let good = || runs(view, true);
        let claims = match self.fault {
            Fault::PanicClaim => panic!("{NAME}: deliberate panic in claim"),
            Fault::ClaimOutOfRange => vec![vec![view.ops.len() as u32 + 3]],
            Fault::ClaimOverlap => good()
                .into_iter()
                .filter(|r| r.len() >= 2)
                .flat_map(|r| [vec![r[0]], r])
                .collect(),
            Fault::ClaimClaimed => runs(view, false),
            Fault::ClaimNonconvex => good()
                .into_iter()
                .filter(|r| r.len() >= 3)
                .map(|r| vec![r[0], r[r.len() - 1]])
                .collect(),
            Fault::None
            | Fault::PanicCompile
            | Fault::PanicRun
            | Fault::ErrorCompile
            | Fault::ErrorRun => good(),
        };
        self.log.log(
            LogLevel::Debug,
            &format!("fault {:?}: claiming {claims:?}", self.fault),
        );
        Ok(claims)
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        match self.fault {
            Fault::PanicCompile => panic!("{NAME}: deliberate panic in compile"),
            Fault::ErrorCompile => {
                return Err(PluginError::internal(format!(
                    "{NAME}: deliberate error in compile"
                )))
            }
            _ => {}
        }
        let mut ops = Vec::with_capacity(region.ops.len());
        for &i in region.ops.iter() {
            let op = view
                .ops
                .get(i as usize)
                .filter(|op| supported(view, op))
                .ok_or_else(|| {
                    PluginError::unsupported(format!("{NAME}: cannot compile op {i}"))
                })?;
            let args: Vec<u32> = op.input_values().collect();
            ops.push(Op {
                symbol: op.symbol.to_string(),
                args,
                out: op.outputs[0],
            });
        }
        let numel = |id: u32| -> Result<usize, PluginError> {
            let shape = cpu_f32(view, id).ok_or_else(|| {
                PluginError::unsupported(format!("{NAME}: value {id} is not a CPU f32 tensor"))
            })?;
            Ok(shape.iter().map(|&d| d.max(0) as usize).product())
        };
        let inputs = region
            .inputs
            .iter()
            .map(|&id| Ok((id, numel(id)?)))
            .collect::<Result<_, PluginError>>()?;
        let outputs = region
            .outputs
            .iter()
            .map(|&id| Ok((id, numel(id)?)))
            .collect::<Result<_, PluginError>>()?;
        Ok(Box::new(Region {
            fault: self.fault,
            run_log: self.run_log.clone(),
            ops,
            inputs,
            outputs,
        }))
    }
}

struct Op {
    symbol: String,
    args: Vec<u32>,
    out: u32,
}

struct Region {
    fault: Fault,
    run_log: Option<String>,
    ops: Vec<Op>,
    /// Value id and element count of each input, in `run`'s order.
    inputs: Vec<(u32, usize)>,
    outputs: Vec<(u32, usize)>,
}

fn check(desc: &TensorDesc<'_>, numel: usize, what: &str) -> Result<(), PluginError> {
    if desc.dtype != DTypeCode::F32
        || desc.device.kind != DeviceKind::Cpu
        || desc.numel() != numel
        || !desc.is_contiguous()
    {
        return Err(PluginError::invalid(format!(
            "{NAME}: {what} is not a contiguous CPU f32 tensor of {numel} elements"
        )));
    }
    Ok(())
}

impl Region {
    fn append_run_log(&self) {
        if let Some(path) = &self.run_log {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(
                    f,
                    "run ops {:?}",
                    self.ops.iter().map(|o| &o.symbol).collect::<Vec<_>>()
                );
            }
        }
    }

    /// Fills every output with NaN, so a host that let a failed run's outputs through would
    /// be caught by the tests comparing results.
    fn scribble(&self, outputs: &[TensorDesc<'_>]) {
        for (desc, &(_, n)) in outputs.iter().zip(&self.outputs) {
            if check(desc, n, "output").is_ok() && n > 0 {
                // SAFETY: checked above: `n` contiguous f32 elements owned by the host.
                let out = unsafe { std::slice::from_raw_parts_mut(desc.base_ptr() as *mut f32, n) };
                out.fill(f32::NAN);
            }
        }
    }
}

impl CompiledRegion for Region {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        self.append_run_log();
        match self.fault {
            Fault::PanicRun => {
                self.scribble(outputs);
                panic!("{NAME}: deliberate panic in run");
            }
            Fault::ErrorRun => {
                self.scribble(outputs);
                return Err(PluginError::internal(format!(
                    "{NAME}: deliberate error in run"
                )));
            }
            _ => {}
        }
        if ctx.device.kind != DeviceKind::Cpu
            || inputs.len() != self.inputs.len()
            || outputs.len() != self.outputs.len()
        {
            return Err(PluginError::invalid(format!(
                "{NAME}: expected {} inputs and {} outputs on CPU",
                self.inputs.len(),
                self.outputs.len()
            )));
        }
        let mut env: HashMap<u32, Vec<f32>> = HashMap::new();
        for (desc, &(id, n)) in inputs.iter().zip(&self.inputs) {
            check(desc, n, "input")?;
            let data = if n == 0 {
                Vec::new()
            } else {
                // SAFETY: checked above; the host keeps the input alive for this call.
                unsafe { std::slice::from_raw_parts(desc.base_ptr() as *const f32, n) }.to_vec()
            };
            env.insert(id, data);
        }
        for op in &self.ops {
            let arg = |k: usize| {
                env.get(&op.args[k]).ok_or_else(|| {
                    PluginError::internal(format!("{NAME}: value {} not computed", op.args[k]))
                })
            };
            let out: Vec<f32> = match op.symbol.as_str() {
                "prims.neg" => arg(0)?.iter().map(|x| -x).collect(),
                "prims.exp" => arg(0)?.iter().map(|x| x.exp()).collect(),
                "prims.add" => arg(0)?.iter().zip(arg(1)?).map(|(a, b)| a + b).collect(),
                other => {
                    return Err(PluginError::internal(format!(
                        "{NAME}: unexpected op {other}"
                    )))
                }
            };
            env.insert(op.out, out);
        }
        for (desc, &(id, n)) in outputs.iter().zip(&self.outputs) {
            check(desc, n, "output")?;
            let src = env.get(&id).ok_or_else(|| {
                PluginError::internal(format!("{NAME}: output value {id} not computed"))
            })?;
            if n > 0 {
                // SAFETY: checked above; a fresh host buffer that aliases no input.
                let dst = unsafe { std::slice::from_raw_parts_mut(desc.base_ptr() as *mut f32, n) };
                dst.copy_from_slice(src);
            }
        }
        Ok(())
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: Faulty::create,
}
