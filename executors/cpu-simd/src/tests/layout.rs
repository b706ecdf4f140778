use crate::layout::{Layout, Nest};

#[test]
fn reshape_of_a_contiguous_layout_is_contiguous() {
    let l = Layout::contiguous(&[2, 3, 4]);
    assert_eq!(
        l.reshape(&[2, 3, 4], &[6, 4]),
        Some(Layout::contiguous(&[6, 4]))
    );
    assert_eq!(
        l.reshape(&[2, 3, 4], &[24]),
        Some(Layout::contiguous(&[24]))
    );
    assert_eq!(
        l.reshape(&[2, 3, 4], &[1, 2, 1, 12, 1])
            .map(|l| l.strides[3]),
        Some(1)
    );
}

#[test]
fn reshape_of_a_transpose_needs_a_copy_only_when_it_mixes_dims() {
    // [3, 4] transposed to [4, 3]: strides (1, 4).
    let t = Layout::contiguous(&[3, 4]).transpose(&[1, 0]);
    assert_eq!(t.reshape(&[4, 3], &[12]), None);
    // Splitting one dim of the transpose is fine.
    assert_eq!(
        t.reshape(&[4, 3], &[2, 2, 3]).map(|l| l.strides),
        Some(vec![2, 1, 4])
    );
}

#[test]
fn broadcast_repeats_with_stride_zero() {
    let b = Layout::contiguous(&[3]).broadcast(&[3], 2, &[1]);
    assert_eq!(b.strides, vec![0, 1]);
    let c = Layout::contiguous(&[4, 1]).broadcast(&[4, 1], 2, &[0, 1]);
    assert_eq!(c.strides, vec![1, 0]);
}

#[test]
fn compact_merges_contiguous_dims_and_keeps_broadcasts() {
    let n = Nest {
        shape: vec![2, 1, 3, 4],
        strides: vec![vec![12, 12, 4, 1], vec![0, 0, 0, 1]],
    }
    .compact();
    assert_eq!(n.shape, vec![6, 4]);
    assert_eq!(n.strides, vec![vec![4, 1], vec![0, 1]]);
    let scalar = Nest {
        shape: vec![],
        strides: vec![vec![]],
    }
    .compact();
    assert_eq!(scalar.shape, vec![1]);
}
