//! What the epilogue finders (convolution's and the GEMMs') share: which ops read and which op
//! makes each value of a region, the residual add and the ReLU pattern.

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

    /// The positions of the ops reading `v` (once per operand).
    pub(crate) fn reads_of(&self, v: u32) -> &[usize] {
        self.reads.get(&v).map_or(&[], Vec::as_slice)
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

/// The other addend of op `pos.1` = `add(cur, r)` when it can be the residual of the op at
/// `pos.0` (a product or convolution) run as its epilogue: `r` exists when that op runs
/// (defined before it, or a region input) and has the add's shape and the op's type.
pub(crate) fn residual_addend(
    ops: &[Decoded],
    producer: &HashMap<u32, usize>,
    pos: (usize, usize),
    cur: u32,
) -> Option<u32> {
    let (d, next) = (&ops[pos.0], &ops[pos.1]);
    let Op::Binary {
        op: BinaryOp::Add,
        a: Operand::Val(x),
        b: Operand::Val(y),
    } = next.op
    else {
        return None;
    };
    let other = if x == cur { y } else { x };
    let early = producer.get(&other).is_none_or(|&p| p < pos.0);
    let fits = ops
        .iter()
        .find(|o| o.out == other)
        .is_none_or(|o| o.shape == next.shape && o.ty == d.ty);
    (x != y && (x == cur || y == cur) && early && fits).then_some(other)
}
