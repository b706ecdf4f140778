//! `--input NAME=FILE.npy` and generated inputs `NAME=randn:f32[8,16]`.

use anyhow::{anyhow, bail, Result};
use std::path::Path;
use thunder_core::runtime::npy::read_npy;
use thunder_core::text::parse_type;
use thunder_core::Array;

fn generated(spec: &str, name: &str) -> Result<Option<Array>> {
    let Some((kind, ty)) = spec.split_once(':') else {
        return Ok(None);
    };
    if !matches!(kind, "randn" | "zeros" | "ones") {
        return Ok(None);
    }
    let ty = parse_type(&format!("cpu {ty}"))
        .ok_or_else(|| anyhow!("input `{name}`: `{ty}` is not a type such as f32[8,16]"))?;
    let shape = ty.shape.clone();
    Ok(Some(match kind {
        "randn" => {
            // A seed from the name keeps runs reproducible and inputs distinct.
            let seed = name
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
            Array::random(&shape, ty.dtype, seed)?
        }
        "zeros" => Array::from_f64(&vec![0.0; ty.numel()], &shape, ty.dtype)?,
        _ => Array::from_f64(&vec![1.0; ty.numel()], &shape, ty.dtype)?,
    }))
}

/// Parses `NAME=SPEC` pairs into named arrays.
pub fn parse_inputs(specs: &[String]) -> Result<Vec<(String, Array)>> {
    let mut out: Vec<(String, Array)> = Vec::new();
    for spec in specs {
        let Some((name, value)) = spec.split_once('=') else {
            bail!("--input `{spec}`: expected NAME=FILE.npy or NAME=randn:f32[8,16]");
        };
        if out.iter().any(|(n, _)| n == name) {
            bail!("--input: `{name}` is given twice");
        }
        let array = match generated(value, name)? {
            Some(a) => a,
            None => read_npy(Path::new(value))?,
        };
        out.push((name.to_string(), array));
    }
    Ok(out)
}

/// Orders inputs as the program's parameters, checking names and types.
pub fn match_inputs(
    params: &[(String, thunder_core::ir::TensorType)],
    given: Vec<(String, Array)>,
) -> Result<Vec<Array>> {
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    for (n, _) in &given {
        if !names.contains(&n.as_str()) {
            bail!(
                "unknown input `{n}`; the program's inputs are: {}",
                names.join(", ")
            );
        }
    }
    let mut by_name: std::collections::HashMap<String, Array> = given.into_iter().collect();
    let mut out = Vec::new();
    for (name, ty) in params {
        let a = by_name.remove(name).ok_or_else(|| {
            anyhow!("missing input `{name}` (expected \"{ty}\"); pass --input {name}=FILE.npy")
        })?;
        if a.shape() != ty.shape.as_slice() || a.dtype() != ty.dtype {
            bail!(
                "input `{name}`: the program expects {}{}, got {}{}",
                ty.dtype.short_name(),
                thunder_core::ir::ShapeDisplay(&ty.shape),
                a.dtype().short_name(),
                thunder_core::ir::ShapeDisplay(a.shape())
            );
        }
        out.push(a.with_requires_grad(ty.requires_grad));
    }
    Ok(out)
}
