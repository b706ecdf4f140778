//! Real tensors and running compiled programs.

mod array;
pub mod npy;
mod program;

pub use array::{Array, Element};
pub use program::{compile, CompiledProgram};
