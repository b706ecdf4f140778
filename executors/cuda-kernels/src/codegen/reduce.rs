//! Kernels with one thread block per row: reductions over any set of dims (sum, prod, amax,
//! amin, argmax, argmin, var_mean), cumsum (a blocked Hillis-Steele scan with a carry) and
//! sort/topk (a bitonic network in shared memory over (value, index) pairs).

use super::*;
use crate::spec::{Fold, MAX_SORT};

pub(super) fn generate(
    spec: &Spec,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    let name = format!("{base}_0");
    let kernel = match spec {
        Spec::Reduce { fold, a, dims, .. } => {
            reduction(&name, *fold, a, dims, None, operands, outs)
        }
        Spec::VarMean {
            a,
            dims,
            correction,
            ..
        } => reduction(&name, Fold::Sum, a, dims, Some(*correction), operands, outs),
        Spec::Cumsum { a, dim } => cumsum(&name, a, *dim, operands, outs),
        Spec::Sort {
            a,
            dim,
            k,
            descending,
        } => sort(&name, a, *dim, *k, *descending, operands, outs),
        _ => return Vec::new(),
    };
    vec![kernel]
}

/// The kept and reduced dims' coordinate code for `row` and `r`, and the input offset.
fn split_dims(a: &Operand, dims: &[usize]) -> (Vec<usize>, Vec<i64>, Vec<i64>) {
    let kept: Vec<usize> = (0..a.rank()).filter(|d| !dims.contains(d)).collect();
    let kept_shape = kept.iter().map(|&d| a.shape[d]).collect();
    let red_shape = dims.iter().map(|&d| a.shape[d]).collect();
    (kept, kept_shape, red_shape)
}

fn reduction(
    name: &str,
    fold: Fold,
    a: &Operand,
    dims: &[usize],
    var_correction: Option<f64>,
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    let (kept, kept_shape, red_shape) = split_dims(a, dims);
    let rows = numel(&kept_shape);
    let red = numel(&red_shape);
    let block = row_block(red as i64, 256);
    let coord = |d: usize| match kept.iter().position(|&k| k == d) {
        Some(i) => format!("k{i}"),
        None => format!("q{}", dims.iter().position(|&x| x == d).unwrap_or(0)),
    };
    let off = offset(0, a.rank(), coord);
    let x = load(a.dtype, "in0[off]");
    let float = a.dtype.is_float();
    let (acc, ident, op, extra) = match fold {
        Fold::Sum if float => ("double", "0.0", "a + b", ""),
        Fold::Sum => ("u64_t", "0ULL", "a + b", ""),
        Fold::Prod if float => ("double", "1.0", "a * b", ""),
        Fold::Prod => ("u64_t", "1ULL", "a * b", ""),
        Fold::Max if float => (
            "double",
            "-__longlong_as_double(0x7ff0000000000000LL)",
            "kmax(a, b)",
            "",
        ),
        Fold::Max => (
            "i64_t",
            "(-9223372036854775807LL - 1)",
            "(a > b ? a : b)",
            "",
        ),
        Fold::Min if float => (
            "double",
            "__longlong_as_double(0x7ff0000000000000LL)",
            "kmin(a, b)",
            "",
        ),
        Fold::Min => ("i64_t", "9223372036854775807LL", "(a < b ? a : b)", ""),
        Fold::ArgMax | Fold::ArgMin => ("Arg", "Arg{0, -1}", "pick(a, b)", ""),
    };
    let mut extra = extra.to_string();
    if matches!(fold, Fold::ArgMax | Fold::ArgMin) {
        let better = if fold == Fold::ArgMax { ">" } else { "<" };
        let nan = if float { "x.v != x.v" } else { "false" };
        let nan_y = if float { "y.v != y.v" } else { "false" };
        let _ = write!(
            extra,
            "// The first extreme wins; a NaN counts as the extreme (the first NaN), as in torch.\n\
             struct Arg {{ {w} v; i64_t i; }};\n\
             __device__ __forceinline__ Arg pick(Arg x, Arg y) {{\n\
             \x20 if (x.i < 0) return y;\n  if (y.i < 0) return x;\n\
             \x20 const bool xn = {nan}, yn = {nan_y};\n\
             \x20 if (xn || yn) {{ if (xn && yn) return x.i < y.i ? x : y; return xn ? x : y; }}\n\
             \x20 if (x.v {better} y.v) return x;\n  if (y.v {better} x.v) return y;\n\
             \x20 return x.i < y.i ? x : y;\n}}\n",
            w = wide(a.dtype)
        );
    }
    let _ = writeln!(
        extra,
        "struct Fold {{ __device__ __forceinline__ {acc} operator()({acc} a, {acc} b) const {{ return {op}; }} }};"
    );
    let params = match var_correction {
        Some(_) => vec![Param::Input(0), Param::Output(0), Param::Output(1)],
        None => vec![Param::Input(0), Param::Output(0)],
    };
    let sig = signature(name, &params, operands, outs);
    let mut b = String::new();
    let _ = writeln!(b, "  __shared__ {acc} buf[{block}];");
    b.push_str(&row_loop(rows));
    b.push_str(&unravel("row", "k", &kept_shape, "    "));
    let element = |b: &mut String, body: &str| {
        let _ = writeln!(
            b,
            "    for (i64_t r = threadIdx.x; r < {red}LL; r += blockDim.x) {{"
        );
        b.push_str(&unravel("r", "q", &red_shape, "      "));
        let _ = writeln!(b, "      const i64_t off = {off};");
        let _ = writeln!(b, "      {body}");
        b.push_str("    }\n");
    };
    match var_correction {
        None => {
            let _ = writeln!(b, "    {acc} acc = {ident};");
            let value = match fold {
                Fold::ArgMax | Fold::ArgMin => format!("Arg{{{x}, r}}"),
                Fold::Sum | Fold::Prod if !float => format!("(u64_t){x}"),
                _ => x.clone(),
            };
            element(&mut b, &format!("acc = Fold()(acc, {value});"));
            let _ = writeln!(b, "    acc = block_fold(acc, Fold(), buf);");
            let result = match fold {
                Fold::ArgMax | Fold::ArgMin => "acc.i".to_string(),
                Fold::Sum | Fold::Prod if !float => store(outs[0], "(i64_t)acc"),
                _ => store(outs[0], "acc"),
            };
            let _ = writeln!(b, "    if (threadIdx.x == 0) out0[row] = {result};");
        }
        Some(correction) => {
            // Two passes in f64, as the interpreter: the mean, then squared deviations from it.
            let _ = writeln!(b, "    double acc = 0.0;");
            element(&mut b, &format!("acc += {x};"));
            let _ = writeln!(
                b,
                "    const double mean = block_fold(acc, Fold(), buf) / (double){red}LL;"
            );
            let _ = writeln!(b, "    acc = 0.0;");
            element(
                &mut b,
                &format!("const double d = {x} - mean; acc += d * d;"),
            );
            let divisor = (red as f64 - correction).max(0.0);
            let _ = writeln!(
                b,
                "    const double var = block_fold(acc, Fold(), buf) / {divisor:?};"
            );
            let _ = writeln!(
                b,
                "    if (threadIdx.x == 0) {{ out0[row] = {}; out1[row] = {}; }}",
                store(outs[0], "var"),
                store(outs[1], "mean")
            );
        }
    }
    b.push_str("  }\n");
    Kernel {
        name: name.into(),
        source: assemble(&extra, &sig, &b),
        launch: Launch::Rows { rows, block },
        params,
    }
}

/// The shape without `dim`, and the names of its coordinates in `a`'s dim order.
fn rows_around(a: &Operand, dim: usize) -> (Vec<i64>, impl Fn(usize) -> String) {
    let shape: Vec<i64> = (0..a.rank())
        .filter(|&d| d != dim)
        .map(|d| a.shape[d])
        .collect();
    let name = move |d: usize| {
        if d == dim {
            "j".to_string()
        } else {
            format!("o{}", if d < dim { d } else { d - 1 })
        }
    };
    (shape, name)
}

fn cumsum(
    name: &str,
    a: &Operand,
    dim: usize,
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    let n = a.shape[dim];
    let inner: i64 = a.shape[dim + 1..].iter().product();
    let (row_shape, coord) = rows_around(a, dim);
    let rows = if n > 0 { numel(&row_shape) } else { 0 };
    let block = row_block(n, 256);
    let float = a.dtype.is_float();
    let acc = if float { "double" } else { "u64_t" };
    let params = vec![Param::Input(0), Param::Output(0)];
    let sig = signature(name, &params, operands, outs);
    let x = if float {
        load(a.dtype, "in0[off]")
    } else {
        format!("(u64_t){}", load(a.dtype, "in0[off]"))
    };
    let out_value = if float {
        store(outs[0], "v")
    } else {
        store(outs[0], "(i64_t)v")
    };
    let mut b = String::new();
    let _ = writeln!(b, "  __shared__ {acc} buf[{block}];");
    b.push_str(&row_loop(rows));
    b.push_str(&unravel("row", "o", &row_shape, "    "));
    let _ = writeln!(
        b,
        "    const i64_t obase = (row / {inner}LL) * {n}LL * {inner}LL + row % {inner}LL;"
    );
    let _ = writeln!(b, "    {acc} carry = 0;");
    let _ = writeln!(b, "    for (i64_t t = 0; t < {n}LL; t += {block}) {{");
    let _ = writeln!(b, "      const i64_t j = t + threadIdx.x;");
    let _ = writeln!(
        b,
        "      const i64_t off = {};",
        offset(0, a.rank(), &coord)
    );
    let _ = writeln!(b, "      buf[threadIdx.x] = j < {n}LL ? {x} : ({acc})0;");
    b.push_str("      __syncthreads();\n");
    let _ = writeln!(b, "      for (int s = 1; s < {block}; s <<= 1) {{");
    let _ = writeln!(
        b,
        "        const {acc} y = threadIdx.x >= s ? buf[threadIdx.x - s] : ({acc})0;"
    );
    b.push_str("        __syncthreads();\n        buf[threadIdx.x] += y;\n        __syncthreads();\n      }\n");
    let _ = writeln!(b, "      const {acc} v = carry + buf[threadIdx.x];");
    let _ = writeln!(
        b,
        "      if (j < {n}LL) out0[obase + j * {inner}LL] = {out_value};"
    );
    let _ = writeln!(b, "      carry += buf[{}];", block - 1);
    b.push_str("      __syncthreads();\n    }\n  }\n");
    Kernel {
        name: name.into(),
        source: assemble("", &sig, &b),
        launch: Launch::Rows { rows, block },
        params,
    }
}

fn sort(
    name: &str,
    a: &Operand,
    dim: usize,
    k: i64,
    descending: bool,
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    let n = a.shape[dim];
    let slots = (n.clamp(1, MAX_SORT) as u64).next_power_of_two() as i64;
    let inner: i64 = a.shape[dim + 1..].iter().product();
    let (row_shape, coord) = rows_around(a, dim);
    let rows = if k > 0 { numel(&row_shape) } else { 0 };
    let block = slots.clamp(32, 1024) as u32;
    let params = vec![Param::Input(0), Param::Output(0), Param::Output(1)];
    let sig = signature(name, &params, operands, outs);
    let ty = storage(a.dtype);
    let w = wide(a.dtype);
    let nan = if a.dtype.is_float() {
        "x != x"
    } else {
        "false"
    };
    let nan_y = if a.dtype.is_float() {
        "y != y"
    } else {
        "false"
    };
    let sign = if descending { "-" } else { "" };
    let extra = format!(
        "// Whether slot a comes before slot b: NaN above every number, ties in index order, and\n\
         // the padding slots (index >= N) last, so the network's result is the stable order.\n\
         __device__ __forceinline__ bool before({w} x, i64_t ia, {w} y, i64_t ib) {{\n\
         \x20 if (ia >= {n}LL) return false;\n  if (ib >= {n}LL) return true;\n\
         \x20 const bool xn = {nan}, yn = {nan_y};\n\
         \x20 const int c = {sign}((xn || yn) ? (xn == yn ? 0 : (xn ? 1 : -1)) : (x < y ? -1 : (y < x ? 1 : 0)));\n\
         \x20 return c != 0 ? c < 0 : ia < ib;\n}}\n"
    );
    let lx = load(a.dtype, "sv[t]");
    let ly = load(a.dtype, "sv[u]");
    let mut b = String::new();
    let _ = writeln!(
        b,
        "  __shared__ {ty} sv[{slots}];\n  __shared__ i64_t si[{slots}];"
    );
    b.push_str(&row_loop(rows));
    b.push_str(&unravel("row", "o", &row_shape, "    "));
    let _ = writeln!(
        b,
        "    for (i64_t j = threadIdx.x; j < {slots}LL; j += blockDim.x) {{"
    );
    let _ = writeln!(
        b,
        "      if (j < {n}LL) {{ sv[j] = in0[{}]; }}\n      si[j] = j;\n    }}",
        offset(0, a.rank(), &coord)
    );
    b.push_str("    __syncthreads();\n");
    let _ = writeln!(b, "    for (int size = 2; size <= {slots}; size <<= 1) {{");
    b.push_str("      for (int half = size >> 1; half > 0; half >>= 1) {\n");
    let _ = writeln!(
        b,
        "        for (int t = threadIdx.x; t < {slots}; t += blockDim.x) {{"
    );
    b.push_str("          const int u = t ^ half;\n          if (u > t) {\n");
    let _ = writeln!(
        b,
        "            const bool up = (t & size) == 0;\n            const bool swap = up ? before({ly}, si[u], {lx}, si[t]) : before({lx}, si[t], {ly}, si[u]);"
    );
    let _ = writeln!(
        b,
        "            if (swap) {{ const {ty} tv = sv[t]; sv[t] = sv[u]; sv[u] = tv; const i64_t ti = si[t]; si[t] = si[u]; si[u] = ti; }}"
    );
    b.push_str("          }\n        }\n        __syncthreads();\n      }\n    }\n");
    let _ = writeln!(
        b,
        "    const i64_t obase = (row / {inner}LL) * {k}LL * {inner}LL + row % {inner}LL;"
    );
    let _ = writeln!(
        b,
        "    for (i64_t j = threadIdx.x; j < {k}LL; j += blockDim.x) {{"
    );
    let _ = writeln!(
        b,
        "      out0[obase + j * {inner}LL] = sv[j];\n      out1[obase + j * {inner}LL] = si[j];\n    }}\n    __syncthreads();\n  }}"
    );
    Kernel {
        name: name.into(),
        source: assemble(&extra, &sig, &b),
        launch: Launch::Rows { rows, block },
        params,
    }
}
