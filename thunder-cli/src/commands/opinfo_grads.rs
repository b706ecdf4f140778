//! The gradient samples of `thunder opinfo-check`: every case of the gradient fixtures
//! (`tests/fixtures/grads`, made with PyTorch by `scripts/gen_grad_fixtures.py`; the CPU
//! executors are checked against PyTorch's gradients on them by `tests/grads_vs_pytorch.rs`)
//! differentiated on a device by the configured executors and compared with the same gradients
//! computed by the interpreter on the CPU, with the case's tolerances. The loss is
//! `sum(out * cot)`, the cotangent a stored input without grad, as in that test.

use super::compare::compare_within;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;
use thunder_core::autograd::value_and_grad;
use thunder_core::ir::{TensorType, Trace};
use thunder_core::{Array, DType, Device, Error, PluginHost, Tensor};
use thunder_torch::prelude::*;

/// One gradient case, loaded.
pub struct GradCase {
    /// `op/case`.
    pub key: String,
    pub program: Trace,
    pub inputs: Vec<Array>,
    pub requires_grad: Vec<bool>,
    pub cot: Array,
    pub rtol: f64,
    pub atol: f64,
}

fn array(st: &safetensors::SafeTensors, name: &str, file: &Path) -> Result<Array> {
    use safetensors::Dtype;
    let view = st
        .tensor(name)
        .map_err(|e| anyhow!("{}: tensor `{name}`: {e}", file.display()))?;
    let dtype = match view.dtype() {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        other => bail!(
            "{}: tensor `{name}` has dtype {other:?}, expected one of b8, u8, i8, i16, i32, i64, f16, bf16, f32, f64",
            file.display()
        ),
    };
    let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
    Array::from_bytes(view.data(), TensorType::new(shape, dtype, Device::Cpu))
        .with_context(|| format!("{}: tensor `{name}`", file.display()))
}

/// Every case of `dir/manifest.json`.
pub fn load_cases(dir: &Path) -> Result<Vec<GradCase>> {
    let manifest_path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("{}: cannot read the manifest", manifest_path.display()))?;
    let manifest: Vec<Json> = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a JSON list", manifest_path.display()))?;
    let mut files: std::collections::HashMap<String, Vec<u8>> = Default::default();
    let mut cases = Vec::with_capacity(manifest.len());
    for (i, case) in manifest.iter().enumerate() {
        let field = |k: &str| {
            case[k].as_str().map(str::to_string).ok_or_else(|| {
                anyhow!(
                    "{} case {i}: field `{k}` is missing or not a string",
                    manifest_path.display()
                )
            })
        };
        let names = |k: &str| -> Result<Vec<Json>> {
            case[k].as_array().cloned().ok_or_else(|| {
                anyhow!(
                    "{} case {i}: field `{k}` is missing or not a list",
                    manifest_path.display()
                )
            })
        };
        let key = format!("{}/{}", field("op")?, field("case")?);
        let file_name = field("file")?;
        let path = dir.join(&file_name);
        if !files.contains_key(&file_name) {
            let bytes =
                std::fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
            files.insert(file_name.clone(), bytes);
        }
        let bytes = files
            .get(&file_name)
            .ok_or_else(|| anyhow!("{}: not loaded", path.display()))?;
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| anyhow!("{}: not a safetensors file: {e}", path.display()))?;
        let inputs = names("inputs")?
            .iter()
            .map(|n| {
                let n = n
                    .as_str()
                    .ok_or_else(|| anyhow!("{key}: an input name is not a string"))?;
                array(&st, n, &path)
            })
            .collect::<Result<Vec<_>>>()?;
        let requires_grad = names("requires_grad")?
            .iter()
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| anyhow!("{key}: requires_grad holds a non-bool"))
            })
            .collect::<Result<Vec<_>>>()?;
        if requires_grad.len() != inputs.len() {
            bail!(
                "{key}: {} requires_grad flags for {} inputs",
                requires_grad.len(),
                inputs.len()
            );
        }
        let program = thunder_torch::parse_trace(&field("program")?)
            .map_err(|e| anyhow!("{key}: the program does not parse: {e}"))?;
        cases.push(GradCase {
            cot: array(&st, &field("cot")?, &path)?,
            rtol: case["rtol"].as_f64().unwrap_or(0.0),
            atol: case["atol"].as_f64().unwrap_or(0.0),
            key,
            program,
            inputs,
            requires_grad,
        });
    }
    Ok(cases)
}

/// The gradients of `sum(program(inputs)[0] * cot)` on `device` (inputs and program moved
/// there), and the executors of the forward and backward programs.
fn grads_on(
    host: &Arc<PluginHost>,
    case: &GradCase,
    device: Device,
) -> thunder_core::Result<(Vec<Array>, Vec<String>)> {
    let program = Arc::new(if device == Device::Cpu {
        case.program.clone()
    } else {
        case.program.on_device(device)
    });
    let n = case.inputs.len();
    let vg = value_and_grad(Some(host.clone()), move |xs: &[Tensor]| {
        let outs = thunder_core::trace_ctx::replay(&program, &xs[..n])?;
        let out = outs
            .first()
            .ok_or_else(|| Error::Usage("the program returns nothing".into()))?;
        Ok::<_, Error>(vec![(out * &xs[n]).sum(None, false)])
    });
    let mut args = case
        .inputs
        .iter()
        .zip(&case.requires_grad)
        .map(|(a, &r)| Ok(a.to(device)?.with_requires_grad(r)))
        .collect::<thunder_core::Result<Vec<_>>>()?;
    args.push(case.cot.to(device)?);
    let (_, grads) = vg.call(&args)?;
    let mut executors = Vec::new();
    if let Some(t) = vg.last_traces() {
        for e in t
            .forward
            .execution
            .executors_used()
            .into_iter()
            .chain(t.backward.execution.executors_used())
        {
            if !executors.contains(&e) {
                executors.push(e);
            }
        }
    }
    Ok((grads, executors))
}

/// What became of one gradient case: (tag, detail, executors), or `None` when the interpreter
/// refuses it on the CPU.
pub fn check_case(
    host: &Arc<PluginHost>,
    reference: &Arc<PluginHost>,
    device: Device,
    case: &GradCase,
) -> Option<(&'static str, String, Vec<String>)> {
    let (want, _) = grads_on(reference, case, Device::Cpu).ok()?;
    let (got, executors) = match grads_on(host, case, device) {
        Err(Error::Unclaimed { ops }) => return Some(("unclaimed", ops, Vec::new())),
        Err(e) => return Some(("failed", e.to_string(), Vec::new())),
        Ok(r) => r,
    };
    if got.len() != want.len() {
        let m = format!(
            "{} gradients, the interpreter gives {}",
            got.len(),
            want.len()
        );
        return Some(("differ", m, executors));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let d = match g
            .to(Device::Cpu)
            .map_err(anyhow::Error::from)
            .and_then(|g| compare_within(&g, w, case.rtol, case.atol))
        {
            Ok(d) => d,
            Err(e) => return Some(("failed", e.to_string(), executors)),
        };
        if d.mismatched > 0 {
            let m = format!(
                "gradient {k}: {} of {} elements off (max abs {:.3e}, max rel {:.3e}) by {}",
                d.mismatched,
                w.numel(),
                d.max_abs,
                d.max_rel,
                executors.join("+")
            );
            return Some(("differ", m, executors));
        }
    }
    Some(("agree", String::new(), executors))
}
