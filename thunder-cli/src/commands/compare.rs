//! How far one array is from another, with torch.testing's tolerances: shared by `examine`
//! and `opinfo-check`.

use anyhow::Result;
use thunder_core::{Array, DType};

/// Per-dtype tolerances of `torch.testing.assert_close`: (rtol, atol). Integers and bools
/// must match exactly.
pub fn tolerances(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F64 => (1e-7, 1e-7),
        DType::F32 => (1.3e-6, 1e-5),
        DType::F16 => (1e-3, 1e-5),
        DType::BF16 => (1.6e-2, 1e-5),
        _ => (0.0, 0.0),
    }
}

/// How far `got` is from `want`: max abs and max rel difference, and the elements outside the
/// dtype's tolerances. NaN matches NaN and an infinity matches itself; anything else involving
/// them is an infinite difference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diff {
    pub max_abs: f64,
    pub max_rel: f64,
    pub mismatched: usize,
}

pub fn compare(got: &Array, want: &Array) -> Result<Diff> {
    let (rtol, atol) = tolerances(want.dtype());
    compare_within(got, want, rtol, atol)
}

/// As [`compare`] with explicit tolerances.
pub fn compare_within(got: &Array, want: &Array, rtol: f64, atol: f64) -> Result<Diff> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Ok(Diff {
            max_abs: f64::INFINITY,
            max_rel: f64::INFINITY,
            mismatched: want.numel().max(1),
        });
    }
    let mut d = Diff {
        max_abs: 0.0,
        max_rel: 0.0,
        mismatched: 0,
    };
    for (a, b) in got.to_f64_vec()?.into_iter().zip(want.to_f64_vec()?) {
        let same = (a.is_nan() && b.is_nan()) || a == b;
        let abs = if same { 0.0 } else { (a - b).abs() };
        let abs = if abs.is_nan() { f64::INFINITY } else { abs };
        let rel = if abs == 0.0 {
            0.0
        } else if b == 0.0 {
            f64::INFINITY
        } else {
            abs / b.abs()
        };
        d.max_abs = d.max_abs.max(abs);
        d.max_rel = d.max_rel.max(rel);
        if !same && (abs.is_infinite() || abs > atol + rtol * b.abs()) {
            d.mismatched += 1;
        }
    }
    Ok(d)
}
