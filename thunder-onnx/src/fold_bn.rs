//! Inference BatchNormalization folded into the convolution before it, once, when the model
//! is loaded (as ONNX Runtime's `ConvBNFusion` and PyTorch's exporter in eval mode do):
//! `bn(conv(x, w, b)) = conv(x, w * s, (b - mean) * s + beta)` with `s = scale / sqrt(var + eps)`
//! per output channel. The convolution then runs with its epilogue alone (cpu-simd fuses the
//! bias, residual and ReLU into it), and no per-channel normalisation pass is left.
//!
//! A pair is folded only when every parameter is an initializer of f32 or f64, the
//! convolution's result is read by that BatchNormalization alone (and is not a graph output),
//! and the BatchNormalization is in inference mode with only its first output used. The folded
//! parameters are computed in f64 and rounded once to the dtype.

use crate::proto::{GraphProto, NodeProto};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use thunder_core::{Array, DType};

fn attr_f(node: &NodeProto, name: &str, default: f64) -> f64 {
    node.attribute
        .iter()
        .find(|a| a.name == name)
        .map_or(default, |a| f64::from(a.f))
}

fn attr_i(node: &NodeProto, name: &str, default: i64) -> i64 {
    node.attribute
        .iter()
        .find(|a| a.name == name)
        .map_or(default, |a| a.i)
}

pub(crate) fn is_default_domain(node: &NodeProto) -> bool {
    node.domain.is_empty() || node.domain == "ai.onnx"
}

/// A name no initializer, node output or graph value uses yet.
pub(crate) fn fresh(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while !taken.insert(name.clone()) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}

/// The folded weights and bias of one pair, or `None` when the arrays do not fit the pattern.
fn fold_arrays(w: &Array, b: Option<&Array>, bn: [&Array; 4], eps: f64) -> Option<(Array, Array)> {
    let dtype = w.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) || w.shape().len() < 3 {
        return None;
    }
    let c_out = w.shape()[0];
    let per_channel = |a: &Array| a.dtype() == dtype && a.shape() == [c_out];
    if !bn.iter().all(|a| per_channel(a)) || b.is_some_and(|b| !per_channel(b)) {
        return None;
    }
    let [scale, beta, mean, var] = bn.map(|a| a.to_f64_vec().ok());
    let (scale, beta, mean, var) = (scale?, beta?, mean?, var?);
    let bias = match b {
        Some(b) => b.to_f64_vec().ok()?,
        None => vec![0.0; c_out as usize],
    };
    let s: Vec<f64> = scale
        .iter()
        .zip(&var)
        .map(|(g, v)| g / (v + eps).sqrt())
        .collect();
    let mut weights = w.to_f64_vec().ok()?;
    let per_out = weights.len() / (c_out as usize).max(1);
    for (o, row) in weights.chunks_mut(per_out.max(1)).enumerate() {
        row.iter_mut().for_each(|x| *x *= s[o]);
    }
    let new_bias: Vec<f64> = (0..c_out as usize)
        .map(|o| (bias[o] - mean[o]) * s[o] + beta[o])
        .collect();
    Some((
        Array::from_f64(&weights, w.shape(), dtype).ok()?,
        Array::from_f64(&new_bias, &[c_out], dtype).ok()?,
    ))
}

/// The initializer `name` stands for, looking through `Identity` nodes.
fn constant<'a>(
    initializers: &HashMap<String, Arc<Array>>,
    alias: &'a HashMap<String, String>,
    mut name: &'a str,
) -> Option<Arc<Array>> {
    for _ in 0..=alias.len() {
        if let Some(a) = initializers.get(name) {
            return Some(a.clone());
        }
        name = alias.get(name)?;
    }
    None
}

/// Folds every eligible Conv -> BatchNormalization pair of `graph`; new parameters are added
/// to `initializers` (and `names`). Returns how many pairs were folded.
pub(crate) fn fold_batch_norms(
    graph: &mut GraphProto,
    initializers: &mut HashMap<String, Arc<Array>>,
    names: &mut Vec<String>,
) -> usize {
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for n in &graph.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *readers.entry(i.as_str()).or_default() += 1;
        }
    }
    let outputs: HashSet<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    let producer: HashMap<&str, usize> = graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    // Exporters share equal constants through Identity nodes (`Identity(initializer)`).
    let alias: HashMap<String, String> = graph
        .node
        .iter()
        .filter(|n| n.op_type == "Identity" && is_default_domain(n) && n.input.len() == 1)
        .filter_map(|n| Some((n.output.first()?.clone(), n.input[0].clone())))
        .collect();
    let mut taken: HashSet<String> = initializers.keys().cloned().collect();
    taken.extend(graph.node.iter().flat_map(|n| n.output.iter().cloned()));
    taken.extend(graph.input.iter().map(|v| v.name.clone()));
    // (conv index, bn index, new weight name, new bias name)
    let mut plan: Vec<(usize, usize, String, String)> = Vec::new();
    let mut added: Vec<(String, Array)> = Vec::new();
    for (j, bn) in graph.node.iter().enumerate() {
        if bn.op_type != "BatchNormalization"
            || !is_default_domain(bn)
            || bn.input.len() != 5
            || attr_i(bn, "training_mode", 0) != 0
            || bn.output.iter().skip(1).any(|o| !o.is_empty())
        {
            continue;
        }
        let y = bn.input[0].as_str();
        let Some(&i) = producer.get(y) else { continue };
        let conv = &graph.node[i];
        if conv.op_type != "Conv"
            || !is_default_domain(conv)
            || conv.output.len() != 1
            || readers.get(y) != Some(&1)
            || outputs.contains(y)
            || conv.input.len() < 2
        {
            continue;
        }
        let get = |name: &str| constant(initializers, &alias, name);
        let Some(w) = get(&conv.input[1]) else {
            continue;
        };
        let b = match conv.input.get(2).filter(|n| !n.is_empty()) {
            Some(n) => match get(n) {
                Some(b) => Some(b),
                None => continue,
            },
            None => None,
        };
        let params: Option<Vec<Arc<Array>>> = bn.input[1..].iter().map(|n| get(n)).collect();
        let Some(p) = params else { continue };
        let eps = attr_f(bn, "epsilon", 1e-5);
        let Some((nw, nb)) = fold_arrays(&w, b.as_deref(), [&p[0], &p[1], &p[2], &p[3]], eps)
        else {
            continue;
        };
        let wn = fresh(&format!("{}_bn_folded", conv.input[1]), &mut taken);
        let bname = fresh(&format!("{}_bn_folded_bias", bn.output[0]), &mut taken);
        added.push((wn.clone(), nw));
        added.push((bname.clone(), nb));
        plan.push((i, j, wn, bname));
    }
    for (name, a) in added {
        initializers.insert(name.clone(), Arc::new(a));
        names.push(name);
    }
    let folded = plan.len();
    let mut drop = HashSet::new();
    for (i, j, wn, bname) in plan {
        let out = graph.node[j].output[0].clone();
        let conv = &mut graph.node[i];
        conv.input.truncate(1);
        conv.input.push(wn);
        conv.input.push(bname);
        conv.output = vec![out];
        drop.insert(j);
    }
    let mut k = 0;
    graph.node.retain(|_| {
        k += 1;
        !drop.contains(&(k - 1))
    });
    folded
}
