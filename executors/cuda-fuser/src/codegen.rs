//! CUDA C++ for a planned kernel.
//!
//! The source is self-contained (no headers: NVRTC needs none, and f16/bf16 conversions are a
//! few lines of PTX and bit arithmetic), deterministic (the same plan gives byte-identical text,
//! which is the cache key and the golden files' content), and readable: one `const` line per
//! trace op, named after the node.
//!
//! - f16 and bf16 are computed in f32 and rounded back after every op, as the reference
//!   interpreter rounds, so fused results match it op by op.
//! - Pointwise kernels use a grid-stride loop over `VEC` elements per step with 16-byte loads
//!   and stores for inputs read contiguously; broadcast inputs are read per element.
//! - Reduction kernels give each row to a team: a thread block (reduced dims trailing and long
//!   enough) or the threads of one column of a 2-D tile (column reductions such as a bias
//!   gradient, sums over transposed inputs); see `reduce_layout`.

use crate::plan::{contiguous_strides, Kernel, Level, NodeId, NodeKind, Operand};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use thunder_abi::prims::{BinaryPrim, CudaSpelling, Elementwise, UnaryPrim};
use thunder_abi::DTypeCode;

use crate::c_types::{
    convert, ctype, in_bounds, is_double, literal, load_expr, rounded, storage, store_expr,
};

/// How a kernel is launched; the grid size is picked at run time from the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// Grid-stride over `items` items of `vec` elements (plus a scalar tail).
    Pointwise { numel: u64, vec: u32, block: u32 },
    /// One block of `block` threads per row.
    BlockPerRow { rows: u64, block: u32 },
    /// `splits` blocks of `block` threads per row, which combine their partials through a
    /// device scratch buffer of `scratch` bytes (the kernel's last parameter) whose `rows`
    /// 4-byte counters from byte `counters` on must be zero at launch.
    SplitRows {
        rows: u64,
        block: u32,
        splits: u32,
        scratch: u64,
        counters: u64,
    },
    /// Blocks of 32 x 8 threads over `tiles` 32 x 32 tiles of a transposing pointwise kernel.
    Tiles { tiles: u64, block: u32 },
    /// Blocks of `block = tile * team` threads, each over `tile` consecutive rows with
    /// `team` threads per row.
    ColumnTiles { rows: u64, tile: u32, block: u32 },
    /// Blocks of `rows_per_block * lanes` threads, `lanes` lanes of a warp (32, 16 or 8) per
    /// row.
    WarpRows {
        rows: u64,
        rows_per_block: u32,
        lanes: u32,
    },
    /// Blocks of `block` threads, `per_sm` a multiprocessor (at most one a row), each taking
    /// rows in turn and loading its next row while it reduces this one
    /// (`RowVector::plan_pipeline`).
    PipelinedRows { rows: u64, block: u32, per_sm: u32 },
    /// One block of `block` threads per row, which keeps the row's re-read vectors in
    /// `shared_bytes` of dynamic shared memory (rows too long for registers).
    StagedRows {
        rows: u64,
        block: u32,
        shared_bytes: u32,
    },
    /// A cluster of `cluster` blocks of `block` threads per row (sm_90 on), each staging its
    /// share of the row's re-read vectors in `shared_bytes` of dynamic shared memory and
    /// combining the reductions with the others through distributed shared memory: rows whose
    /// re-read arrays one block's shared memory cannot hold (see `RowVector::plan_cluster`).
    /// The cluster's shape is compiled into the kernel (`__cluster_dims__`).
    ClusterRows {
        rows: u64,
        block: u32,
        shared_bytes: u32,
        cluster: u32,
    },
}

impl Launch {
    /// Dynamic shared memory a block of the launch needs.
    pub fn shared_bytes(self) -> u32 {
        match self {
            Launch::StagedRows { shared_bytes, .. } | Launch::ClusterRows { shared_bytes, .. } => {
                shared_bytes
            }
            _ => 0,
        }
    }
}

/// What generated code may assume of the device it will run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Dynamic shared memory one block may ask for (the device's opt-in limit, less what the
    /// kernels' static shared memory and the driver's reservation need).
    pub max_shared_bytes: u32,
    /// Whether blocks may form clusters that read each other's shared memory (sm_90 on).
    pub clusters: bool,
}

impl Target {
    /// What every CUDA device gives a block without opting in (48 KiB), less 1 KiB.
    pub const PORTABLE: Target = Target {
        max_shared_bytes: 47 * 1024,
        clusters: false,
    };

    /// A device whose blocks may opt in to `optin` bytes of shared memory.
    pub fn with_optin(optin: u32) -> Target {
        Target {
            max_shared_bytes: optin
                .saturating_sub(1024)
                .max(Self::PORTABLE.max_shared_bytes),
            clusters: false,
        }
    }

    /// A device of compute capability `cc` whose blocks may opt in to `optin` bytes of shared
    /// memory.
    pub fn for_device(cc: (i32, i32), optin: u32) -> Target {
        Target {
            clusters: cc.0 >= 9,
            ..Self::with_optin(optin)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Generated {
    pub name: String,
    pub source: String,
    pub launch: Launch,
}

/// The prelude every kernel shares. From sm_80 on, f32 -> bf16 rounding and the NaN-keeping
/// f32 max/min are one instruction each (`cvt.rn.bf16.f32`, `max.NaN.f32`) instead of 5-8:
/// a bf16 softmax over vocabulary rows issued about 50 instructions an element and ran at
/// 1.6 TB/s on an H200, bound by them. Both give the same values (a NaN's payload aside).
pub const PRELUDE: &str = r#"typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
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
__device__ __forceinline__ float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
__device__ __forceinline__ float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
__device__ __forceinline__ u16_t bf16_bits(float exact) { return (u16_t)(__float_as_uint(exact) >> 16); }
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ float nan_max(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
__device__ __forceinline__ float nan_min(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
#endif
__device__ __forceinline__ float py_rem(float a, float b) { float r = fmodf(a, b); if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b; return r; }
__device__ __forceinline__ double py_rem(double a, double b) { double r = fmod(a, b); if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b; return r; }
struct SumOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct MaxOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_max(a, b); } };
struct MinOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_min(a, b); } };
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity) {
  __shared__ T scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = (lane < warps) ? scratch[lane] : identity;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
"#;

/// The shuffle-only combination of a warp's partials (a warp-per-row kernel's reductions): a
/// fixed butterfly, so every lane gets the same bits.
/// `W` lanes (a power of two up to 32) combine among themselves: every lane of the warp takes
/// part, each group of `W` with its own row.
pub const WARP_REDUCE: &str = r#"template <int W, typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
"#;

/// The C type a value of `dtype` is computed in.
pub(crate) fn device_functions(k: &Kernel) -> String {
    let mut sources: Vec<&str> = Vec::new();
    for n in &k.nodes {
        if let NodeKind::Unary(m, _) | NodeKind::Binary(m, _, _) = &n.kind {
            if let CudaSpelling::Device { source, .. } = m.spelling {
                if !sources.contains(&source) {
                    sources.push(source);
                }
            }
        }
    }
    sources.concat()
}

/// Whether the element's full-level coordinates `i_d` are all in `[lo_d, hi_d)`.
pub(crate) struct Emitter<'k> {
    pub(crate) k: &'k Kernel,
    pub(crate) out: String,
    /// f32 `exp` as the hardware's `ex2.approx.ftz` of a scaled argument (one instruction
    /// where `exp2f` takes four: results below 2^-126 flush to zero), and division by a row
    /// value as a product with its reciprocal: each within 2 f32 ulps, far below a half type's
    /// rounding (see [`fast_math_for`]).
    pub(crate) fast_math: bool,
    /// Nodes already defined in the current scope (row scope, or one loop body).
    pub(crate) defined: HashSet<NodeId>,
    /// Row-level nodes defined in the row scope (visible in every loop).
    pub(crate) row_defined: HashSet<NodeId>,
    /// How to read a contiguous full-level input at the current element, when vectorized.
    pub(crate) vector_inputs: bool,
    /// Loads read 16 bytes at a time at the top of a row kernel's vector loop: the element
    /// expression of each (`e_n<node>[j]`).
    pub(crate) vector_nodes: HashMap<NodeId, String>,
    /// Row-cached vector loads already read from memory in an earlier pass of this row.
    pub(crate) cache_loaded: HashSet<NodeId>,
    pub(crate) indent: usize,
}

impl Emitter<'_> {
    pub(crate) fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub(crate) fn name(n: NodeId) -> String {
        format!("v{n}")
    }

    fn operand(&mut self, o: &Operand, at: DTypeCode) -> String {
        match o {
            Operand::Node(n) => {
                self.define(*n);
                Self::name(*n)
            }
            Operand::Literal(l) => literal(l, at),
        }
    }

    fn operand_dtype(&self, o: &Operand, fallback: DTypeCode) -> DTypeCode {
        match o {
            Operand::Node(n) => self.k.nodes[*n].dtype,
            Operand::Literal(_) => fallback,
        }
    }

    /// Offset expression of a load at the current element.
    pub(crate) fn offset(&self, level: Level, base: i64, strides: &[i64]) -> String {
        let dims: Vec<usize> = match level {
            Level::Full => (0..self.k.full_shape.len()).collect(),
            Level::Row => (0..self.k.full_shape.len())
                .filter(|d| !self.k.reduced.contains(d))
                .collect(),
        };
        let terms: Vec<String> = (base != 0)
            .then(|| format!("{base}"))
            .into_iter()
            .chain(
                dims.iter()
                    .zip(strides)
                    .filter(|(_, &s)| s != 0)
                    .map(|(d, &s)| {
                        if s == 1 {
                            format!("i{d}")
                        } else {
                            format!("i{d} * {s}")
                        }
                    }),
            )
            .collect();
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// Whether `o` is the same for every element of a row: a row value, or one carried to the
    /// full level by same-type conversions (how a broadcast row value reads).
    fn row_valued(&self, o: &Operand) -> bool {
        let mut o = o;
        loop {
            let Operand::Node(d) = o else {
                return false;
            };
            let node = &self.k.nodes[*d];
            if node.level == Level::Row {
                return true;
            }
            match &node.kind {
                NodeKind::Convert(a) if self.operand_dtype(a, node.dtype) == node.dtype => o = a,
                _ => return false,
            }
        }
    }

    pub(crate) fn define(&mut self, n: NodeId) {
        if self.defined.contains(&n) || self.row_defined.contains(&n) {
            return;
        }
        let node = &self.k.nodes[n];
        let ty = ctype(node.dtype);
        let expr = match &node.kind {
            NodeKind::Load {
                input,
                base,
                strides,
                guard: Some(bounds),
            } => {
                let d = self.k.inputs[*input].dtype;
                if let Some(x) = self.vector_nodes.get(&n) {
                    // Read (or zeroed) for the whole vector: see `vector_strided_loads`.
                    let e = load_expr(d, x);
                    self.line(&format!("const {ty} {} = {e};", Self::name(n)));
                    self.defined.insert(n);
                    return;
                }
                let read = load_expr(
                    d,
                    &format!("in{input}[{}]", self.offset(node.level, *base, strides)),
                );
                format!("({} ? {read} : 0)", in_bounds(bounds))
            }
            NodeKind::InBounds(bounds) => in_bounds(bounds),
            NodeKind::Load {
                input,
                base,
                strides,
                guard: None,
            } => {
                let d = self.k.inputs[*input].dtype;
                if let Some(x) = self.vector_nodes.get(&n) {
                    let e = load_expr(d, x);
                    self.line(&format!("const {ty} {} = {e};", Self::name(n)));
                    self.defined.insert(n);
                    return;
                }
                let contiguous =
                    *base == 0 && *strides == contiguous_strides(&self.k.level_shape(node.level));
                if self.vector_inputs && contiguous && node.level == Level::Full {
                    load_expr(d, &format!("e_in{input}[j]"))
                } else if contiguous && node.level == Level::Full {
                    load_expr(d, &format!("in{input}[e]"))
                } else {
                    load_expr(
                        d,
                        &format!("in{input}[{}]", self.offset(node.level, *base, strides)),
                    )
                }
            }
            NodeKind::Iota {
                start,
                step,
                base,
                strides,
            } => {
                let index = self.offset(node.level, *base, strides);
                let (a, b) = (literal(start, node.dtype), literal(step, node.dtype));
                rounded(node.dtype, format!("({a} + {b} * ({ty})({index}))"))
            }
            NodeKind::Unary(m, a) => {
                let at = self.operand_dtype(a, node.dtype);
                let x = self.operand(a, at);
                let e = if m.int {
                    m.spelling.render_int(ctype(at), &[&x])
                } else if self.fast_math
                    && !is_double(at)
                    && m.op == Elementwise::Unary(UnaryPrim::Exp)
                {
                    format!("fast_exp2(({x}) * 1.44269504089f)")
                } else {
                    m.spelling.render(is_double(at), &[&x])
                };
                if m.op.bool_out() {
                    e
                } else {
                    rounded(node.dtype, e)
                }
            }
            NodeKind::Binary(m, a, b) => {
                let at = self.operand_dtype(a, self.operand_dtype(b, node.dtype));
                let x = self.operand(a, at);
                let y = self.operand(b, at);
                let by_row_value = node.level == Level::Full && self.row_valued(b);
                let e = if m.int {
                    m.spelling.render_int(ctype(at), &[&x, &y])
                } else if self.fast_math
                    && !is_double(at)
                    && by_row_value
                    && m.op == Elementwise::Binary(BinaryPrim::Div)
                {
                    // The reciprocal is loop-invariant: computed once a row.
                    format!("(({x}) * (1.0f / ({y})))")
                } else {
                    m.spelling.render(is_double(at), &[&x, &y])
                };
                if node.dtype == DTypeCode::Bool {
                    e
                } else {
                    rounded(node.dtype, e)
                }
            }
            NodeKind::Where(p, a, b) => {
                let c = self.operand(p, DTypeCode::Bool);
                let x = self.operand(a, node.dtype);
                let y = self.operand(b, node.dtype);
                let e = format!("({c} ? {x} : {y})");
                // Nodes are values of their dtype; a literal need not be one.
                if matches!(a, Operand::Literal(_)) || matches!(b, Operand::Literal(_)) {
                    rounded(node.dtype, e)
                } else {
                    e
                }
            }
            NodeKind::Convert(a) => {
                let from = self.operand_dtype(a, node.dtype);
                let x = self.operand(a, from);
                convert(from, node.dtype, &x)
            }
            NodeKind::Reduce { .. } => {
                // Defined by its reduction loop; reaching here is a planning bug.
                "/* reduction read before its loop */ 0".into()
            }
        };
        self.line(&format!("const {ty} {} = {expr};", Self::name(n)));
        self.defined.insert(n);
    }
}

/// Whether `k` may use the fast f32 forms of `exp` and row division ([`Emitter::fast_math`]):
/// in row kernels whose every output is f16 or bf16, whose rounding (2^-9 or 2^-12 relative)
/// dwarfs their error of a few f32 ulps (`fast_math=0` in the row tuning turns it off).
pub(crate) fn fast_math_for(k: &Kernel) -> bool {
    crate::row_vector::tuning().fast_math
        && !k.outputs.is_empty()
        && k.outputs
            .iter()
            .all(|o| matches!(k.nodes[o.node].dtype, DTypeCode::F16 | DTypeCode::BF16))
}

pub(crate) fn signature(k: &Kernel, name: &str, block: u32, scratch: bool) -> String {
    let mut params = Vec::new();
    for (i, input) in k.inputs.iter().enumerate() {
        params.push(format!(
            "const {}* __restrict__ in{i}",
            storage(input.dtype)
        ));
    }
    for (i, o) in k.outputs.iter().enumerate() {
        params.push(format!(
            "{}* __restrict__ out{i}",
            storage(k.nodes[o.node].dtype)
        ));
    }
    if scratch {
        params.push("unsigned char* __restrict__ split_scratch".into());
    }
    format!(
        "extern \"C\" __global__ void __launch_bounds__({block}) {name}({})",
        params.join(", ")
    )
}

/// Coordinates `i<d>` of `dims` (row-major over their sizes) from the linear index `var`.
pub(crate) fn coordinates(k: &Kernel, dims: &[usize], var: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut div = 1i64;
    for &d in dims.iter().rev() {
        let size = k.full_shape[d];
        let q = if div == 1 {
            var.to_string()
        } else {
            format!("({var} / {div})")
        };
        if d == dims[0] {
            lines.push(format!("const ix_t i{d} = {q};"));
        } else {
            lines.push(format!("const ix_t i{d} = {q} % {size};"));
        }
        div *= size.max(1);
    }
    lines.reverse();
    lines
}

fn vector_width(k: &Kernel) -> u32 {
    let widest = k
        .inputs
        .iter()
        .map(|i| i.dtype.size_bytes())
        .chain(k.outputs.iter().map(|o| k.nodes[o.node].dtype.size_bytes()))
        .max()
        .unwrap_or(4);
    (16 / widest.max(1)) as u32
}

pub(crate) fn raw_type(bytes: usize) -> &'static str {
    match bytes {
        16 => "uint4",
        8 => "uint2",
        4 => "unsigned",
        2 => "u16_t",
        _ => "u8_t",
    }
}

/// Offsets below this bound are computed in 32 bits (`ix_t` is `int`). Half of `i32::MAX`
/// leaves room for what loops step past their bounds (a grid-stride step, a block of vectors)
/// and for a row's start plus its column.
const NARROW_INDEX_BOUND: u128 = 1 << 30;

/// The typedef of `ix_t`, the type of every index and offset in the kernel `k` (whose split
/// partials and counters take `scratch_bytes`): `int` where every offset the kernel computes
/// is below [`NARROW_INDEX_BOUND`], else `long long`. On an H100 (`docs/gpu-wave/2026-11-27-s14`)
/// 32-bit offsets took an f32 log_softmax over 2048 rows of 50,257 from 417 to 291 µs and the
/// softmax from 316 to 299: 64-bit arithmetic is two instructions and two registers a value.
/// `THUNDER_CUDA_FUSER_ROWS=wide_index=1` keeps 64 bits everywhere (for A/B sweeps).
pub(crate) fn index_typedef(k: &Kernel, scratch_bytes: u64) -> &'static str {
    let extent = |shape: &[i64], base: i64, strides: &[i64]| -> u128 {
        let reach: u128 = shape
            .iter()
            .zip(strides)
            .map(|(&n, &s)| u128::from(s.unsigned_abs()) * u128::from((n.max(1) - 1) as u64))
            .sum();
        u128::from(base.unsigned_abs()) + reach + 1
    };
    let numel: u128 = k
        .full_shape
        .iter()
        .map(|&d| u128::from(d.max(0) as u64))
        .product();
    let mut largest = numel.max(u128::from(scratch_bytes));
    for node in &k.nodes {
        if let NodeKind::Load { base, strides, .. } | NodeKind::Iota { base, strides, .. } =
            &node.kind
        {
            largest = largest.max(extent(&k.level_shape(node.level), *base, strides));
        }
    }
    if largest < NARROW_INDEX_BOUND && !crate::row_vector::tuning().wide_index {
        "typedef int ix_t;\n"
    } else {
        "typedef long long ix_t;\n"
    }
}

/// The kernel `k` for any CUDA device (see [`generate_for`]).
pub fn generate(k: &Kernel, name: &str) -> Generated {
    generate_for(k, name, Target::PORTABLE)
}

/// The kernel `k`, named `name`, for a device described by `target`.
pub fn generate_for(k: &Kernel, name: &str, target: Target) -> Generated {
    if k.reduced.is_empty() {
        pointwise(k, name)
    } else {
        crate::row_kernel::rows(k, name, target)
    }
}

pub(crate) fn header(k: &Kernel) -> String {
    let shape: Vec<String> = k.full_shape.iter().map(i64::to_string).collect();
    let mut h = format!("// thunder cuda-fuser kernel over [{}]", shape.join(", "));
    if !k.reduced.is_empty() {
        let _ = write!(h, ", reducing dims {:?}", k.reduced);
    }
    h.push('\n');
    h
}

fn pointwise(k: &Kernel, name: &str) -> Generated {
    if let Some(t) = crate::tiled::plan(k) {
        return crate::tiled::generate(k, name, &t);
    }
    const BLOCK: u32 = 256;
    let numel: i64 = k.full_shape.iter().map(|&d| d.max(0)).product();
    let vec = vector_width(k);
    let all_dims: Vec<usize> = (0..k.full_shape.len()).collect();
    let all_outputs: Vec<(usize, NodeId)> = k.outputs.iter().map(|o| o.node).enumerate().collect();
    let full_contiguous = contiguous_strides(&k.full_shape);
    // Inputs read contiguously are loaded 16 bytes at a time; the others (broadcasts) per
    // element, from coordinates.
    let mut contiguous_full = HashSet::new();
    // Strided loads and index ramps read the element's coordinates, which are then computed.
    let mut strided = false;
    for n in &k.nodes {
        match &n.kind {
            NodeKind::Load {
                input,
                base,
                strides,
                guard: None,
            } => {
                if *base == 0 && *strides == full_contiguous {
                    contiguous_full.insert(*input);
                } else {
                    strided = true;
                }
            }
            NodeKind::Iota { .. }
            | NodeKind::InBounds(_)
            | NodeKind::Load { guard: Some(_), .. } => strided = true,
            NodeKind::Unary(..)
            | NodeKind::Binary(..)
            | NodeKind::Where(..)
            | NodeKind::Convert(_)
            | NodeKind::Reduce { .. } => {}
        }
    }
    let mut em = Emitter {
        k,
        fast_math: false,
        out: String::new(),
        defined: HashSet::new(),
        row_defined: HashSet::new(),
        vector_inputs: true,
        vector_nodes: HashMap::new(),
        cache_loaded: HashSet::new(),
        indent: 0,
    };
    em.out.push_str(&header(k));
    em.out.push_str(PRELUDE);
    em.out.push_str(index_typedef(k, 0));
    em.out.push_str(&device_functions(k));
    em.line(&format!("{} {{", signature(k, name, BLOCK, false)));
    em.indent = 1;
    em.line(&format!("const ix_t n = {numel};"));
    em.line("const ix_t step = (ix_t)gridDim.x * blockDim.x;");
    em.line("const ix_t first = (ix_t)blockIdx.x * blockDim.x + threadIdx.x;");
    // Vector body.
    em.line(&format!(
        "for (ix_t q = first; q < n / {vec}; q += step) {{"
    ));
    em.indent = 2;
    for (i, input) in k.inputs.iter().enumerate() {
        if !contiguous_full.contains(&i) {
            continue;
        }
        let bytes = input.dtype.size_bytes() * vec as usize;
        let raw = raw_type(bytes);
        em.line(&format!(
            "const {raw} r_in{i} = reinterpret_cast<const {raw}*>(in{i})[q];"
        ));
        em.line(&format!(
            "const {}* e_in{i} = reinterpret_cast<const {}*>(&r_in{i});",
            storage(input.dtype),
            storage(input.dtype)
        ));
    }
    for (i, o) in k.outputs.iter().enumerate() {
        let d = k.nodes[o.node].dtype;
        em.line(&format!("__align__(16) {} s_out{i}[{vec}];", storage(d)));
    }
    // When the innermost dim is a multiple of the vector, the vector's elements share every
    // coordinate but the innermost, which steps by one: the divisions are done once per vector,
    // not per element (a bias broadcast over a [B, T, 3072] GELU spent more on 64-bit divisions
    // than on memory).
    let last = k.full_shape.len().wrapping_sub(1);
    let hoisted = strided
        && k.full_shape
            .last()
            .is_some_and(|&d| d > 0 && d % i64::from(vec) == 0);
    if hoisted {
        em.line(&format!("const ix_t e0 = q * {vec};"));
        let inner = format!("const ix_t i{last} = ");
        for l in coordinates(k, &all_dims, "e0") {
            em.line(&l.replacen(&inner, &format!("const ix_t i{last}_0 = "), 1));
        }
        vector_strided_loads(&mut em, vec, last);
    }
    em.line("#pragma unroll");
    em.line(&format!("for (int j = 0; j < {vec}; ++j) {{"));
    em.indent = 3;
    if hoisted {
        em.line("const ix_t e = e0 + j;");
        em.line(&format!("const ix_t i{last} = i{last}_0 + j;"));
    } else if strided {
        em.line(&format!("const ix_t e = q * {vec} + j;"));
        for l in coordinates(k, &all_dims, "e") {
            em.line(&l);
        }
    }
    store_outputs(&mut em, &all_outputs, |i| format!("s_out{i}[j]"));
    em.indent = 2;
    em.line("}");
    for (i, o) in k.outputs.iter().enumerate() {
        let bytes = k.nodes[o.node].dtype.size_bytes() * vec as usize;
        let raw = raw_type(bytes);
        em.line(&format!(
            "reinterpret_cast<{raw}*>(out{i})[q] = *reinterpret_cast<const {raw}*>(s_out{i});"
        ));
    }
    em.indent = 1;
    em.line("}");
    // Scalar tail.
    em.defined.clear();
    em.vector_nodes.clear();
    em.vector_inputs = false;
    em.line(&format!(
        "for (ix_t e = (n / {vec}) * {vec} + first; e < n; e += step) {{"
    ));
    em.indent = 2;
    if strided {
        for l in coordinates(k, &all_dims, "e") {
            em.line(&l);
        }
    }
    store_outputs(&mut em, &all_outputs, |i| format!("out{i}[e]"));
    em.indent = 1;
    em.line("}");
    em.indent = 0;
    em.line("}");
    Generated {
        name: name.to_string(),
        source: em.out,
        launch: Launch::Pointwise {
            numel: numel as u64,
            vec,
            block: BLOCK,
        },
    }
}

/// Strided loads whose innermost stride is 1 (a head transpose that keeps the head dim, a
/// slice, a piece of a cat) read the vector's elements from consecutive addresses: one aligned
/// 16-byte load at the vector's first element, instead of one 2-byte load per element.
/// Aligned because the pointers are, the innermost coordinate of the vector's first element is
/// a multiple of `vec` (see `hoisted`), and so are the base and the other strides (checked
/// here). A guarded load (a cat's piece, a pad) qualifies when its innermost bounds are
/// multiples of `vec` too: the guard then holds for all of the vector or none of it.
fn vector_strided_loads(em: &mut Emitter, vec: u32, last: usize) {
    let k = em.k;
    let v = i64::from(vec);
    for (id, node) in k.nodes.iter().enumerate() {
        let NodeKind::Load {
            input,
            base,
            strides,
            guard,
        } = &node.kind
        else {
            continue;
        };
        let contiguous = *base == 0 && *strides == contiguous_strides(&k.full_shape);
        let aligned = base % v == 0
            && strides.len() == last + 1
            && strides[last] == 1
            && strides[..last].iter().all(|s| s % v == 0);
        let uniform_guard = guard.as_ref().is_none_or(|b| {
            b.len() == last + 1 && b[last].0.rem_euclid(v) == 0 && b[last].1.rem_euclid(v) == 0
        });
        if node.level != Level::Full
            || (contiguous && guard.is_none())
            || !aligned
            || !uniform_guard
        {
            continue;
        }
        let d = k.inputs[*input].dtype;
        let raw = raw_type(d.size_bytes() * vec as usize);
        let read = format!(
            "*reinterpret_cast<const {raw}*>(in{input} + ({}))",
            crate::col_kernel::first_offset(em, *base, strides)
        );
        match guard {
            None => em.line(&format!("const {raw} r_n{id} = {read};")),
            Some(bounds) => {
                let inside: Vec<String> = bounds
                    .iter()
                    .enumerate()
                    .map(|(dim, (lo, hi))| {
                        let at = if dim == last {
                            format!("i{dim}_0")
                        } else {
                            format!("i{dim}")
                        };
                        format!("{at} >= {lo} && {at} < {hi}")
                    })
                    .collect();
                em.line(&format!("{raw} r_n{id} = {{}};"));
                em.line(&format!("if ({}) r_n{id} = {read};", inside.join(" && ")));
            }
        }
        em.line(&format!(
            "const {}* e_n{id} = reinterpret_cast<const {}*>(&r_n{id});",
            storage(d),
            storage(d)
        ));
        em.vector_nodes.insert(id, format!("e_n{id}[j]"));
    }
}

/// Defines each output node and stores it: `out{i}[{index}] = ...` (or into a staging array).
pub(crate) fn store_outputs(
    em: &mut Emitter,
    outputs: &[(usize, NodeId)],
    dest: impl Fn(usize) -> String,
) {
    for &(i, n) in outputs {
        em.define(n);
        let v = Emitter::name(n);
        let value = store_expr(em.k.nodes[n].dtype, &v);
        em.line(&format!("{} = {value};", dest(i)));
    }
}
