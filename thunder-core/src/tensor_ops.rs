//! Arithmetic operators on [`Tensor`]. `a + b` records the op library's `ltorch.add` by id, so
//! that it traces exactly as `ltorch.add(a, b)` does. The library (the thunder-torch crate)
//! registers itself on first use; operators used before that get an error naming the fix.
//! Operators cannot return `Result`, so the error is kept by the tracing context and returned
//! when the trace ends, like every other traced op's.

use crate::clang::Operand;
use crate::error::{Error, Result};
use crate::ir::{lookup_symbol, Arg};
use crate::tensor::Tensor;
use crate::trace_ctx::{bind1, sticky};
use std::ops;

fn record(id: &'static str, args: Vec<Arg>) -> Result<Tensor> {
    let sym = lookup_symbol(id).ok_or_else(|| {
        Error::Usage(format!(
            "`{id}` is not registered: Tensor operators record the ltorch op library's symbols; \
             call `thunder_torch::register()` (or any thunder_torch function) first"
        ))
    })?;
    bind1(sym, args)
}

fn binary(id: &'static str, a: Operand, b: Operand) -> Tensor {
    sticky(record(id, vec![a.to_arg(), b.to_arg()]))
}

macro_rules! binary_overloads {
    ($($trait:ident, $method:ident, $id:literal;)*) => {$(
        impl<R: Into<Operand>> ops::$trait<R> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                binary($id, self.into(), rhs.into())
            }
        }
        impl<R: Into<Operand>> ops::$trait<R> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                binary($id, self.into(), rhs.into())
            }
        }
        impl ops::$trait<&Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                binary($id, self.into(), rhs.into())
            }
        }
        impl ops::$trait<Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                binary($id, self.into(), rhs.into())
            }
        }
        impl ops::$trait<&Tensor> for i64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                binary($id, self.into(), rhs.into())
            }
        }
        impl ops::$trait<Tensor> for i64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                binary($id, self.into(), rhs.into())
            }
        }
    )*};
}

binary_overloads! {
    Add, add, "ltorch.add";
    Sub, sub, "ltorch.sub";
    Mul, mul, "ltorch.mul";
    Div, div, "ltorch.div";
}

impl ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        sticky(record("ltorch.neg", vec![Arg::Value(self.value())]))
    }
}

impl ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        -&self
    }
}
