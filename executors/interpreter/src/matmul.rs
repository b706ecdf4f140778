//! Batched matmul `[..., m, k] @ [..., k, n]` with equal batch dims. Products are summed in f64
//! (floats) or wrapping i64 (ints) and rounded once by the caller, so the result does not depend
//! on a summation order the way a narrow accumulator would.

use crate::data::Lanes;

/// `(batch, m, k, n)` for two shapes that `decode` has already checked.
fn dims(a: &[usize], b: &[usize]) -> Result<(usize, usize, usize, usize), String> {
    let bad = || format!("internal: cannot multiply {a:?} by {b:?}");
    let (ra, rb) = (a.len(), b.len());
    if ra < 2 || ra != rb || a[..ra - 2] != b[..rb - 2] || a[ra - 1] != b[rb - 2] {
        return Err(bad());
    }
    let batch = a[..ra - 2].iter().product();
    Ok((batch, a[ra - 2], a[ra - 1], b[rb - 1]))
}

pub(crate) fn matmul(
    a: &Lanes,
    a_shape: &[usize],
    b: &Lanes,
    b_shape: &[usize],
) -> Result<Lanes, String> {
    let (batch, m, k, n) = dims(a_shape, b_shape)?;
    if a.len() != batch * m * k || b.len() != batch * k * n {
        return Err("internal: operand sizes do not match their shapes".to_string());
    }
    match (a, b) {
        (Lanes::Float(a), Lanes::Float(b)) => Ok(Lanes::Float(kernel(
            a,
            b,
            (batch, m, k, n),
            0.0,
            |acc, x, y| acc + x * y,
        ))),
        (Lanes::Int(a), Lanes::Int(b)) => Ok(Lanes::Int(kernel(
            a,
            b,
            (batch, m, k, n),
            0,
            |acc, x, y| acc.wrapping_add(x.wrapping_mul(y)),
        ))),
        (Lanes::Bool(_), _) | (_, Lanes::Bool(_)) => Err("not defined for b8".to_string()),
        _ => Err("internal: operands of different lanes".to_string()),
    }
}

fn kernel<T: Copy>(
    a: &[T],
    b: &[T],
    (batch, m, k, n): (usize, usize, usize, usize),
    zero: T,
    fma: impl Fn(T, T, T) -> T,
) -> Vec<T> {
    let mut out = vec![zero; batch * m * n];
    // k = 0 is an empty sum: the zeros stand.
    if n == 0 || m == 0 || k == 0 {
        return out;
    }
    for ((a, b), out) in a
        .chunks_exact(m * k)
        .zip(b.chunks_exact(k * n))
        .zip(out.chunks_exact_mut(m * n))
    {
        // i-p-j order walks `b` and `out` rows contiguously.
        for (a_row, out_row) in a.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
            for (&x, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                for (o, &y) in out_row.iter_mut().zip(b_row) {
                    *o = fma(*o, x, y);
                }
            }
        }
    }
    out
}
