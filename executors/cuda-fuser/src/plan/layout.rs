//! Layout ops in the planner: reshape, broadcast and transpose (`add_shape`), slices and flips
//! (`add_reindex`). A layout op of a value not computed in the open kernel costs nothing: its
//! expression's leaves are read at a new base and strides.

use super::{
    bad, contiguous_strides, new_kernel, Expr, ExprKind, Home, Kernel, KernelOutput, Level,
    NodeKind, Operand, Pending, Planner,
};
use thunder_abi::prims::{IndexingPrim, ShapePrim};
use thunder_abi::{ArgView, DTypeCode, OpView, PluginError};

impl Planner<'_> {
    pub(super) fn add_shape(
        &mut self,
        op: &OpView,
        prim: ShapePrim,
        out: u32,
    ) -> Result<bool, PluginError> {
        let Some(ArgView::Value(src)) = op.args.first() else {
            return Err(bad(op, "first argument is not a tensor"));
        };
        let src = *src;
        let out_shape = self.shape(out).to_vec();
        let src_shape = self.shape(src).to_vec();
        let perm = match prim {
            ShapePrim::Transpose => {
                let Some(ArgView::Ints(perm)) = op.args.get(1) else {
                    return Err(bad(op, "permutation is not a list of ints"));
                };
                let perm: Vec<usize> = perm
                    .iter()
                    .map(|&p| usize::try_from(p).ok().filter(|&p| p < src_shape.len()))
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad(op, "permutation entry out of range"))?;
                if perm.len() != src_shape.len() {
                    return Err(bad(op, "permutation of the wrong length"));
                }
                Some(perm)
            }
            _ => None,
        };
        let moves_data = perm
            .as_ref()
            .is_some_and(|p| p.iter().enumerate().any(|(i, &d)| i != d));
        if let Some(Home::Node(n)) = self.homes.get(&src) {
            // A value computed in the open kernel is read at its own coordinates only: a
            // permutation of it starts a new kernel that reads it from memory.
            if moves_data {
                return Ok(false);
            }
            let n = *n;
            let Some(k) = self.open.as_ref() else {
                return Ok(false);
            };
            let node_level = k.nodes[n].level;
            if node_level == Level::Row && k.is_row_shape(&out_shape) {
                self.homes.insert(out, Home::Node(n));
                return Ok(true);
            }
            if node_level == Level::Full && out_shape == src_shape {
                self.homes.insert(out, Home::Node(n));
                return Ok(true);
            }
            let row_to_full = prim == ShapePrim::BroadcastInDim
                && node_level == Level::Row
                && out_shape == k.full_shape
                && matches!(op.args.get(2), Some(ArgView::Ints(dims))
                    if broadcasts_row_over_reduced(k, &src_shape, dims));
            if row_to_full {
                // A separate node so each node has one level; it is the row value itself.
                let dtype = k.nodes[n].dtype;
                let id = self
                    .node(NodeKind::Convert(Operand::Node(n)), dtype, Level::Full)
                    .ok_or_else(|| bad(op, "no open kernel"))?;
                self.homes.insert(out, Home::Node(id));
                return Ok(true);
            }
            return Ok(false);
        }
        let expr = self.expr_of(src).ok_or_else(|| bad(op, "operand lost"))?;
        let restrided = match prim {
            ShapePrim::Reshape => {
                let contiguous = contiguous_strides(&src_shape);
                match &expr.kind {
                    // A dense block (a contiguous slice keeps its base) is read as the new
                    // shape from the same place.
                    ExprKind::Load { strides, .. } | ExprKind::Iota { strides, .. }
                        if *strides == contiguous =>
                    {
                        let new = contiguous_strides(&out_shape);
                        expr.reindex(&move |base, _| (base, new.clone()))
                    }
                    ExprKind::Lit(_) => expr.clone(),
                    // A computed value is laid out anew: compute it into memory first.
                    _ => {
                        self.materialize_now(src, &src_shape, &expr);
                        let new = contiguous_strides(&out_shape);
                        Expr {
                            kind: ExprKind::Load {
                                value: src,
                                base: 0,
                                strides: new,
                            },
                            dtype: expr.dtype,
                        }
                    }
                }
            }
            ShapePrim::BroadcastInDim => {
                let Some(ArgView::Ints(dims)) = op.args.get(2) else {
                    return Err(bad(op, "broadcast_dimensions is not a list of ints"));
                };
                let mut map = Vec::new();
                for (i, &d) in dims.iter().enumerate() {
                    let d = usize::try_from(d).map_err(|_| bad(op, "negative broadcast dim"))?;
                    if d >= out_shape.len() || i >= src_shape.len() {
                        return Err(bad(op, "broadcast dim out of range"));
                    }
                    map.push((i, d, src_shape[i] == out_shape[d]));
                }
                let rank = out_shape.len();
                expr.restride(&move |old: &[i64]| {
                    let mut new = vec![0i64; rank];
                    for &(i, d, keep) in &map {
                        if keep {
                            new[d] = old.get(i).copied().unwrap_or(0);
                        }
                    }
                    new
                })
            }
            // Output dim `i` is input dim `perm[i]`: every leaf is read through permuted
            // strides, so a transpose consumed by elementwise work costs no pass of its own.
            ShapePrim::Transpose => {
                let perm = perm.unwrap_or_default();
                expr.restride(&move |old: &[i64]| {
                    perm.iter()
                        .map(|&p| old.get(p).copied().unwrap_or(0))
                        .collect()
                })
            }
        };
        self.homes.insert(
            out,
            Home::Pending(Pending {
                shape: out_shape,
                expr: restrided,
            }),
        );
        Ok(true)
    }

    /// Computes a pending value into memory right away, in a kernel of its own placed before
    /// the open one (which does not read it yet).
    fn materialize_now(&mut self, v: u32, shape: &[i64], expr: &Expr) {
        let open = self.open.replace(new_kernel(shape));
        if let Some(Operand::Node(n)) = self.instantiate(expr, Level::Full) {
            if let Some(k) = self.open.as_mut() {
                k.outputs.push(KernelOutput { value: v, node: n });
            }
        }
        if let Some(k) = self.open.take() {
            self.kernels.push(k);
        }
        self.open = open;
        self.homes.insert(v, Home::Memory);
    }

    /// `pad` with no interior padding: output coordinate `j` reads input coordinate `j - low`
    /// where that is inside the input and is the pad value elsewhere. Its kernel is written
    /// out at once (its guarded loads only make sense at its own coordinates), so consumers
    /// read it from memory.
    pub(super) fn add_pad(&mut self, op: &OpView, out: u32) -> Result<bool, PluginError> {
        let Some(ArgView::Value(src)) = op.args.first() else {
            return Err(bad(op, "first argument is not a tensor"));
        };
        let src = *src;
        let src_shape = self.shape(src).to_vec();
        let out_shape = self.shape(out).to_vec();
        let dtype = self.dtype(out);
        let Some(ArgView::Ints(config)) = op.args.get(2) else {
            return Err(bad(op, "config is not a list of ints"));
        };
        if config.len() != 3 * src_shape.len() || config.chunks(3).any(|c| c[2] != 0) {
            return Err(bad(op, "only pads without interior padding are claimed"));
        }
        let fill = op
            .args
            .get(1)
            .and_then(|a| self.literal(a, dtype))
            .ok_or_else(|| bad(op, "the pad value is not a number"))?;
        if matches!(self.homes.get(&src), Some(Home::Node(_))) {
            // Computed in the open kernel: read it from memory in a new one.
            return Ok(false);
        }
        let low: Vec<i64> = config.chunks(3).map(|c| c[0]).collect();
        let bounds: Vec<(i64, i64)> = low
            .iter()
            .zip(&src_shape)
            .map(|(&lo, &n)| (lo, lo + n))
            .collect();
        let expr = self.expr_of(src).ok_or_else(|| bad(op, "operand lost"))?;
        let empty = out_shape.contains(&0) || src_shape.contains(&0);
        let shifted = expr.reindex(&move |base, strides| {
            let shift: i64 = if empty {
                0
            } else {
                low.iter().zip(strides).map(|(l, s)| -l * s).sum()
            };
            (base + shift, strides.to_vec())
        });
        let open = self.open.replace(new_kernel(&out_shape));
        let inside = self.node(
            NodeKind::InBounds(bounds.clone()),
            DTypeCode::Bool,
            Level::Full,
        );
        let value = self.instantiate_guarded(&shifted, Level::Full, Some(&bounds));
        let written = match (inside, value) {
            (Some(c), Some(v)) => self.node(
                NodeKind::Where(Operand::Node(c), v, Operand::Literal(fill)),
                dtype,
                Level::Full,
            ),
            _ => None,
        };
        if let (Some(n), Some(k)) = (written, self.open.as_mut()) {
            k.outputs.push(KernelOutput {
                value: out,
                node: n,
            });
        }
        if let Some(k) = self.open.take() {
            self.kernels.push(k);
        }
        self.open = open;
        if written.is_none() {
            return Err(bad(op, "could not plan the padding"));
        }
        self.homes.insert(out, Home::Memory);
        Ok(true)
    }

    /// `cat(dim, t0, t1, ...)`: along `dim` the output reads part `k` at `j - offset_k` where
    /// `offset_k <= j < offset_k + size_k`, each part's loads guarded to its range, chosen by a
    /// chain of `where`s. Written out at once, like a pad.
    pub(super) fn add_cat(&mut self, op: &OpView, out: u32) -> Result<bool, PluginError> {
        let Some(ArgView::Int(dim)) = op.args.first() else {
            return Err(bad(op, "the dim is not an int"));
        };
        let out_shape = self.shape(out).to_vec();
        let dtype = self.dtype(out);
        let dim = usize::try_from(*dim)
            .ok()
            .filter(|&d| d < out_shape.len())
            .ok_or_else(|| bad(op, "dim out of range"))?;
        let parts: Vec<u32> = op.args[1..].iter().filter_map(ArgView::as_value).collect();
        if parts.is_empty() || parts.len() + 1 != op.args.len() {
            return Err(bad(op, "the parts are not all tensors"));
        }
        if parts
            .iter()
            .any(|v| matches!(self.homes.get(v), Some(Home::Node(_))))
        {
            // A part computed in the open kernel: read it from memory in a new one.
            return Ok(false);
        }
        // (expression read at output coordinates, bounds along `dim`) per non-empty part.
        let mut pieces = Vec::new();
        let mut offset = 0i64;
        for &v in &parts {
            let size = self.shape(v).get(dim).copied().unwrap_or(0);
            if size > 0 {
                let expr = self.expr_of(v).ok_or_else(|| bad(op, "operand lost"))?;
                let shifted = expr.reindex(&move |base, strides| {
                    (
                        base - offset * strides.get(dim).copied().unwrap_or(0),
                        strides.to_vec(),
                    )
                });
                let bounds: Vec<(i64, i64)> = out_shape
                    .iter()
                    .enumerate()
                    .map(|(d, &n)| {
                        if d == dim {
                            (offset, offset + size)
                        } else {
                            (0, n)
                        }
                    })
                    .collect();
                pieces.push((shifted, bounds));
            }
            offset += size;
        }
        let open = self.open.replace(new_kernel(&out_shape));
        // The last piece is the default; each earlier one is chosen where it is in bounds.
        let mut written: Option<Operand> = None;
        for (expr, bounds) in pieces.iter().rev() {
            let value = self.instantiate_guarded(expr, Level::Full, Some(bounds));
            written = match (written, value) {
                (None, v) => v,
                (Some(rest), Some(v)) => self
                    .node(
                        NodeKind::InBounds(bounds.clone()),
                        DTypeCode::Bool,
                        Level::Full,
                    )
                    .and_then(|c| {
                        self.node(
                            NodeKind::Where(Operand::Node(c), v, rest),
                            dtype,
                            Level::Full,
                        )
                    })
                    .map(Operand::Node),
                (Some(_), None) => None,
            };
        }
        let node = match written {
            Some(Operand::Node(n)) => Some(n),
            Some(Operand::Literal(_)) | None => None,
        };
        if let (Some(n), Some(k)) = (node, self.open.as_mut()) {
            k.outputs.push(KernelOutput {
                value: out,
                node: n,
            });
        }
        if let Some(k) = self.open.take() {
            if !k.outputs.is_empty() {
                self.kernels.push(k);
            }
        }
        self.open = open;
        if node.is_none() && !out_shape.contains(&0) {
            return Err(bad(op, "could not plan the concatenation"));
        }
        self.homes.insert(out, Home::Memory);
        Ok(true)
    }

    /// `slice` and `flip`: the value is read at other coordinates, so every leaf of its
    /// expression gets a new base and strides and no pass of its own is needed.
    pub(super) fn add_reindex(
        &mut self,
        op: &OpView,
        prim: IndexingPrim,
        out: u32,
    ) -> Result<bool, PluginError> {
        let Some(ArgView::Value(src)) = op.args.first() else {
            return Err(bad(op, "first argument is not a tensor"));
        };
        let src = *src;
        let src_shape = self.shape(src).to_vec();
        let out_shape = self.shape(out).to_vec();
        let rank = src_shape.len();
        let ints = |i: usize, what: &str| match op.args.get(i) {
            Some(ArgView::Ints(v)) => Ok(v.to_vec()),
            _ => Err(bad(op, format!("{what} is not a list of ints"))),
        };
        // Coordinate j of dim d of the output is coordinate first[d] + j * step[d] of the input.
        let (first, step): (Vec<i64>, Vec<i64>) = match prim {
            IndexingPrim::Slice => {
                let (start, strides) = (ints(1, "start")?, ints(3, "strides")?);
                if start.len() != rank || strides.len() != rank {
                    return Err(bad(op, "start and strides need one entry per dim"));
                }
                (start, strides)
            }
            IndexingPrim::Flip => {
                let dims = ints(1, "dims")?;
                let mut first = vec![0; rank];
                let mut step = vec![1; rank];
                for d in dims {
                    let d = usize::try_from(d)
                        .ok()
                        .filter(|&d| d < rank)
                        .ok_or_else(|| bad(op, "flip dim out of range"))?;
                    first[d] = (src_shape[d] - 1).max(0);
                    step[d] = -1;
                }
                (first, step)
            }
            IndexingPrim::Pad
            | IndexingPrim::Cat
            | IndexingPrim::Take
            | IndexingPrim::TakeAlongAxis
            | IndexingPrim::ScatterAdd
            | IndexingPrim::IndexAdd => return Err(bad(op, "not a re-indexing prim")),
        };
        if matches!(self.homes.get(&src), Some(Home::Node(_))) {
            // Computed in the open kernel at its own coordinates: read it from memory in a new one.
            return Ok(false);
        }
        let expr = self.expr_of(src).ok_or_else(|| bad(op, "operand lost"))?;
        let empty = out_shape.contains(&0);
        let reindexed = expr.reindex(&move |base, strides| {
            // An empty output reads nothing; its first coordinates may lie past the input.
            let shift: i64 = if empty {
                0
            } else {
                first.iter().zip(strides).map(|(f, s)| f * s).sum()
            };
            let strides = strides.iter().zip(&step).map(|(s, k)| s * k).collect();
            (base + shift, strides)
        });
        self.homes.insert(
            out,
            Home::Pending(Pending {
                shape: out_shape,
                expr: reindexed,
            }),
        );
        Ok(true)
    }
}

/// Whether `broadcast_in_dim(src, F, dims)` of a row value repeats it over the reduced dims:
/// every kept dim of `F` comes from a source dim of the same size, and every other source dim
/// has size 1.
fn broadcasts_row_over_reduced(k: &Kernel, src_shape: &[i64], dims: &[i64]) -> bool {
    if dims.len() != src_shape.len() {
        return false;
    }
    let mut covered = Vec::new();
    for (i, &d) in dims.iter().enumerate() {
        let Ok(d) = usize::try_from(d) else {
            return false;
        };
        let Some(&full) = k.full_shape.get(d) else {
            return false;
        };
        if !k.reduced.contains(&d) && src_shape[i] == full {
            covered.push(d);
        } else if src_shape[i] != 1 {
            return false;
        }
    }
    (0..k.full_shape.len())
        .filter(|d| !k.reduced.contains(d))
        .all(|d| covered.contains(&d) || k.full_shape[d] == 1)
}
