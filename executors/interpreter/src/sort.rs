//! `sort` and `topk`: a stable sort of each row along a dim. NaN orders above every number (so
//! it comes last ascending and first descending, as in torch) and equal values keep their index
//! order, so results do not depend on the sort algorithm.

use crate::along::split;
use crate::data::Lanes;
use std::cmp::Ordering;

fn float_order(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // -0 and +0 compare equal, as in torch.
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// The first `k` values of each row in sorted order and their indices along `dim`.
pub(crate) fn sort(
    a: &Lanes,
    shape: &[usize],
    dim: usize,
    k: usize,
    descending: bool,
) -> Vec<Lanes> {
    let (outer, n, inner) = split(shape, dim);
    fn run<T: Copy>(
        v: &[T],
        (outer, n, inner): (usize, usize, usize),
        k: usize,
        descending: bool,
        order: impl Fn(T, T) -> Ordering,
    ) -> (Vec<T>, Vec<i64>) {
        // The order of every row (o, i), then the output written in row-major (o, j, i).
        let mut orders: Vec<Vec<usize>> = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| v[(o * n + j) * inner + i];
                let mut row: Vec<usize> = (0..n).collect();
                // `sort_by` is stable: ties keep index order in both directions.
                row.sort_by(|&x, &y| {
                    let c = order(at(x), at(y));
                    if descending {
                        c.reverse()
                    } else {
                        c
                    }
                });
                row.truncate(k);
                orders.push(row);
            }
        }
        let len = outer * k * inner;
        let (mut values, mut indices) = (Vec::with_capacity(len), Vec::with_capacity(len));
        for (o, rows) in orders.chunks(inner.max(1)).enumerate().take(outer) {
            for j in 0..k {
                for (i, row) in rows.iter().enumerate() {
                    let src = row[j];
                    values.push(v[(o * n + src) * inner + i]);
                    indices.push(src as i64);
                }
            }
        }
        (values, indices)
    }
    let dims = (outer, n, inner);
    let (values, indices) = match a {
        Lanes::Float(v) => {
            let (x, i) = run(v, dims, k, descending, float_order);
            (Lanes::Float(x), i)
        }
        Lanes::Int(v) => {
            let (x, i) = run(v, dims, k, descending, |x: i64, y| x.cmp(&y));
            (Lanes::Int(x), i)
        }
        Lanes::Bool(v) => {
            let (x, i) = run(v, dims, k, descending, |x: bool, y| x.cmp(&y));
            (Lanes::Bool(x), i)
        }
    };
    vec![values, Lanes::Int(indices)]
}
