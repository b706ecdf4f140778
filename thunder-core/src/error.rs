//! One error type for the library. User errors name the op, file or field and say what was
//! expected and what came; `Bug` marks broken internal invariants.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum Error {
    /// An op was called with inputs its meta function rejects (shapes, dtypes, arguments).
    #[error("{op}: {message}")]
    Op { op: String, message: String },

    #[error("line {line}, column {column}: {message}")]
    Parse {
        line: usize,
        column: usize,
        message: String,
    },

    #[error("input `{name}`: {message}")]
    Input { name: String, message: String },

    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },

    #[error("{path}: field `{field}`: {message}")]
    Config {
        path: PathBuf,
        field: String,
        message: String,
    },

    #[error("plugin `{plugin}`: {message}")]
    Plugin { plugin: String, message: String },

    /// No executor claimed an op; lists the ops so `examine` and users see what is missing.
    #[error("no executor can run {ops}")]
    Unclaimed { ops: String },

    /// CUDA was asked for on a machine where it cannot be used.
    #[error("no CUDA driver: {reason}")]
    NoCudaDriver { reason: String },

    /// A CUDA driver call failed.
    #[error("CUDA {call} failed: {message}")]
    Cuda { call: String, message: String },

    #[error("{0}")]
    Usage(String),

    #[error("internal error (a bug in thunder): {0}")]
    Bug(String),
}

impl Error {
    pub fn op(op: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Op {
            op: op.into(),
            message: message.into(),
        }
    }

    /// Adds the name of the enclosing op, so an error inside a decomposition reads
    /// `ltorch.linear: ltorch.matmul: prims.matmul: ...`.
    pub fn within(self, outer: &str) -> Self {
        match self {
            Error::Op { op, message } if op != outer => Error::Op {
                op: outer.to_string(),
                message: format!("{op}: {message}"),
            },
            other => other,
        }
    }
}

macro_rules! bail_op {
    ($op:expr, $($fmt:tt)*) => {
        return Err($crate::error::Error::op($op, format!($($fmt)*)))
    };
}
pub(crate) use bail_op;
