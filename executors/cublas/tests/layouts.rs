//! Transposes and reshapes folded into the product's operand and output layouts: which ops
//! cuBLAS claims with each `prims.matmul`, the cuBLASLt call each pattern becomes, and that call
//! emulated on the host as column-major BLAS reads it, against the interpreter (no GPU needed).

mod common;

use common::{check_region, claim_rounds};
use thunder_cublas::layout::{matrix, Operand, View};
use thunder_cublas::plan_region;
use thunder_cublas::shape::{LtCall, LtMatrix};

fn prog(inputs: &[(&str, &str)], body: &[&str], outs: &str) -> String {
    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
    let mut t = format!("def computation({}):\n", names.join(", "));
    for (n, ty) in inputs {
        t.push_str(&format!("  # {n}: \"cuda:0 {ty}\"\n"));
    }
    for line in body {
        t.push_str(&format!("  {line}\n"));
    }
    t.push_str(&format!("  return ({outs},)\n"));
    t
}

/// Claims of `text` (one region expected), checked by emulation; returns the region's ops and
/// its cuBLASLt call.
fn claim_one(text: &str) -> (Vec<u32>, LtCall) {
    thunder_torch::register();
    let trace = thunder_torch::parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (bsyms, view, regions) = claim_rounds(&trace, &[]);
    let [ops] = regions.as_slice() else {
        panic!("one region expected, got {regions:?}\n{text}");
    };
    check_region(&trace, &bsyms, &view, ops);
    let spec = common::spec(&trace, &bsyms, ops);
    let call = plan_region(&view, &spec).expect("plans").gemm.lt_call();
    (ops.clone(), call)
}

fn m(rows: u64, cols: u64, ld: u64, batch: u64, stride: u64) -> LtMatrix {
    LtMatrix {
        rows,
        cols,
        ld,
        batch,
        stride,
    }
}

#[test]
fn reshape_views_follow_aten() {
    let c = View::contiguous(&[2, 3, 4]);
    assert_eq!(c.strides, vec![12, 4, 1]);
    // Merging and splitting dims of a contiguous buffer is always a view.
    assert_eq!(c.reshape(&[6, 4]).map(|v| v.strides), Some(vec![4, 1]));
    assert_eq!(c.reshape(&[24]).map(|v| v.strides), Some(vec![1]));
    assert_eq!(
        c.reshape(&[2, 3, 2, 2]).map(|v| v.strides),
        Some(vec![12, 4, 2, 1])
    );
    assert_eq!(
        c.reshape(&[1, 6, 1, 4]).map(|v| v.strides),
        Some(vec![24, 4, 4, 1])
    );
    // A transposed matrix can split or merge its leading dims but not merge across the swap.
    let t = c.permute(&[0, 2, 1]).expect("perm"); // [2, 4, 3], strides [12, 1, 4]
    assert_eq!(t.strides, vec![12, 1, 4]);
    assert_eq!(t.reshape(&[8, 3]), None);
    assert_eq!(t.reshape(&[24]), None);
    assert_eq!(
        t.reshape(&[2, 2, 2, 3]).map(|v| v.strides),
        Some(vec![12, 2, 1, 4])
    );
    // The head-merge permute [B, H, T, D] -> [B, T, H, D] cannot merge H and D in place.
    let heads = View::contiguous(&[2, 3, 5, 4])
        .permute(&[0, 2, 1, 3])
        .expect("perm");
    assert_eq!(heads.reshape(&[2, 5, 12]), None);
    assert_eq!(c.reshape(&[5, 5]), None, "element counts differ");
    assert_eq!(c.permute(&[0, 0, 1]), None, "not a permutation");
}

#[test]
fn matrices_need_one_unit_stride_and_one_batch_stride() {
    let row = matrix(&View::contiguous(&[3, 4, 5])).expect("contiguous");
    assert_eq!(row, Operand::row_major(4, 5));
    let t = View::contiguous(&[3, 5, 4])
        .permute(&[0, 2, 1])
        .expect("perm");
    assert_eq!(
        matrix(&t),
        Some(Operand {
            transposed: true,
            ld: 4,
            batch_stride: 20
        })
    );
    // Batch dims that do not nest (the heads of [B, T, H, D] read as [B, H, T, D]).
    let v = View::contiguous(&[2, 5, 3, 4])
        .permute(&[0, 2, 1, 3])
        .expect("perm");
    assert_eq!(matrix(&v), None);
    // No unit stride at all.
    let v = View::contiguous(&[4, 3, 5])
        .permute(&[1, 0, 2])
        .expect("perm");
    let v = View {
        shape: vec![v.shape[0], v.shape[1]],
        strides: vec![v.strides[0], v.strides[1]],
    };
    assert_eq!(matrix(&v), None);
}

#[test]
fn a_linear_forward_reads_x_reshaped_and_w_transposed_in_place() {
    // linear(x, w) decomposed: matmul(reshape(x, [B*T, C]), transpose(w)), output reshaped back.
    let text = prog(
        &[("x", "f32[2, 3, 8]"), ("w", "f32[5, 8]")],
        &[
            "t0 = prims.transpose(w, [1, 0])",
            "t1 = prims.reshape(x, [6, 8])",
            "t2 = prims.matmul(t1, t0)",
            "t3 = prims.reshape(t2, [2, 3, 5])",
            "t4 = prims.exp(t3)",
        ],
        "t4",
    );
    let (ops, call) = claim_one(&text);
    assert_eq!(
        ops,
        vec![0, 1, 2, 3],
        "both operand chains and the output reshape"
    );
    assert_eq!(
        call,
        LtCall {
            transa: true,
            transb: false,
            a: m(8, 5, 8, 1, 40),
            b: m(8, 6, 8, 1, 48),
            d: m(5, 6, 5, 1, 30),
        }
    );
}

#[test]
fn the_input_gradient_reads_a_double_transpose_as_the_weight() {
    // dx = matmul(g, transpose(transpose(w))).
    let text = prog(
        &[("g", "f32[6, 5]"), ("w", "f32[5, 8]")],
        &[
            "t0 = prims.transpose(w, [1, 0])",
            "t1 = prims.transpose(t0, [1, 0])",
            "t2 = prims.matmul(g, t1)",
        ],
        "t2",
    );
    let (ops, call) = claim_one(&text);
    assert_eq!(ops, vec![0, 1, 2]);
    assert_eq!((call.transa, call.transb), (false, false));
    assert_eq!(call.a, m(8, 5, 8, 1, 40));
}

#[test]
fn the_weight_gradient_writes_its_transposed_output_by_swapping_operands() {
    // dw = transpose(matmul(transpose(reshape(x)), reshape(g))): dw = g^T x, no transposed copy.
    let text = prog(
        &[("x", "f32[2, 3, 8]"), ("g", "f32[2, 3, 5]")],
        &[
            "t0 = prims.reshape(x, [6, 8])",
            "t1 = prims.transpose(t0, [1, 0])",
            "t2 = prims.reshape(g, [6, 5])",
            "t3 = prims.matmul(t1, t2)",
            "t4 = prims.transpose(t3, [1, 0])",
        ],
        "t4",
    );
    let (ops, call) = claim_one(&text);
    assert_eq!(ops, vec![0, 1, 2, 3, 4]);
    // t4 [5, 8] = g^T (5 x 6) @ x (6 x 8): Lt's A is x read as is, Lt's B is g transposed.
    assert_eq!(
        call,
        LtCall {
            transa: false,
            transb: true,
            a: m(8, 6, 8, 1, 48),
            b: m(5, 6, 5, 1, 30),
            d: m(8, 5, 8, 1, 40),
        }
    );
}

#[test]
fn batched_products_fold_transposed_operands_and_outputs() {
    // Attention's scores q @ k^T and a batched output stored transposed.
    let text = prog(
        &[("q", "f32[2, 3, 4, 6]"), ("k", "f32[2, 3, 5, 6]")],
        &[
            "t0 = prims.transpose(k, [0, 1, 3, 2])",
            "t1 = prims.matmul(q, t0)",
            "t2 = prims.transpose(t1, [0, 1, 3, 2])",
        ],
        "t2",
    );
    let (ops, call) = claim_one(&text);
    assert_eq!(ops, vec![0, 1, 2]);
    assert_eq!(call.d, m(4, 5, 4, 6, 20), "t2 [.., 5, 4] written row-major");
    // Batch dims merged or split by reshapes still fold into one stride.
    let text = prog(
        &[("a", "f32[6, 4, 3]"), ("b", "f32[2, 3, 3, 5]")],
        &[
            "t0 = prims.reshape(a, [2, 3, 4, 3])",
            "t1 = prims.matmul(t0, b)",
            "t2 = prims.reshape(t1, [6, 4, 5])",
        ],
        "t2",
    );
    let (ops, call) = claim_one(&text);
    assert_eq!(ops, vec![0, 1, 2]);
    assert_eq!((call.a.batch, call.b.stride, call.d.stride), (6, 12, 20));
    // A batch taken from a middle dim: rows 15 apart inside each matrix, matrices 5 apart.
    let text = prog(
        &[("x", "f32[4, 3, 5]"), ("b", "f32[3, 5, 2]")],
        &[
            "t0 = prims.transpose(x, [1, 0, 2])",
            "t1 = prims.matmul(t0, b)",
        ],
        "t1",
    );
    let (ops, call) = claim_one(&text);
    assert_eq!(ops, vec![0, 1]);
    assert_eq!((call.transb, call.b), (false, m(5, 4, 15, 3, 5)));
}

#[test]
fn layouts_cublas_cannot_read_stay_materialized() {
    // The head-merge permute ([B, H, T, D] -> [B, T, H, D]) cannot be read as one matrix: the
    // reshapes after it fold, the permute itself is left to the fuser.
    let text = prog(
        &[("a", "f32[2, 3, 4, 5]"), ("w", "f32[7, 15]")],
        &[
            "t0 = prims.transpose(a, [0, 2, 1, 3])",
            "t1 = prims.reshape(t0, [2, 4, 15])",
            "t2 = prims.reshape(t1, [8, 15])",
            "t3 = prims.transpose(w, [1, 0])",
            "t4 = prims.matmul(t2, t3)",
        ],
        "t4",
    );
    let (ops, _) = claim_one(&text);
    assert_eq!(ops, vec![1, 2, 3, 4], "everything but the permute");
    // A transpose read by someone else, or returned, is not claimed: its value must exist.
    for (extra, outs) in [
        ("t2 = prims.exp(t0)", "t1, t2"),
        ("t2 = prims.exp(a)", "t1, t0"),
    ] {
        let text = prog(
            &[("a", "f32[4, 3]"), ("b", "f32[4, 5]")],
            &[
                "t0 = prims.transpose(a, [1, 0])",
                "t1 = prims.matmul(t0, b)",
                extra,
            ],
            outs,
        );
        thunder_torch::register();
        let trace = thunder_torch::parse_trace(&text).expect("parses");
        let (bsyms, view, regions) = claim_rounds(&trace, &[]);
        assert_eq!(regions, vec![vec![1]], "{text}");
        check_region(&trace, &bsyms, &view, &regions[0]);
    }
    // matmul(t, t) reads its one transposed operand twice: the transpose stays.
    let text = prog(
        &[("a", "f32[4, 4]")],
        &[
            "t0 = prims.transpose(a, [1, 0])",
            "t1 = prims.matmul(t0, t0)",
        ],
        "t1",
    );
    let (ops, _) = claim_one(&text);
    assert_eq!(ops, vec![1]);
}

#[test]
fn every_dtype_cublas_runs_claims_the_same_chains() {
    for dtype in ["f32", "f16", "bf16"] {
        let text = prog(
            &[
                ("x", &format!("{dtype}[2, 3, 8]")),
                ("w", &format!("{dtype}[5, 8]")),
            ],
            &[
                "t0 = prims.transpose(w, [1, 0])",
                "t1 = prims.reshape(x, [6, 8])",
                "t2 = prims.matmul(t1, t0)",
            ],
            "t2",
        );
        thunder_torch::register();
        let trace = thunder_torch::parse_trace(&text).expect("parses");
        let (_, _, regions) = claim_rounds(&trace, &[]);
        assert_eq!(regions, vec![vec![0, 1, 2]], "{dtype}");
    }
    // f64 is not a cuBLASLt type here: nothing is claimed, the layout ops included.
    let text = prog(
        &[("x", "f64[6, 8]"), ("w", "f64[5, 8]")],
        &[
            "t0 = prims.transpose(w, [1, 0])",
            "t1 = prims.matmul(x, t0)",
        ],
        "t1",
    );
    let trace = thunder_torch::parse_trace(&text).expect("parses");
    assert!(claim_rounds(&trace, &[]).2.is_empty());
    // Empty products are left to other executors, with their layout ops.
    for (x, w) in [("f32[0, 8]", "f32[5, 8]"), ("f32[6, 0]", "f32[5, 0]")] {
        let text = prog(
            &[("x", x), ("w", w)],
            &[
                "t0 = prims.transpose(w, [1, 0])",
                "t1 = prims.matmul(x, t0)",
            ],
            "t1",
        );
        let trace = thunder_torch::parse_trace(&text).expect("parses");
        assert!(claim_rounds(&trace, &[]).2.is_empty(), "{x} @ {w}^T");
    }
}

#[test]
fn plans_of_two_views_with_the_same_shape_but_other_readers_differ() {
    // The same ops and values, except who reads the transpose: folding it into the product is
    // right only where the product alone reads it. `plan_region` keeps the last view's use
    // maps; planned with the shared view's maps, the other view's product would not fold t0.
    let text = |neg_of: &str| {
        prog(
            &[("a", "f32[6, 8]"), ("w", "f32[5, 8]")],
            &[
                "t0 = prims.transpose(w, [1, 0])",
                "t1 = prims.matmul(a, t0)",
                &format!("t2 = prims.neg({neg_of})"),
            ],
            "t1, t2",
        )
    };
    thunder_torch::register();
    let plan = |text: &str, ops: &[u32]| {
        let trace = thunder_torch::parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let view = thunder_core::host::view::trace_view(&trace, &trace.bsyms);
        let spec = common::spec(&trace, &trace.bsyms, ops);
        plan_region(&view, &spec).map(|p| p.ops)
    };
    for _ in 0..2 {
        assert_eq!(
            plan(&text("t0"), &[1]),
            Ok(vec![1]),
            "t0 is also read by neg: the product reads it as a value"
        );
        assert_eq!(
            plan(&text("a"), &[0, 1]),
            Ok(vec![0, 1]),
            "the product alone reads t0: the transpose folds"
        );
    }
}
