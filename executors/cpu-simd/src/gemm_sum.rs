//! A batched product read only by a sum over its batch dims (every weight gradient of a
//! linear layer on a 3-D input: `sum_b x_bᵀ g_b`) runs as one GEMM into the summed output:
//! no `[batch, m, n]` intermediate and no reduction pass (`GemmPlan::fold_summed_batches`).

use crate::decode::{Decoded, Op};
use crate::layout::Layout;
use crate::ops::ReduceOp;
use crate::plan::{numel, Planner};
use crate::stages::{GemmPlan, Stage};
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
        let (abuf, alay) = self.materialize(a)?;
        let (bbuf, blay) = self.materialize(b)?;
        let ashape = self.val(a)?.shape.clone();
        let bshape = self.val(b)?.shape.clone();
        let r = ashape.len();
        let out = self.new_buf(sum.out, sum.ty, numel(&sum.shape));
        self.stages.push(Stage::Gemm(
            GemmPlan {
                ty: mm.ty,
                a: (abuf, alay),
                b: (bbuf, blay),
                out,
                batch: ashape[..r - 2].to_vec(),
                m: ashape[r - 2],
                k: ashape[r - 1],
                n: bshape[r - 1],
                accumulate: true,
                epilogue: None,
            }
            .fold_summed_batches(),
        ));
        self.producer.insert(out, self.stages.len() - 1);
        self.define(sum, None, Some((out, Layout::contiguous(&sum.shape))), None);
        Ok(())
    }
}
