//! How each op joins the schedule (see `plan.rs`): elementwise ops join a group, shape ops
//! change views, reductions fold inside the group computing their input, matmul and iota
//! become stages of their own.

use crate::decode::{Decoded, Lit, Op, Operand, Ty};
use crate::group::{GroupBuilder, Ins};
use crate::layout::{row_major, Layout};
use crate::movement::{PadPlan, TakePlan};
use crate::ops::Real;
use crate::plan::{internal, numel, Planner};
use crate::stages::{GemmPlan, IotaPlan, Stage};
use thunder_abi::PluginError;

impl Planner {
    pub(crate) fn add(&mut self, d: &Decoded) -> Result<(), PluginError> {
        let vals = |ops: &[Operand]| -> Vec<u32> {
            ops.iter()
                .filter_map(|o| match o {
                    Operand::Val(v) => Some(*v),
                    Operand::Lit(_) => None,
                })
                .collect()
        };
        match &d.op {
            Op::Unary { op, a } => {
                let g = self.pick_group(&[*a], &d.shape)?;
                let a = self.reg(g, *a)?;
                let gb = self.group(g)?;
                let dst = gb.fresh(d.ty);
                gb.ins.push(Ins::Unary {
                    ty: d.ty,
                    op: *op,
                    dst,
                    a,
                });
                self.define(d, Some((g, dst)), None, None);
            }
            Op::Binary { op, a, b } => {
                let g = self.pick_group(&vals(&[*a, *b]), &d.shape)?;
                let (a, b) = (self.operand(g, *a)?, self.operand(g, *b)?);
                let gb = self.group(g)?;
                let dst = gb.fresh(d.ty);
                gb.ins.push(Ins::Binary {
                    ty: d.ty,
                    op: *op,
                    dst,
                    a,
                    b,
                });
                self.define(d, Some((g, dst)), None, None);
            }
            Op::Compare { op, a, b } => {
                let ty = vals(&[*a, *b])
                    .first()
                    .map(|&v| self.val(v).map(|s| s.ty))
                    .transpose()?
                    .ok_or_else(|| internal("compare of two literals"))?;
                let g = self.pick_group(&vals(&[*a, *b]), &d.shape)?;
                let (a, b) = (self.operand(g, *a)?, self.operand(g, *b)?);
                let gb = self.group(g)?;
                let dst = gb.fresh(Ty::B8);
                gb.ins.push(Ins::Compare {
                    ty,
                    op: *op,
                    dst,
                    a,
                    b,
                });
                self.define(d, Some((g, dst)), None, None);
            }
            Op::Where { pred, a, b } => {
                let mut ids = vals(&[*a, *b]);
                ids.push(*pred);
                let g = self.pick_group(&ids, &d.shape)?;
                let pred = self.reg(g, *pred)?;
                let (a, b) = (self.operand(g, *a)?, self.operand(g, *b)?);
                let gb = self.group(g)?;
                let dst = gb.fresh(d.ty);
                gb.ins.push(Ins::Where {
                    ty: d.ty,
                    dst,
                    pred,
                    a,
                    b,
                });
                self.define(d, Some((g, dst)), None, None);
            }
            Op::Convert { a } => {
                let st = self.val(*a)?.clone();
                if let Some(l) = st.konst {
                    self.define(d, None, None, Some(convert_lit(l, d.ty)));
                    return Ok(());
                }
                let g = self.pick_group(&[*a], &d.shape)?;
                let a = self.reg(g, *a)?;
                let gb = self.group(g)?;
                let dst = gb.fresh(d.ty);
                gb.ins.push(Ins::Convert {
                    from: st.ty,
                    to: d.ty,
                    dst,
                    a,
                });
                self.define(d, Some((g, dst)), None, None);
            }
            Op::Reshape { a } => self.reshape(d, *a)?,
            Op::Broadcast { a, dims } => {
                let st = self.val(*a)?.clone();
                let increasing = dims.windows(2).all(|w| w[0] < w[1]);
                if numel(&st.shape) == numel(&d.shape) && increasing && st.konst.is_none() {
                    // Only size-1 dims are added: the row-major order is unchanged.
                    return self.reshape(d, *a);
                }
                if let Some(l) = st.konst {
                    self.define(d, None, None, Some(l));
                    return Ok(());
                }
                let (buf, layout) = self.materialize(*a)?;
                let layout = layout.broadcast(&st.shape, d.shape.len(), dims);
                self.define(d, None, Some((buf, layout)), None);
            }
            Op::Transpose { a, perm } => {
                let st = self.val(*a)?.clone();
                let moved: Vec<usize> =
                    perm.iter().copied().filter(|&p| st.shape[p] != 1).collect();
                if moved.windows(2).all(|w| w[0] < w[1]) && st.konst.is_none() {
                    // Only size-1 dims move: the row-major order is unchanged.
                    return self.reshape(d, *a);
                }
                if let Some(l) = st.konst {
                    self.define(d, None, None, Some(l));
                    return Ok(());
                }
                let (buf, layout) = self.materialize(*a)?;
                self.define(d, None, Some((buf, layout.transpose(perm))), None);
            }
            Op::Slice { a, start, step } => {
                let st = self.val(*a)?.clone();
                if let Some(l) = st.konst {
                    self.define(d, None, None, Some(l));
                    return Ok(());
                }
                let (buf, layout) = self.materialize(*a)?;
                let offset = layout.offset
                    + start
                        .iter()
                        .zip(&layout.strides)
                        .map(|(&s, &stride)| s as i64 * stride)
                        .sum::<i64>();
                let strides = layout
                    .strides
                    .iter()
                    .zip(step)
                    .map(|(&stride, &k)| stride * k as i64)
                    .collect();
                self.define(d, None, Some((buf, Layout { offset, strides })), None);
            }
            Op::Pad { a, value, config } => {
                let in_shape = self.val(*a)?.shape.clone();
                let src = self.materialize(*a)?;
                let out = self.new_buf(d.out, d.ty, numel(&d.shape));
                self.stages.push(Stage::Pad(PadPlan {
                    ty: d.ty,
                    src,
                    in_shape,
                    out,
                    out_shape: d.shape.clone(),
                    config: config.clone(),
                    value: Some(*value),
                }));
                self.producer.insert(out, self.stages.len() - 1);
                self.define(d, None, Some((out, Layout::contiguous(&d.shape))), None);
            }
            Op::Cat { parts, dim } => {
                // Each part is copied into its place, like a pad without the fill (the parts
                // cover the output), unless its kernel wrote it there (`placement.rs`); the
                // output is ready after the last copy.
                let out = self.new_buf(d.out, d.ty, numel(&d.shape));
                let full = Layout::contiguous(&d.shape);
                let mut start = 0usize;
                for &part in parts {
                    let st = self.val(part)?;
                    let in_shape = st.shape.clone();
                    let len = in_shape[*dim];
                    let slot = Layout {
                        offset: start as i64 * full.strides[*dim],
                        strides: full.strides.clone(),
                    };
                    if st.virt.is_none() && st.mem == Some((out, slot)) {
                        start += len;
                        continue;
                    }
                    let src = self.materialize(part)?;
                    let config = (0..d.shape.len())
                        .map(|k| match k == *dim {
                            true => (start as i64, (d.shape[k] - start - len) as i64, 0),
                            false => (0, 0, 0),
                        })
                        .collect();
                    self.stages.push(Stage::Pad(PadPlan {
                        ty: d.ty,
                        src,
                        in_shape,
                        out,
                        out_shape: d.shape.clone(),
                        config,
                        value: None,
                    }));
                    self.producer.insert(out, self.stages.len() - 1);
                    start += len;
                }
                self.define(d, None, Some((out, Layout::contiguous(&d.shape))), None);
            }
            Op::Take { a, index, dim } => {
                let in_shape = self.val(*a)?.shape.clone();
                let src = self.materialize(*a)?;
                let index = self.materialize(*index)?;
                let out = self.new_buf(d.out, d.ty, numel(&d.shape));
                self.stages.push(Stage::Take(TakePlan {
                    ty: d.ty,
                    src,
                    in_shape,
                    index,
                    dim: *dim,
                    out,
                    len: d.shape[*dim],
                }));
                self.producer.insert(out, self.stages.len() - 1);
                self.define(d, None, Some((out, Layout::contiguous(&d.shape))), None);
            }
            Op::IndexAdd { a, index, src, dim } => {
                let shape = d.shape.clone();
                // A constant base (the zeros a gradient starts from) is filled, not read.
                let st = self.val(*a)?;
                let fill = if st.mem.is_none() { st.konst } else { None };
                let base = match fill {
                    Some(l) => crate::index_add::Base::Fill(l),
                    None => crate::index_add::Base::Buf(self.materialize(*a)?),
                };
                let len = self.val(*src)?.shape[*dim];
                let src = self.materialize(*src)?;
                let index = self.materialize(*index)?;
                let out = self.new_buf(d.out, d.ty, numel(&shape));
                self.stages
                    .push(Stage::IndexAdd(crate::index_add::IndexAddPlan {
                        ty: d.ty,
                        base,
                        shape: shape.clone(),
                        index,
                        src,
                        dim: *dim,
                        len,
                        out,
                    }));
                self.producer.insert(out, self.stages.len() - 1);
                self.define(d, None, Some((out, Layout::contiguous(&shape))), None);
            }
            Op::Reduce { op, a, dims } => self.reduce(d, *op, *a, dims)?,
            Op::Matmul { a, b } => {
                let plan = self
                    .product(d.ty, (*a, *b), (d.out, d.ty, &d.shape), false)?
                    .fold_broadcast_batches();
                self.push_product(plan, d, &d.shape);
            }
            Op::Conv { .. } => self.add_conv(d, None, d)?,
            Op::Full { value } => {
                let l = convert_lit(*value, d.ty);
                self.define(d, None, None, Some(l));
            }
            Op::Iota { start, step } => {
                let n = numel(&d.shape);
                let out = self.new_buf(d.out, d.ty, n);
                self.stages.push(Stage::Iota(IotaPlan {
                    ty: d.ty,
                    out,
                    start: *start,
                    step: *step,
                    len: n,
                }));
                self.producer.insert(out, self.stages.len() - 1);
                self.define(d, None, Some((out, Layout::contiguous(&d.shape))), None);
            }
        }
        Ok(())
    }

    fn reshape(&mut self, d: &Decoded, a: u32) -> Result<(), PluginError> {
        let st = self.val(a)?.clone();
        let mem = st
            .mem
            .as_ref()
            .and_then(|(b, l)| l.reshape(&st.shape, &d.shape).map(|l| (*b, l)));
        if st.virt.is_some() || mem.is_some() || st.konst.is_some() {
            self.define(d, st.virt, mem, st.konst);
            return Ok(());
        }
        // A strided view that strides cannot reshape: copy it to a contiguous buffer first.
        let g = self.stages.len();
        self.stages
            .push(Stage::Group(GroupBuilder::new(st.shape.clone())));
        let r = self.reg(g, a)?;
        self.define(d, Some((g, r)), None, None);
        Ok(())
    }

    fn reduce(
        &mut self,
        d: &Decoded,
        op: crate::ops::ReduceOp,
        a: u32,
        dims: &[usize],
    ) -> Result<(), PluginError> {
        let st = self.val(a)?.clone();
        let kept = row_major(&d.shape);
        let mut next = kept.iter();
        let out_strides: Vec<i64> = (0..st.shape.len())
            .map(|k| {
                if dims.contains(&k) {
                    0
                } else {
                    next.next().copied().unwrap_or(0)
                }
            })
            .collect();
        let over_a = Layout {
            offset: 0,
            strides: out_strides,
        };
        let mut g = self.pick_group(&[a], &st.shape)?;
        let mut strides = over_a.reshape(&st.shape, &self.group(g)?.shape.clone());
        if strides.is_none() {
            // The group's iteration shape cannot express this reduction: reduce in a new one.
            self.stages
                .push(Stage::Group(GroupBuilder::new(st.shape.clone())));
            g = self.stages.len() - 1;
            strides = Some(over_a);
        }
        let strides = strides
            .ok_or_else(|| internal("reduction strides"))?
            .strides;
        let src = self.reg(g, a)?;
        let n = numel(&d.shape);
        let out = self.new_buf(d.out, d.ty, n);
        self.group(g)?.reduce(src, op, out, strides, n);
        self.producer.insert(out, g);
        self.define(d, None, Some((out, Layout::contiguous(&d.shape))), None);
        Ok(())
    }
}

/// A literal as a value of `ty`, the way a conversion (or `full`) produces it: one rounding.
fn convert_lit(l: Lit, ty: Ty) -> Lit {
    match (l, ty) {
        (Lit::F(v), Ty::F32) => Lit::F(f32::from_f64(v).to_f64()),
        (Lit::I(v), Ty::F32) => Lit::F(f64::from(v as f32)),
        (Lit::B(v), Ty::F32 | Ty::F64) => Lit::F(f64::from(u8::from(v))),
        (Lit::F(v), Ty::F64) => Lit::F(v),
        (Lit::I(v), Ty::F64) => Lit::F(v as f64),
        (Lit::F(v), Ty::B8) => Lit::B(v != 0.0),
        (Lit::I(v), Ty::B8) => Lit::B(v != 0),
        (Lit::B(v), Ty::B8) => Lit::B(v),
        (Lit::F(v), Ty::I64) => Lit::I(v as i64),
        (Lit::I(v), Ty::I64) => Lit::I(v),
        (Lit::B(v), Ty::I64) => Lit::I(i64::from(v)),
    }
}

impl Planner {
    /// `a @ b` of type `ty` (`[..., m, k] @ [..., k, n]`; `accumulate`: summed over the batch
    /// dims) into a new buffer for value `out` (its id, dtype and shape), the operands
    /// materialized; not yet a stage: see [`Planner::push_product`].
    pub(crate) fn product(
        &mut self,
        ty: Ty,
        (a, b): (u32, u32),
        (out, out_ty, out_shape): (u32, Ty, &[usize]),
        accumulate: bool,
    ) -> Result<GemmPlan, PluginError> {
        let (abuf, alay) = self.materialize(a)?;
        let (bbuf, blay) = self.materialize(b)?;
        let ashape = self.val(a)?.shape.clone();
        let bshape = self.val(b)?.shape.clone();
        let r = ashape.len();
        let out = self.new_buf(out, out_ty, numel(out_shape));
        Ok(GemmPlan {
            ty,
            a: (abuf, alay),
            b: (bbuf, blay),
            out,
            batch: ashape[..r - 2].to_vec(),
            m: ashape[r - 2],
            k: ashape[r - 1],
            n: bshape[r - 1],
            accumulate,
            epilogue: None,
            packed: None,
        })
    }

    /// Runs `plan` as a stage and defines `dest` as its output, contiguous of `shape`.
    pub(crate) fn push_product(&mut self, plan: GemmPlan, dest: &Decoded, shape: &[usize]) {
        let out = plan.out;
        self.stages.push(Stage::Gemm(plan));
        self.producer.insert(out, self.stages.len() - 1);
        self.define(dest, None, Some((out, Layout::contiguous(shape))), None);
    }
}
