//! Shape prims as index arithmetic on row-major lanes: each output element names the input
//! element it copies, through per-output-dim strides into the input (0 where broadcast).

use crate::data::Lanes;

pub(crate) fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= d;
    }
    strides
}

/// For every element of `shape` in row-major order, `sum(index[d] * strides[d])`.
pub(crate) fn linear_indices(shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; shape.len()];
    let mut offset = 0usize;
    for _ in 0..n {
        out.push(offset);
        for d in (0..shape.len()).rev() {
            if index[d] + 1 < shape[d] {
                index[d] += 1;
                offset += strides[d];
                break;
            }
            offset -= strides[d] * (shape[d] - 1);
            index[d] = 0;
        }
    }
    out
}

/// Input dim `i` becomes output dim `dims[i]`; size-1 input dims repeat along their output dim.
pub(crate) fn broadcast_in_dim(
    a: &Lanes,
    in_shape: &[usize],
    out_shape: &[usize],
    dims: &[usize],
) -> Result<Lanes, String> {
    let in_strides = row_major_strides(in_shape);
    let mut strides = vec![0usize; out_shape.len()];
    for ((&size, &stride), &d) in in_shape.iter().zip(&in_strides).zip(dims) {
        let slot = strides
            .get_mut(d)
            .ok_or_else(|| format!("internal: broadcast dim {d} out of range"))?;
        if size != 1 {
            *slot = stride;
        }
    }
    a.gather(&linear_indices(out_shape, &strides))
}

/// Output dim `i` is input dim `perm[i]`.
pub(crate) fn transpose(a: &Lanes, in_shape: &[usize], perm: &[usize]) -> Result<Lanes, String> {
    let in_strides = row_major_strides(in_shape);
    let mut out_shape = Vec::with_capacity(perm.len());
    let mut strides = Vec::with_capacity(perm.len());
    for &p in perm {
        match (in_shape.get(p), in_strides.get(p)) {
            (Some(&size), Some(&stride)) => {
                out_shape.push(size);
                strides.push(stride);
            }
            _ => return Err(format!("internal: permutation entry {p} out of range")),
        }
    }
    a.gather(&linear_indices(&out_shape, &strides))
}
