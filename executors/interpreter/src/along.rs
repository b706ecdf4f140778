//! Kernels along one dim (argmax/argmin, cumsum) and var_mean. A row-major tensor is seen as
//! `[outer, n, inner]` around the dim, so element `(o, j, i)` sits at `(o * n + j) * inner + i`.

use crate::data::Lanes;
use crate::shape::{linear_indices, row_major_strides};

/// `(outer, n, inner)` of `shape` around `dim`.
pub(crate) fn split(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    let outer = shape[..dim].iter().product();
    let inner = shape[dim + 1..].iter().product();
    (outer, shape[dim], inner)
}

/// Index of the first maximum (minimum) along `dim`; the first NaN wins, as in torch.
pub(crate) fn arg_extreme(a: &Lanes, shape: &[usize], dim: usize, max: bool) -> Lanes {
    let (outer, n, inner) = split(shape, dim);
    fn pick<T: Copy>(
        v: &[T],
        (outer, n, inner): (usize, usize, usize),
        is_nan: impl Fn(T) -> bool,
        better: impl Fn(T, T) -> bool,
    ) -> Vec<i64> {
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| v[(o * n + j) * inner + i];
                let mut best = 0usize;
                for j in 1..n {
                    if is_nan(at(best)) {
                        break;
                    }
                    if is_nan(at(j)) || better(at(j), at(best)) {
                        best = j;
                    }
                }
                out.push(best as i64);
            }
        }
        out
    }
    let dims = (outer, n, inner);
    Lanes::Int(match a {
        Lanes::Float(v) if max => pick(v, dims, f64::is_nan, |x, b| x > b),
        Lanes::Float(v) => pick(v, dims, f64::is_nan, |x, b| x < b),
        Lanes::Int(v) if max => pick(v, dims, |_| false, |x, b| x > b),
        Lanes::Int(v) => pick(v, dims, |_| false, |x, b| x < b),
        Lanes::Bool(v) if max => pick(v, dims, |_| false, |x, b| x & !b),
        Lanes::Bool(v) => pick(v, dims, |_| false, |x, b| !x & b),
    })
}

/// Inclusive running sum along `dim` (f64 accumulation for floats, wrapping for ints).
pub(crate) fn cumsum(a: &Lanes, shape: &[usize], dim: usize) -> Lanes {
    let (outer, n, inner) = split(shape, dim);
    fn scan<T: Copy>(
        v: &[T],
        (outer, n, inner): (usize, usize, usize),
        add: impl Fn(T, T) -> T,
    ) -> Vec<T> {
        let mut out = v.to_vec();
        for o in 0..outer {
            for i in 0..inner {
                for j in 1..n {
                    let (prev, at) = ((o * n + j - 1) * inner + i, (o * n + j) * inner + i);
                    out[at] = add(out[prev], out[at]);
                }
            }
        }
        out
    }
    let dims = (outer, n, inner);
    match a {
        Lanes::Float(v) => Lanes::Float(scan(v, dims, |s, x| s + x)),
        Lanes::Int(v) => Lanes::Int(scan(v, dims, i64::wrapping_add)),
        // Refused at decode; a logical or is the only sensible meaning.
        Lanes::Bool(v) => Lanes::Bool(scan(v, dims, |s, x| s | x)),
    }
}

/// (variance, mean) over `dims`, two passes in f64: the mean first, then the squared
/// deviations from it (one pass of sums of squares loses digits to cancellation).
pub(crate) fn var_mean(
    a: &Lanes,
    shape: &[usize],
    dims: &[usize],
    correction: f64,
) -> Result<Vec<Lanes>, String> {
    let Lanes::Float(v) = a else {
        return Err("var_mean of a non-float tensor".into());
    };
    let kept: Vec<usize> = (0..shape.len())
        .filter(|d| !dims.contains(d))
        .map(|d| shape[d])
        .collect();
    let out_n: usize = kept.iter().product();
    let count: usize = dims.iter().map(|&d| shape[d]).product();
    let kept_strides = row_major_strides(&kept);
    let mut next = kept_strides.iter();
    let strides: Vec<usize> = (0..shape.len())
        .map(|d| {
            if dims.contains(&d) {
                0
            } else {
                next.next().copied().unwrap_or(0)
            }
        })
        .collect();
    let targets = linear_indices(shape, &strides);
    let mut mean = vec![0.0; out_n];
    for (&x, &t) in v.iter().zip(&targets) {
        mean[t] += x;
    }
    mean.iter_mut().for_each(|m| *m /= count as f64);
    let mut var = vec![0.0; out_n];
    for (&x, &t) in v.iter().zip(&targets) {
        var[t] += (x - mean[t]) * (x - mean[t]);
    }
    // As torch: the divisor never goes below 0, so too few samples give inf or NaN.
    let divisor = (count as f64 - correction).max(0.0);
    var.iter_mut().for_each(|s| *s /= divisor);
    Ok(vec![Lanes::Float(var), Lanes::Float(mean)])
}
