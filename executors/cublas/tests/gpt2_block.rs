//! The GPT-2 block's forward and backward (as `thunder bench --grad` builds them, small shapes)
//! claimed as on the GPU: every product claimed with the transposes and reshapes that only
//! re-read its operands or re-write its output, what stays materialized and why, and every
//! claimed region's cuBLASLt call emulated against the interpreter.

mod common;

use common::{check_region, claim_rounds, gpt2_block, grad_traces, TRITON};
use thunder_abi::prims::Prim;
use thunder_abi::{ArgView, TraceView};

/// The layout ops (transpose, reshape) on the way into or out of a `prims.matmul` that no
/// cuBLAS region took, as `(symbol, perm or shape, how many ops read its output)`.
fn left_out(view: &TraceView, regions: &[Vec<u32>]) -> Vec<(String, Vec<i64>, usize)> {
    let claimed = |i: usize| regions.iter().any(|r| r.contains(&(i as u32)));
    let layout = |i: usize| {
        let s = view.ops[i].symbol.as_str();
        s == Prim::Transpose.id() || s == Prim::Reshape.id()
    };
    let producer = |v: u32| view.ops.iter().position(|o| o.outputs.contains(&v));
    let readers = |v: u32| {
        view.ops
            .iter()
            .filter(|o| o.input_values().any(|x| x == v))
            .count()
    };
    let describe = |i: usize| {
        let ints = match view.ops[i].args.get(1) {
            Some(ArgView::Ints(v)) => v.to_vec(),
            _ => Vec::new(),
        };
        (
            view.ops[i].symbol.to_string(),
            ints,
            readers(view.ops[i].outputs[0]),
        )
    };
    let mut out = Vec::new();
    for (i, op) in view.ops.iter().enumerate() {
        if op.symbol.as_str() != Prim::Matmul.id() {
            continue;
        }
        assert!(claimed(i), "op {i} (prims.matmul) is not claimed by cuBLAS");
        for mut v in op.input_values() {
            while let Some(p) = producer(v).filter(|&p| layout(p)) {
                if !claimed(p) {
                    out.push(p);
                }
                v = view.ops[p].input_values().next().expect("layout op input");
            }
        }
        let mut v = op.outputs[0];
        while let Some(r) = view
            .ops
            .iter()
            .position(|o| o.input_values().any(|x| x == v))
            .filter(|&r| layout(r) && readers(v) == 1)
        {
            if !claimed(r) {
                out.push(r);
            }
            v = view.ops[r].outputs[0];
        }
    }
    out.sort_unstable();
    out.dedup();
    let mut described: Vec<_> = out.into_iter().map(describe).collect();
    described.sort();
    described
}

fn matmuls(view: &TraceView) -> usize {
    view.ops
        .iter()
        .filter(|o| o.symbol.as_str() == Prim::Matmul.id())
        .count()
}

#[test]
fn the_block_claims_every_product_with_its_layouts() {
    // B2 T8 C16 H2 (D 8) in bf16, attention claimed whole by Triton as on the H200.
    claims_of_the_block(2, 8, 16, 2);
}

#[test]
fn the_full_size_block_claims_the_same_and_reads_its_weights_in_place() {
    // B8 T1024 C768 H12, as gpt2_block_peer.py times it (claims only: no data).
    let (fview, fregions, bview, bregions) = claims_of_the_block(8, 1024, 768, 12);
    let calls = |view: &TraceView, regions: &[Vec<u32>]| -> Vec<String> {
        regions
            .iter()
            .map(|r| {
                let spec = thunder_abi::RegionSpec {
                    ops: r.clone().into(),
                    inputs: Vec::new().into(),
                    outputs: vec![last_output(view, r)].into(),
                };
                let c = thunder_cublas::plan_region(view, &spec)
                    .expect("plans")
                    .gemm
                    .lt_call();
                let t = |b: bool| if b { 'T' } else { 'N' };
                format!(
                    "{}{} m{} n{} k{} lda{} ldb{} ldd{}",
                    t(c.transa),
                    t(c.transb),
                    c.d.rows,
                    c.d.cols,
                    if c.transa { c.a.rows } else { c.a.cols },
                    c.a.ld,
                    c.b.ld,
                    c.d.ld
                )
            })
            .collect()
    };
    let (f, b) = (calls(&fview, &fregions), calls(&bview, &bregions));
    eprintln!("forward products (Lt terms): {f:#?}\nbackward products: {b:#?}");
    // Forward: y = x w^T, Lt's D = w x^T read with transa (the weight [N, C] in place).
    for (call, n) in f.iter().zip([2304, 768, 3072, 768]) {
        assert!(call.starts_with(&format!("TN m{n} n8192 ")), "{call}");
    }
    // Backward: dx = g w (NN) and dw = g^T x (NT, its transposed output folded), per layer.
    assert_eq!(
        b.iter().filter(|c| c.starts_with("NN ")).count(),
        4,
        "{b:#?}"
    );
    assert_eq!(
        b.iter().filter(|c| c.starts_with("NT ")).count(),
        4,
        "{b:#?}"
    );
    for call in b.iter().filter(|c| c.starts_with("NT ")) {
        assert!(call.contains(" k8192 "), "dw sums over B*T rows: {call}");
    }
}

/// The one value region `ops` writes: the output of its last op.
fn last_output(view: &TraceView, ops: &[u32]) -> u32 {
    let last = *ops.iter().max().expect("ops");
    view.ops[last as usize].outputs[0]
}

fn claims_of_the_block(
    b: i64,
    t: i64,
    c: i64,
    h: i64,
) -> (TraceView, Vec<Vec<u32>>, TraceView, Vec<Vec<u32>>) {
    let (fwd, bwd) = grad_traces(&gpt2_block(b, t, c, h, "bf16"));
    let (_, fview, fregions) = claim_rounds(&fwd, &TRITON);
    let (_, bview, bregions) = claim_rounds(&bwd, &TRITON);
    assert_eq!(
        (matmuls(&fview), fregions.len()),
        (4, 4),
        "the four linears"
    );
    assert_eq!(
        (matmuls(&bview), bregions.len()),
        (8, 8),
        "dx and dw of each"
    );
    // Forward: each linear takes reshape(x) and transpose(w) and its output reshape.
    for r in &fregions {
        let syms: Vec<&str> = r
            .iter()
            .map(|&i| fview.ops[i as usize].symbol.as_str())
            .collect();
        assert!(syms.contains(&"prims.transpose"), "{syms:?}");
        assert_eq!(syms.iter().filter(|s| **s == "prims.matmul").count(), 1);
    }
    // What stays materialized: the head-merge permute of attention's output ([B, H, T, D] ->
    // [B, T, H, D] cannot be read as one matrix with one batch stride; the reshapes after it
    // are folded). Also left out: the [B*T, 4C] -> [B, T, 4C] reshape of the MLP's first
    // product, which the forward saves for the backward to recompute the bias and GELU from:
    // a saved product is read twice, and a reshape of a contiguous buffer runs as an alias,
    // copying nothing.
    let heads = ("prims.transpose".to_string(), vec![0, 2, 1, 3], 1);
    let saved_product = ("prims.reshape".to_string(), vec![b, t, 4 * c], 1);
    assert_eq!(
        left_out(&fview, &fregions),
        vec![saved_product, heads.clone()]
    );
    // Backward: the same permute (recomputed for dW_o) and the head split of dW_o's input
    // gradient before attention's backward (the same layout, written), and the four reshapes
    // of an output gradient that both of its layer's products read (`[B, T, N] -> [B*T, N]`
    // of a contiguous buffer, which copies nothing; regions may not share it). And the qkv
    // gradient's [B, T, 3, H, D]-ordered cat merged back to [B, T, 3C] (passes::MergedCats),
    // the same kind of reshape of a contiguous result.
    let left = left_out(&bview, &bregions);
    let reshapes: Vec<_> = left
        .iter()
        .filter(|(s, _, _)| s == "prims.reshape")
        .collect();
    assert_eq!(left.iter().filter(|l| **l == heads).count(), 2, "{left:?}");
    assert_eq!((reshapes.len(), left.len()), (5, 7), "{left:?}");
    let qkv_grad = ("prims.reshape".to_string(), vec![b, t, 3 * c], 1);
    assert!(
        reshapes
            .iter()
            .all(|l| **l == qkv_grad || (l.1.len() == 2 && l.2 == 2)),
        "{left:?}"
    );
    // Every weight gradient is written by its product (the output transpose folded as
    // out^T = rhs^T lhs^T), not by a transposing copy.
    for &g in bview.outputs.iter() {
        let Some(p) = bview.ops.iter().position(|o| o.outputs.contains(&g)) else {
            continue;
        };
        if bview.ops[p].symbol.as_str() == Prim::Transpose.id() {
            assert!(
                bregions.iter().any(|r| r.contains(&(p as u32))),
                "gradient t{g} is a transpose left to another executor"
            );
        }
    }
    (fview, fregions, bview, bregions)
}

#[test]
fn every_claimed_region_of_the_block_agrees_with_the_interpreter() {
    // f32, so the emulation (f64) and the interpreter agree to rounding. Once with attention
    // claimed whole (as on the GPU), once decomposed (its batched products, with their
    // transposed operands, are claimed too).
    let (fwd, bwd) = grad_traces(&gpt2_block(2, 8, 16, 2, "f32"));
    for trace in [&fwd, &bwd] {
        for kept in [&TRITON[..], &[]] {
            let (bsyms, view, regions) = claim_rounds(trace, kept);
            assert!(!regions.is_empty());
            for r in &regions {
                check_region(trace, &bsyms, &view, r);
            }
            if kept.is_empty() {
                // The decomposed attention adds its score and value products (2 forward,
                // 4 backward, plus the forward's recomputed 2).
                assert!(regions.len() > 4, "{} regions", regions.len());
            }
        }
    }
}
