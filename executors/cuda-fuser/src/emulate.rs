//! The meaning of a plan, evaluated on the host in f64 (rounding to each node's dtype as the
//! generated code does). Tests run plans through this and compare with the reference
//! interpreter, so planning mistakes (strides, levels, reductions, which values a kernel must
//! write) show up on machines without a GPU; the golden sources pin the code generated from a
//! plan, and the GPU script checks that code itself.

use crate::plan::{Fold, Kernel, Level, Literal, NodeKind, Operand};
use crate::support::Math;
use std::collections::HashMap;
use thunder_abi::DTypeCode;

fn round(d: DTypeCode, x: f64) -> f64 {
    match d {
        DTypeCode::F16 => half::f16::from_f64(x).to_f64(),
        DTypeCode::BF16 => half::bf16::from_f64(x).to_f64(),
        DTypeCode::F32 => x as f32 as f64,
        DTypeCode::Bool => f64::from(u8::from(x != 0.0)),
        DTypeCode::F64 => x,
        // Integer conversions truncate, as C casts do, and wrap to the width.
        DTypeCode::U8 => f64::from(x.trunc() as i64 as u8),
        DTypeCode::I8 => f64::from(x.trunc() as i64 as i8),
        DTypeCode::I16 => f64::from(x.trunc() as i64 as i16),
        DTypeCode::I32 => f64::from(x.trunc() as i64 as i32),
        DTypeCode::I64 => x.trunc(),
    }
}

/// The table's value of `m` on float operands: the interpreter's own semantics, so a plan
/// that computes the right thing in the right place agrees with it. NaN (which fails every
/// comparison) where the row has no float function, which a claimed op never lacks.
fn math(m: &Math, operands: &[f64]) -> f64 {
    if m.int {
        let ints: Vec<i64> = operands.iter().map(|&x| x as i64).collect();
        return m.op.eval_int(&ints, m.bools).map_or(f64::NAN, |v| v as f64);
    }
    m.op.eval_float(operands).unwrap_or(f64::NAN)
}

/// Coordinates of linear index `i` over `dims` of `shape` (row-major).
fn coords(shape: &[i64], dims: &[usize], mut i: i64, out: &mut [i64]) {
    for &d in dims.iter().rev() {
        let n = shape[d].max(1);
        out[d] = i % n;
        i /= n;
    }
}

/// Runs the kernels in order over `memory` (every value as f64 in row-major order), adding
/// each kernel's outputs to it.
pub fn run(kernels: &[Kernel], memory: &mut HashMap<u32, Vec<f64>>) {
    for k in kernels {
        let outputs = run_kernel(k, memory);
        memory.extend(outputs);
    }
}

fn run_kernel(k: &Kernel, memory: &HashMap<u32, Vec<f64>>) -> Vec<(u32, Vec<f64>)> {
    let nd = k.full_shape.len();
    let kept: Vec<usize> = (0..nd).filter(|d| !k.reduced.contains(d)).collect();
    let rows: i64 = kept.iter().map(|&d| k.full_shape[d].max(0)).product();
    let cols: i64 = k.reduced.iter().map(|&d| k.full_shape[d].max(0)).product();
    let full_n = (rows * cols) as usize;
    let full_strides = crate::plan::contiguous_strides(&k.full_shape);
    // values[node] holds one value per element of the node's level.
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); k.nodes.len()];
    let mut c = vec![0i64; nd];
    // Flat full index -> (row, coordinates).
    let full_index = |r: i64, col: i64, c: &mut [i64]| -> i64 {
        coords(&k.full_shape, &kept, r, c);
        coords(&k.full_shape, &k.reduced, col, c);
        c.iter().zip(&full_strides).map(|(a, b)| a * b).sum()
    };
    let operand = |values: &Vec<Vec<f64>>, o: &Operand, i: usize| match o {
        Operand::Node(n) => values[*n].get(i).copied().unwrap_or(f64::NAN),
        Operand::Literal(Literal::Float(x)) => *x,
        Operand::Literal(Literal::Int(x)) => *x as f64,
        Operand::Literal(Literal::Bool(b)) => f64::from(u8::from(*b)),
    };
    for (id, node) in k.nodes.iter().enumerate() {
        let len = match node.level {
            Level::Full => full_n,
            Level::Row => rows as usize,
        };
        let mut out = vec![0.0; len];
        for (slot, o) in out.iter_mut().enumerate() {
            // The row and full-index coordinates of this element.
            let r = match node.level {
                Level::Full => {
                    // Elements of the full level are stored in flat row-major order of F.
                    let mut r = 0i64;
                    let mut rem = slot as i64;
                    for d in (0..nd).rev() {
                        let n = k.full_shape[d].max(1);
                        c[d] = rem % n;
                        rem /= n;
                    }
                    for &d in &kept {
                        r = r * k.full_shape[d].max(1) + c[d];
                    }
                    r
                }
                Level::Row => {
                    coords(&k.full_shape, &kept, slot as i64, &mut c);
                    slot as i64
                }
            };
            *o = match &node.kind {
                NodeKind::InBounds(bounds) => f64::from(u8::from(
                    bounds
                        .iter()
                        .enumerate()
                        .all(|(d, &(lo, hi))| (lo..hi).contains(&c[d])),
                )),
                NodeKind::Load {
                    guard: Some(bounds),
                    ..
                } if !bounds
                    .iter()
                    .enumerate()
                    .all(|(d, &(lo, hi))| (lo..hi).contains(&c[d])) =>
                {
                    0.0
                }
                NodeKind::Load {
                    input,
                    base,
                    strides,
                    ..
                } => {
                    let dims: Vec<usize> = match node.level {
                        Level::Full => (0..nd).collect(),
                        Level::Row => kept.clone(),
                    };
                    let off: i64 = base
                        + dims
                            .iter()
                            .zip(strides)
                            .map(|(&d, s)| c[d] * s)
                            .sum::<i64>();
                    memory
                        .get(&k.inputs[*input].value)
                        .and_then(|m| m.get(off as usize).copied())
                        .unwrap_or(f64::NAN)
                }
                NodeKind::Iota {
                    start,
                    step,
                    base,
                    strides,
                } => {
                    let dims: Vec<usize> = match node.level {
                        Level::Full => (0..nd).collect(),
                        Level::Row => kept.clone(),
                    };
                    let index: i64 = base
                        + dims
                            .iter()
                            .zip(strides)
                            .map(|(&d, s)| c[d] * s)
                            .sum::<i64>();
                    let lit = |l: &Literal| match *l {
                        Literal::Float(x) => x,
                        Literal::Int(x) => x as f64,
                        Literal::Bool(b) => f64::from(u8::from(b)),
                    };
                    round(node.dtype, lit(start) + lit(step) * index as f64)
                }
                NodeKind::Unary(m, a) => {
                    let x = math(m, &[operand(&values, a, slot)]);
                    if m.op.bool_out() {
                        x
                    } else {
                        round(node.dtype, x)
                    }
                }
                NodeKind::Binary(m, a, b) => round(
                    node.dtype,
                    math(m, &[operand(&values, a, slot), operand(&values, b, slot)]),
                ),
                NodeKind::Where(p, a, b) => {
                    if operand(&values, p, slot) != 0.0 {
                        operand(&values, a, slot)
                    } else {
                        operand(&values, b, slot)
                    }
                }
                NodeKind::Convert(a) => {
                    // A row value read at full level is the same value for every column.
                    let src_level = match a {
                        Operand::Node(n) => k.nodes[*n].level,
                        Operand::Literal(_) => node.level,
                    };
                    let i = if src_level == Level::Row && node.level == Level::Full {
                        r as usize
                    } else {
                        slot
                    };
                    round(node.dtype, operand(&values, a, i))
                }
                NodeKind::Reduce { fold, input, .. } => {
                    let mut acc = match fold {
                        Fold::Max => f64::NEG_INFINITY,
                        Fold::Min => f64::INFINITY,
                        Fold::Sum => 0.0,
                    };
                    let mut cc = vec![0i64; nd];
                    for col in 0..cols {
                        let e = full_index(r, col, &mut cc) as usize;
                        let v = values[*input].get(e).copied().unwrap_or(f64::NAN);
                        acc = match fold {
                            Fold::Max | Fold::Min if acc.is_nan() || v.is_nan() => f64::NAN,
                            Fold::Max => acc.max(v),
                            Fold::Min => acc.min(v),
                            Fold::Sum => acc + v,
                        };
                    }
                    round(node.dtype, acc)
                }
            };
        }
        values[id] = out;
    }
    k.outputs
        .iter()
        // Row outputs are stored at linear row index r, full outputs contiguously in F: both
        // are exactly the level's element order.
        .map(|o| (o.value, values[o.node].clone()))
        .collect()
}
