//! A CPU session's convolution weights laid out once for the executor: each f32 Conv weight
//! with a kernel of more than one element (`[C_out, C_in/G, kh, kw]`) is stored
//! `[C_in/G, kh, kw, C_out]` and handed back through a `Transpose` node, so the trace reads
//! `permute(w_co_last, [3, 0, 1, 2])`: the same values, a view whose output channels are
//! contiguous. cpu-simd's convolution reads such weights in place with the output channels
//! along its vector lanes (`conv_comajor.rs`), where on the plain layout the `gemm` crate
//! packed them on every call. ONNX Runtime does the same kind of thing when it creates a
//! session (its NCHWc kernels' weights are reordered once).
//!
//! Only for the CPU: on a GPU the executors take PyTorch's layout. 1x1 convolutions keep it
//! too (ResNet-50 b1 laid out whole ran 2-4% slower: the crate's 1x1s at 56 x 56 were 1.3x
//! faster cold than the lane-per-channel product), and so do weights over [`MAX_BYTES`].
//! `THUNDER_ONNX_CONV_LAYOUT=0` turns it off. ResNet-50 on the CPU, 2 threads, three
//! alternating rounds against it off (`benches/peer/onnx_peer.py --only resnet50`, AMD EPYC
//! Zen 5): b1 24.8-25.3 ms against 25.0-26.2, b8 194.1-194.7 against 195.8-205.7.
//!
//! On the device host's Xeon (2 pinned cores, `scripts/gpu/conv_layout_ab.sh`, which moves
//! the limits through `THUNDER_ONNX_CONV_LAYOUT_MAX_BYTES` and `THUNDER_ONNX_CONV_LAYOUT_1X1`)
//! laying out more was no faster: ResNet-50 b8 took 276-283 ms at best a round with these
//! limits, 306-328 with every 3x3 laid out, 306-340 with the 1x1s too (up to 1 MiB), 401-459
//! with everything; b1 was too noisy that hour to rank the arms.

use crate::fold_bn::{fresh, is_default_domain};
use crate::model::OnnxModel;
use crate::proto::{AttributeProto, NodeProto};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use thunder_core::{Array, DType};

/// The largest weight laid out (an L2 cache): a bigger one streams from memory on every
/// call, which the crate's packing reads row by row at a higher rate than the lane-per-channel
/// product reads 256-byte pieces of its rows. ResNet-50 b1 (2 threads, AMD EPYC Zen 5):
/// its 3x3s over 512 channels (9.4 MB) at 7 x 7 took 735 us on the crate and 889 laid out,
/// over 256 channels (2.4 MB) at 14 x 14 642 against 663; over 64 and 128 channels (150 KB
/// and less) 699 against 607 and 652 against 589.
const MAX_BYTES: usize = 1 << 20;

/// Which weights are laid out: at most `max_bytes` ([`MAX_BYTES`] unless
/// `THUNDER_ONNX_CONV_LAYOUT_MAX_BYTES` says otherwise), and 1x1 kernels too when `pointwise`
/// (`THUNDER_ONNX_CONV_LAYOUT_1X1=1`). The two variables are for A/B runs on other CPUs than
/// the one the defaults were measured on; a value that is not a byte count is ignored, with a
/// warning.
struct Limits {
    max_bytes: usize,
    pointwise: bool,
}

impl Limits {
    fn from_env() -> Limits {
        Limits::parse(
            std::env::var("THUNDER_ONNX_CONV_LAYOUT_MAX_BYTES")
                .ok()
                .as_deref(),
            std::env::var("THUNDER_ONNX_CONV_LAYOUT_1X1")
                .ok()
                .as_deref(),
        )
    }

    /// From the two variables' values (`None`: unset).
    fn parse(max_bytes: Option<&str>, pointwise: Option<&str>) -> Limits {
        let max_bytes = max_bytes.map_or(MAX_BYTES, |v| {
            v.trim().parse().unwrap_or_else(|_| {
                tracing::warn!(
                    "THUNDER_ONNX_CONV_LAYOUT_MAX_BYTES={v:?} is not a byte count; using {MAX_BYTES}"
                );
                MAX_BYTES
            })
        });
        Limits {
            max_bytes,
            pointwise: pointwise == Some("1"),
        }
    }
}

/// `AttributeProto.AttributeType` INTS.
const INTS: i32 = 7;

/// Whether CPU sessions lay their convolution weights out: where the CPU has AVX-512, which
/// cpu-simd's lane-per-channel product needs (elsewhere the crate would read the laid-out
/// weights as a strided operand, a few percent slower than PyTorch's layout);
/// `THUNDER_ONNX_CONV_LAYOUT=0` turns it off, `=1` on anywhere.
pub(crate) fn enabled() -> bool {
    match std::env::var("THUNDER_ONNX_CONV_LAYOUT").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => avx512(),
    }
}

#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx512() -> bool {
    false
}

/// Stores every eligible Conv weight of `model` with its output channels last (see the
/// module doc); returns how many. A weight is eligible when it is an f32 initializer of
/// rank 3 or more whose kernel has more than one element and which only Conv nodes read, as
/// their weight.
pub(crate) fn channels_last_conv_weights(model: &mut OnnxModel) -> usize {
    channels_last_within(model, &Limits::from_env())
}

/// [`channels_last_conv_weights`] within `limits`.
fn channels_last_within(model: &mut OnnxModel, limits: &Limits) -> usize {
    let mut reads: HashMap<&str, usize> = HashMap::new();
    for n in &model.graph.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *reads.entry(i.as_str()).or_default() += 1;
        }
    }
    let mut as_weight: HashMap<&str, usize> = HashMap::new();
    for n in &model.graph.node {
        if n.op_type == "Conv" && is_default_domain(n) {
            if let Some(w) = n.input.get(1).filter(|w| !w.is_empty()) {
                *as_weight.entry(w.as_str()).or_default() += 1;
            }
        }
    }
    let outputs: HashSet<&str> = model.graph.output.iter().map(|o| o.name.as_str()).collect();
    let mut eligible: Vec<String> = as_weight
        .iter()
        .filter(|&(w, n)| reads.get(w) == Some(n) && !outputs.contains(w))
        .filter(|&(w, _)| {
            model.initializers.get(*w).is_some_and(|a| {
                a.dtype() == DType::F32
                    && a.shape().len() >= 3
                    && (a.shape()[2..].iter().product::<i64>() > 1 || limits.pointwise)
                    && a.numel() * 4 <= limits.max_bytes
            })
        })
        .map(|(w, _)| w.to_string())
        .collect();
    // In the file's order, so the rewritten graph does not depend on hash order.
    let order: HashMap<&str, usize> = model
        .initializer_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    eligible.sort_by_key(|w| order.get(w.as_str()).copied().unwrap_or(usize::MAX));
    let mut taken: HashSet<String> = model.initializers.keys().cloned().collect();
    taken.extend(
        model
            .graph
            .node
            .iter()
            .flat_map(|n| n.output.iter().cloned()),
    );
    taken.extend(model.graph.input.iter().map(|v| v.name.clone()));
    let mut transposes = Vec::new();
    for w in eligible {
        let Some(array) = model.initializers.get(&w) else {
            continue;
        };
        let Some(stored) = co_last(array) else {
            continue;
        };
        let name = fresh(&format!("{w}_co_last"), &mut taken);
        let rank = array.shape().len() as i64;
        let mut perm = vec![rank - 1];
        perm.extend(0..rank - 1);
        transposes.push(NodeProto {
            input: vec![name.clone()],
            output: vec![w.clone()],
            name: format!("{w}_layout"),
            op_type: "Transpose".into(),
            domain: String::new(),
            attribute: vec![AttributeProto {
                name: "perm".into(),
                r#type: INTS,
                ints: perm,
                ..Default::default()
            }],
        });
        model.initializers.remove(&w);
        model.initializers.insert(name.clone(), Arc::new(stored));
        for n in model.initializer_names.iter_mut().filter(|n| **n == w) {
            *n = name.clone();
        }
    }
    let count = transposes.len();
    transposes.append(&mut model.graph.node);
    model.graph.node = transposes;
    count
}

/// `a` (`[C_out, rest...]`) stored as `[rest..., C_out]`.
fn co_last(a: &Array) -> Option<Array> {
    let shape = a.shape();
    let co = usize::try_from(shape[0]).ok()?;
    let values = a.to_vec::<f32>().ok()?;
    let per = values.len().checked_div(co).unwrap_or(0);
    let mut out = vec![0f32; values.len()];
    for (o, row) in values.chunks_exact(per.max(1)).enumerate().take(co) {
        for (k, &x) in row.iter().enumerate() {
            out[k * co + o] = x;
        }
    }
    let mut stored: Vec<i64> = shape[1..].to_vec();
    stored.push(shape[0]);
    Array::from_slice(&out, &stored).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn layout_limits_come_from_the_variables_or_the_defaults() {
        let d = Limits::parse(None, None);
        assert_eq!((d.max_bytes, d.pointwise), (MAX_BYTES, false));
        let set = Limits::parse(Some(" 4194304 "), Some("1"));
        assert_eq!((set.max_bytes, set.pointwise), (4 << 20, true));
        // Not a byte count (or negative): the default, with a warning; only "1" turns 1x1s on.
        for bad in ["4M", "-1", ""] {
            assert_eq!(
                Limits::parse(Some(bad), Some("yes")).max_bytes,
                MAX_BYTES,
                "{bad:?}"
            );
        }
        assert!(!Limits::parse(None, Some("yes")).pointwise);
        assert!(!Limits::parse(None, Some("0")).pointwise);
    }

    #[test]
    fn the_limits_pick_which_weights_are_laid_out() {
        let before = resnet_tiny();
        let ws = conv_weights(&before);
        let wide = ws
            .iter()
            .filter(|w| before.initializers[*w].shape()[2..].iter().product::<i64>() > 1)
            .count();
        assert!(wide > 0 && wide < ws.len(), "the fixture has both kinds");
        let mut all = before.clone();
        let every = Limits {
            max_bytes: MAX_BYTES,
            pointwise: true,
        };
        assert_eq!(channels_last_within(&mut all, &every), ws.len());
        let mut none = before.clone();
        let nothing = Limits {
            max_bytes: 0,
            pointwise: true,
        };
        assert_eq!(channels_last_within(&mut none, &nothing), 0);
        assert_eq!(none.graph.node.len(), before.graph.node.len());
    }

    fn resnet_tiny() -> OnnxModel {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/resnet_tiny/model.onnx");
        OnnxModel::load(&path).unwrap()
    }

    fn conv_weights(model: &OnnxModel) -> Vec<String> {
        let mut ws: Vec<String> = model
            .graph
            .node
            .iter()
            .filter(|n| n.op_type == "Conv")
            .map(|n| n.input[1].clone())
            .collect();
        ws.sort();
        ws.dedup();
        ws
    }

    #[test]
    fn kernels_of_more_than_one_element_are_stored_output_channels_last() {
        let before = resnet_tiny();
        let mut after = before.clone();
        let n = channels_last_conv_weights(&mut after);
        let mut wide = 0;
        for w in conv_weights(&before) {
            let a = &before.initializers[&w];
            if a.shape()[2..].iter().product::<i64>() == 1 {
                // 1x1 weights keep their layout and their name.
                assert!(Arc::ptr_eq(a, &after.initializers[&w]), "{w}");
                continue;
            }
            wide += 1;
            assert!(
                !after.initializers.contains_key(&w),
                "{w} is now a node's output"
            );
            let t = after
                .graph
                .node
                .iter()
                .find(|n| n.output == [w.clone()])
                .unwrap_or_else(|| panic!("no node makes {w}"));
            assert_eq!(t.op_type, "Transpose");
            let rank = a.shape().len() as i64;
            let mut perm = vec![rank - 1];
            perm.extend(0..rank - 1);
            assert_eq!(t.attribute[0].ints, perm);
            let stored = &after.initializers[&t.input[0]];
            let mut shape = a.shape()[1..].to_vec();
            shape.push(a.shape()[0]);
            assert_eq!(stored.shape(), shape.as_slice());
            // Element (o, rest) of the original is element (rest, o) of the stored array.
            let (x, y) = (a.to_vec::<f32>().unwrap(), stored.to_vec::<f32>().unwrap());
            let co = a.shape()[0] as usize;
            let per = x.len() / co;
            for (i, &v) in x.iter().enumerate() {
                assert_eq!(y[(i % per) * co + i / per], v);
            }
        }
        assert!(wide > 0, "the fixture has convolutions with wider kernels");
        assert_eq!(n, wide);
    }

    #[test]
    fn a_weight_read_by_another_node_keeps_its_layout() {
        let mut model = resnet_tiny();
        let wide: Vec<String> = conv_weights(&model)
            .into_iter()
            .filter(|w| model.initializers[w].shape()[2..].iter().product::<i64>() > 1)
            .collect();
        let shared = wide[0].clone();
        model.graph.node.push(NodeProto {
            input: vec![shared.clone()],
            output: vec!["elsewhere".into()],
            op_type: "Identity".into(),
            ..Default::default()
        });
        let n = channels_last_conv_weights(&mut model);
        assert_eq!(n, wide.len() - 1);
        assert!(model.initializers.contains_key(&shared));
    }
}
