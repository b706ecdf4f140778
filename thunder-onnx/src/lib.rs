//! thunder-onnx: ONNX models as thunder-rs programs. A graph becomes a trace of ltorch
//! symbols for the concrete shapes of its inputs; initializers (and constants the trace
//! needs) become weight inputs; shape arithmetic is folded at import. [`OnnxSession`] caches
//! one compiled program per input signature.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let model = thunder_onnx::OnnxModel::load("model.onnx".as_ref())?;
//! let host = Arc::new(thunder_core::PluginHost::from_env()?);
//! let session = thunder_onnx::OnnxSession::new(model, host);
//! let x = thunder_core::Array::random(&[1, 3, 224, 224], thunder_core::DType::F32, 0)?;
//! let outputs = session.run(&[x])?;
//! # Ok(()) }
//! ```
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod conv_layout;
pub mod error;
mod fold_bn;
mod import;
pub mod model;
mod node;
mod ops;
pub mod proto;
mod session;
mod tensor;
mod value;

pub use error::{NodeRef, OnnxError, Result};
pub use import::{import, Imported};
pub use model::{Dim, InputSpec, OnnxModel};
pub use session::{OnnxSession, Specialization, Timings};

/// Every node no import rule exists for (op type not in the table, or another domain), in
/// graph order: what `thunder examine` lists before trying anything.
pub fn unsupported_nodes(model: &OnnxModel) -> Vec<NodeRef> {
    model
        .graph
        .node
        .iter()
        .filter(|n| ops::lookup(&n.domain, &n.op_type).is_none())
        .map(|n| import::node_ref(model, n))
        .collect()
}

/// The op types of the default domain the importer supports.
pub fn supported_ops() -> Vec<&'static str> {
    ops::OPS.iter().map(|(n, _)| *n).collect()
}
