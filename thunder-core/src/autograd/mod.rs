//! Reverse-mode autodiff as a trace transform.
//!
//! [`value_and_grad_in_trace`] runs a function inside the trace being built, flattens what it
//! recorded down to the level where VJP rules exist (prims, and composites with their own
//! rule), then walks that tape backwards appending the backward computation to the same trace:
//! the joint trace. [`split_forward_backward`] cuts a joint trace into a forward trace (outputs
//! plus the residuals the backward reads) and a backward trace (residuals in, gradients out).
//!
//! Saving policy: the backward reads forward values directly, so everything it needs is saved;
//! nothing is recomputed yet. Cheap elementwise values could be recomputed in the backward to
//! save memory; that is a later pass over the split, not a change here.

mod remat;
mod schedule;
mod value_and_grad;
pub mod vjp;

pub use value_and_grad::{grad, value_and_grad, Grad, GradTraces, ValueAndGrad};

use crate::dtype;
use crate::error::{Error, Result};
use crate::ir::{Arg, Trace, Value};
use crate::passes::Pass;
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;
use crate::trace_ctx::{flatten_scope_from, scope_len, take_error, tensor_of};
use std::collections::{HashMap, HashSet};
use vjp::prim_vjp;

/// What [`value_and_grad_in_trace`] recorded.
pub struct GradResult {
    pub outputs: Vec<Tensor>,
    /// One per `wrt` input, in order.
    pub grads: Vec<Tensor>,
    /// Number of bound symbols of the current scope that belong to the forward computation
    /// (everything recorded before the call plus the flattened forward).
    pub forward_len: usize,
}

/// Runs `f` on `inputs` in the current trace and appends the gradient of its first output
/// (a floating-point scalar) with respect to the inputs listed in `wrt`.
pub fn value_and_grad_in_trace<F>(inputs: &[Tensor], wrt: &[usize], f: F) -> Result<GradResult>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    grad_in_trace(inputs, wrt, f, None)
}

/// Like [`value_and_grad_in_trace`], but seeded with a cotangent per output instead of a scalar
/// loss: the gradients are the vector-Jacobian product `cotangents · ∂outputs/∂inputs[wrt]`.
/// `cotangents` pairs output indices with tensors of the same type (usually trace inputs;
/// outputs not listed get no cotangent).
pub fn vjp_in_trace<F>(
    inputs: &[Tensor],
    wrt: &[usize],
    f: F,
    cotangents: &[(usize, Tensor)],
) -> Result<GradResult>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    grad_in_trace(inputs, wrt, f, Some(cotangents))
}

fn grad_in_trace<F>(
    inputs: &[Tensor],
    wrt: &[usize],
    f: F,
    cotangents: Option<&[(usize, Tensor)]>,
) -> Result<GradResult>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    for &i in wrt {
        let t = inputs.get(i).ok_or_else(|| {
            Error::Usage(format!(
                "grad: input {i} does not exist ({} inputs)",
                inputs.len()
            ))
        })?;
        if !dtype::is_float(t.dtype()) {
            return Err(Error::Usage(format!(
                "grad: cannot differentiate with respect to input {i} (`{}`): its dtype {} is not floating point",
                crate::trace_ctx::value_name(t.value())?,
                t.dtype().short_name()
            )));
        }
    }
    let start = scope_len()?;
    let outputs = f(inputs);
    if let Some(e) = take_error()? {
        return Err(e);
    }
    let outputs = outputs?;
    let mut grads: HashMap<Value, Tensor> = HashMap::new();
    let tape = flatten_scope_from(start, &|s| s.vjp.is_some())?;
    // Everything recorded so far is the forward; the seed below already belongs to the backward.
    let forward_len = scope_len()?;
    match cotangents {
        None => {
            let loss = outputs
                .first()
                .ok_or_else(|| Error::Usage("grad: the function returned no outputs".into()))?;
            if loss.rank() != 0 || !dtype::is_float(loss.dtype()) {
                return Err(Error::Usage(format!(
                    "grad: the first output must be a floating-point scalar (a loss), got {}; reduce it (e.g. `.sum(None, false)`) or give a cotangent",
                    loss.ty()
                )));
            }
            let seed =
                crate::clang::full(Vec::new(), Arg::Float(1.0), loss.device(), loss.dtype())?;
            grads.insert(loss.value(), seed);
        }
        Some(cots) => {
            for (i, cot) in cots {
                let out = outputs.get(*i).ok_or_else(|| {
                    Error::Usage(format!(
                        "vjp: a cotangent for output {i}, but the function returned {} outputs",
                        outputs.len()
                    ))
                })?;
                if out.ty().shape != cot.ty().shape || out.dtype() != cot.dtype() {
                    return Err(Error::Usage(format!(
                        "vjp: the cotangent of output {i} is {}, the output is {}",
                        cot.ty(),
                        out.ty()
                    )));
                }
                let args = [Arg::Value(out.value())];
                accumulate(&mut grads, &args, vec![Some(cot.clone())])?;
            }
        }
    }

    for b in tape.iter().rev() {
        // A cotangent per output, absent where nothing read it (var_mean, topk, sort, the
        // attention forward's log-sum-exp).
        let gs: Vec<Option<Tensor>> = b.outputs.iter().map(|o| grads.get(o).cloned()).collect();
        if gs.iter().all(Option::is_none) {
            continue;
        }
        let outs = b
            .outputs
            .iter()
            .map(|&o| tensor_of(o))
            .collect::<Result<Vec<_>>>()?;
        let cots = match (b.sym.prim(), b.sym.vjp, &outs[..], &gs[..]) {
            (Some(p), _, [out], [Some(g)]) => prim_vjp(p, &b.args, out, g)?,
            (Some(p), _, _, _) => vjp::multi_output_vjp(p, &b.args, &outs, &gs)?,
            (None, Some(rule), _, _) => rule(&b.args, &outs, &gs)?,
            (None, None, _, _) => {
                return Err(Error::op(
                    b.sym.id,
                    "has no grad rule and no decomposition to differentiate through",
                ))
            }
        };
        accumulate(&mut grads, &b.args, cots)?;
    }
    let mut out_grads = Vec::with_capacity(wrt.len());
    for &i in wrt {
        let x = &inputs[i];
        out_grads.push(match grads.get(&x.value()) {
            Some(g) => g.clone(),
            None => crate::clang::full(x.shape().to_vec(), Arg::Float(0.0), x.device(), x.dtype())?,
        });
    }
    Ok(GradResult {
        outputs,
        grads: out_grads,
        forward_len,
    })
}

/// Adds each argument's cotangent to the gradient gathered so far for its value.
fn accumulate(
    grads: &mut HashMap<Value, Tensor>,
    args: &[Arg],
    cots: Vec<Option<Tensor>>,
) -> Result<()> {
    for (arg, cot) in args.iter().zip(cots) {
        if let (Arg::Value(v), Some(c)) = (arg, cot) {
            let total = match grads.remove(v) {
                Some(prev) => prim1(
                    Prim::Add,
                    vec![Arg::Value(prev.value()), Arg::Value(c.value())],
                )?,
                None => c,
            };
            grads.insert(*v, total);
        }
    }
    Ok(())
}

/// The values the backward part of `joint` reads from the forward part, in definition order.
fn saved_values(joint: &Trace, forward_len: usize, n_outputs: usize) -> Vec<Value> {
    let mut defined: HashSet<Value> = joint.inputs.iter().copied().collect();
    for b in &joint.bsyms[..forward_len] {
        defined.extend(b.outputs.iter().copied());
    }
    let mut read: HashSet<Value> = HashSet::new();
    let mut remade: HashSet<Value> = HashSet::new();
    for b in &joint.bsyms[forward_len..] {
        // Values the backward recomputes itself (views, `remat`) before reading them.
        read.extend(b.input_values().filter(|v| !remade.contains(v)));
        remade.extend(b.outputs.iter().copied());
    }
    read.extend(
        joint.outputs[n_outputs..]
            .iter()
            .copied()
            .filter(|v| !remade.contains(v)),
    );
    let mut saved: Vec<Value> = read.into_iter().filter(|v| defined.contains(v)).collect();
    saved.sort();
    saved
}

/// Splits a joint trace (`outputs` = the function's outputs, then the gradients) at
/// `forward_len` into a forward trace returning the outputs and the saved residuals, and a
/// backward trace taking the residuals and returning the gradients.
pub fn split_forward_backward(
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
) -> Result<(Trace, Trace, Vec<Value>)> {
    if forward_len > joint.bsyms.len() || n_outputs > joint.outputs.len() {
        return Err(Error::Bug(
            "split point past the end of the joint trace".into(),
        ));
    }
    // Dead code in the backward must not keep residuals alive: prune it first, then save
    // only what the remaining backward reads.
    let mut backward = joint.clone();
    backward.bsyms = joint.bsyms[forward_len..].to_vec();
    backward.outputs = joint.outputs[n_outputs..].to_vec();
    let mut backward = crate::passes::Dce.run(&backward)?;
    backward.bsyms = schedule::sink_unfusible(std::mem::take(&mut backward.bsyms));
    // Views first (always recomputed), then cheap chains measured against what remains.
    for policy in [remat::views_to_recompute, remat::elementwise_to_recompute] {
        let recompute = policy(
            joint,
            forward_len,
            n_outputs,
            &backward.bsyms,
            &backward.outputs,
        );
        backward.bsyms = remat::insert_before_use(std::mem::take(&mut backward.bsyms), recompute);
    }
    backward.bsyms = remat::save_merged_outputs(
        joint,
        forward_len,
        n_outputs,
        std::mem::take(&mut backward.bsyms),
    );
    let mut pruned = joint.clone();
    pruned.bsyms.truncate(forward_len);
    pruned.bsyms.extend(backward.bsyms.iter().cloned());
    let saved = saved_values(&pruned, forward_len, n_outputs);
    let mut forward = joint.clone();
    forward.bsyms.truncate(forward_len);
    forward.outputs = joint.outputs[..n_outputs].to_vec();
    forward.outputs.extend(saved.iter().copied());
    forward.provenance = "Grad transform (forward)".into();
    backward.inputs = saved.clone();
    backward.fn_name = "backward".into();
    backward.provenance = "Grad transform (backward)".into();
    Ok((forward, backward, saved))
}

/// Splits a joint trace made by [`vjp_in_trace`] whose cotangents are the trace inputs
/// `cotangents`: the forward trace takes the other inputs, and the backward trace takes the
/// saved residuals followed by the cotangents.
pub fn split_forward_backward_vjp(
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
    cotangents: &[Value],
) -> Result<(Trace, Trace, Vec<Value>)> {
    let (mut forward, mut backward, saved) = split_forward_backward(joint, forward_len, n_outputs)?;
    let is_cot = |v: &Value| cotangents.contains(v);
    if forward
        .bsyms
        .iter()
        .any(|b| b.input_values().any(|v| is_cot(&v)))
    {
        return Err(Error::Bug(
            "vjp: the forward part of the joint trace reads a cotangent".into(),
        ));
    }
    let saved: Vec<Value> = saved.into_iter().filter(|v| !is_cot(v)).collect();
    forward.inputs.retain(|v| !is_cot(v));
    forward.outputs.truncate(n_outputs);
    forward.outputs.extend(saved.iter().copied());
    backward.inputs = saved.iter().chain(cotangents).copied().collect();
    Ok((forward, backward, saved))
}
