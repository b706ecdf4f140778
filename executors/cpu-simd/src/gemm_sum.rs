//! A batched product read only by a sum over its batch dims (every weight gradient of a
//! linear layer on a 3-D input: `sum_b x_bᵀ g_b`) runs as one GEMM into the summed output:
//! no `[batch, m, n]` intermediate and no reduction pass (`GemmPlan::fold_summed_batches`).

use crate::decode::{Decoded, Op};
use crate::ops::ReduceOp;
use crate::plan::Planner;
use std::collections::HashMap;
use thunder_abi::PluginError;

/// Position of each such matmul -> position of its sum (positions in the region's op list).
pub(crate) fn find(ops: &[Decoded], outputs: &[u32]) -> HashMap<usize, usize> {
    let mut reads: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, d) in ops.iter().enumerate() {
        for v in crate::attn_match::inputs_of(&d.op) {
            reads.entry(v).or_default().push(j);
        }
    }
    let mut found = HashMap::new();
    for (i, d) in ops.iter().enumerate() {
        let Op::Matmul { .. } = d.op else { continue };
        let batch_rank = d.shape.len().saturating_sub(2);
        if batch_rank == 0 || outputs.contains(&d.out) {
            continue;
        }
        let Some(&[j]) = reads.get(&d.out).map(Vec::as_slice) else {
            continue;
        };
        if let Op::Reduce {
            op: ReduceOp::Sum,
            dims,
            ..
        } = &ops[j].op
        {
            if dims.iter().copied().eq(0..batch_rank) {
                found.insert(i, j);
            }
        }
    }
    found
}

impl Planner {
    /// Plans `sum(matmul(a, b), batch dims)` at the sum's place.
    pub(crate) fn add_gemm_sum(&mut self, mm: &Decoded, sum: &Decoded) -> Result<(), PluginError> {
        let Op::Matmul { a, b } = mm.op else {
            return Err(crate::plan::internal("a matmul-sum without its matmul"));
        };
        let plan = self
            .product(mm.ty, (a, b), (sum.out, sum.ty, &sum.shape), true)?
            .fold_summed_batches();
        self.push_product(plan, sum, &sum.shape);
        Ok(())
    }
}
