//! Real tensors and running compiled programs.

mod array;
pub mod npy;
pub mod pool;
mod program;
mod replay;

pub use array::{Array, Element};
pub use program::{compile, compile_with_static, CompiledProgram, StepTime};
pub use replay::GraphStats;
