//! A compiled region: its ops decoded into instructions over numbered slots (region inputs
//! first, then one slot per op output), interpreted in trace order on every run.

use crate::args::{Env, SlotMeta};
use crate::data::{lane_kind, Lanes};
use crate::decode::{decode, Instr, Operand};
use crate::elementwise::{self, Src};
use crate::memory::{check_desc, read, read_elements, write};
use crate::{matmul, reduce, shape};
use thunder_abi::export::CompiledRegion;
use thunder_abi::prims::Prim;
use thunder_abi::{
    DeviceKind, ExecContext, OpView, PluginError, RegionSpec, TensorDesc, TraceView,
};

struct Step {
    prim: Prim,
    instr: Instr,
    /// One slot per output, in the op's output order.
    outs: Vec<usize>,
    /// Slots read for the last time here and not region outputs: freed after the step so a
    /// long region does not hold every intermediate at once.
    release: Vec<usize>,
}

pub(crate) struct Program {
    n_inputs: usize,
    metas: Vec<SlotMeta>,
    /// Trace value id of each slot, for messages.
    ids: Vec<u32>,
    steps: Vec<Step>,
    outputs: Vec<usize>,
    /// Region inputs read only as the source of `take`s: never decoded whole, each take reads
    /// the elements it gathers straight from the input buffer.
    gathered_only: Vec<bool>,
}

fn slot_meta(view: &TraceView, id: u32) -> Result<SlotMeta, PluginError> {
    let meta = view.values.get(id as usize).ok_or_else(|| {
        PluginError::invalid(format!(
            "value {id} is not in the trace ({} values)",
            view.values.len()
        ))
    })?;
    if meta.device.kind != DeviceKind::Cpu {
        return Err(PluginError::unsupported(format!(
            "value {id} is on {:?}; the interpreter runs on CPU only",
            meta.device
        )));
    }
    let shape = meta
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            PluginError::invalid(format!("value {id} has a negative dim in {:?}", meta.shape))
        })?;
    Ok(SlotMeta {
        dtype: meta.dtype,
        shape,
    })
}

fn reads(instr: &Instr) -> Vec<usize> {
    let slot = |o: &Operand| match o {
        Operand::Slot(s) => Some(*s),
        Operand::Scalar(_) => None,
    };
    match instr {
        Instr::Unary { a, .. }
        | Instr::Predicate { a, .. }
        | Instr::Convert { a }
        | Instr::BroadcastInDim { a, .. }
        | Instr::Reshape { a }
        | Instr::Transpose { a, .. }
        | Instr::Reduce { a, .. } => vec![*a],
        Instr::Binary { a, b, .. } | Instr::Compare { a, b, .. } => {
            [slot(a), slot(b)].into_iter().flatten().collect()
        }
        Instr::Where { pred, a, b } => [Some(*pred), slot(a), slot(b)]
            .into_iter()
            .flatten()
            .collect(),
        Instr::Matmul { a, b } => vec![*a, *b],
        Instr::Full { .. } | Instr::Iota { .. } => Vec::new(),
        Instr::Kernel(k) => k.reads(),
        Instr::Indexing(ix) => ix.reads(),
    }
}

/// A decoded op: its prim, instruction, and each output's trace id and metadata.
type DecodedOp = (Prim, Instr, Vec<(u32, SlotMeta)>);

/// Decodes one op against the values defined so far: its prim, instruction, and the id and
/// metadata of each output.
fn decode_op(view: &TraceView, op: &OpView, env: &Env) -> Result<DecodedOp, PluginError> {
    let prim = Prim::from_id(&op.symbol).ok_or_else(|| {
        PluginError::unsupported(format!(
            "{}: not a prim (the interpreter runs prims only)",
            op.symbol
        ))
    })?;
    let outs = op
        .outputs
        .iter()
        .map(|&id| slot_meta(view, id).map(|m| (id, m)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PluginError::new(e.kind, format!("{}: {}", prim.id(), e.message)))?;
    let metas: Vec<SlotMeta> = outs.iter().map(|(_, m)| m.clone()).collect();
    let instr = match metas.as_slice() {
        [out] if !crate::kernels::is_multi_output(prim) => decode(prim, &op.args, out, env),
        _ => crate::kernels::decode_multi(prim, &op.args, &metas, env),
    }
    .map_err(|e| e.into_plugin(prim.id()))?;
    Ok((prim, instr, outs))
}

/// Whether `compile` accepts `op` on its own, its tensor arguments read from outside.
pub(crate) fn accepts(view: &TraceView, op: &OpView) -> bool {
    let mut env = Env::default();
    for id in op.input_values() {
        if env.slots.contains_key(&id) {
            continue;
        }
        let Ok(meta) = slot_meta(view, id) else {
            return false;
        };
        env.slots.insert(id, env.metas.len());
        env.metas.push(meta);
    }
    decode_op(view, op, &env).is_ok()
}

impl Program {
    pub(crate) fn compile(view: &TraceView, region: &RegionSpec) -> Result<Program, PluginError> {
        let mut env = Env::default();
        let mut ids = Vec::new();
        let mut define = |env: &mut Env, id: u32, meta: SlotMeta| {
            if env.slots.insert(id, env.metas.len()).is_some() {
                return Err(PluginError::invalid(format!(
                    "value {id} is defined twice in the region"
                )));
            }
            env.metas.push(meta);
            ids.push(id);
            Ok(env.metas.len() - 1)
        };
        for &id in region.inputs.iter() {
            define(&mut env, id, slot_meta(view, id)?)?;
        }
        let n_inputs = env.metas.len();

        let mut steps = Vec::with_capacity(region.ops.len());
        for &index in region.ops.iter() {
            let op = view
                .ops
                .get(index as usize)
                .ok_or_else(|| PluginError::invalid(format!("op {index} is not in the trace")))?;
            let (prim, instr, outs) = decode_op(view, op, &env)?;
            let outs = outs
                .into_iter()
                .map(|(id, meta)| define(&mut env, id, meta))
                .collect::<Result<Vec<_>, _>>()?;
            steps.push(Step {
                prim,
                instr,
                outs,
                release: Vec::new(),
            });
        }

        let outputs = region
            .outputs
            .iter()
            .map(|id| {
                env.slots.get(id).copied().ok_or_else(|| {
                    PluginError::invalid(format!(
                        "region output {id} is neither a region input nor written by its ops"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;

        let mut last_use: Vec<Option<usize>> = vec![None; env.metas.len()];
        for (i, step) in steps.iter().enumerate() {
            // A value nobody reads dies where it is made.
            for &out in &step.outs {
                last_use[out] = Some(i);
            }
            for slot in reads(&step.instr) {
                last_use[slot] = Some(i);
            }
        }
        for (slot, last) in last_use.into_iter().enumerate() {
            if let (Some(i), false) = (last, outputs.contains(&slot)) {
                steps[i].release.push(slot);
            }
        }
        let mut gathered_only = vec![true; n_inputs];
        for step in &steps {
            let source = match &step.instr {
                Instr::Indexing(ix) => ix.take_source().filter(|(a, i)| a != i).map(|(a, _)| a),
                _ => None,
            };
            for slot in reads(&step.instr) {
                if slot < n_inputs && Some(slot) != source {
                    gathered_only[slot] = false;
                }
            }
        }
        for &slot in &outputs {
            if slot < n_inputs {
                gathered_only[slot] = false;
            }
        }
        Ok(Program {
            n_inputs,
            metas: env.metas,
            ids,
            steps,
            outputs,
            gathered_only,
        })
    }

    /// A `take` whose source is a gathered-only region input: reads just the taken elements.
    fn take_from_input(
        &self,
        ix: &crate::indexing::IndexInstr,
        step: &Step,
        slots: &[Option<Lanes>],
        inputs: &[TensorDesc<'_>],
    ) -> Result<Vec<Lanes>, String> {
        let lanes = |slot: usize| {
            slots
                .get(slot)
                .and_then(Option::as_ref)
                .ok_or_else(|| format!("internal: slot {slot} is empty"))
        };
        let shape = |slot: usize| self.metas[slot].shape.as_slice();
        let out = step
            .outs
            .first()
            .map(|&o| &self.metas[o])
            .ok_or_else(|| "internal: take without an output".to_string())?;
        let positions = ix.take_positions(&lanes, &shape, out)?;
        let (a, _) = ix
            .take_source()
            .ok_or_else(|| "internal: not a take".to_string())?;
        Ok(vec![read_elements(&inputs[a], &positions)?])
    }

    fn exec(&self, step: &Step, slots: &[Option<Lanes>]) -> Result<Vec<Lanes>, String> {
        let lanes = |slot: usize| {
            slots
                .get(slot)
                .and_then(Option::as_ref)
                .ok_or_else(|| format!("internal: slot {slot} is empty"))
        };
        let shape = |slot: usize| self.metas[slot].shape.as_slice();
        let src = |o: &Operand| match o {
            Operand::Slot(s) => lanes(*s).map(Src::Tensor),
            Operand::Scalar(v) => Ok(Src::Scalar(*v)),
        };
        if let Instr::Kernel(ext) = &step.instr {
            let outs: Vec<&SlotMeta> = step.outs.iter().map(|&o| &self.metas[o]).collect();
            return ext.exec(&lanes, &shape, &outs);
        }
        let out = &self.metas[step.outs[0]];
        let n = out.shape.iter().product();
        let single = match &step.instr {
            Instr::Unary { op, a } => elementwise::unary(*op, lanes(*a)?),
            Instr::Predicate { op, a } => elementwise::predicate(*op, lanes(*a)?),
            Instr::Binary { op, a, b } => {
                elementwise::binary(*op, src(a)?, src(b)?, lane_kind(out.dtype), n)
            }
            Instr::Compare { op, a, b } => elementwise::compare(*op, src(a)?, src(b)?, n),
            Instr::Where { pred, a, b } => {
                elementwise::where_(lanes(*pred)?, src(a)?, src(b)?, lane_kind(out.dtype))
            }
            Instr::Convert { a } => Ok(elementwise::convert(lanes(*a)?, out.dtype)),
            Instr::BroadcastInDim { a, dims } => {
                shape::broadcast_in_dim(lanes(*a)?, shape(*a), &out.shape, dims)
            }
            Instr::Reshape { a } => Ok(lanes(*a)?.clone()),
            Instr::Transpose { a, perm } => shape::transpose(lanes(*a)?, shape(*a), perm),
            Instr::Reduce { op, a, dims } => reduce::reduce(*op, lanes(*a)?, shape(*a), dims),
            Instr::Matmul { a, b } => matmul::matmul(lanes(*a)?, shape(*a), lanes(*b)?, shape(*b)),
            Instr::Full { value } => Ok(Lanes::splat(*value, n)),
            // Values are exact in i64 and rounded to a float dtype by `normalize`.
            Instr::Iota {
                start,
                step: stride,
            } => {
                let values = (0..n as i64).map(|i| start.wrapping_add(i.wrapping_mul(*stride)));
                Ok(if out.dtype.is_float() {
                    Lanes::Float(values.map(|v| v as f64).collect())
                } else {
                    Lanes::Int(values.collect())
                })
            }
            Instr::Indexing(ix) => ix.exec(&lanes, &shape, out),
            Instr::Kernel(_) => {
                Err("internal: kernel instruction in the single-output path".into())
            }
        };
        single.map(|l| vec![l])
    }
}

impl CompiledRegion for Program {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        if ctx.device.kind != DeviceKind::Cpu {
            return Err(PluginError::invalid(format!(
                "asked to run on {:?}; the interpreter runs on CPU only",
                ctx.device
            )));
        }
        if inputs.len() != self.n_inputs || outputs.len() != self.outputs.len() {
            return Err(PluginError::invalid(format!(
                "expected {} inputs and {} outputs, got {} and {}",
                self.n_inputs,
                self.outputs.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        // Outputs are checked before any work so a bad buffer fails fast.
        for (j, (desc, &slot)) in outputs.iter().zip(&self.outputs).enumerate() {
            let meta = &self.metas[slot];
            check_desc(desc, meta.dtype, &meta.shape).map_err(|m| {
                PluginError::invalid(format!("output {j} (value {}): {m}", self.ids[slot]))
            })?;
        }
        let mut slots: Vec<Option<Lanes>> = vec![None; self.metas.len()];
        for (i, desc) in inputs.iter().enumerate() {
            let meta = &self.metas[i];
            check_desc(desc, meta.dtype, &meta.shape).map_err(|m| {
                PluginError::invalid(format!("input {i} (value {}): {m}", self.ids[i]))
            })?;
            if !self.gathered_only[i] {
                let lanes = read(desc).map_err(|m| {
                    PluginError::invalid(format!("input {i} (value {}): {m}", self.ids[i]))
                })?;
                slots[i] = Some(lanes);
            }
        }
        for step in &self.steps {
            let results = match &step.instr {
                Instr::Indexing(ix)
                    if ix
                        .take_source()
                        .is_some_and(|(a, _)| a < self.n_inputs && self.gathered_only[a]) =>
                {
                    self.take_from_input(ix, step, &slots, inputs)
                }
                _ => self.exec(step, &slots),
            }
            .map_err(|m| PluginError::invalid(format!("{}: {m}", step.prim.id())))?;
            if results.len() != step.outs.len() {
                return Err(PluginError::internal(format!(
                    "{}: {} results for {} outputs",
                    step.prim.id(),
                    results.len(),
                    step.outs.len()
                )));
            }
            for (mut lanes, &out) in results.into_iter().zip(&step.outs) {
                lanes.normalize(self.metas[out].dtype);
                slots[out] = Some(lanes);
            }
            for &slot in &step.release {
                slots[slot] = None;
            }
        }
        for (j, (desc, &slot)) in outputs.iter().zip(&self.outputs).enumerate() {
            let lanes = slots[slot].as_ref().ok_or_else(|| {
                PluginError::internal(format!("output {j}: slot {slot} was released"))
            })?;
            write(desc, lanes).map_err(|m| {
                PluginError::invalid(format!("output {j} (value {}): {m}", self.ids[slot]))
            })?;
        }
        Ok(())
    }
}
