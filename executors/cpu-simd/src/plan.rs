//! Scheduling a region: every op becomes part of a stage (a fused group, a GEMM or an iota),
//! and every value is tracked as computed in a group (a register there), as a strided view of
//! a buffer, or as a constant. Shape ops only change views; a value is written to memory only
//! when something outside its group needs it (a GEMM, a broadcast, a region output).
//!
//! Stages run in creation order. An op may join an existing group only if every buffer it
//! reads is written by an earlier stage, which keeps that order valid however groups grow.

use crate::decode::{Decoded, Lit, Operand, Ty};
use crate::group::{BufId, GroupBuilder, Src};
use crate::layout::Layout;
use crate::stages::Stage;
use std::collections::HashMap;
use thunder_abi::PluginError;

#[derive(Debug, Clone)]
pub(crate) struct ValState {
    pub(crate) ty: Ty,
    pub(crate) shape: Vec<usize>,
    /// Computed in group `.0` as SSA value `.1`.
    pub(crate) virt: Option<(usize, u32)>,
    /// Readable from memory.
    pub(crate) mem: Option<(BufId, Layout)>,
    /// Every element is this literal.
    pub(crate) konst: Option<Lit>,
}

/// How an operand reaches a group.
pub(crate) enum Reach {
    Reg(u32),
    Load(BufId, Layout),
    Const(Lit),
    /// Computed in an earlier group: store it there, then load it.
    StoreFrom(usize, u32),
}

pub(crate) struct Planner {
    pub(crate) vals: HashMap<u32, ValState>,
    pub(crate) stages: Vec<Stage>,
    pub(crate) producer: HashMap<BufId, usize>,
    pub(crate) scratch: Vec<(Ty, usize)>,
    outputs: HashMap<u32, usize>,
    /// Kernel outputs written into a later value's buffer (`placement.rs`).
    pub(crate) placements: HashMap<u32, crate::placement::Placement>,
    /// The buffers of those later values, made when the first output placed there is.
    anchors: HashMap<u32, BufId>,
}

pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

pub(crate) fn internal(m: impl Into<String>) -> PluginError {
    PluginError::internal(format!("cpu-simd: {}", m.into()))
}

impl Planner {
    pub(crate) fn new(inputs: &[(u32, Ty, Vec<usize>)], outputs: &[u32]) -> Planner {
        let mut vals = HashMap::new();
        for (i, (id, ty, shape)) in inputs.iter().enumerate() {
            vals.insert(
                *id,
                ValState {
                    ty: *ty,
                    shape: shape.clone(),
                    virt: None,
                    mem: Some((BufId::Input(i), Layout::contiguous(shape))),
                    konst: None,
                },
            );
        }
        Planner {
            vals,
            stages: Vec::new(),
            producer: HashMap::new(),
            scratch: Vec::new(),
            outputs: outputs.iter().enumerate().map(|(j, &id)| (id, j)).collect(),
            placements: HashMap::new(),
            anchors: HashMap::new(),
        }
    }

    pub(crate) fn val(&self, id: u32) -> Result<&ValState, PluginError> {
        self.vals
            .get(&id)
            .ok_or_else(|| internal(format!("value {id} is read before it is defined")))
    }

    pub(crate) fn group(&mut self, g: usize) -> Result<&mut GroupBuilder, PluginError> {
        match self.stages.get_mut(g) {
            Some(Stage::Group(b)) => Ok(b),
            _ => Err(internal(format!("stage {g} is not a group"))),
        }
    }

    /// Lets value `src` take the output slot of region output `out`, a reshape of it that is
    /// its only reader: both are contiguous, so writing `src` there writes `out`, and the copy
    /// of a product into its reshaped output (GPT-2's `[T, vocab]` logits) is gone.
    pub(crate) fn share_output_slot(&mut self, src: u32, out: u32) {
        if let Some(&j) = self.outputs.get(&out) {
            if !self.outputs.contains_key(&src) && !self.vals.contains_key(&src) {
                self.outputs.insert(src, j);
            }
        }
    }

    /// Whether value `id` is written into a region output's buffer: it is one, or it took one's
    /// slot ([`Planner::share_output_slot`]).
    pub(crate) fn has_output_slot(&self, id: u32) -> bool {
        self.outputs.contains_key(&id)
    }

    /// A buffer for value `id`: its output slot when it is a region output, else scratch.
    pub(crate) fn new_buf(&mut self, id: u32, ty: Ty, n: usize) -> BufId {
        if let Some(&b) = self.anchors.get(&id) {
            return b;
        }
        if let Some(&j) = self.outputs.get(&id) {
            if !self.producer.contains_key(&BufId::Output(j)) {
                return BufId::Output(j);
            }
        }
        self.scratch.push((ty, n));
        BufId::Scratch(self.scratch.len() - 1)
    }

    /// Where a kernel writes value `id`: its place in a later value's buffer when it has one
    /// (`placement.rs`), else a contiguous buffer of its own.
    pub(crate) fn out_view(&mut self, id: u32, ty: Ty, shape: &[usize]) -> (BufId, Layout) {
        let Some(p) = self.placements.get(&id).cloned() else {
            return (
                self.new_buf(id, ty, numel(shape)),
                Layout::contiguous(shape),
            );
        };
        let buf = match self.anchors.get(&p.anchor) {
            Some(&b) => b,
            None => {
                let b = self.new_buf(p.anchor, ty, numel(&p.anchor_shape));
                self.anchors.insert(p.anchor, b);
                b
            }
        };
        (buf, p.layout)
    }

    pub(crate) fn ready_before(&self, buf: BufId, g: usize) -> bool {
        self.producer.get(&buf).is_none_or(|&p| p < g)
    }

    /// How value `id` can be read by group `g` of shape `gshape`, if it can.
    pub(crate) fn reach(
        &self,
        id: u32,
        g: usize,
        gshape: &[usize],
    ) -> Result<Option<Reach>, PluginError> {
        let st = self.val(id)?;
        if let Some((vg, ssa)) = st.virt {
            if vg == g {
                return Ok(Some(Reach::Reg(ssa)));
            }
        }
        if let Some(l) = st.konst {
            return Ok(Some(Reach::Const(l)));
        }
        if let Some((buf, layout)) = &st.mem {
            if self.ready_before(*buf, g) {
                if let Some(l) = layout.reshape(&st.shape, gshape) {
                    return Ok(Some(Reach::Load(*buf, l)));
                }
            }
        }
        Ok(match st.virt {
            Some((vg, ssa)) if vg < g => Some(Reach::StoreFrom(vg, ssa)),
            _ => None,
        })
    }

    /// Writes a group-computed value to a new contiguous buffer (once).
    pub(crate) fn materialize(&mut self, id: u32) -> Result<(BufId, Layout), PluginError> {
        let st = self.val(id)?.clone();
        if let Some(mem) = st.mem {
            return Ok(mem);
        }
        let n = numel(&st.shape);
        let buf = self.new_buf(id, st.ty, n);
        let contiguous = Layout::contiguous(&st.shape);
        match (st.virt, st.konst) {
            (Some((g, ssa)), _) => {
                let gb = self.group(g)?;
                let layout = contiguous
                    .reshape(&st.shape, &gb.shape)
                    .ok_or_else(|| internal("a contiguous layout failed to reshape"))?;
                gb.store(ssa, buf, layout);
                self.producer.insert(buf, g);
            }
            (None, Some(l)) => {
                let mut gb = GroupBuilder::new(st.shape.clone());
                let r = gb.fresh(st.ty);
                gb.ins.push(crate::group::Ins::Splat {
                    ty: st.ty,
                    dst: r,
                    value: l,
                });
                gb.store(r, buf, contiguous.clone());
                self.stages.push(Stage::Group(gb));
                self.producer.insert(buf, self.stages.len() - 1);
            }
            (None, None) => return Err(internal(format!("value {id} has no definition"))),
        }
        let mem = (buf, contiguous);
        if let Some(v) = self.vals.get_mut(&id) {
            v.mem = Some(mem.clone());
        }
        Ok(mem)
    }

    /// Writes SSA value `ssa` of group `g` (value `id`) to a new contiguous buffer, for a
    /// reader whose shape its existing view cannot be reshaped to.
    pub(crate) fn store_fresh(
        &mut self,
        id: u32,
        g: usize,
        ssa: u32,
    ) -> Result<(BufId, Layout), PluginError> {
        let st = self.val(id)?.clone();
        if st.mem.is_none() {
            return self.materialize(id);
        }
        self.scratch.push((st.ty, numel(&st.shape)));
        let buf = BufId::Scratch(self.scratch.len() - 1);
        let gb = self.group(g)?;
        let layout = Layout::contiguous(&st.shape)
            .reshape(&st.shape, &gb.shape)
            .ok_or_else(|| internal("a contiguous layout failed to reshape"))?;
        gb.store(ssa, buf, layout);
        self.producer.insert(buf, g);
        Ok((buf, Layout::contiguous(&st.shape)))
    }

    /// Turns a plan into an SSA value of group `g` (or a literal).
    pub(crate) fn bring(&mut self, g: usize, id: u32, reach: Reach) -> Result<Src, PluginError> {
        let ty = self.val(id)?.ty;
        match reach {
            Reach::Reg(r) => Ok(Src::Reg(r)),
            Reach::Const(l) => Ok(Src::Lit(l)),
            Reach::Load(buf, layout) => Ok(Src::Reg(self.group(g)?.load(buf, ty, layout))),
            Reach::StoreFrom(vg, ssa) => {
                let (buf, layout) = self.store_fresh(id, vg, ssa)?;
                let (shape, gshape) = (self.val(id)?.shape.clone(), self.group(g)?.shape.clone());
                let layout = layout
                    .reshape(&shape, &gshape)
                    .ok_or_else(|| internal("a fresh buffer failed to reshape"))?;
                Ok(Src::Reg(self.group(g)?.load(buf, ty, layout)))
            }
        }
    }

    /// The group to run an op of `numel` elements reading `ids`: the newest group that already
    /// computes one of them, else the newest group of that size, else a new one.
    pub(crate) fn pick_group(
        &mut self,
        ids: &[u32],
        shape: &[usize],
    ) -> Result<usize, PluginError> {
        let n = numel(shape);
        let mut candidates: Vec<usize> = ids
            .iter()
            .filter_map(|id| self.vals.get(id).and_then(|s| s.virt).map(|(g, _)| g))
            .collect();
        candidates.sort_unstable();
        candidates.reverse();
        let newest_same_size = self.stages.iter().rposition(|s| match s {
            Stage::Group(gb) => gb.numel() == n,
            _ => false,
        });
        candidates.extend(newest_same_size);
        for g in candidates {
            let gshape = self.group(g)?.shape.clone();
            if numel(&gshape) != n {
                continue;
            }
            let mut ok = true;
            for &id in ids {
                ok &= self.reach(id, g, &gshape)?.is_some();
            }
            if ok {
                return Ok(g);
            }
        }
        self.stages
            .push(Stage::Group(GroupBuilder::new(shape.to_vec())));
        Ok(self.stages.len() - 1)
    }

    pub(crate) fn operand(&mut self, g: usize, o: Operand) -> Result<Src, PluginError> {
        match o {
            Operand::Lit(l) => Ok(Src::Lit(l)),
            Operand::Val(id) => {
                let gshape = self.group(g)?.shape.clone();
                let reach = self
                    .reach(id, g, &gshape)?
                    .ok_or_else(|| internal(format!("value {id} cannot reach group {g}")))?;
                self.bring(g, id, reach)
            }
        }
    }

    /// An operand that must be a register (a splat when it is a constant).
    pub(crate) fn reg(&mut self, g: usize, id: u32) -> Result<u32, PluginError> {
        let ty = self.val(id)?.ty;
        match self.operand(g, Operand::Val(id))? {
            Src::Reg(r) => Ok(r),
            Src::Lit(value) => {
                let gb = self.group(g)?;
                let dst = gb.fresh(ty);
                gb.ins.push(crate::group::Ins::Splat { ty, dst, value });
                Ok(dst)
            }
        }
    }

    pub(crate) fn define(
        &mut self,
        d: &Decoded,
        virt: Option<(usize, u32)>,
        mem: Option<(BufId, Layout)>,
        konst: Option<Lit>,
    ) {
        self.vals.insert(
            d.out,
            ValState {
                ty: d.ty,
                shape: d.shape.clone(),
                virt,
                mem,
                konst,
            },
        );
    }

    /// Makes sure every region output lands in its output buffer.
    pub(crate) fn finish_outputs(&mut self, outputs: &[u32]) -> Result<(), PluginError> {
        for (j, &id) in outputs.iter().enumerate() {
            let st = self.val(id)?.clone();
            let target = (BufId::Output(j), Layout::contiguous(&st.shape));
            if st.mem.as_ref() == Some(&target) {
                continue;
            }
            if self.producer.contains_key(&BufId::Output(j)) {
                return Err(internal(format!("output {j} is written twice")));
            }
            let g = match st.virt {
                Some((g, _)) => g,
                None => {
                    self.stages
                        .push(Stage::Group(GroupBuilder::new(st.shape.clone())));
                    self.stages.len() - 1
                }
            };
            let r = self.reg(g, id)?;
            let gb = self.group(g)?;
            let layout = target
                .1
                .reshape(&st.shape, &gb.shape)
                .ok_or_else(|| internal("output layout"))?;
            gb.store(r, target.0, layout);
            self.producer.insert(target.0, g);
        }
        Ok(())
    }
}
