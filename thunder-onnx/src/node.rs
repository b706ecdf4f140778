//! `NodeCtx`: what an op's import rule sees of its node: inputs as values, attributes with
//! defaults, and helpers that turn constants into traced tensors or literals.

use crate::error::{NodeRef, OnnxError, Result};
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor::to_array;
use crate::value::{Const, HostArr, Val};
use std::collections::HashMap;
use std::sync::Arc;
use thunder_core::clang::Operand;
use thunder_core::{Array, DType, Device, Tensor};
use thunder_torch as ltorch;

/// State shared by every node of one import: the weight inputs declared for this trace and
/// the constants found missing (declared on the next attempt).
#[derive(Default)]
pub struct Weights {
    pub declared: HashMap<String, Tensor>,
    pub missing: Vec<(String, Arc<Array>)>,
    /// MatMul outputs computed as one 2-d product on flattened rows (then reshaped): the
    /// product, by the output's name, so that a bias Add reading the output can add to the
    /// product itself (see `elementwise::add`).
    pub flat_products: HashMap<String, Tensor>,
}

pub struct NodeCtx<'a> {
    pub node: &'a NodeProto,
    pub nref: NodeRef,
    pub inputs: Vec<Option<Val>>,
    pub weights: &'a mut Weights,
}

/// Largest constant folded on the host (bigger ones are traced).
pub const FOLD_LIMIT: usize = 1 << 16;

impl<'a> NodeCtx<'a> {
    pub fn err(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Node {
            node: self.nref.clone(),
            message: message.into(),
        }
    }

    pub fn unsupported(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            node: self.nref.clone(),
            reason: reason.into(),
        }
    }

    pub fn opset(&self) -> i64 {
        self.nref.opset
    }

    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    pub fn has_input(&self, i: usize) -> bool {
        matches!(self.inputs.get(i), Some(Some(_)))
    }

    pub fn input(&self, i: usize) -> Result<&Val> {
        match self.inputs.get(i) {
            Some(Some(v)) => Ok(v),
            _ => Err(self.err(format!("input {i} is required but not given"))),
        }
    }

    pub fn shape(&self, i: usize) -> Result<Vec<i64>> {
        Ok(self.input(i)?.shape().to_vec())
    }

    pub fn rank(&self, i: usize) -> Result<usize> {
        Ok(self.input(i)?.shape().len())
    }

    /// True when every given input is known at import time and small enough to fold.
    pub fn all_const(&self) -> bool {
        self.inputs.iter().flatten().all(|v| match v {
            Val::Const(c) => c.array.numel() <= FOLD_LIMIT,
            Val::Traced(_) => false,
        })
    }

    pub fn host(&self, i: usize) -> Result<HostArr> {
        match self.input(i)? {
            Val::Const(c) => HostArr::from_array(&c.array).map_err(|e| self.err(e.to_string())),
            Val::Traced(_) => Err(self.err(format!(
                "input {i} (`{}`) must be known when the model is imported (a constant, an \
                 initializer or shape arithmetic), but it is computed from the graph's inputs",
                self.node.input.get(i).map_or("", String::as_str)
            ))),
        }
    }

    /// An input that must be a constant list of integers (shapes, axes, pads).
    pub fn ints(&self, i: usize) -> Result<Vec<i64>> {
        Ok(self.host(i)?.ints())
    }

    /// Input `i` as a traced tensor: weights are the declared inputs; uniform constants are
    /// `full`; other constants are requested as weight inputs for the next attempt.
    pub fn tensor(&mut self, i: usize) -> Result<Tensor> {
        let v = self.input(i)?.clone();
        self.materialize(&v)
    }

    pub fn materialize(&mut self, v: &Val) -> Result<Tensor> {
        let c = match v {
            Val::Traced(t) => return Ok(t.clone()),
            Val::Const(c) => c,
        };
        if let Some(t) = self.weights.declared.get(&c.name) {
            return Ok(t.clone());
        }
        let a = &c.array;
        let uniform = if a.numel() <= FOLD_LIMIT {
            let v = a.to_f64_vec().map_err(|e| self.err(e.to_string()))?;
            v.first()
                .copied()
                .filter(|x| v.iter().all(|y| y.to_bits() == x.to_bits()))
        } else {
            None
        };
        let shape = a.shape().to_vec();
        let dtype = a.dtype();
        if let Some(x) = uniform {
            return Ok(ltorch::full(&shape, literal(x, dtype), Device::Cpu, dtype)?);
        }
        if a.numel() == 0 {
            return Ok(ltorch::zeros(&shape, Device::Cpu, dtype)?);
        }
        // Declared on the next attempt; a placeholder keeps this attempt going so that every
        // missing constant is found in one pass.
        if !self.weights.missing.iter().any(|(n, _)| n == &c.name) {
            self.weights.missing.push((c.name.clone(), c.array.clone()));
        }
        Ok(ltorch::zeros(&shape, Device::Cpu, dtype)?)
    }

    /// Input `i` for an elementwise op: a number literal when it is a constant of one element
    /// that broadcasting would not enlarge, else a tensor.
    pub fn operand(&mut self, i: usize, other_rank: usize) -> Result<Operand> {
        let v = self.input(i)?.clone();
        if let Val::Const(c) = &v {
            if c.array.numel() == 1 && c.array.shape().len() <= other_rank {
                let x = c.array.to_f64_vec().map_err(|e| self.err(e.to_string()))?[0];
                return Ok(match literal(x, c.array.dtype()) {
                    thunder_core::ir::Arg::Float(f) => Operand::Float(f),
                    thunder_core::ir::Arg::Bool(b) => Operand::Bool(b),
                    thunder_core::ir::Arg::Int(n) => Operand::Int(n),
                    _ => Operand::Float(x),
                });
            }
        }
        Ok(Operand::Tensor(self.materialize(&v)?))
    }

    /// A folded result as a value, named after this node's output `k`.
    pub fn folded(&self, h: HostArr, k: usize) -> Result<Val> {
        let array = h.to_array().map_err(|e| self.err(e.to_string()))?;
        let out = self.node.output.get(k).cloned().unwrap_or_default();
        Ok(Val::Const(Const {
            array: Arc::new(array),
            name: format!("const:{out}"),
        }))
    }

    fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    pub fn has_attr(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    pub fn attr_i(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }

    pub fn attr_f(&self, name: &str, default: f64) -> f64 {
        self.attr(name).map_or(default, |a| a.f as f64)
    }

    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    pub fn attr_s(&self, name: &str, default: &str) -> String {
        self.attr(name).map_or(default.to_string(), |a| {
            String::from_utf8_lossy(&a.s).into_owned()
        })
    }

    /// A tensor attribute (Constant's `value`, ConstantOfShape's `value`).
    pub fn attr_tensor(&self, name: &str) -> Result<Option<Array>> {
        match self.attr(name).and_then(|a| a.t.as_ref()) {
            None => Ok(None),
            Some(t) => to_array(t, None, &format!("{}: attribute `{name}`", self.nref)).map(Some),
        }
    }

    /// `axis` normalised against `rank` (negative counts from the end).
    pub fn axis(&self, axis: i64, rank: usize) -> Result<i64> {
        let r = rank as i64;
        if axis < -r.max(1) || axis >= r.max(1) {
            return Err(self.err(format!("axis {axis} is out of range for rank {rank}")));
        }
        Ok(if axis < 0 { axis + r } else { axis })
    }
}

/// A number as the literal kind of `dtype`.
pub fn literal(x: f64, dtype: DType) -> thunder_core::ir::Arg {
    use thunder_core::ir::Arg;
    match dtype {
        DType::Bool => Arg::Bool(x != 0.0),
        d if d.is_float() => Arg::Float(x),
        _ => Arg::Int(x as i64),
    }
}
