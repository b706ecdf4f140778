//! Loading a `.onnx` file: decode the protobuf, read the opsets, the graph's inputs (with
//! symbolic dimensions), outputs and initializers.

use crate::error::{OnnxError, Result};
use crate::proto::{GraphProto, ModelProto, ValueInfoProto};
use crate::tensor::{dtype_of, onnx_type_name, to_array_mapped};
use prost::Message;
use rayon::prelude::*;
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
#[derive(Debug, Clone)]
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
    /// Inference BatchNormalization nodes folded into the Conv before them at load (see
    /// `fold_bn.rs`); the graph holds the folded Conv nodes.
    pub batch_norms_folded: usize,
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
    ///
    /// The file is memory-mapped (private, copy-on-write), and weights stored as aligned
    /// `raw_data` are arrays over the mapping itself: nothing is copied, and pages are read as
    /// the program first touches them. Like every mmap-based loader (ONNX Runtime, safetensors,
    /// llama.cpp), this assumes the file is not truncated or rewritten while the model lives.
    pub fn load(path: &Path) -> Result<OnnxModel> {
        let err = |e: std::io::Error| OnnxError::File {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        };
        let file = std::fs::File::open(path).map_err(err)?;
        let len = file.metadata().map_err(err)?.len();
        if len == 0 {
            // mmap refuses empty files; decoding reports what is wrong with one.
            return OnnxModel::from_buffer(prost::bytes::Bytes::new(), path);
        }
        // SAFETY: a private copy-on-write mapping: writes through it (none are made) would not
        // reach the file. Another process truncating the file while it is mapped is the one
        // hazard, shared by every mmap-based loader and documented above.
        let map = unsafe { memmap2::MmapOptions::new().map_copy(&file) }.map_err(err)?;
        OnnxModel::from_buffer(prost::bytes::Bytes::from_owner(map), path)
    }

    /// Decodes a model held in memory; `path` names it in errors and locates external data.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<OnnxModel> {
        OnnxModel::from_buffer(prost::bytes::Bytes::copy_from_slice(bytes), path)
    }

    /// Decodes a model from a shared buffer: tensor data is read from it without a copy, and
    /// each weight whose bytes are aligned for its dtype is an array over the buffer (kept
    /// alive by the array); others are copied once into their own array.
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
        // Weights are independent: read them on the threads (most are copies, since protobuf
        // leaves raw data unaligned, and a copy of hundreds of megabytes is worth splitting).
        let files = crate::tensor::ExternalFiles::default();
        let tensors = std::mem::take(&mut graph.initializer);
        let arrays: Vec<Result<Arc<Array>>> = tensors
            .par_iter()
            .map(|t| {
                let what = format!("{}: initializer `{}`", path.display(), t.name);
                to_array_mapped(t, dir, &what, &files).map(Arc::new)
            })
            .collect();
        let mut initializers = HashMap::new();
        let mut initializer_names = Vec::new();
        for (t, array) in tensors.into_iter().zip(arrays) {
            if initializers.insert(t.name.clone(), array?).is_none() {
                initializer_names.push(t.name);
            }
        }
        let batch_norms_folded =
            crate::fold_bn::fold_batch_norms(&mut graph, &mut initializers, &mut initializer_names);
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
            batch_norms_folded,
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
