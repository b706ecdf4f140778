//! Loading a `.onnx` file: decode the protobuf, read the opsets, the graph's inputs (with
//! symbolic dimensions), outputs and initializers.

use crate::error::{OnnxError, Result};
use crate::proto::{GraphProto, ModelProto, ValueInfoProto};
use crate::tensor::{dtype_of, onnx_type_name, to_array};
use prost::Message;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thunder_core::{Array, DType};

/// One dimension of a graph input: a size or a symbolic name (`batch`, `sequence`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(i64),
    Symbolic(String),
}

/// A graph input the caller supplies: its name, dtype and (possibly symbolic) shape.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    pub name: String,
    pub dtype: DType,
    /// `None` when the model does not declare a shape (any rank is accepted).
    pub dims: Option<Vec<Dim>>,
}

impl std::fmt::Display for InputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.dtype.short_name())?;
        match &self.dims {
            None => write!(f, "[any shape]"),
            Some(dims) => {
                let d: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => n.to_string(),
                        Dim::Symbolic(s) => s.clone(),
                    })
                    .collect();
                write!(f, "[{}]", d.join(", "))
            }
        }
    }
}

/// A decoded model: the graph, its opsets, inputs and initializers (read once, shared by
/// every specialisation).
#[derive(Debug)]
pub struct OnnxModel {
    pub path: PathBuf,
    pub graph: GraphProto,
    /// Opset version per domain (`""` is `ai.onnx`).
    pub opsets: HashMap<String, i64>,
    pub inputs: Vec<InputSpec>,
    pub output_names: Vec<String>,
    pub initializers: HashMap<String, Arc<Array>>,
    /// Initializer names in the file's order (the graph keeps none of their data).
    pub initializer_names: Vec<String>,
    pub producer: String,
}

fn input_spec(v: &ValueInfoProto) -> Result<InputSpec> {
    let what = || format!("graph input `{}`", v.name);
    let tensor = v
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .ok_or_else(|| OnnxError::model(what(), "is not a tensor"))?;
    let dtype = dtype_of(tensor.elem_type).ok_or_else(|| {
        OnnxError::model(
            what(),
            format!(
                "{} inputs are not supported",
                onnx_type_name(tensor.elem_type)
            ),
        )
    })?;
    let dims = tensor.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .enumerate()
            .map(|(i, d)| match (&d.dim_value, &d.dim_param) {
                (Some(n), _) if *n >= 0 => Dim::Fixed(*n),
                (_, Some(p)) if !p.is_empty() => Dim::Symbolic(p.clone()),
                _ => Dim::Symbolic(format!("dim{i}")),
            })
            .collect()
    });
    Ok(InputSpec {
        name: v.name.clone(),
        dtype,
        dims,
    })
}

impl OnnxModel {
    /// Reads and decodes `path`; external tensor data is read relative to its folder.
    pub fn load(path: &Path) -> Result<OnnxModel> {
        let bytes = std::fs::read(path).map_err(|e| OnnxError::File {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        OnnxModel::from_buffer(prost::bytes::Bytes::from(bytes), path)
    }

    /// Decodes a model held in memory; `path` names it in errors and locates external data.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<OnnxModel> {
        OnnxModel::from_buffer(prost::bytes::Bytes::copy_from_slice(bytes), path)
    }

    /// Decodes a model from a shared buffer: tensor data is read from it without a copy per
    /// tensor, then copied once into each weight's array.
    pub fn from_buffer(bytes: prost::bytes::Bytes, path: &Path) -> Result<OnnxModel> {
        let file_err = |message: String| OnnxError::File {
            path: path.to_path_buf(),
            message,
        };
        let model = ModelProto::decode(bytes)
            .map_err(|e| file_err(format!("not a valid ONNX model (protobuf: {e})")))?;
        let mut graph = model
            .graph
            .ok_or_else(|| file_err("not an ONNX model: it has no graph".into()))?;
        let mut opsets = HashMap::new();
        for o in &model.opset_import {
            let domain = if o.domain == "ai.onnx" { "" } else { &o.domain };
            opsets.insert(domain.to_string(), o.version);
        }
        if model.opset_import.is_empty() {
            return Err(file_err("not an ONNX model: it imports no opset".into()));
        }
        let dir = path.parent();
        let mut initializers = HashMap::new();
        let mut initializer_names = Vec::new();
        for t in std::mem::take(&mut graph.initializer) {
            let what = format!("{}: initializer `{}`", path.display(), t.name);
            let array = Arc::new(to_array(&t, dir, &what)?);
            if initializers.insert(t.name.clone(), array).is_none() {
                initializer_names.push(t.name);
            }
        }
        // Inputs that have an initializer are defaults the caller may not override here.
        let inputs = graph
            .input
            .iter()
            .filter(|v| !initializers.contains_key(&v.name))
            .map(input_spec)
            .collect::<Result<Vec<_>>>()
            .map_err(|e| match e {
                OnnxError::Model { context, message } => OnnxError::Model {
                    context: format!("{}: {context}", path.display()),
                    message,
                },
                e => e,
            })?;
        let output_names = graph.output.iter().map(|o| o.name.clone()).collect();
        Ok(OnnxModel {
            path: path.to_path_buf(),
            opsets,
            inputs,
            output_names,
            initializers,
            initializer_names,
            producer: format!("{} {}", model.producer_name, model.producer_version),
            graph,
        })
    }

    /// The opset version in force for a node's domain (0 when the model imports none).
    pub fn opset(&self, domain: &str) -> i64 {
        let d = if domain == "ai.onnx" { "" } else { domain };
        self.opsets.get(d).copied().unwrap_or(0)
    }
}
