//! Errors of ONNX import. Every error names what it is about: the file, the node (name, op
//! type, domain, opset), the tensor or the input.

use std::path::PathBuf;

pub type Result<T, E = OnnxError> = std::result::Result<T, E>;

/// Where a node sits: its name (or output), op type, domain and the opset in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub opset: i64,
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let domain = if self.domain.is_empty() {
            "ai.onnx"
        } else {
            &self.domain
        };
        write!(
            f,
            "node `{}` (op {}, domain {domain}, opset {})",
            self.name, self.op_type, self.opset
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file cannot be read or is not a valid ONNX protobuf.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },

    /// The model is well-formed protobuf but not a model we can import (no graph, a value
    /// used before it is made, a tensor whose data does not fill its shape, ...).
    #[error("{context}: {message}")]
    Model { context: String, message: String },

    /// No importer rule for this op (in this domain or at this opset).
    #[error("unsupported {node}{}", if .reason.is_empty() { String::new() } else { format!(": {}", .reason) })]
    Unsupported { node: NodeRef, reason: String },

    /// A node's inputs or attributes are not what its op allows.
    #[error("{node}: {message}")]
    Node { node: NodeRef, message: String },

    /// A graph input is missing, unknown, or of the wrong type or rank.
    #[error("input `{name}`: {message}")]
    Input { name: String, message: String },

    /// Tracing, compiling or running failed inside thunder-core.
    #[error(transparent)]
    Core(#[from] thunder_core::Error),
}

impl OnnxError {
    pub(crate) fn model(context: impl Into<String>, message: impl Into<String>) -> Self {
        OnnxError::Model {
            context: context.into(),
            message: message.into(),
        }
    }
}
