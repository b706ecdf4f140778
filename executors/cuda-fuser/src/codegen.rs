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

use crate::plan::{contiguous_strides, Fold, Kernel, Level, NodeId, NodeKind, Operand};
use crate::reduce_layout::{self, Team};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use thunder_abi::prims::CudaSpelling;
use thunder_abi::DTypeCode;

use crate::c_types::{
    convert, ctype, float_literal, in_bounds, is_double, literal, load_expr, rounded, storage,
    store_expr,
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
    /// Blocks of `block = tile * team` threads, each over `tile` consecutive rows with
    /// `team` threads per row.
    ColumnTiles { rows: u64, tile: u32, block: u32 },
}

#[derive(Debug, Clone)]
pub struct Generated {
    pub name: String,
    pub source: String,
    pub launch: Launch,
}

/// The prelude every kernel shares.
pub const PRELUDE: &str = r#"typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
}
__device__ __forceinline__ float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
__device__ __forceinline__ float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
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

/// The C type a value of `dtype` is computed in.
fn device_functions(k: &Kernel) -> String {
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
    out: String,
    /// Nodes already defined in the current scope (row scope, or one loop body).
    pub(crate) defined: HashSet<NodeId>,
    /// Row-level nodes defined in the row scope (visible in every loop).
    row_defined: HashSet<NodeId>,
    /// How to read a contiguous full-level input at the current element, when vectorized.
    vector_inputs: bool,
    /// Loads read 16 bytes at a time at the top of a row kernel's vector loop: the element
    /// expression of each (`e_n<node>[j]`).
    pub(crate) vector_nodes: HashMap<NodeId, String>,
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

    fn name(n: NodeId) -> String {
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
            .then(|| format!("{base}LL"))
            .into_iter()
            .chain(
                dims.iter()
                    .zip(strides)
                    .filter(|(_, &s)| s != 0)
                    .map(|(d, &s)| {
                        if s == 1 {
                            format!("i{d}")
                        } else {
                            format!("i{d} * {s}LL")
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

    fn define(&mut self, n: NodeId) {
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
                format!("({a} + {b} * ({ty})({index}))")
            }
            NodeKind::Unary(m, a) => {
                let at = self.operand_dtype(a, node.dtype);
                let x = self.operand(a, at);
                let e = if m.int {
                    m.spelling.render_int(ctype(at), &[&x])
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
                let e = if m.int {
                    m.spelling.render_int(ctype(at), &[&x, &y])
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
                format!("({c} ? {x} : {y})")
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

fn signature(k: &Kernel, name: &str, block: u32, scratch: bool) -> String {
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
            format!("({var} / {div}LL)")
        };
        if d == dims[0] {
            lines.push(format!("const i64_t i{d} = {q};"));
        } else {
            lines.push(format!("const i64_t i{d} = {q} % {size}LL;"));
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

pub fn generate(k: &Kernel, name: &str) -> Generated {
    if k.reduced.is_empty() {
        pointwise(k, name)
    } else {
        rows(k, name)
    }
}

fn header(k: &Kernel) -> String {
    let shape: Vec<String> = k.full_shape.iter().map(i64::to_string).collect();
    let mut h = format!("// thunder cuda-fuser kernel over [{}]", shape.join(", "));
    if !k.reduced.is_empty() {
        let _ = write!(h, ", reducing dims {:?}", k.reduced);
    }
    h.push('\n');
    h
}

fn pointwise(k: &Kernel, name: &str) -> Generated {
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
        out: String::new(),
        defined: HashSet::new(),
        row_defined: HashSet::new(),
        vector_inputs: true,
        vector_nodes: HashMap::new(),
        indent: 0,
    };
    em.out.push_str(&header(k));
    em.out.push_str(PRELUDE);
    em.out.push_str(&device_functions(k));
    em.line(&format!("{} {{", signature(k, name, BLOCK, false)));
    em.indent = 1;
    em.line(&format!("const i64_t n = {numel}LL;"));
    em.line("const i64_t step = (i64_t)gridDim.x * blockDim.x;");
    em.line("const i64_t first = (i64_t)blockIdx.x * blockDim.x + threadIdx.x;");
    // Vector body.
    em.line(&format!(
        "for (i64_t q = first; q < n / {vec}; q += step) {{"
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
    em.line("#pragma unroll");
    em.line(&format!("for (int j = 0; j < {vec}; ++j) {{"));
    em.indent = 3;
    if strided {
        em.line(&format!("const i64_t e = q * {vec} + j;"));
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
    em.vector_inputs = false;
    em.line(&format!(
        "for (i64_t e = (n / {vec}) * {vec} + first; e < n; e += step) {{"
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

/// Reductions of one loop: a reduction's depth is one more than the deepest reduction its
/// input reads, so independent reductions (a sum and a sum of squares) share a pass.
fn reduction_depths(k: &Kernel) -> Vec<usize> {
    let mut depth = vec![0usize; k.nodes.len()];
    for (i, n) in k.nodes.iter().enumerate() {
        let deps: Vec<NodeId> = match &n.kind {
            NodeKind::Load { .. } | NodeKind::Iota { .. } | NodeKind::InBounds(_) => vec![],
            NodeKind::Unary(_, a) | NodeKind::Convert(a) => node_of(a).into_iter().collect(),
            NodeKind::Binary(_, a, b) => node_of(a).into_iter().chain(node_of(b)).collect(),
            NodeKind::Where(p, a, b) => node_of(p)
                .into_iter()
                .chain(node_of(a))
                .chain(node_of(b))
                .collect(),
            NodeKind::Reduce { input, .. } => vec![*input],
        };
        let d = deps.iter().map(|&x| depth[x]).max().unwrap_or(0);
        depth[i] = if matches!(n.kind, NodeKind::Reduce { .. }) {
            d + 1
        } else {
            d
        };
    }
    depth
}

fn node_of(o: &Operand) -> Option<NodeId> {
    match o {
        Operand::Node(n) => Some(*n),
        Operand::Literal(_) => None,
    }
}

/// The accumulator's start value and the block-reduce functor of a reduction prim.
fn reduction_identity(fold: Fold, double: bool) -> (String, &'static str) {
    match fold {
        Fold::Max => (
            format!("-{}", float_literal(f64::INFINITY, double)),
            "MaxOp()",
        ),
        Fold::Min => (float_literal(f64::INFINITY, double), "MinOp()"),
        Fold::Sum => (float_literal(0.0, double), "SumOp()"),
    }
}

/// The kernel's outputs at `level`, as (parameter index, node).
fn outputs_at(k: &Kernel, level: Level) -> Vec<(usize, NodeId)> {
    k.outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| k.nodes[o.node].level == level)
        .map(|(i, o)| (i, o.node))
        .collect()
}

/// Opens the loop over a row's elements and defines its coordinates and flat index `e`.
fn open_column_loop(em: &mut Emitter, full_strides: &[i64], unroll: bool) {
    if unroll {
        // Several elements' loads in flight per thread.
        em.line("#pragma unroll 4");
    }
    em.line("for (i64_t c = lane; c < cols; c += team) {");
    em.indent += 1;
    for l in coordinates(em.k, &em.k.reduced, "c") {
        em.line(&l);
    }
    let e = em.offset(Level::Full, 0, full_strides);
    em.line(&format!("const i64_t e = {e};"));
    em.defined.clear();
}

/// Defines each output node and stores it: `out{i}[{index}] = ...` (or into a staging array).
fn store_outputs(em: &mut Emitter, outputs: &[(usize, NodeId)], dest: impl Fn(usize) -> String) {
    for &(i, n) in outputs {
        em.define(n);
        let v = Emitter::name(n);
        let value = store_expr(em.k.nodes[n].dtype, &v);
        em.line(&format!("{} = {value};", dest(i)));
    }
}

/// Where a split reduction's row counters start in its scratch buffer: after an 8-byte slot
/// per reduction, row and split.
fn split_counters_at(reductions: usize, rows: i64, splits: u32) -> u64 {
    8 * reductions as u64 * rows.max(0) as u64 * u64::from(splits)
}

/// In a split reduction, after each block reduced its share (`acc{r}` in thread 0): the block
/// stores its partials, and the last block of the row to get here combines every partial of
/// the row in split order (a fixed tree, so the bits do not depend on which block came last);
/// the other blocks go on to their next row.
fn emit_split_combine(em: &mut Emitter, stage: &[NodeId], rows_n: i64, splits: u32) {
    let k = em.k;
    let slot = |q: usize| format!("({q}LL * rows + r) * splits");
    em.line("if (threadIdx.x == 0) {");
    for &r in stage {
        let NodeKind::Reduce { input, .. } = &k.nodes[r].kind else {
            continue;
        };
        let q = k.reductions.iter().position(|&x| x == r).unwrap_or(0);
        let acc_ty = ctype(k.nodes[*input].dtype);
        em.line(&format!(
            "  reinterpret_cast<{acc_ty}*>(split_scratch)[{} + part] = acc{r};",
            slot(q)
        ));
    }
    em.line("  __threadfence();");
    em.line(&format!(
        "  split_last = atomicAdd(reinterpret_cast<unsigned*>(split_scratch + {}LL) + r, 1u) == (unsigned)(splits - 1);",
        split_counters_at(k.reductions.len(), rows_n, splits)
    ));
    em.line("}");
    em.line("__syncthreads();");
    em.line("if (!split_last) continue;");
    em.line("__threadfence();");
    for &r in stage {
        let NodeKind::Reduce { fold, input, .. } = &k.nodes[r].kind else {
            continue;
        };
        let q = k.reductions.iter().position(|&x| x == r).unwrap_or(0);
        let acc_ty = ctype(k.nodes[*input].dtype);
        let (identity, op) = reduction_identity(*fold, acc_ty == "double");
        em.line(&format!("acc{r} = {identity};"));
        em.line(&format!(
            "for (i64_t p = threadIdx.x; p < splits; p += blockDim.x) acc{r} = {op}(acc{r}, reinterpret_cast<volatile {acc_ty}*>(split_scratch)[{} + p]);",
            slot(q)
        ));
        em.line(&format!(
            "acc{r} = block_reduce<{acc_ty}>(acc{r}, {op}, ({acc_ty})({identity}));"
        ));
    }
}

fn rows(k: &Kernel, name: &str) -> Generated {
    let rows_n: i64 = k.row_shape().iter().map(|&d| d.max(0)).product();
    let cols_n: i64 = k.reduced.iter().map(|&d| k.full_shape[d].max(0)).product();
    let layout = reduce_layout::choose(k);
    let (block_team, block) = match layout {
        Team::Block { block } => (true, block),
        Team::Columns { tile, team } => (false, tile * team),
    };
    let kept: Vec<usize> = (0..k.full_shape.len())
        .filter(|d| !k.reduced.contains(d))
        .collect();
    let depths = reduction_depths(k);
    let max_depth = k.reductions.iter().map(|&r| depths[r]).max().unwrap_or(0);
    let full_strides = contiguous_strides(&k.full_shape);
    let full_outputs = outputs_at(k, Level::Full);
    let splits = match layout {
        Team::Block { block } if max_depth == 1 && full_outputs.is_empty() => {
            reduce_layout::splits(rows_n, cols_n, block)
        }
        _ => 1,
    };
    let split = splits > 1;
    let mut em = Emitter {
        k,
        out: String::new(),
        defined: HashSet::new(),
        row_defined: HashSet::new(),
        vector_inputs: false,
        vector_nodes: HashMap::new(),
        indent: 0,
    };
    // Rows read along their length get vector loads and stores, and a block no wider than a
    // row's vectors.
    let vector = if block_team {
        crate::row_vector::plan(k, cols_n)
    } else {
        None
    };
    let block = match &vector {
        Some(v) => crate::row_vector::block_for(block, cols_n, v.width),
        None => block,
    };
    em.out.push_str(&header(k));
    em.out.push_str(PRELUDE);
    if !block_team {
        em.out.push_str(reduce_layout::TEAM_REDUCE);
    }
    em.out.push_str(&device_functions(k));
    em.line(&format!("{} {{", signature(k, name, block, split)));
    em.indent = 1;
    em.line(&format!(
        "const i64_t rows = {rows_n}LL, cols = {cols_n}LL;"
    ));
    if split {
        // Block `rb` takes share `rb % splits` of row `rb / splits`; the threads of a row's
        // blocks interleave over it as one team.
        em.line(&format!("const i64_t splits = {splits}LL;"));
        em.line("__shared__ bool split_last;");
        em.line("for (i64_t rb = blockIdx.x; rb < rows * splits; rb += gridDim.x) {");
        em.line("  const i64_t r = rb / splits, part = rb % splits;");
        em.line("  const i64_t lane = part * blockDim.x + threadIdx.x, team = (i64_t)blockDim.x * splits;");
    } else if block_team {
        em.line("const i64_t lane = threadIdx.x, team = blockDim.x;");
        em.line("for (i64_t r = blockIdx.x; r < rows; r += gridDim.x) {");
    } else if let Team::Columns { tile, team } = layout {
        // Every thread of the block runs every tile (team_reduce synchronizes the block): a
        // thread past the last row computes the last row again and stores nothing.
        em.line(&format!(
            "const i64_t lane = threadIdx.x / {tile}, team = {team};"
        ));
        em.line(&format!(
            "for (i64_t r0 = (i64_t)blockIdx.x * {tile}; r0 < rows; r0 += (i64_t)gridDim.x * {tile}) {{"
        ));
        em.indent = 2;
        em.line(&format!(
            "const bool live = r0 + threadIdx.x % {tile} < rows;"
        ));
        em.line(&format!(
            "const i64_t r = live ? r0 + threadIdx.x % {tile} : rows - 1;"
        ));
    }
    em.indent = 2;
    for l in coordinates(k, &kept, "r") {
        em.line(&l);
    }
    // Row values that need no reduction.
    let emit_ready_rows = |em: &mut Emitter, done_depth: usize| {
        for (i, n) in k.nodes.iter().enumerate() {
            if n.level == Level::Row
                && !matches!(n.kind, NodeKind::Reduce { .. })
                && depths[i] <= done_depth
                && !em.row_defined.contains(&i)
            {
                em.defined.clear();
                em.define(i);
                em.row_defined.extend(em.defined.drain());
            }
        }
    };
    emit_ready_rows(&mut em, 0);
    for depth in 1..=max_depth {
        let stage: Vec<NodeId> = k
            .reductions
            .iter()
            .copied()
            .filter(|&r| depths[r] == depth)
            .collect();
        for &r in &stage {
            let NodeKind::Reduce { fold, input, .. } = &k.nodes[r].kind else {
                continue;
            };
            let acc_ty = ctype(k.nodes[*input].dtype);
            let (identity, _) = reduction_identity(*fold, acc_ty == "double");
            em.line(&format!("{acc_ty} acc{r} = {identity};"));
        }
        let inputs: Vec<NodeId> = stage
            .iter()
            .filter_map(|&r| match &k.nodes[r].kind {
                NodeKind::Reduce { input, .. } => Some(*input),
                _ => None,
            })
            .collect();
        let nest = match &vector {
            Some(v) => crate::row_vector::open(&mut em, v, &inputs, &[]),
            None => {
                open_column_loop(&mut em, &full_strides, !block_team || split);
                1
            }
        };
        for &r in &stage {
            let NodeKind::Reduce { fold, input, .. } = &k.nodes[r].kind else {
                continue;
            };
            em.define(*input);
            let v = Emitter::name(*input);
            match fold {
                Fold::Max => em.line(&format!("acc{r} = nan_max(acc{r}, {v});")),
                Fold::Min => em.line(&format!("acc{r} = nan_min(acc{r}, {v});")),
                Fold::Sum => em.line(&format!("acc{r} += {v};")),
            }
        }
        crate::row_vector::close(
            &mut em,
            nest,
            2,
            vector.as_ref().map_or(1, |v| v.width),
            &[],
        );
        for &r in &stage {
            let NodeKind::Reduce { fold, input, .. } = &k.nodes[r].kind else {
                continue;
            };
            let acc_ty = ctype(k.nodes[*input].dtype);
            let (identity, op) = reduction_identity(*fold, acc_ty == "double");
            match layout {
                Team::Block { .. } => em.line(&format!(
                    "acc{r} = block_reduce<{acc_ty}>(acc{r}, {op}, ({acc_ty})({identity}));"
                )),
                Team::Columns { tile, team } if team > 1 => em.line(&format!(
                    "acc{r} = team_reduce<{acc_ty}, {tile}, {team}>(acc{r}, {op});"
                )),
                Team::Columns { .. } => {}
            }
        }
        if split {
            emit_split_combine(&mut em, &stage, rows_n, splits);
        }
        for &r in &stage {
            let NodeKind::Reduce { input, .. } = &k.nodes[r].kind else {
                continue;
            };
            let dtype = k.nodes[r].dtype;
            em.line(&format!(
                "const {} {} = {};",
                ctype(dtype),
                Emitter::name(r),
                rounded(
                    dtype,
                    convert(k.nodes[*input].dtype, dtype, &format!("acc{r}"))
                )
            ));
            em.row_defined.insert(r);
        }
        emit_ready_rows(&mut em, depth);
    }
    // Full outputs: one more pass over the row.
    if !full_outputs.is_empty() {
        if !block_team {
            em.line("if (live) {");
            em.indent = 3;
        }
        let depth = em.indent;
        match &vector {
            Some(v) => {
                let roots: Vec<NodeId> = full_outputs.iter().map(|&(_, n)| n).collect();
                let nest = crate::row_vector::open(&mut em, v, &roots, &full_outputs);
                store_outputs(&mut em, &full_outputs, |i| format!("s_out{i}[j]"));
                crate::row_vector::close(&mut em, nest, depth, v.width, &full_outputs);
            }
            None => {
                open_column_loop(&mut em, &full_strides, false);
                store_outputs(&mut em, &full_outputs, |i| format!("out{i}[e]"));
                em.indent = depth;
                em.line("}");
            }
        }
        if !block_team {
            em.indent = 2;
            em.line("}");
        }
    }
    let row_outputs = outputs_at(k, Level::Row);
    if !row_outputs.is_empty() {
        em.line(if split {
            "if (threadIdx.x == 0) {"
        } else if block_team {
            "if (lane == 0) {"
        } else {
            "if (lane == 0 && live) {"
        });
        em.indent = 3;
        // Row values are defined already: this only stores them.
        store_outputs(&mut em, &row_outputs, |i| format!("out{i}[r]"));
        em.indent = 2;
        em.line("}");
    }
    em.indent = 1;
    em.line("}");
    em.indent = 0;
    em.line("}");
    Generated {
        name: name.to_string(),
        source: em.out,
        launch: match layout {
            Team::Block { .. } if split => Launch::SplitRows {
                rows: rows_n as u64,
                block,
                splits,
                scratch: split_counters_at(k.reductions.len(), rows_n, splits) + 4 * rows_n as u64,
                counters: split_counters_at(k.reductions.len(), rows_n, splits),
            },
            Team::Block { .. } => Launch::BlockPerRow {
                rows: rows_n as u64,
                block,
            },
            Team::Columns { tile, .. } => Launch::ColumnTiles {
                rows: rows_n as u64,
                tile,
                block,
            },
        },
    }
}
