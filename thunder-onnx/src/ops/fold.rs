//! Host evaluation of small constant values: what shape arithmetic needs (broadcasting
//! elementwise ops, gathers, concatenation, slices).

use crate::value::HostArr;
use thunder_core::DType;

/// Row-major strides of `shape`.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1].max(1);
    }
    s
}

/// numpy broadcasting of two shapes; `None` when they do not broadcast.
pub fn broadcast(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// The flat index into an array of `shape` that broadcasts to `out` at multi-index `idx`.
fn source_index(idx: &[i64], shape: &[i64]) -> usize {
    let off = idx.len() - shape.len();
    let st = strides(shape);
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if d == 1 { 0 } else { idx[off + i] * st[i] })
        .sum::<i64>() as usize
}

fn multi_index(mut flat: i64, shape: &[i64]) -> Vec<i64> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        let d = shape[i].max(1);
        idx[i] = flat % d;
        flat /= d;
    }
    idx
}

/// Elementwise over broadcast operands; `None` when the shapes do not broadcast.
pub fn map_n(args: &[&HostArr], dtype: DType, f: impl Fn(&[f64]) -> f64) -> Option<HostArr> {
    let mut shape: Vec<i64> = Vec::new();
    for a in args {
        shape = broadcast(&shape, &a.shape)?;
    }
    let n: i64 = shape.iter().product();
    let mut data = Vec::with_capacity(n as usize);
    let mut xs = vec![0.0; args.len()];
    for flat in 0..n {
        let idx = multi_index(flat, &shape);
        for (k, a) in args.iter().enumerate() {
            xs[k] = a.data[source_index(&idx, &a.shape)];
        }
        data.push(f(&xs));
    }
    Some(HostArr { shape, dtype, data })
}

/// `a` broadcast to `shape`.
pub fn expand(a: &HostArr, shape: &[i64]) -> Option<HostArr> {
    let target = broadcast(&a.shape, shape)?;
    let zero = HostArr {
        shape: target,
        dtype: a.dtype,
        data: vec![0.0],
    };
    let zero = HostArr {
        data: vec![0.0; zero.shape.iter().product::<i64>() as usize],
        ..zero
    };
    map_n(&[a, &zero], a.dtype, |x| x[0])
}

/// Rounds a value the way a cast to `dtype` stores it (integers truncate, bools are != 0).
pub fn cast_value(x: f64, dtype: DType) -> f64 {
    match dtype {
        DType::Bool => (x != 0.0) as i64 as f64,
        d if d.is_float() => x,
        _ => x.trunc(),
    }
}

/// `take` along `axis` with (already normalised) indices of shape `ishape`.
pub fn gather(a: &HostArr, axis: usize, indices: &[i64], ishape: &[i64]) -> HostArr {
    let outer: i64 = a.shape[..axis].iter().product();
    let inner: i64 = a.shape[axis + 1..].iter().product();
    let dim = a.shape[axis];
    let mut data = Vec::new();
    for o in 0..outer {
        for &i in indices {
            let base = (o * dim + i) * inner;
            data.extend_from_slice(&a.data[base as usize..(base + inner) as usize]);
        }
    }
    let mut shape = a.shape[..axis].to_vec();
    shape.extend_from_slice(ishape);
    shape.extend_from_slice(&a.shape[axis + 1..]);
    HostArr {
        shape,
        dtype: a.dtype,
        data,
    }
}

/// Concatenation along `axis` (same rank, equal other dims: checked by the caller).
pub fn concat(parts: &[HostArr], axis: usize) -> HostArr {
    let outer: i64 = parts[0].shape[..axis].iter().product();
    let mut data = Vec::new();
    for o in 0..outer {
        for p in parts {
            let chunk: i64 = p.shape[axis..].iter().product();
            data.extend_from_slice(&p.data[(o * chunk) as usize..((o + 1) * chunk) as usize]);
        }
    }
    let mut shape = parts[0].shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    HostArr {
        shape,
        dtype: parts[0].dtype,
        data,
    }
}

/// `a[start:end:step]` along `axis` with ONNX's clamping (start/end already clamped).
pub fn slice(a: &HostArr, axis: usize, start: i64, end: i64, step: i64) -> HostArr {
    let mut picks = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        picks.push(i);
        i += step;
    }
    gather(a, axis, &picks, &[picks.len() as i64])
}

/// Clamps ONNX Slice bounds for a dimension of size `dim`; returns (start, end).
pub fn clamp_slice(start: i64, end: i64, step: i64, dim: i64) -> (i64, i64) {
    let norm = |x: i64| if x < 0 { x.saturating_add(dim) } else { x };
    let (s, e) = (norm(start), norm(end));
    if step > 0 {
        (s.clamp(0, dim), e.clamp(0, dim))
    } else {
        (s.clamp(-1, dim - 1), e.clamp(-1, dim - 1))
    }
}
