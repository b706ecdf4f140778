//! Writes every sample for `scripts/gen_opinfo_fixtures.py`: `samples.jsonl` (one JSON object
//! per sample: key, op, fingerprint, arguments with views, output count) and, per op,
//! `inputs/<op>.safetensors` with the input tensors. Python needs no trace parser: arguments
//! come structured, and views (transpose, expand) are spelled out.

use crate::{build, sample_key, table, SArg, View};
use serde_json::{json, Value as Json};
use std::path::Path;
use thunder_core::ir::Arg;
use thunder_core::{Array, DType};

/// The safetensors dtype of `d`.
pub fn st_dtype(d: DType) -> safetensors::Dtype {
    use safetensors::Dtype;
    match d {
        DType::Bool => Dtype::BOOL,
        DType::U8 => Dtype::U8,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
    }
}

fn float_json(x: f64) -> Json {
    if x.is_finite() {
        json!({ "float": x })
    } else {
        let text = if x.is_nan() {
            "nan"
        } else if x > 0.0 {
            "inf"
        } else {
            "-inf"
        };
        json!({ "float": text })
    }
}

fn literal_json(a: &Arg) -> Json {
    match a {
        Arg::Int(i) => json!({ "int": i }),
        Arg::Float(x) => float_json(*x),
        Arg::Bool(b) => json!({ "bool": b }),
        Arg::Ints(v) => json!({ "ints": v }),
        Arg::DType(d) => json!({ "dtype": d.short_name() }),
        Arg::Device(_) => json!({ "device": "cpu" }),
        Arg::Str(s) => json!({ "str": s }),
        Arg::None | Arg::Value(_) => json!({ "none": true }),
    }
}

/// Writes the dump into `dir` and returns the number of samples written.
pub fn write(dir: &Path) -> Result<usize, String> {
    let inputs_dir = dir.join("inputs");
    std::fs::create_dir_all(&inputs_dir).map_err(|e| format!("{}: {e}", inputs_dir.display()))?;
    let mut lines = Vec::new();
    for info in table() {
        let mut tensors: Vec<(String, Array)> = Vec::new();
        for &dtype in &info.dtypes {
            for (i, sample) in info.samples(dtype).iter().enumerate() {
                let key = sample_key(&info.id, dtype, i);
                let built = match build(&info.id, &sample.args) {
                    Ok(b) => b,
                    // The harness reports samples that do not trace; nothing to evaluate here.
                    Err(e) => {
                        eprintln!("{key}: does not trace: {e}");
                        continue;
                    }
                };
                let mut n = 0;
                let args: Vec<Json> = sample
                    .args
                    .iter()
                    .map(|a| match a {
                        SArg::Lit(l) => literal_json(l),
                        SArg::Tensor(t, view) => {
                            let name = format!("{}/{}/{i}.in{n}", info.name(), dtype.short_name());
                            n += 1;
                            tensors.push((name.clone(), t.clone()));
                            let view = match view {
                                View::Plain => Json::Null,
                                View::Transposed => json!("transpose"),
                                View::Expanded(s) => json!({ "expand": s }),
                            };
                            json!({ "tensor": name, "view": view })
                        }
                    })
                    .collect();
                lines.push(json!({
                    "key": key,
                    "op": info.id,
                    "dtype": dtype.short_name(),
                    "fingerprint": built.fingerprint().map_err(|e| format!("{key}: {e}"))?,
                    "args": args,
                    "outputs": built.trace.outputs.len(),
                    "note": sample.note,
                }));
            }
        }
        let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
            .iter()
            .map(|(name, a)| {
                let shape: Vec<usize> = a.shape().iter().map(|&d| d as usize).collect();
                let bytes = a.bytes().map_err(|e| format!("{name}: {e}"))?;
                safetensors::tensor::TensorView::new(st_dtype(a.dtype()), shape, bytes)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| format!("{name}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let path = inputs_dir.join(format!("{}.safetensors", info.id));
        safetensors::serialize_to_file(views, &None, &path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = dir.join("samples.jsonl");
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(lines.len())
}
