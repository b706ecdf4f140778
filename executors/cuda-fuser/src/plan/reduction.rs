//! Reductions in the planner: sum and amax over the kernel's reduced dims, fused with the
//! elementwise work that feeds them and reads them.

use super::{bad, new_kernel, Fold, Home, Level, NodeKind, Operand, Planner};
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
}
