//! One error type for the library. User errors name the op, file or field and say what was
//! expected and what came; `Bug` marks broken internal invariants.

use crate::dtype::DType;
use crate::ir::ShapeDisplay;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What was wrong with an op's inputs: tests and tools match on the kind, the message is its
/// display.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum OpErrorKind {
    /// The op takes `expected` positional arguments.
    #[error("expected {expected} arguments, got {got}")]
    Arity { expected: usize, got: usize },
    /// Argument `index` is not of the kind the op takes.
    #[error("argument {index} must be {expected}{}", got.as_ref().map(|g| format!(", got {g}")).unwrap_or_default())]
    Argument {
        index: usize,
        expected: String,
        got: Option<String>,
    },
    /// Two operands whose shapes must agree (`rule` says how).
    #[error("shapes {} and {} {rule}", ShapeDisplay(a), ShapeDisplay(b))]
    ShapeMismatch {
        a: Vec<i64>,
        b: Vec<i64>,
        rule: String,
    },
    /// Two operands whose dtypes must agree.
    #[error("dtypes {} and {} {rule}", a.short_name(), b.short_name())]
    DTypeMismatch { a: DType, b: DType, rule: String },
    /// A dim outside `[-rank, rank)` (a 0-d tensor takes 0 and -1), in torch's words.
    #[error("dimension out of range (expected to be in range of [{}, {}], but got {dim})", -(*rank.max(&1) as i64), *rank.max(&1) as i64 - 1)]
    Dim { dim: i64, rank: usize },
    /// A dtype the op is not defined on; `allowed` says which are (may be empty).
    #[error("does not support dtype {}{}", got.short_name(), if allowed.is_empty() { String::new() } else { format!(" ({allowed})") })]
    DType { got: DType, allowed: String },
    /// Anything else, in words.
    #[error("{0}")]
    Other(String),
}

impl OpErrorKind {
    /// The kind's name, for matching in tests and tools.
    pub fn tag(&self) -> &'static str {
        match self {
            OpErrorKind::Arity { .. } => "arity",
            OpErrorKind::Argument { .. } => "argument",
            OpErrorKind::ShapeMismatch { .. } => "shape mismatch",
            OpErrorKind::DTypeMismatch { .. } => "dtype mismatch",
            OpErrorKind::DType { .. } => "dtype",
            OpErrorKind::Dim { .. } => "dim",
            OpErrorKind::Other(_) => "other",
        }
    }
}

fn op_display(op: &str, path: &[String], kind: &OpErrorKind) -> String {
    let mut out = op.to_string();
    for inner in path {
        out.push_str(": ");
        out.push_str(inner);
    }
    format!("{out}: {kind}")
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum Error {
    /// An op was called with inputs its meta function rejects (shapes, dtypes, arguments).
    /// `op` is the op the program called; `path` the ops inside its decomposition, outermost
    /// first, down to the one whose check failed (empty when it was `op` itself).
    #[error("{}", op_display(op, path, kind))]
    Op {
        op: String,
        path: Vec<String>,
        kind: OpErrorKind,
    },

    #[error("line {line}, column {column}: {message}")]
    Parse {
        line: usize,
        column: usize,
        message: String,
    },

    /// A call in trace text that does not fit its op (unknown op or keyword, wrong arity,
    /// an argument of the wrong kind), with the op's signature where that helps.
    #[error("line {line}, column {column}: {error}")]
    Call {
        line: usize,
        column: usize,
        error: Box<crate::ir::CallError>,
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
    /// An op error described in words ([`OpErrorKind::Other`]).
    pub fn op(op: impl Into<String>, message: impl Into<String>) -> Self {
        Error::op_kind(op, OpErrorKind::Other(message.into()))
    }

    /// The op is not defined on `got`; `allowed` says what is (may be empty).
    pub fn dtype(op: impl Into<String>, got: DType, allowed: &str) -> Self {
        Error::op_kind(
            op,
            OpErrorKind::DType {
                got,
                allowed: allowed.into(),
            },
        )
    }

    pub fn op_kind(op: impl Into<String>, kind: OpErrorKind) -> Self {
        Error::Op {
            op: op.into(),
            path: Vec::new(),
            kind,
        }
    }

    /// Records the enclosing op, so an error inside a decomposition names the op the program
    /// called and the path down to the failed check:
    /// `ltorch.linear: ltorch.matmul: prims.matmul: ...`.
    pub fn within(self, outer: &str) -> Self {
        match self {
            Error::Op { op, mut path, kind } if op != outer => {
                path.insert(0, op);
                Error::Op {
                    op: outer.to_string(),
                    path,
                    kind,
                }
            }
            other => other,
        }
    }

    /// The op an op error names (the one the program called).
    pub fn op_name(&self) -> Option<&str> {
        match self {
            Error::Op { op, .. } => Some(op),
            _ => None,
        }
    }

    /// The kind of an op error.
    pub fn op_kind_of(&self) -> Option<&OpErrorKind> {
        match self {
            Error::Op { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// An op error's message without the op's name: the path and the kind.
    pub fn op_message(&self) -> Option<String> {
        match self {
            Error::Op { path, kind, .. } => Some(
                path.iter()
                    .map(|p| format!("{p}: "))
                    .chain(std::iter::once(kind.to_string()))
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// Returns an op error: `bail_op!("ltorch.foo", "what went wrong {x}")`.
#[macro_export]
macro_rules! bail_op {
    ($op:expr, $($fmt:tt)*) => {
        return Err($crate::error::Error::op($op, format!($($fmt)*)))
    };
}
pub use crate::bail_op;

impl From<thunder_cuda_runtime::CudaError> for Error {
    fn from(e: thunder_cuda_runtime::CudaError) -> Self {
        use thunder_cuda_runtime::CudaError;
        match e {
            CudaError::NoCudaDriver { reason } => Error::NoCudaDriver { reason },
            CudaError::Cuda { call, message } => Error::Cuda { call, message },
            CudaError::Usage(message) => Error::Usage(message),
        }
    }
}
