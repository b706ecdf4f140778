//! Strided views of a buffer, in elements, for executors that read transposes and reshapes in
//! place instead of copying: row-major strides, and the strides a reshape keeps when it can be
//! a view (PyTorch's `computeStride`). Shared by cpu-simd's loop layouts and cublas's operand
//! layouts so the rule exists once.

/// The strides of a contiguous row-major `shape`.
pub fn row_major(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= d as i64;
    }
    strides
}

/// The strides of the elements of a `from`-shaped view with `strides`, seen with shape `to`,
/// when strides can express it; `None` when the reshape would need a copy. Each run of input
/// dims that are contiguous with each other may be regrouped freely; no output dim may span
/// two runs. Strides of size-1 output dims are never stepped over.
pub fn reshape(from: &[usize], strides: &[i64], to: &[usize]) -> Option<Vec<i64>> {
    let numel: usize = from.iter().product();
    if numel != to.iter().product::<usize>() {
        return None;
    }
    if numel <= 1 {
        // Nothing is ever stepped over: any strides address the one element (or none).
        return Some(row_major(to));
    }
    // Size-1 dims never step; dropping them keeps the chunk test below simple.
    let (old_shape, old_strides): (Vec<usize>, Vec<i64>) = from
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .unzip();
    let mut new_strides = vec![0i64; to.len()];
    let mut view_d = to.len() as isize - 1;
    let mut chunk_base = *old_strides.last()?;
    let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
    for d in (0..old_shape.len()).rev() {
        tensor_numel *= old_shape[d];
        let chunk_ends = d == 0 || old_strides[d - 1] != tensor_numel as i64 * chunk_base;
        if chunk_ends {
            while view_d >= 0 && (view_numel < tensor_numel || to[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel as i64 * chunk_base;
                view_numel *= to[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if d > 0 {
                chunk_base = old_strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    // Leading size-1 dims of `to` left over are never stepped over.
    while view_d >= 0 {
        if to[view_d as usize] != 1 {
            return None;
        }
        view_d -= 1;
    }
    Some(new_strides)
}
