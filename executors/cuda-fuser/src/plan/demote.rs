//! Values that cross from one kernel of a region to a later one without leaving the region:
//! an elementwise value computed from loads alone (no reduction of its kernel feeds it) is not
//! written to memory for the later kernel to read; it becomes pending again, and the later
//! kernel computes it from the same inputs. In a layer_norm backward the column kernel (the
//! weight and bias gradients) computed `dy * w` and `x - mean` in f32 and the row kernel read
//! them back: two f32 round trips per element where re-reading `dy` and `x` (bf16) costs less.
//! Pending values that do leave the region are computed at its end ([`Planner::materialize_pending`]).

use thunder_abi::prims::Prim;

use super::{
    new_kernel, Expr, ExprKind, Home, Kernel, KernelOutput, Level, NodeId, NodeKind, Operand,
    Pending, Planner,
};

impl Planner<'_> {
    /// Pending values needed outside the region get kernels of their own, one per shape.
    pub(super) fn materialize_pending(&mut self, region_outputs: &[u32]) {
        let mut wanted: Vec<(u32, Pending)> = self
            .homes
            .iter()
            .filter_map(|(&v, h)| match h {
                Home::Pending(p) if self.needed_later(v, region_outputs) => Some((v, p.clone())),
                _ => None,
            })
            .collect();
        wanted.sort_by_key(|(v, _)| *v);
        while let Some((_, first)) = wanted.first() {
            let shape = first.shape.clone();
            let (group, rest): (Vec<_>, Vec<_>) =
                wanted.into_iter().partition(|(_, p)| p.shape == shape);
            wanted = rest;
            self.open = Some(new_kernel(&shape));
            for (v, p) in group {
                let node = match self.instantiate(&p.expr, Level::Full) {
                    Some(Operand::Node(n)) => Some(n),
                    // A literal-only expression: stored through a convert node.
                    Some(Operand::Literal(l)) => self.node(
                        NodeKind::Convert(Operand::Literal(l)),
                        p.expr.dtype,
                        Level::Full,
                    ),
                    None => None,
                };
                if let (Some(n), Some(k)) = (node, self.open.as_mut()) {
                    k.outputs.push(KernelOutput { value: v, node: n });
                }
                self.homes.insert(v, Home::Memory);
            }
            if let Some(k) = self.open.take() {
                self.kernels.push(k);
            }
        }
    }

    /// `node` of the closing kernel `k` as an expression over memory, if it reads only
    /// full-level loads (no reduction, no row value, no guarded load).
    pub(super) fn recomputable(&self, k: &Kernel, node: NodeId) -> Option<Expr> {
        self.expr_of_node(k, node)
    }

    /// Whether a later kernel of the region should compute `v` (of `shape`, computed as
    /// `expr`) itself rather than read it from memory: `v` does not leave the region, no
    /// reshape reads it (a reshape of a computed value is written out first anyway), and
    /// re-reading its leaves costs no more bytes per element than writing `v` and reading it
    /// back (broadcast leaves are nearly free).
    pub(super) fn recompute_later(
        &self,
        v: u32,
        shape: &[i64],
        expr: &Expr,
        region_outputs: &[u32],
    ) -> bool {
        if region_outputs.contains(&v) || self.view.outputs.contains(&v) {
            return false;
        }
        let reshaped = self.readers.get(&v).is_some_and(|ops| {
            ops.iter()
                .any(|&i| self.view.ops[i].symbol.as_str() == Prim::Reshape.id())
        });
        if reshaped {
            return false;
        }
        let mut leaves = Vec::new();
        full_size_leaves(expr, shape, &mut leaves);
        leaves.sort_unstable();
        leaves.dedup();
        let reread: usize = leaves.iter().map(|&v| self.dtype(v).size_bytes()).sum();
        reread <= 2 * expr.dtype.size_bytes()
    }

    /// The expression of `node` over the kernel's full shape.
    fn expr_of_node(&self, k: &Kernel, node: NodeId) -> Option<Expr> {
        let n = k.nodes.get(node)?;
        let operand = |o: &Operand| match o {
            Operand::Node(m) => self.expr_of_node(k, *m).map(Box::new),
            Operand::Literal(l) => Some(Box::new(Expr {
                kind: ExprKind::Lit(*l),
                dtype: n.dtype,
            })),
        };
        // Only full-level work: a row value (a reduction's result, or a value read once per
        // row) is left to memory.
        if n.level != Level::Full {
            return None;
        }
        let kind = match &n.kind {
            NodeKind::Load {
                input,
                base,
                strides,
                guard: None,
            } => ExprKind::Load {
                value: k.inputs.get(*input)?.value,
                base: *base,
                strides: strides.clone(),
            },
            NodeKind::Iota {
                start,
                step,
                base,
                strides,
            } => ExprKind::Iota {
                start: *start,
                step: *step,
                base: *base,
                strides: strides.clone(),
            },
            NodeKind::Unary(m, a) => ExprKind::Unary(*m, operand(a)?),
            NodeKind::Binary(m, a, b) => ExprKind::Binary(*m, operand(a)?, operand(b)?),
            NodeKind::Where(c, a, b) => ExprKind::Where(operand(c)?, operand(a)?, operand(b)?),
            NodeKind::Convert(a) => ExprKind::Convert(operand(a)?),
            NodeKind::Load { guard: Some(_), .. }
            | NodeKind::InBounds(_)
            | NodeKind::Reduce { .. } => return None,
        };
        Some(Expr {
            kind,
            dtype: n.dtype,
        })
    }
}

/// The values `expr` (over `shape`) reads at full size: no stride 0 along a dim of size > 1.
fn full_size_leaves(expr: &Expr, shape: &[i64], out: &mut Vec<u32>) {
    match &expr.kind {
        ExprKind::Load { value, strides, .. } => {
            if strides.iter().zip(shape).all(|(&s, &n)| s != 0 || n <= 1) {
                out.push(*value);
            }
        }
        ExprKind::Iota { .. } | ExprKind::Lit(_) => {}
        ExprKind::Unary(_, a) | ExprKind::Convert(a) => full_size_leaves(a, shape, out),
        ExprKind::Binary(_, a, b) => {
            full_size_leaves(a, shape, out);
            full_size_leaves(b, shape, out);
        }
        ExprKind::Where(c, a, b) => {
            full_size_leaves(c, shape, out);
            full_size_leaves(a, shape, out);
            full_size_leaves(b, shape, out);
        }
    }
}
