use crate::decode::Ty;
use crate::group::BufId;
use crate::layout::Layout;
use crate::stages::GemmPlan;

fn plan(a: Layout, b: Layout, batch: &[usize], (m, k, n): (usize, usize, usize)) -> GemmPlan {
    GemmPlan {
        ty: Ty::F32,
        a: (BufId::Input(0), a),
        b: (BufId::Input(1), b),
        out: BufId::Output(0),
        batch: batch.to_vec(),
        m,
        k,
        n,
        accumulate: false,
        epilogue: None,
        packed: None,
    }
}

#[test]
fn rows_of_contiguous_batches_against_a_broadcast_weight_fold_into_one_gemm() {
    // x[2, 3, 5, 4] @ w[4, 6] with w broadcast over the batch dims.
    let a = Layout::contiguous(&[2, 3, 5, 4]);
    let b = Layout {
        offset: 7,
        strides: vec![0, 0, 6, 1],
    };
    let g = plan(a, b, &[2, 3], (5, 4, 6)).fold_broadcast_batches();
    assert_eq!((g.batch.len(), g.m, g.k, g.n), (0, 30, 4, 6));
    assert_eq!(g.a.1.strides, vec![4, 1]);
    assert_eq!((g.b.1.offset, g.b.1.strides.clone()), (7, vec![6, 1]));
}

#[test]
fn size_one_batch_dims_do_not_stop_the_fold() {
    let a = Layout {
        offset: 0,
        strides: vec![999, 20, 4, 1],
    };
    let b = Layout {
        offset: 0,
        strides: vec![5, 0, 6, 1],
    };
    let g = plan(a, b, &[1, 3], (5, 4, 6)).fold_broadcast_batches();
    assert_eq!((g.batch.len(), g.m), (0, 15));
}

#[test]
fn batches_that_do_not_step_evenly_over_the_rows_stay_batched() {
    // The batch dim of a transposed x ([5, 2, 4] viewed as [2, 5, 4]) interleaves the rows.
    let a = Layout::contiguous(&[5, 2, 4]).transpose(&[1, 0, 2]);
    let b = Layout {
        offset: 0,
        strides: vec![0, 6, 1],
    };
    let g = plan(a, b, &[2], (5, 4, 6)).fold_broadcast_batches();
    assert_eq!((g.batch.clone(), g.m), (vec![2], 5));
    // A right operand that differs per batch cannot share one GEMM.
    let a = Layout::contiguous(&[2, 5, 4]);
    let b = Layout::contiguous(&[2, 4, 6]);
    let g = plan(a, b, &[2], (5, 4, 6)).fold_broadcast_batches();
    assert_eq!((g.batch.clone(), g.m), (vec![2], 5));
}
