//! The two attention composites this executor claims whole, so that training runs without the
//! `[..., L, S]` probabilities:
//!
//! - `ltorch.sdpa_fwd_lse(q, k, v, is_causal, scale) -> (out, lse)` runs the fused forward
//!   (`attn.rs`), which also writes the row log-sum-exp;
//! - `ltorch.sdpa_bwd(dO, q, k, v, out, lse, is_causal, scale) -> (dq, dk, dv)` runs the
//!   FlashAttention-2 backward (`attn_bwd.rs`).
//!
//! Both are claimed on CPU f32 tensors with the same batch dims and at least one query and one
//! key; anything else is left to their decompositions, which the other stages run.

use crate::attn::AttnPlan;
use crate::attn_bwd::AttnBwdPlan;
use crate::decode::{fail, value_meta, Ty, R};
use crate::gemm_t::swap_last_two;
use crate::layout::Layout;
use crate::plan::{numel, Planner, ValState};
use crate::stages::Stage;
use thunder_abi::{ArgView, OpView, PluginError, TraceView};

pub(crate) const FWD: &str = "ltorch.sdpa_fwd_lse";
pub(crate) const BWD: &str = "ltorch.sdpa_bwd";

/// Whether `symbol` is one of the composites decoded here.
pub(crate) fn is_sdpa(symbol: &str) -> bool {
    symbol == FWD || symbol == BWD
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SdpaKind {
    /// Outputs `out`, `lse`.
    Fwd,
    /// Extra inputs `dO`, `out`, `lse`; outputs `dq`, `dk`, `dv`.
    Bwd,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SdpaOp {
    pub(crate) kind: SdpaKind,
    /// Tensor arguments in the symbol's order.
    pub(crate) args: Vec<u32>,
    pub(crate) outputs: Vec<u32>,
    pub(crate) out_shapes: Vec<Vec<usize>>,
    pub(crate) causal: bool,
    /// The scores' factor, rounded to f32 as the decomposition's literal is.
    pub(crate) scale: f32,
    pub(crate) batch: Vec<usize>,
    pub(crate) l: usize,
    pub(crate) s: usize,
    pub(crate) e: usize,
    pub(crate) ev: usize,
}

/// Decodes one of the two symbols; the error names it and what did not fit.
pub(crate) fn decode(view: &TraceView, op: &OpView) -> Result<SdpaOp, PluginError> {
    decode_inner(view, op).map_err(|m| PluginError::unsupported(format!("{}: {m}", op.symbol)))
}

fn tensor(view: &TraceView, args: &[ArgView], i: usize, name: &str) -> R<(u32, Vec<usize>)> {
    match args.get(i) {
        Some(ArgView::Value(v)) => {
            let (ty, shape) = value_meta(view, *v)?;
            if ty != Ty::F32 {
                return fail(format!(
                    "{name} is {ty:?}; cpu-simd runs attention in f32 only"
                ));
            }
            Ok((*v, shape))
        }
        other => fail(format!(
            "argument {i} ({name}) must be a tensor, got {other:?}"
        )),
    }
}

fn decode_inner(view: &TraceView, op: &OpView) -> R<SdpaOp> {
    let (kind, first, n_args, n_out) = match op.symbol.as_str() {
        FWD => (SdpaKind::Fwd, 0, 5, 2),
        BWD => (SdpaKind::Bwd, 1, 8, 3),
        other => return fail(format!("{other} is not an attention composite")),
    };
    let args = op.args.as_slice();
    if args.len() != n_args || op.outputs.len() != n_out {
        return fail(format!(
            "expected {n_args} arguments and {n_out} outputs, got {} and {}",
            args.len(),
            op.outputs.len()
        ));
    }
    let (q, qs) = tensor(view, args, first, "query")?;
    let (k, ks) = tensor(view, args, first + 1, "key")?;
    let (v, vs) = tensor(view, args, first + 2, "value")?;
    let r = qs.len();
    if r < 2 || ks.len() != r || vs.len() != r {
        return fail(format!(
            "query, key and value need the same rank (at least 2), got {qs:?}, {ks:?}, {vs:?}"
        ));
    }
    let batch = qs[..r - 2].to_vec();
    let (l, e, s, ev) = (qs[r - 2], qs[r - 1], ks[r - 2], vs[r - 1]);
    if ks[..r - 2] != batch[..] || vs[..r - 2] != batch[..] || ks[r - 1] != e || vs[r - 2] != s {
        return fail(format!(
            "query {qs:?}, key {ks:?} and value {vs:?} do not fit (..., L, E), (..., S, E), \
             (..., S, Ev) with the same batch dims"
        ));
    }
    if l == 0 || s == 0 {
        return fail("no queries or no keys (left to the decomposition)");
    }
    let with = |rows: usize, cols: Option<usize>| {
        let mut sh = batch.clone();
        sh.push(rows);
        sh.extend(cols);
        sh
    };
    let mut tensors = vec![q, k, v];
    if kind == SdpaKind::Bwd {
        for (i, name, want) in [
            (0, "grad_out", with(l, Some(ev))),
            (4, "out", with(l, Some(ev))),
            (5, "lse", with(l, None)),
        ] {
            let (id, shape) = tensor(view, args, i, name)?;
            if shape != want {
                return fail(format!("{name} is {shape:?}, expected {want:?}"));
            }
            tensors.push(id);
        }
        // Symbol order: grad_out, q, k, v, out, lse.
        tensors = vec![
            tensors[3], tensors[0], tensors[1], tensors[2], tensors[4], tensors[5],
        ];
    }
    let last = args.len();
    let causal = match &args[last - 2] {
        ArgView::Bool(b) => *b,
        other => return fail(format!("is_causal must be a bool, got {other:?}")),
    };
    let scale = match &args[last - 1] {
        ArgView::None => 1.0 / (e as f64).sqrt(),
        ArgView::Float(x) => *x,
        ArgView::Int(x) => *x as f64,
        other => return fail(format!("scale must be a number or None, got {other:?}")),
    };
    let want_out: Vec<Vec<usize>> = match kind {
        SdpaKind::Fwd => vec![with(l, Some(ev)), with(l, None)],
        SdpaKind::Bwd => vec![with(l, Some(e)), with(s, Some(e)), with(s, Some(ev))],
    };
    for (&o, want) in op.outputs.iter().zip(&want_out) {
        let (ty, shape) = value_meta(view, o)?;
        if ty != Ty::F32 || &shape != want {
            return fail(format!(
                "output {o} is {ty:?}{shape:?}, expected F32{want:?}"
            ));
        }
    }
    Ok(SdpaOp {
        kind,
        args: tensors,
        outputs: op.outputs.to_vec(),
        out_shapes: want_out,
        causal,
        scale: scale as f32,
        batch,
        l,
        s,
        e,
        ev,
    })
}

impl Planner {
    /// Schedules a decoded attention composite as one stage writing its outputs.
    pub(crate) fn add_sdpa(&mut self, op: &SdpaOp) -> Result<(), PluginError> {
        let mut ins = Vec::with_capacity(op.args.len());
        for &id in &op.args {
            ins.push(self.materialize(id)?);
        }
        // The row-major outputs may be placed in a reader's buffer; `lse` is contiguous.
        let bufs: Vec<_> = op
            .outputs
            .iter()
            .zip(&op.out_shapes)
            .enumerate()
            .map(|(i, (&o, shape))| match (&op.kind, i) {
                (SdpaKind::Fwd, 1) => (
                    self.new_buf(o, Ty::F32, numel(shape)),
                    Layout::contiguous(shape),
                ),
                _ => self.out_view(o, Ty::F32, shape),
            })
            .collect();
        let stage = match op.kind {
            SdpaKind::Fwd => {
                let [q, k, v] = [ins[0].clone(), ins[1].clone(), ins[2].clone()];
                Stage::Attn(AttnPlan {
                    q,
                    kt: (k.0, swap_last_two(&k.1)),
                    v,
                    mask: None,
                    causal: op.causal,
                    out: bufs[0].clone(),
                    lse: Some(bufs[1].0),
                    batch: op.batch.clone(),
                    l: op.l,
                    s: op.s,
                    d: op.e,
                    dv: op.ev,
                    scale: Some((op.scale, false)),
                })
            }
            SdpaKind::Bwd => Stage::AttnBwd(AttnBwdPlan {
                dout: ins[0].clone(),
                q: ins[1].clone(),
                k: ins[2].clone(),
                v: ins[3].clone(),
                out: ins[4].clone(),
                lse: ins[5].clone(),
                dq: bufs[0].clone(),
                dk: bufs[1].clone(),
                dv: bufs[2].clone(),
                batch: op.batch.clone(),
                l: op.l,
                s: op.s,
                e: op.e,
                ev: op.ev,
                causal: op.causal,
                scale: op.scale,
            }),
        };
        self.stages.push(stage);
        let at = self.stages.len() - 1;
        for ((&o, shape), mem) in op.outputs.iter().zip(op.out_shapes.clone()).zip(bufs) {
            self.producer.insert(mem.0, at);
            self.vals.insert(
                o,
                ValState {
                    ty: Ty::F32,
                    mem: Some(mem),
                    shape,
                    virt: None,
                    konst: None,
                },
            );
        }
        Ok(())
    }
}
