//! A product read only by a transpose of its last two dims runs transposed: `(A B)ᵀ = Bᵀ Aᵀ`,
//! one GEMM with the operands' views swapped and transposed, written straight into the
//! transpose's buffer. Every `linear` weight gradient has this shape (the weight enters as
//! `transpose(w)`, so its gradient leaves as `transpose(Σ_b x_bᵀ g_b)`), and without it the
//! product was written once and then copied through a transposing loop, a strided pass over
//! the weight per layer and step.

use crate::decode::{Decoded, Op};
use crate::layout::Layout;
use crate::plan::Planner;
use crate::stages::GemmPlan;
use std::collections::HashMap;
use thunder_abi::PluginError;

/// Position of each product (a matmul, or the sum of a summed matmul in `summed`) -> position of
/// the transpose that is its only reader. `outside` are values read outside the prims.
pub(crate) fn find(
    ops: &[Decoded],
    outside: &[u32],
    summed: &HashMap<usize, usize>,
) -> HashMap<usize, usize> {
    let mut reads: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, d) in ops.iter().enumerate() {
        for v in crate::attn_match::inputs_of(&d.op) {
            reads.entry(v).or_default().push(j);
        }
    }
    let sums: Vec<usize> = summed.values().copied().collect();
    let mut found = HashMap::new();
    for (i, d) in ops.iter().enumerate() {
        let product = match d.op {
            Op::Matmul { .. } => !summed.contains_key(&i),
            _ => sums.contains(&i),
        };
        if !product || outside.contains(&d.out) {
            continue;
        }
        let Some(&[j]) = reads.get(&d.out).map(Vec::as_slice) else {
            continue;
        };
        if let Op::Transpose { perm, .. } = &ops[j].op {
            if swaps_last_two(perm) {
                found.insert(i, j);
            }
        }
    }
    found
}

/// `perm` keeps every dim but swaps the last two.
fn swaps_last_two(perm: &[usize]) -> bool {
    let r = perm.len();
    r >= 2
        && perm[r - 2] == r - 1
        && perm[r - 1] == r - 2
        && perm[..r - 2].iter().enumerate().all(|(i, &p)| i == p)
}

/// `layout` with its last two dims swapped.
pub(crate) fn swap_last_two(layout: &Layout) -> Layout {
    let mut l = layout.clone();
    let r = l.strides.len();
    l.strides.swap(r - 2, r - 1);
    l
}

impl GemmPlan {
    /// The transposed product `Bᵀ Aᵀ` into the same (contiguous) output.
    pub(crate) fn transposed(self) -> GemmPlan {
        GemmPlan {
            a: (self.b.0, swap_last_two(&self.b.1)),
            b: (self.a.0, swap_last_two(&self.a.1)),
            m: self.n,
            n: self.m,
            ..self
        }
    }
}

impl Planner {
    /// Plans `transpose(matmul(a, b))` (or of `sum(matmul(a, b), batch dims)` when `sum` is
    /// given) as one GEMM into the transpose's output `t`.
    pub(crate) fn add_gemm_transposed(
        &mut self,
        mm: &Decoded,
        sum: Option<&Decoded>,
        t: &Decoded,
    ) -> Result<(), PluginError> {
        let Op::Matmul { a, b } = mm.op else {
            return Err(crate::plan::internal(
                "a transposed product without its matmul",
            ));
        };
        let plan = self
            .product(mm.ty, (a, b), (t.out, t.ty, &t.shape), sum.is_some())?
            .transposed();
        let plan = if sum.is_some() {
            plan.fold_summed_batches()
        } else {
            plan.fold_broadcast_batches()
        };
        self.push_product(plan, t, &t.shape);
        Ok(())
    }
}
