//! CUDA C++ for each [`Spec`]: one or two kernels, generated as text with every shape baked in
//! as a constant and every input's strides passed as `i64` parameters after its pointer, so
//! strided (transposed, sliced, broadcast) inputs are read where they lie. Outputs are written
//! contiguously. The text is deterministic (it is the NVRTC cache key and the golden files).
//!
//! Every kernel is a grid-stride loop (over elements, or over rows with one thread block per
//! row), so any grid size is correct; [`grid`] picks one from the work and the device.

mod ce;
mod conv;
mod index;
mod misc;
mod reduce;

use crate::spec::{Lit, Operand, Spec};
use std::fmt::Write;
use thunder_abi::DTypeCode;

/// How a kernel is launched: threads over elements, or one block per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    Elements { n: u64, block: u32 },
    Rows { rows: u64, block: u32 },
}

/// A kernel parameter group, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// Operand `k` of [`Spec::operands`]: its pointer, then one `i64` stride per dim.
    Input(usize),
    /// Output `j` of the op (contiguous).
    Output(usize),
    /// The error word pair `[code, value]` (zeroed before the launch, read after it).
    Flag,
}

/// Device error codes written to the flag.
pub const ERR_INDEX: i64 = 1;
pub const ERR_DIV_ZERO: i64 = 2;
/// A negative integer exponent (value: the exponent).
pub const ERR_NEG_POW: i64 = 3;

#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub source: String,
    pub launch: Launch,
    pub params: Vec<Param>,
}

impl Kernel {
    pub fn has_flag(&self) -> bool {
        self.params.contains(&Param::Flag)
    }
}

/// The grid for `launch` on a device with `sm_count` SMs: enough blocks to cover the work,
/// capped (the kernels stride over the rest), at least 1.
pub fn grid(launch: Launch, sm_count: u32) -> (u32, u32) {
    let cap = u64::from(sm_count.max(1)) * 32;
    match launch {
        Launch::Elements { n, block } => (n.div_ceil(u64::from(block)).clamp(1, cap) as u32, block),
        Launch::Rows { rows, block } => (rows.clamp(1, cap) as u32, block),
    }
}

/// Whether a launch has anything to do (empty tensors launch nothing).
pub fn has_work(launch: Launch) -> bool {
    match launch {
        Launch::Elements { n, .. } => n > 0,
        Launch::Rows { rows, .. } => rows > 0,
    }
}

/// A power-of-two block for rows of `n` elements: 32 to `max` threads.
pub fn row_block(n: i64, max: u32) -> u32 {
    (n.max(1) as u64)
        .next_power_of_two()
        .clamp(32, u64::from(max)) as u32
}

pub const PRELUDE: &str = r#"typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
"#;

/// The C type a dtype is stored as.
pub fn storage(d: DTypeCode) -> &'static str {
    match d {
        DTypeCode::Bool | DTypeCode::U8 => "u8_t",
        DTypeCode::I8 => "signed char",
        DTypeCode::I16 => "short",
        DTypeCode::I32 => "int",
        DTypeCode::I64 => "i64_t",
        DTypeCode::F16 | DTypeCode::BF16 => "u16_t",
        DTypeCode::F32 => "float",
        DTypeCode::F64 => "double",
    }
}

/// The type values are computed in: f64 for floats (the interpreter's precision), i64 else.
pub fn wide(d: DTypeCode) -> &'static str {
    if d.is_float() {
        "double"
    } else {
        "i64_t"
    }
}

/// A stored element as its wide value.
pub fn load(d: DTypeCode, raw: &str) -> String {
    match d {
        DTypeCode::Bool => format!("((i64_t)({raw} != 0))"),
        DTypeCode::F16 => format!("((double)f16_to_f32({raw}))"),
        DTypeCode::BF16 => format!("((double)bf16_to_f32({raw}))"),
        DTypeCode::F32 => format!("((double)({raw}))"),
        DTypeCode::F64 => raw.to_string(),
        DTypeCode::U8 | DTypeCode::I8 | DTypeCode::I16 | DTypeCode::I32 | DTypeCode::I64 => {
            format!("((i64_t)({raw}))")
        }
    }
}

/// A wide value stored as dtype `d`, rounded once (floats) or wrapped (ints).
pub fn store(d: DTypeCode, v: &str) -> String {
    match d {
        DTypeCode::Bool => format!("((u8_t)(({v}) != 0))"),
        DTypeCode::F16 => format!("f64_to_f16({v})"),
        DTypeCode::BF16 => format!("f64_to_bf16({v})"),
        DTypeCode::F32 => format!("((float)({v}))"),
        DTypeCode::F64 => format!("((double)({v}))"),
        other => format!("(({})({v}))", storage(other)),
    }
}

/// A literal as a wide value of dtype `d` (as the interpreter converts literals).
pub fn literal(d: DTypeCode, v: Lit) -> String {
    let float = |f: f64| {
        if f.is_nan() {
            "__longlong_as_double(0x7ff8000000000000LL)".to_string()
        } else if f.is_infinite() {
            format!(
                "{}__longlong_as_double(0x7ff0000000000000LL)",
                if f < 0.0 { "-" } else { "" }
            )
        } else {
            format!("{f:?}")
        }
    };
    // A number beside a float tensor is first rounded to its dtype (once, from f64).
    let rounded = |x: String| match d {
        DTypeCode::F16 => format!("((double)f16_to_f32(f64_to_f16({x})))"),
        DTypeCode::BF16 => format!("((double)bf16_to_f32(f64_to_bf16({x})))"),
        DTypeCode::F32 => format!("((double)(float)({x}))"),
        _ => x,
    };
    match (d.is_float(), v) {
        (true, Lit::Float(f)) => rounded(float(f)),
        (true, Lit::Int(i)) => rounded(format!("((double){i}LL)")),
        (true, Lit::Bool(b)) => float(f64::from(u8::from(b))),
        (false, Lit::Int(i)) => format!("((i64_t){i}LL)"),
        (false, Lit::Bool(b)) => format!("((i64_t){})", u8::from(b)),
        (false, Lit::Float(f)) => format!("((i64_t){})", f.trunc()),
    }
}

/// Code that splits flat index `var` into coordinates `{p}0..` of `shape` (row-major), each
/// line indented by `ind`.
pub fn unravel(var: &str, p: &str, shape: &[i64], ind: &str) -> String {
    let mut s = String::new();
    if shape.is_empty() {
        return s;
    }
    let _ = writeln!(s, "{ind}i64_t {p}_rem = {var};");
    for (d, &n) in shape.iter().enumerate().rev() {
        let _ = writeln!(
            s,
            "{ind}const i64_t {p}{d} = {p}_rem % {n}LL; {p}_rem /= {n}LL;"
        );
    }
    s
}

/// `c0 * s{k}_0 + c1 * s{k}_1 ...` for operand `k` with coordinate names from `coord(d)`.
pub fn offset(k: usize, rank: usize, coord: impl Fn(usize) -> String) -> String {
    if rank == 0 {
        return "0".into();
    }
    (0..rank)
        .map(|d| format!("{} * s{k}_{d}", coord(d)))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The kernel's parameter list for `params` given the spec's operands and output dtypes.
pub fn signature(
    name: &str,
    params: &[Param],
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> String {
    let mut parts = Vec::new();
    for p in params {
        match *p {
            Param::Input(k) => {
                let o = operands[k];
                parts.push(format!("const {}* __restrict__ in{k}", storage(o.dtype)));
                for d in 0..o.rank() {
                    parts.push(format!("i64_t s{k}_{d}"));
                }
            }
            Param::Output(j) => parts.push(format!("{}* __restrict__ out{j}", storage(outs[j]))),
            Param::Flag => parts.push("i64_t* __restrict__ err".into()),
        }
    }
    format!("extern \"C\" __global__ void {name}({})", parts.join(", "))
}

/// The grid-stride loop header over `n` elements with index `e`.
pub fn element_loop(n: u64) -> String {
    format!(
        "  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < {n}LL; e += (i64_t)gridDim.x * blockDim.x) {{\n"
    )
}

/// The grid-stride loop header over `rows` rows with index `row`, one block each.
pub fn row_loop(rows: u64) -> String {
    format!("  for (i64_t row = blockIdx.x; row < {rows}LL; row += gridDim.x) {{\n")
}

pub fn numel(shape: &[i64]) -> u64 {
    shape.iter().map(|&d| d.max(0) as u64).product()
}

/// The kernels for `spec`, named `{base}_{i}`, in launch order.
pub fn generate(spec: &Spec, outs: &[DTypeCode], base: &str) -> Vec<Kernel> {
    let operands = spec.operands();
    match spec {
        Spec::Reduce { .. } | Spec::VarMean { .. } | Spec::Cumsum { .. } | Spec::Sort { .. } => {
            reduce::generate(spec, &operands, outs, base)
        }
        Spec::Take { .. } | Spec::ScatterAdd { .. } | Spec::Pad { .. } => {
            index::generate(spec, &operands, outs, base)
        }
        Spec::Conv { .. } => conv::generate(spec, &operands, outs, base),
        Spec::CrossEntropy { .. } | Spec::CrossEntropyBwd { .. } => {
            ce::generate(spec, &operands, outs, base)
        }
        Spec::Full { .. }
        | Spec::Iota { .. }
        | Spec::Random { .. }
        | Spec::Matmul { .. }
        | Spec::Divide { .. } => misc::generate(spec, &operands, outs, base),
    }
}

/// Assembles a kernel's source: prelude, extra device code, then the kernel.
pub fn assemble(extra: &str, sig: &str, body: &str) -> String {
    format!("{PRELUDE}{extra}{sig} {{\n{body}}}\n")
}

impl Spec {
    /// The tensor operands, in [`Param::Input`] order.
    pub fn operands(&self) -> Vec<&Operand> {
        match self {
            Spec::Reduce { a, .. }
            | Spec::VarMean { a, .. }
            | Spec::Cumsum { a, .. }
            | Spec::Sort { a, .. }
            | Spec::Pad { a, .. } => vec![a],
            Spec::Take { a, index, .. } => vec![a, index],
            Spec::ScatterAdd { a, index, src, .. } => vec![a, index, src],
            Spec::Matmul { a, b } => vec![a, b],
            Spec::Conv { a, w, bias, .. } => [Some(a), Some(w), bias.as_ref()]
                .into_iter()
                .flatten()
                .collect(),
            Spec::Divide { a, b, .. } => {
                [a, b].into_iter().filter_map(|x| x.as_ref().ok()).collect()
            }
            Spec::CrossEntropy { logits, target, .. } => vec![logits, target],
            Spec::CrossEntropyBwd {
                grad,
                logits,
                target,
                lse,
                ..
            } => vec![grad, logits, target, lse],
            Spec::Full { .. } | Spec::Iota { .. } | Spec::Random { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_cover_the_work_and_stay_capped() {
        let l = Launch::Elements {
            n: 1 << 26,
            block: 256,
        };
        assert_eq!(grid(l, 132), (132 * 32, 256));
        assert_eq!(grid(Launch::Elements { n: 10, block: 256 }, 132), (1, 256));
        assert_eq!(grid(Launch::Rows { rows: 7, block: 64 }, 132), (7, 64));
        assert_eq!(
            grid(
                Launch::Rows {
                    rows: 1 << 40,
                    block: 32
                },
                0
            ),
            (32, 32)
        );
        assert!(!has_work(Launch::Elements { n: 0, block: 256 }));
        assert!(!has_work(Launch::Rows { rows: 0, block: 32 }));
    }

    #[test]
    fn row_blocks_are_powers_of_two_between_32_and_the_cap() {
        assert_eq!(row_block(0, 256), 32);
        assert_eq!(row_block(33, 256), 64);
        assert_eq!(row_block(1 << 20, 256), 256);
        assert_eq!(row_block(1500, 1024), 1024);
    }

    #[test]
    fn index_math_for_scalars_and_strided_operands() {
        // A 0-d tensor has no coordinates and offset 0.
        assert_eq!(unravel("e", "c", &[], "  "), "");
        assert_eq!(offset(0, 0, |d| format!("c{d}")), "0");
        // Row-major: the last dim varies fastest.
        let u = unravel("e", "c", &[2, 3], "");
        assert!(
            u.find("c1 = c_rem % 3LL") < u.find("c0 = c_rem % 2LL"),
            "{u}"
        );
        assert_eq!(offset(1, 2, |d| format!("c{d}")), "c0 * s1_0 + c1 * s1_1");
    }

    #[test]
    fn literals_are_rounded_to_the_dtype_once() {
        assert_eq!(literal(DTypeCode::F64, Lit::Float(0.1)), "0.1");
        assert_eq!(
            literal(DTypeCode::F32, Lit::Float(0.1)),
            "((double)(float)(0.1))"
        );
        assert!(literal(DTypeCode::BF16, Lit::Int(257)).contains("f64_to_bf16"));
        assert_eq!(literal(DTypeCode::I16, Lit::Int(-3)), "((i64_t)-3LL)");
        assert!(literal(DTypeCode::F32, Lit::Float(f64::NEG_INFINITY))
            .contains("-__longlong_as_double"));
    }
}
