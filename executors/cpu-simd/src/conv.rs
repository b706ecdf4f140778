//! `prims.convolution` on the CPU as im2col and GEMM, the way PyTorch's CPU fallback and most
//! inference engines lower it: per batch item and group, the input windows are unrolled into a
//! `[C_in/G * K, S]` column matrix (zeros where a window reaches into the padding) and multiplied
//! by the group's weights viewed as `[C_out/G, C_in/G * K]` (blocked and threaded in
//! `conv_run.rs`).
//!
//! This file decodes the prim and plans it. A convolution whose result is read only by a
//! residual `add` and/or a ReLU (`maximum(x, 0.0)`), as in every ResNet block, takes those ops
//! as its **epilogue**: they run on each output block right after its GEMM, while it is in
//! cache, instead of as passes over the whole feature map.

use crate::decode::{fail, Cx, Decoded, Op, Ty, R};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::Layout;
use crate::plan::{numel, Planner};
use crate::stages::Stage;
use std::collections::{HashMap, HashSet};
use thunder_abi::{ArgView, PluginError};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConvGeometry {
    pub(crate) stride: Vec<usize>,
    pub(crate) padding: Vec<usize>,
    pub(crate) dilation: Vec<usize>,
    pub(crate) groups: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct ConvPlan {
    pub(crate) ty: Ty,
    pub(crate) a: (BufId, Layout),
    pub(crate) w: (BufId, Layout),
    pub(crate) bias: Option<(BufId, Layout)>,
    pub(crate) out: BufId,
    /// `[N, C_in, *S_in]`, `[C_out, C_in/G, *K]`, `[N, C_out, *S_out]`.
    pub(crate) a_shape: Vec<usize>,
    pub(crate) w_shape: Vec<usize>,
    pub(crate) out_shape: Vec<usize>,
    pub(crate) geom: ConvGeometry,
    pub(crate) epilogue: Epilogue,
    /// The weight, a static input, kept packed between runs (`packed_left.rs`).
    pub(crate) packed:
        Option<std::sync::Arc<crate::prepack::PackedSlot<crate::packed_left::PackedA>>>,
    /// The weight, a static input, kept transformed for Winograd's algorithm between runs
    /// (`winograd.rs`).
    #[cfg(target_arch = "x86_64")]
    pub(crate) winograd:
        Option<std::sync::Arc<crate::prepack::PackedSlot<crate::winograd::Weights>>>,
}

/// What runs on each output block after its product (besides the bias).
#[derive(Debug, Clone, Default)]
pub(crate) struct Epilogue {
    /// Added elementwise: a value of the output's shape.
    pub(crate) residual: Option<(BufId, Layout)>,
    /// The residual's spatial dims are one unit-stride run (read as a slice).
    pub(crate) residual_flat: bool,
    /// `maximum(x, 0.0)` last.
    pub(crate) relu: bool,
}

/// A convolution's epilogue found in a region: the positions of the ops it takes over.
#[derive(Debug, Clone)]
pub(crate) struct ConvEpi {
    /// The residual added (a value defined before the convolution).
    pub(crate) residual: Option<u32>,
    pub(crate) relu: bool,
    /// Positions of the add and/or maximum, in order; the last one's output is the result.
    pub(crate) ops: Vec<usize>,
}

impl Cx<'_> {
    /// `convolution(a, weight, bias, stride, padding, dilation, groups)` on f32 or f64.
    pub(crate) fn convolution(&self) -> R<Op> {
        self.arity(7)?;
        let ((a, ta, sa), (w, tw, sw)) = (self.tensor(0)?, self.tensor(1)?);
        if ta != tw || !ta.is_float() {
            return fail("input and weight must both be f32 or both f64");
        }
        let bias = match self.args.get(2) {
            Some(ArgView::None) => None,
            _ => {
                let (b, tb, sb) = self.tensor(2)?;
                if tb != ta || sb.len() != 1 || sb[0] != sw[0] {
                    return fail("bias must be one value per output channel, of the input's dtype");
                }
                Some(b)
            }
        };
        let spatial = sa.len().saturating_sub(2);
        let list = |i: usize| -> R<Vec<usize>> {
            match self.args.get(i) {
                Some(ArgView::Ints(v)) if v.len() == spatial => v
                    .iter()
                    .map(|&x| usize::try_from(x).map_err(|_| format!("argument {i}: negative")))
                    .collect(),
                other => fail(format!(
                    "argument {i} must be {spatial} ints, got {other:?}"
                )),
            }
        };
        let groups = match self.args.get(6) {
            Some(ArgView::Int(g)) if *g >= 1 => *g as usize,
            other => return fail(format!("argument 6 must be a positive int, got {other:?}")),
        };
        let geom = ConvGeometry {
            stride: list(3)?,
            padding: list(4)?,
            dilation: list(5)?,
            groups,
        };
        if spatial == 0
            || sw.len() != sa.len()
            || sw[1].checked_mul(groups) != Some(sa[1])
            || sw[0] % groups != 0
        {
            return fail("expects a [N, C_in, *S] input and [C_out, C_in/groups, *K] weights");
        }
        if geom.stride.contains(&0) || geom.dilation.contains(&0) {
            return fail("strides and dilations must be positive");
        }
        self.expect_out(ta, &output_shape(&sa, &sw, &geom))?;
        Ok(Op::Conv { a, w, bias, geom })
    }
}

/// The output's shape; a window larger than the padded input gives an empty spatial dim.
pub(crate) fn output_shape(a: &[usize], w: &[usize], g: &ConvGeometry) -> Vec<usize> {
    let mut out = vec![a[0], w[0]];
    for d in 0..a.len() - 2 {
        // Saturating: absurd geometry (refused by meta before a plugin sees it) gives an empty
        // output rather than an overflow.
        let span = g.dilation[d]
            .saturating_mul(w[d + 2].max(1) - 1)
            .saturating_add(1);
        let padded = a[d + 2].saturating_add(g.padding[d].saturating_mul(2));
        out.push(if padded < span || w[d + 2] == 0 {
            0
        } else {
            (padded - span) / g.stride[d] + 1
        });
    }
    out
}

pub(crate) fn run(p: &ConvPlan, bufs: &Bufs) {
    if crate::exec::trace() {
        let t = std::time::Instant::now();
        let c0 = thread_cpu_us();
        run_untraced(p, bufs);
        crate::exec::trace_line(format_args!(
            "cpu-simd conv:  {:>9.1} us (this thread's cpu {:>9.1} us) in {:?} w {:?} out {:?} {:?} residual {} relu {}",
            t.elapsed().as_secs_f64() * 1e6,
            thread_cpu_us() - c0,
            p.a_shape,
            p.w_shape,
            p.out_shape,
            p.geom,
            p.epilogue.residual.is_some(),
            p.epilogue.relu,
        ));
    } else {
        run_untraced(p, bufs);
    }
}

/// The calling thread's CPU time in microseconds (0 where unknown), so a trace on a shared
/// machine can tell work from waiting for a core. With one thread the whole convolution runs
/// on the calling thread; with more, this is the caller's share.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub(crate) fn thread_cpu_us() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec (64-bit Linux layout) for this clock.
    if unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.sec as f64 * 1e6 + t.nsec as f64 * 1e-3
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub(crate) fn thread_cpu_us() -> f64 {
    0.0
}

fn run_untraced(p: &ConvPlan, bufs: &Bufs) {
    match p.ty {
        Ty::F32 => crate::conv_run::run_typed::<f32>(p, bufs),
        Ty::F64 => crate::conv_run::run_typed::<f64>(p, bufs),
        // Refused by decode.
        Ty::B8 | Ty::I64 => {}
    }
}

/// The epilogue of each convolution (by position) that has one. `taken` are positions other
/// fusions already own; `outputs` the region's outputs (an intermediate that is one stays).
pub(crate) fn find_epilogues(
    ops: &[Decoded],
    outputs: &[u32],
    taken: &HashSet<usize>,
) -> HashMap<usize, ConvEpi> {
    let uses = crate::fusion::Uses::of(ops);
    let producer = &uses.producer;
    let sole = |v: u32| uses.sole(v, outputs, taken);
    let mut found = HashMap::new();
    let mut used: HashSet<usize> = HashSet::new();
    for (i, d) in ops.iter().enumerate() {
        if !matches!(d.op, Op::Conv { .. }) || taken.contains(&i) || used.contains(&i) {
            continue;
        }
        let mut epi = ConvEpi {
            residual: None,
            relu: false,
            ops: Vec::new(),
        };
        let mut cur = d.out;
        if let Some(j) = sole(cur).filter(|j| !used.contains(j)) {
            // The residual must exist when the convolution runs and have its output's shape.
            let residual = crate::fusion::residual_addend(ops, producer, (i, j), cur)
                .filter(|_| ops[j].shape == d.shape);
            if let Some(r) = residual {
                epi.residual = Some(r);
                epi.ops.push(j);
                cur = ops[j].out;
            }
        }
        if let Some(j) = sole(cur).filter(|j| !used.contains(j)) {
            if crate::fusion::is_relu(&ops[j], cur) && ops[j].shape == d.shape {
                epi.relu = true;
                epi.ops.push(j);
            }
        }
        if !epi.ops.is_empty() {
            used.extend(epi.ops.iter().copied());
            found.insert(i, epi);
        }
    }
    found
}

impl Planner {
    /// Plans a convolution; with an epilogue, its result is `last`'s output.
    pub(crate) fn add_conv(
        &mut self,
        d: &Decoded,
        epi: Option<&ConvEpi>,
        last: &Decoded,
    ) -> Result<(), PluginError> {
        let Op::Conv { a, w, bias, geom } = &d.op else {
            return Err(crate::plan::internal("add_conv on another op"));
        };
        let a_shape = self.val(*a)?.shape.clone();
        let w_shape = self.val(*w)?.shape.clone();
        let a_mem = self.materialize(*a)?;
        let w_mem = self.materialize(*w)?;
        let bias = bias.map(|b| self.materialize(b)).transpose()?;
        let mut epilogue = Epilogue::default();
        if let Some(e) = epi {
            epilogue.relu = e.relu;
            if let Some(r) = e.residual {
                let (shape, (buf, layout)) = (self.val(r)?.shape.clone(), self.materialize(r)?);
                let spatial = crate::layout::row_major(&shape[2..]);
                epilogue.residual_flat = layout.strides[2..]
                    .iter()
                    .zip(&spatial)
                    .zip(&shape[2..])
                    .all(|((&s, &want), &size)| size == 1 || s == want);
                epilogue.residual = Some((buf, layout));
            }
        }
        let out = self.new_buf(last.out, d.ty, numel(&d.shape));
        self.stages.push(Stage::Conv(ConvPlan {
            ty: d.ty,
            a: a_mem,
            w: w_mem,
            bias,
            out,
            a_shape,
            w_shape,
            out_shape: d.shape.clone(),
            geom: geom.clone(),
            epilogue,
            packed: None,
            #[cfg(target_arch = "x86_64")]
            winograd: None,
        }));
        self.producer.insert(out, self.stages.len() - 1);
        self.define(last, None, Some((out, Layout::contiguous(&d.shape))), None);
        Ok(())
    }
}
