//! Reductions in the planner: sum and amax over the kernel's reduced dims, fused with the
//! elementwise work that feeds them and reads them.

use super::{bad, new_kernel, Fold, Home, KernelOutput, Level, NodeKind, Operand, Planner};
use thunder_abi::{ArgView, OpView, PluginError};

impl Planner<'_> {
    pub(super) fn add_reduction(
        &mut self,
        op: &OpView,
        fold: Fold,
        out: u32,
    ) -> Result<bool, PluginError> {
        let Some(ArgView::Value(src)) = op.args.first() else {
            return Err(bad(op, "first argument is not a tensor"));
        };
        let Some(ArgView::Ints(dims)) = op.args.get(1) else {
            return Err(bad(op, "dims is not a list of ints"));
        };
        let src = *src;
        let src_shape = self.shape(src).to_vec();
        let mut dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        dims.sort_unstable();
        dims.dedup();
        if self.open.is_none() {
            self.open = Some(new_kernel(&src_shape));
        }
        let fits = self.open.as_ref().is_some_and(|k| {
            k.full_shape == src_shape && (k.reduced.is_empty() || k.reduced == dims)
        });
        if !fits {
            return Ok(false);
        }
        let Some(Operand::Node(input)) = self.value_at(src, Level::Full) else {
            return Ok(false);
        };
        let k_index = self.open.as_ref().map(|k| k.reductions.len()).unwrap_or(0);
        if let Some(k) = self.open.as_mut() {
            k.reduced = dims;
        }
        let n = self
            .node(
                NodeKind::Reduce {
                    fold,
                    input,
                    k: k_index,
                },
                self.dtype(out),
                Level::Row,
            )
            .ok_or_else(|| bad(op, "no open kernel"))?;
        if let Some(k) = self.open.as_mut() {
            k.reductions.push(n);
        }
        self.homes.insert(out, Home::Node(n));
        Ok(true)
    }

    /// A column reduction (reduced leading dims, last dim kept) also stores the pending
    /// values of its full shape that are needed later (unless a later kernel recomputes them) (the elementwise product a bias
    /// gradient sums, saved for another use): computed from the registers of the one pass that
    /// reads the inputs for the sum (`col_kernel`), instead of a pointwise kernel of their
    /// own that reads the inputs again. A pending value reads only values in memory, so it
    /// never depends on this kernel's reductions.
    pub(super) fn absorb_pending_outputs(&mut self, region_outputs: &[u32]) {
        let Some(k) = self.open.as_ref() else {
            return;
        };
        let nd = k.full_shape.len();
        if k.reduced.is_empty() || nd == 0 || k.reduced.contains(&(nd - 1)) {
            return;
        }
        let full = k.full_shape.clone();
        let mut wanted: Vec<(u32, super::Expr)> = self
            .homes
            .iter()
            .filter_map(|(&v, h)| match h {
                // Not a value a later kernel of the region computes itself from the same
                // inputs for less than a round trip through memory.
                Home::Pending(p)
                    if p.shape == full
                        && self.needed_later(v, region_outputs)
                        && !self.recompute_later(v, &p.shape, &p.expr, region_outputs) =>
                {
                    Some((v, p.expr.clone()))
                }
                _ => None,
            })
            .collect();
        wanted.sort_by_key(|(v, _)| *v);
        for (v, expr) in wanted {
            if let Some(Operand::Node(n)) = self.instantiate(&expr, Level::Full) {
                if let Some(k) = self.open.as_mut() {
                    k.outputs.push(KernelOutput { value: v, node: n });
                }
                self.homes.insert(v, Home::Memory);
            }
        }
    }
}
