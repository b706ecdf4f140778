//! Reductions over a set of dims, which are removed from the shape. Every input element is
//! folded into the output element its kept dims name, so one pass in row-major order does any
//! set of dims.

use crate::data::Lanes;
use crate::shape::{linear_indices, row_major_strides};
use thunder_abi::prims::special::nan_max;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Amax,
    Prod,
    Amin,
}

pub(crate) fn reduce(
    op: ReduceOp,
    a: &Lanes,
    shape: &[usize],
    dims: &[usize],
) -> Result<Lanes, String> {
    let kept: Vec<usize> = (0..shape.len())
        .filter(|d| !dims.contains(d))
        .map(|d| shape[d])
        .collect();
    let out_n: usize = kept.iter().product();
    let reduced: usize = dims.iter().filter_map(|&d| shape.get(d)).product();
    if matches!(op, ReduceOp::Amax | ReduceOp::Amin) && reduced == 0 && out_n > 0 {
        return Err("cannot reduce over a dim of size 0 (the maximum of nothing)".to_string());
    }
    // Strides into the output for kept dims, 0 for reduced ones.
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
    if targets.len() != a.len() {
        return Err(format!(
            "internal: {} elements for shape {shape:?}",
            a.len()
        ));
    }

    fn fold<T: Copy>(
        v: &[T],
        targets: &[usize],
        init: T,
        out_n: usize,
        f: impl Fn(T, T) -> T,
    ) -> Vec<T> {
        let mut acc = vec![init; out_n];
        for (&x, &t) in v.iter().zip(targets) {
            // `t < out_n` by construction of the strides.
            if let Some(slot) = acc.get_mut(t) {
                *slot = f(*slot, x);
            }
        }
        acc
    }

    Ok(match (op, a) {
        // f64 accumulation, rounded once by the caller: no precision lost to a narrow
        // accumulator (a running f16 sum stops growing at 2048 when adding ones).
        (ReduceOp::Sum, Lanes::Float(v)) => {
            Lanes::Float(fold(v, &targets, 0.0, out_n, |s, x| s + x))
        }
        (ReduceOp::Sum, Lanes::Int(v)) => {
            Lanes::Int(fold(v, &targets, 0, out_n, i64::wrapping_add))
        }
        (ReduceOp::Sum, Lanes::Bool(_)) => return Err("not defined for b8".to_string()),
        (ReduceOp::Amax, Lanes::Float(v)) => {
            Lanes::Float(fold(v, &targets, f64::NEG_INFINITY, out_n, nan_max))
        }
        (ReduceOp::Amax, Lanes::Int(v)) => Lanes::Int(fold(v, &targets, i64::MIN, out_n, i64::max)),
        (ReduceOp::Amax, Lanes::Bool(v)) => {
            Lanes::Bool(fold(v, &targets, false, out_n, |m, x| m || x))
        }
        // f64 products of f16/bf16/f32 values round once at the end, like torch's f32
        // accumulation for narrow floats (closer, not worse).
        (ReduceOp::Prod, Lanes::Float(v)) => {
            Lanes::Float(fold(v, &targets, 1.0, out_n, |p, x| p * x))
        }
        (ReduceOp::Prod, Lanes::Int(v)) => {
            Lanes::Int(fold(v, &targets, 1, out_n, i64::wrapping_mul))
        }
        (ReduceOp::Prod, Lanes::Bool(_)) => return Err("not defined for b8".to_string()),
        (ReduceOp::Amin, Lanes::Float(v)) => {
            Lanes::Float(fold(v, &targets, f64::INFINITY, out_n, |m, x| {
                -nan_max(-m, -x)
            }))
        }
        (ReduceOp::Amin, Lanes::Int(v)) => Lanes::Int(fold(v, &targets, i64::MAX, out_n, i64::min)),
        (ReduceOp::Amin, Lanes::Bool(v)) => {
            Lanes::Bool(fold(v, &targets, true, out_n, |m, x| m && x))
        }
    })
}
