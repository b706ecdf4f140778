//! A weight used by an embedding lookup and by an output projection (GPT-2's tied `wte`): its
//! gradient sums the lookup's scatter and the projection's product, which the passes fold into
//! one `index_add` into the product's gradient (`passes::IndexAddInto`). Against central finite
//! differences in f64, with repeated token ids.

use thunder_core::autograd::value_and_grad;
use thunder_core::trace_ctx::sticky;
use thunder_core::{Array, Tensor};
use thunder_tests::finite_differences::{check_indexed, values, Op};
use thunder_tests::interpreter_host;
use thunder_torch::prelude::*;

fn tied(x: &[Tensor]) -> Tensor {
    // x[0]: the [vocab, C] weight, x[1]: token ids.
    let h = sticky(thunder_torch::embedding(&x[1], &x[0], None));
    h.linear(&x[0], None).tanh()
}

fn ids() -> Array {
    Array::from_slice(&[3i64, 1, 3, 0, 3], &[5]).unwrap()
}

#[test]
fn a_tied_embeddings_gradient_matches_finite_differences() {
    check_indexed(
        "tied embedding",
        std::sync::Arc::new(tied) as Op,
        vec![values(&[6, 4], 61, -1.0, 1.0)],
        vec![ids()],
    );
}

#[test]
fn the_backward_scatters_into_the_projections_gradient() {
    let vg = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![tied(x).sum(None, false)]
    });
    let w = values(&[6, 4], 62, -1.0, 1.0).with_requires_grad(true);
    vg.call(&[w, ids()]).unwrap();
    let traces = vg.last_traces().unwrap();
    let text = thunder_core::text::print_trace(traces.backward.final_trace());
    let scatters: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("prims.index_add("))
        .collect();
    assert_eq!(scatters.len(), 1, "{text}");
    assert!(
        !text.contains("prims.full([6, 4], 0.0"),
        "no zero-filled [vocab, C] tensor is left:\n{text}"
    );
}
