//! A compiled region: its stages in run order, plus what `run` checks the host's tensors
//! against. Scratch buffers come from the host's allocator for the duration of one run.

use crate::decode::{decode, value_meta, Op, Ty};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::plan::Planner;
use crate::stages::Stage;
use std::collections::{HashMap, HashSet};
use thunder_abi::export::CompiledRegion;
use thunder_abi::{
    DeviceDesc, DeviceKind, ExecContext, HostServices, PluginError, RegionSpec, TensorDesc,
    TraceView,
};

/// A region op in trace order: a decoded prim (its position among the prims), an attention
/// composite or a layer norm.
enum Item {
    Prim(usize),
    Sdpa(crate::sdpa::SdpaOp),
    LayerNorm(crate::layer_norm::LayerNormOp),
}

pub(crate) struct Region {
    inputs: Vec<(u32, Ty, Vec<usize>)>,
    outputs: Vec<(u32, Ty, Vec<usize>)>,
    scratch: Vec<(Ty, usize)>,
    stages: Vec<Stage>,
    services: HostServices,
    /// `2 m n k` over the GEMMs and convolutions (`on_worker.rs`).
    product_flops: f64,
}

fn size_of(ty: Ty) -> usize {
    ty.dtype().size_bytes()
}

fn metas(view: &TraceView, ids: &[u32]) -> Result<Vec<(u32, Ty, Vec<usize>)>, PluginError> {
    ids.iter()
        .map(|&id| {
            value_meta(view, id)
                .map(|(ty, shape)| (id, ty, shape))
                .map_err(|m| PluginError::unsupported(format!("cpu-simd: {m}")))
        })
        .collect()
}

impl Region {
    /// `static_inputs`: positions in `region.inputs` the host promised to be the same buffer
    /// with the same values on every run (ABI 1.2's `compile_static`).
    pub(crate) fn compile(
        view: &TraceView,
        region: &RegionSpec,
        services: HostServices,
        static_inputs: &[u32],
    ) -> Result<Region, PluginError> {
        crate::ftz::init_pool();
        let inputs = metas(view, &region.inputs)?;
        let outputs = metas(view, &region.outputs)?;
        let mut planner = Planner::new(&inputs, &region.outputs);
        // Prims are decoded for the planner and the pattern finders; the attention
        // composites (`sdpa.rs`) are stages of their own, and what they read counts as read
        // outside any chain (like a region output).
        let mut decoded = Vec::with_capacity(region.ops.len());
        let mut order = Vec::with_capacity(region.ops.len());
        let mut read_outside: Vec<u32> = region.outputs.to_vec();
        for &i in region.ops.iter() {
            let op = view.ops.get(i as usize).ok_or_else(|| {
                PluginError::invalid(format!("cpu-simd: op {i} is not in the trace"))
            })?;
            if crate::sdpa::is_sdpa(&op.symbol) {
                let s = crate::sdpa::decode(view, op)?;
                read_outside.extend(&s.args);
                order.push(Item::Sdpa(s));
            } else if op.symbol == crate::layer_norm::SYMBOL {
                let l = crate::layer_norm::decode(view, op)?;
                read_outside.extend([l.x].into_iter().chain(l.weight).chain(l.bias));
                order.push(Item::LayerNorm(l));
            } else {
                decoded.push(decode(view, op)?);
                order.push(Item::Prim(decoded.len() - 1));
            }
        }
        // Attention chains run fused: their ops are skipped and the kernel's stage takes the
        // place of the final product.
        let attention = if fuse_attention() {
            crate::attn_match::find(&decoded, &read_outside)
        } else {
            Vec::new()
        };
        // A batched product summed over its batch runs at the sum's place as one GEMM.
        let summed = crate::gemm_sum::find(&decoded, &read_outside);
        let sum_of: HashMap<usize, usize> = summed.iter().map(|(&mm, &s)| (s, mm)).collect();
        // A product read only by a transpose runs transposed, at the transpose's place.
        let mut transposed = crate::gemm_t::find(&decoded, &read_outside, &summed);
        transposed.retain(|p, _| !attention.iter().any(|m| m.ops.contains(p)));
        let transpose_of: HashMap<usize, usize> =
            transposed.iter().map(|(&p, &t)| (t, p)).collect();
        // A convolution read only by a residual add and/or a ReLU runs them as its epilogue.
        let taken: HashSet<usize> = attention
            .iter()
            .flat_map(|m| m.ops.iter().copied())
            .chain(summed.keys().copied())
            .chain(summed.values().copied())
            .chain(transposed.keys().copied())
            .chain(transposed.values().copied())
            .collect();
        // A max pool's pad, slices and maximums run as one window stage at the last maximum.
        let pools = if crate::pool_match::enabled() {
            crate::pool_match::find(&decoded, &read_outside, &taken)
        } else {
            Vec::new()
        };
        let taken: HashSet<usize> = taken
            .into_iter()
            .chain(pools.iter().flat_map(|m| m.ops.iter().copied()))
            .collect();
        let epilogues = crate::conv::find_epilogues(&decoded, &read_outside, &taken);
        let mut in_epilogue: HashSet<usize> = epilogues
            .values()
            .flat_map(|e| e.ops.iter().copied())
            .collect();
        // A plain product read only by a bias add (and a ReLU) runs them as its epilogue.
        let taken: HashSet<usize> = taken
            .into_iter()
            .chain(in_epilogue.iter().copied())
            .chain(epilogues.keys().copied())
            .collect();
        // A region output that reshapes a value only it reads: the value is computed into the
        // output's buffer (not region inputs: those are read in place, and `vals` has them).
        // Last op first, so that a chain of such reshapes hands the slot down to its start.
        let uses = crate::fusion::Uses::of(&decoded);
        for d in decoded.iter().rev() {
            if let Op::Reshape { a } = d.op {
                if planner.has_output_slot(d.out)
                    && uses.sole(a, &read_outside, &HashSet::new()).is_some()
                {
                    planner.share_output_slot(a, d.out);
                }
            }
        }
        // Attention outputs read only through the heads' merge or as parts of a
        // concatenation are written into the merged or concatenated buffer.
        let mut candidates: Vec<u32> = attention.iter().map(|m| m.out).collect();
        let mut shapes: HashMap<u32, Vec<usize>> = inputs
            .iter()
            .map(|(id, _, shape)| (*id, shape.clone()))
            .chain(decoded.iter().map(|d| (d.out, d.shape.clone())))
            .collect();
        for item in &order {
            if let Item::Sdpa(s) = item {
                let rows = match s.kind {
                    crate::sdpa::SdpaKind::Fwd => &s.outputs[..1],
                    crate::sdpa::SdpaKind::Bwd => &s.outputs[..],
                };
                candidates.extend(rows);
                shapes.extend(s.outputs.iter().copied().zip(s.out_shapes.iter().cloned()));
            }
        }
        planner.placements =
            crate::placement::find(&decoded, &uses, &candidates, &read_outside, &taken, &shapes);
        let gemm_epilogues = crate::gemm_epi::find(&decoded, &read_outside, &taken);
        in_epilogue.extend(gemm_epilogues.values().flat_map(|e| e.ops.iter().copied()));
        for item in &order {
            let pos = match item {
                Item::Sdpa(s) => {
                    planner.add_sdpa(s)?;
                    continue;
                }
                Item::LayerNorm(l) => {
                    planner.add_layer_norm(l)?;
                    continue;
                }
                Item::Prim(pos) => *pos,
            };
            let d = &decoded[pos];
            if let Some(&p) = transpose_of.get(&pos) {
                // p is a matmul, or the sum of a summed one.
                match sum_of.get(&p) {
                    Some(&mm) => planner.add_gemm_transposed(&decoded[mm], Some(&decoded[p]), d)?,
                    None => planner.add_gemm_transposed(&decoded[p], None, d)?,
                }
                continue;
            }
            if let Some(m) = pools.iter().find(|m| m.ops.contains(&pos)) {
                if m.at == pos {
                    planner.add_max_pool(m, d)?;
                }
                continue;
            }
            match attention.iter().find(|m| m.ops.contains(&pos)) {
                Some(m) if m.at == pos => planner.add_attention(m, d)?,
                Some(_) => {}
                None if summed.contains_key(&pos)
                    || transposed.contains_key(&pos)
                    || in_epilogue.contains(&pos) => {}
                None if gemm_epilogues.contains_key(&pos) => {
                    planner.add_gemm_epi(d, &gemm_epilogues[&pos], &decoded)?;
                }
                None if epilogues.contains_key(&pos) => {
                    let epi = &epilogues[&pos];
                    let last = epi.ops.last().map_or(d, |&j| &decoded[j]);
                    planner.add_conv(d, Some(epi), last)?;
                }
                None => match sum_of.get(&pos) {
                    Some(&mm) => planner.add_gemm_sum(&decoded[mm], d)?,
                    None => planner.add(d)?,
                },
            }
        }
        planner.finish_outputs(&region.outputs)?;
        let scratch = std::mem::take(&mut planner.scratch);
        let mut stages: Vec<Stage> = planner.stages.into_iter().map(Stage::finish).collect();
        // Products and convolutions against a static weight keep it packed between runs.
        let is_static =
            |buf: BufId| matches!(buf, BufId::Input(i) if static_inputs.contains(&(i as u32)));
        for stage in &mut stages {
            match stage {
                Stage::Gemm(g) if is_static(g.b.0) && crate::prepack::applies(g) => {
                    g.packed = Some(Default::default());
                }
                Stage::Conv(c) if is_static(c.w.0) => {
                    if crate::packed_left::applies(c) {
                        c.packed = Some(Default::default());
                    }
                    #[cfg(target_arch = "x86_64")]
                    if crate::winograd::applies(c) {
                        c.winograd = Some(Default::default());
                    }
                }
                _ => {}
            }
        }
        let stages = crate::gemm_pair::pair_products(stages);
        let product_flops = crate::on_worker::product_flops(&stages);
        Ok(Region {
            inputs,
            outputs,
            scratch,
            stages,
            product_flops,
            services,
        })
    }

    /// Number of max-pool window stages and of pad stages (for tests).
    #[cfg(test)]
    pub(crate) fn pool_and_pad_stages(&self) -> (usize, usize) {
        let count = |f: fn(&Stage) -> bool| self.stages.iter().filter(|s| f(s)).count();
        (
            count(|s| matches!(s, Stage::MaxPool(_))),
            count(|s| matches!(s, Stage::Pad(_))),
        )
    }

    /// Number of fused attention stages (for tests).
    #[cfg(test)]
    pub(crate) fn attention_stages(&self) -> usize {
        self.stages
            .iter()
            .filter(|s| matches!(s, Stage::Attn(_) | Stage::AttnBwd(_)))
            .count()
    }

    /// `2 m n k` over the region's GEMMs and convolutions (for tests).
    #[cfg(test)]
    pub(crate) fn product_flops(&self) -> f64 {
        self.product_flops
    }

    /// Number of product and convolution stages running on a kept packing of their weight
    /// (for tests).
    #[cfg(test)]
    pub(crate) fn packed_products(&self) -> usize {
        let packed = |g: &crate::stages::GemmPlan| g.packed.as_ref().is_some_and(|s| s.is_packed());
        self.stages
            .iter()
            .map(|s| match s {
                Stage::Gemm(g) => usize::from(packed(g)),
                Stage::GemmPair(p) => usize::from(packed(&p.0)) + usize::from(packed(&p.1)),
                Stage::Conv(c) => usize::from(c.packed.as_ref().is_some_and(|s| s.is_packed())),
                _ => 0,
            })
            .sum()
    }

    /// Number of paired product stages (for tests).
    #[cfg(test)]
    pub(crate) fn gemm_pairs(&self) -> usize {
        self.stages
            .iter()
            .filter(|s| matches!(s, Stage::GemmPair(_)))
            .count()
    }

    /// Number of stages, and how many of them are fused groups (for tests and logs).
    pub(crate) fn stage_counts(&self) -> (usize, usize) {
        let groups = self
            .stages
            .iter()
            .filter(|s| matches!(s, Stage::Ready(_)))
            .count();
        (self.stages.len(), groups)
    }
}

/// Whether attention chains are fused and the attention composites claimed
/// (`THUNDER_CPU_SIMD_ATTN=0` turns both off, for A/B runs and to check the kernels against the
/// unfused stages).
pub(crate) fn fuse_attention() -> bool {
    std::env::var("THUNDER_CPU_SIMD_ATTN").map_or(true, |v| v != "0")
}

/// Checks a run's device and its tensor counts (`got` against `want`, inputs then outputs).
pub(crate) fn check_call(
    ctx: &ExecContext,
    got: (usize, usize),
    want: (usize, usize),
) -> Result<(), PluginError> {
    if ctx.device.kind != DeviceKind::Cpu {
        return Err(PluginError::invalid(format!(
            "cpu-simd: asked to run on {:?}; it runs on the CPU only",
            ctx.device
        )));
    }
    if got != want {
        return Err(PluginError::invalid(format!(
            "cpu-simd: expected {} inputs and {} outputs, got {} and {}",
            want.0, want.1, got.0, got.1
        )));
    }
    Ok(())
}

/// Checks a host tensor and returns its first element's address.
fn check(
    what: Side,
    desc: &TensorDesc<'_>,
    (id, ty, shape): &(u32, Ty, Vec<usize>),
) -> Result<*mut u8, PluginError> {
    check_tensor(what, desc, *id, ty.dtype(), shape)
}

/// Checks a host tensor against value `id`'s dtype and shape (CPU, contiguous, aligned) and
/// returns its first element's address.
pub(crate) fn check_tensor(
    what: Side,
    desc: &TensorDesc<'_>,
    id: u32,
    dtype: thunder_abi::DTypeCode,
    shape: &[usize],
) -> Result<*mut u8, PluginError> {
    let bad = |m: String| PluginError::invalid(format!("cpu-simd: {what} (value {id}): {m}"));
    let same_shape = desc.shape.len() == shape.len()
        && desc
            .shape
            .iter()
            .zip(shape)
            .all(|(&g, &w)| g >= 0 && g as usize == w);
    if desc.dtype != dtype || !same_shape || desc.device.kind != DeviceKind::Cpu {
        return Err(bad(format!(
            "expected a CPU {}{shape:?}, got {:?} {}{:?}",
            dtype.short_name(),
            desc.device.kind,
            desc.dtype.short_name(),
            desc.shape.as_slice()
        )));
    }
    // Strides of an empty tensor address nothing.
    if desc.numel() > 0 && !desc.strides.is_empty() && !desc.is_contiguous() {
        return Err(PluginError::unsupported(format!(
            "cpu-simd: {what} (value {id}): strided tensors are not supported"
        )));
    }
    let p = desc.base_ptr();
    if desc.numel() > 0 && (p.is_null() || !(p as usize).is_multiple_of(dtype.size_bytes())) {
        return Err(bad("null or misaligned data".to_string()));
    }
    Ok(p)
}

/// Which tensor of a run `check` looks at; named in its errors only, so a run formats nothing.
#[derive(Clone, Copy)]
pub(crate) enum Side {
    Input(usize),
    Output(usize),
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Side::Input(i) => write!(f, "input {i}"),
            Side::Output(j) => write!(f, "output {j}"),
        }
    }
}

/// Scratch memory taken from the host for one run and given back when dropped.
struct Scratch {
    services: HostServices,
    blocks: Vec<(*mut u8, usize)>,
}

const ALIGN: usize = 64;

impl Drop for Scratch {
    fn drop(&mut self) {
        for &(p, bytes) in &self.blocks {
            (self.services.free)(DeviceDesc::CPU, p.cast(), bytes, ALIGN);
        }
    }
}

impl CompiledRegion for Region {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        check_call(
            ctx,
            (inputs.len(), outputs.len()),
            (self.inputs.len(), self.outputs.len()),
        )?;
        let ins = inputs
            .iter()
            .zip(&self.inputs)
            .enumerate()
            .map(|(i, (d, m))| check(Side::Input(i), d, m))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = outputs
            .iter()
            .zip(&self.outputs)
            .enumerate()
            .map(|(j, (d, m))| check(Side::Output(j), d, m))
            .collect::<Result<Vec<_>, _>>()?;
        // The clock is read only for the trace line (a run of a tiny program takes well
        // under a microsecond, and each reading is tens of nanoseconds).
        let started = crate::exec::trace().then(std::time::Instant::now);
        let mut scratch = Scratch {
            services: self.services,
            blocks: Vec::with_capacity(self.scratch.len()),
        };
        for &(ty, n) in &self.scratch {
            let bytes = n * size_of(ty);
            let p = (self.services.alloc)(DeviceDesc::CPU, bytes, ALIGN) as *mut u8;
            if p.is_null() {
                return Err(PluginError::internal(format!(
                    "cpu-simd: the host could not allocate {bytes} bytes of scratch"
                )));
            }
            scratch.blocks.push((p, bytes));
        }
        let bufs = Bufs {
            inputs: ins,
            outputs: outs,
            scratch: scratch.blocks.iter().map(|&(p, _)| p).collect(),
        };
        let allocated = started.map(|t| t.elapsed());
        let run_stages = || self.stages.iter().try_for_each(|stage| stage.run(&bufs));
        if crate::on_worker::applies(self.product_flops) {
            crate::on_worker::run(run_stages)?;
        } else {
            run_stages()?;
        }
        if let (Some(started), Some(allocated)) = (started, allocated) {
            crate::exec::trace_line(format_args!(
                "cpu-simd region: {:>8.1} us, {} stages, scratch {} buffers {:.1} MB allocated in {:.1} us",
                started.elapsed().as_secs_f64() * 1e6,
                self.stages.len(),
                self.scratch.len(),
                self.scratch.iter().map(|&(t, n)| n * size_of(t)).sum::<usize>() as f64 / 1e6,
                allocated.as_secs_f64() * 1e6
            ));
        }
        Ok(())
    }
}
