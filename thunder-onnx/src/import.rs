//! Graph to trace: walk the nodes in order, run each op's rule on values (folding what is
//! known at import time), and trace the rest as ltorch calls. Initializers become weight
//! inputs after the graph's own inputs; weights the trace does not use are dropped.

use crate::error::{NodeRef, OnnxError, Result};
use crate::model::OnnxModel;
use crate::node::{NodeCtx, Weights};
use crate::ops;
use crate::value::{Const, Val};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use thunder_core::ir::{Arg, TensorType, Trace};
use thunder_core::trace_ctx::trace_with;
use thunder_core::{Array, Tensor};

/// A trace for one set of concrete input types, with the arrays of its weight inputs.
#[derive(Debug, Clone)]
pub struct Imported {
    pub trace: Trace,
    /// The arrays of the trace's inputs after the graph's own, in order.
    pub weights: Vec<Arc<Array>>,
    /// The ONNX names of the weight inputs, in the same order.
    pub weight_names: Vec<String>,
    /// The graph's output names, in the trace's output order.
    pub output_names: Vec<String>,
}

/// `name` made a valid, unused identifier for the printed trace.
fn ident(name: &str, used: &mut HashSet<String>) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s0 = s.trim_matches('_').to_string();
    s = if s0.is_empty() { "v".into() } else { s0 };
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s = format!("v_{s}");
    }
    let mut out = s.clone();
    let mut k = 1;
    while !used.insert(out.clone()) {
        out = format!("{s}_{k}");
        k += 1;
    }
    out
}

/// The NodeRef of `node` (its name, or its first output when unnamed).
pub fn node_ref(model: &OnnxModel, node: &crate::proto::NodeProto) -> NodeRef {
    let name = if node.name.is_empty() {
        node.output.first().cloned().unwrap_or_default()
    } else {
        node.name.clone()
    };
    NodeRef {
        name,
        op_type: node.op_type.clone(),
        domain: node.domain.clone(),
        opset: model.opset(&node.domain),
    }
}

fn run_graph(model: &OnnxModel, inputs: &[Tensor], weights: &mut Weights) -> Result<Vec<Tensor>> {
    let mut env: HashMap<&str, Val> = HashMap::new();
    for (spec, t) in model.inputs.iter().zip(inputs) {
        env.insert(&spec.name, Val::Traced(t.clone()));
    }
    for (name, array) in &model.initializers {
        env.entry(name).or_insert_with(|| {
            Val::Const(Const {
                array: array.clone(),
                name: name.clone(),
            })
        });
    }
    for node in &model.graph.node {
        let nref = node_ref(model, node);
        let rule =
            ops::lookup(&node.domain, &node.op_type).ok_or_else(|| OnnxError::Unsupported {
                node: nref.clone(),
                reason: String::new(),
            })?;
        let mut node_inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                node_inputs.push(None);
                continue;
            }
            let v = env.get(name.as_str()).cloned().ok_or_else(|| OnnxError::Node {
                node: nref.clone(),
                message: format!("input `{name}` is not a graph input, an initializer or an earlier node's output"),
            })?;
            node_inputs.push(Some(v));
        }
        let mut ctx = NodeCtx {
            node,
            nref,
            inputs: node_inputs,
            weights,
        };
        let outs = rule(&mut ctx).map_err(|e| match e {
            OnnxError::Core(core) => ctx.err(core.to_string()),
            e => e,
        })?;
        for (name, v) in node.output.iter().zip(outs) {
            if !name.is_empty() {
                env.insert(name, v);
            }
        }
    }
    let mut outputs = Vec::new();
    for name in &model.output_names {
        let v = env.get(name.as_str()).cloned().ok_or_else(|| {
            OnnxError::model(format!("graph output `{name}`"), "no node produces it")
        })?;
        let t = match v {
            Val::Traced(t) => t,
            Val::Const(c) => {
                // A constant output: a weight input of its own (never a placeholder).
                match weights.declared.get(&c.name) {
                    Some(t) => t.clone(),
                    None => {
                        weights.missing.push((c.name.clone(), c.array.clone()));
                        thunder_torch::zeros(
                            c.array.shape(),
                            thunder_core::Device::Cpu,
                            c.array.dtype(),
                        )?
                    }
                }
            }
        };
        outputs.push(t);
    }
    Ok(outputs)
}

/// Imports the graph for inputs of these types (the graph's inputs, in order).
pub fn import(model: &OnnxModel, types: &[TensorType]) -> Result<Imported> {
    if types.len() != model.inputs.len() {
        return Err(OnnxError::model(
            model.path.display().to_string(),
            format!(
                "{} inputs given, the graph has {}",
                types.len(),
                model.inputs.len()
            ),
        ));
    }
    // Every initializer is declared at first; unused ones are dropped from the trace after.
    let mut weight_list: Vec<(String, Arc<Array>)> = model
        .graph
        .initializer
        .iter()
        .filter_map(|t| {
            model
                .initializers
                .get(&t.name)
                .map(|a| (t.name.clone(), a.clone()))
        })
        .collect();
    for _attempt in 0..4 {
        let mut used = HashSet::new();
        let mut trace_inputs: Vec<(String, TensorType)> = Vec::new();
        for (spec, ty) in model.inputs.iter().zip(types) {
            trace_inputs.push((ident(&spec.name, &mut used), ty.clone()));
        }
        for (name, a) in &weight_list {
            trace_inputs.push((ident(name, &mut used), a.ty().clone()));
        }
        let failure: RefCell<Option<OnnxError>> = RefCell::new(None);
        let missing: RefCell<Vec<(String, Arc<Array>)>> = RefCell::new(Vec::new());
        let n_graph = types.len();
        let traced = trace_with(
            &trace_inputs,
            HashSet::new(),
            "Imported from ONNX",
            |proxies| {
                let mut weights = Weights::default();
                for ((name, _), t) in weight_list.iter().zip(&proxies[n_graph..]) {
                    weights.declared.insert(name.clone(), t.clone());
                }
                match run_graph(model, &proxies[..n_graph], &mut weights) {
                    Ok(outs) => {
                        *missing.borrow_mut() = weights.missing;
                        Ok(outs)
                    }
                    Err(e) => {
                        let message = e.to_string();
                        *failure.borrow_mut() = Some(e);
                        Err(thunder_core::Error::Usage(message))
                    }
                }
            },
        );
        if let Some(e) = failure.into_inner() {
            return Err(e);
        }
        let trace = traced?;
        let missing = missing.into_inner();
        if !missing.is_empty() {
            tracing::debug!(
                count = missing.len(),
                "constants to declare as weight inputs"
            );
            weight_list.extend(missing);
            continue;
        }
        return Ok(prune(
            trace,
            n_graph,
            weight_list,
            model.output_names.clone(),
        ));
    }
    Err(OnnxError::model(
        model.path.display().to_string(),
        "constants kept needing new weight inputs after 4 attempts (an importer bug)",
    ))
}

/// Drops weight inputs no bound symbol or output uses.
fn prune(
    mut trace: Trace,
    n_graph: usize,
    weight_list: Vec<(String, Arc<Array>)>,
    output_names: Vec<String>,
) -> Imported {
    let mut used = HashSet::new();
    for b in &trace.bsyms {
        for a in &b.args {
            if let Arg::Value(v) = a {
                used.insert(*v);
            }
        }
    }
    used.extend(trace.outputs.iter().copied());
    let mut inputs = trace.inputs[..n_graph].to_vec();
    let mut weights = Vec::new();
    let mut weight_names = Vec::new();
    for (&v, (name, a)) in trace.inputs[n_graph..].iter().zip(weight_list) {
        if used.contains(&v) {
            inputs.push(v);
            weights.push(a);
            weight_names.push(name);
        }
    }
    trace.inputs = inputs;
    Imported {
        trace,
        weights,
        weight_names,
        output_names,
    }
}
