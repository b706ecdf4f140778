//! Real tensors and running compiled programs.

mod array;
pub mod npy;
pub mod pool;
mod program;

pub use array::{Array, Element};
pub use program::{compile, CompiledProgram, StepTime};
