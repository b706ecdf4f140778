//! What the epilogue finders (convolution's and the GEMMs') share: which ops read and which op
//! makes each value of a region, and the ReLU pattern.

use crate::decode::{Decoded, Lit, Op, Operand};
use crate::ops::BinaryOp;
use std::collections::{HashMap, HashSet};

pub(crate) struct Uses {
    reads: HashMap<u32, Vec<usize>>,
    /// value -> the position of the op making it
    pub(crate) producer: HashMap<u32, usize>,
}

impl Uses {
    pub(crate) fn of(ops: &[Decoded]) -> Uses {
        let mut reads: HashMap<u32, Vec<usize>> = HashMap::new();
        let mut producer = HashMap::new();
        for (j, d) in ops.iter().enumerate() {
            producer.insert(d.out, j);
            for v in crate::attn_match::inputs_of(&d.op) {
                reads.entry(v).or_default().push(j);
            }
        }
        Uses { reads, producer }
    }

    /// The one op reading `v`, when `v` is an intermediate (not among `outputs`) read once, by
    /// an op no other fusion took.
    pub(crate) fn sole(&self, v: u32, outputs: &[u32], taken: &HashSet<usize>) -> Option<usize> {
        match self.reads.get(&v).map(Vec::as_slice) {
            Some(&[j]) if !outputs.contains(&v) && !taken.contains(&j) => Some(j),
            _ => None,
        }
    }
}

/// `maximum(v, +0.0)` in either order (a `-0.0` literal would keep `-0.0` for negatives).
pub(crate) fn is_relu(d: &Decoded, v: u32) -> bool {
    let plus_zero = |o: &Operand| matches!(o, Operand::Lit(Lit::F(z)) if z.to_bits() == 0);
    matches!(&d.op, Op::Binary { op: BinaryOp::Maximum, a, b }
        if (*a == Operand::Val(v) && plus_zero(b)) || (*b == Operand::Val(v) && plus_zero(a)))
}
