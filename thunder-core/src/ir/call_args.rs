//! Typed access to a composite's positional arguments, with errors that name the op.

use crate::clang::Operand;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, OpErrorKind, Result};
use crate::ir::Arg;
use crate::tensor::Tensor;

pub struct CallArgs<'a> {
    pub op: &'static str,
    pub args: &'a [Arg],
}

impl CallArgs<'_> {
    pub fn expect(&self, n: usize) -> Result<()> {
        if self.args.len() != n {
            return Err(Error::op_kind(
                self.op,
                OpErrorKind::Arity {
                    expected: n,
                    got: self.args.len(),
                },
            ));
        }
        Ok(())
    }

    fn get(&self, i: usize) -> Result<&Arg> {
        self.args
            .get(i)
            .ok_or_else(|| Error::op(self.op, format!("missing argument {i}")))
    }

    fn wrong(&self, i: usize, what: &str) -> Error {
        let got = self
            .args
            .get(i)
            .map(|a| format!("{a:?}"))
            .unwrap_or_else(|| "nothing".into());
        Error::op_kind(
            self.op,
            OpErrorKind::Argument {
                index: i,
                expected: what.into(),
                got: Some(got),
            },
        )
    }

    pub fn tensor(&self, i: usize) -> Result<Tensor> {
        match self.get(i)? {
            Arg::Value(v) => crate::trace_ctx::tensor_of(*v),
            _ => Err(self.wrong(i, "a tensor")),
        }
    }

    pub fn opt_tensor(&self, i: usize) -> Result<Option<Tensor>> {
        match self.get(i)? {
            Arg::None => Ok(None),
            _ => self.tensor(i).map(Some),
        }
    }

    pub fn operand(&self, i: usize) -> Result<Operand> {
        Operand::from_arg(self.op, self.get(i)?)
    }

    pub fn int(&self, i: usize) -> Result<i64> {
        match self.get(i)? {
            Arg::Int(v) => Ok(*v),
            _ => Err(self.wrong(i, "an int")),
        }
    }

    pub fn bool(&self, i: usize) -> Result<bool> {
        match self.get(i)? {
            Arg::Bool(v) => Ok(*v),
            _ => Err(self.wrong(i, "True or False")),
        }
    }

    pub fn ints(&self, i: usize) -> Result<Vec<i64>> {
        match self.get(i)? {
            Arg::Ints(v) => Ok(v.clone()),
            _ => Err(self.wrong(i, "a list of ints")),
        }
    }

    /// A list of ints, or `None`.
    pub fn opt_ints(&self, i: usize) -> Result<Option<Vec<i64>>> {
        match self.get(i)? {
            Arg::None => Ok(None),
            Arg::Ints(v) => Ok(Some(v.clone())),
            _ => Err(self.wrong(i, "a list of ints or None")),
        }
    }

    pub fn str(&self, i: usize) -> Result<&str> {
        match self.get(i)? {
            Arg::Str(s) => Ok(s),
            _ => Err(self.wrong(i, "a string")),
        }
    }

    pub fn dtype(&self, i: usize) -> Result<DType> {
        match self.get(i)? {
            Arg::DType(d) => Ok(*d),
            _ => Err(self.wrong(i, "a dtype")),
        }
    }

    pub fn device(&self, i: usize) -> Result<Device> {
        match self.get(i)? {
            Arg::Device(d) => Ok(*d),
            _ => Err(self.wrong(i, "a device")),
        }
    }

    /// A number argument (fill values).
    pub fn number(&self, i: usize) -> Result<Arg> {
        match self.get(i)? {
            a @ (Arg::Int(_) | Arg::Float(_) | Arg::Bool(_)) => Ok(a.clone()),
            _ => Err(self.wrong(i, "a number")),
        }
    }
}
