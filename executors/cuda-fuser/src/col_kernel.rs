//! Column reductions at memory bandwidth: reductions over *leading* dims whose last dim is
//! kept (bias gradients, layer_norm weight/bias gradients: sums over the 8192 tokens of
//! `[8, 1024, C]`), single-stage, whose full-level outputs do not read a reduction (the
//! elementwise work fused before the sum: `gelu_bwd(g, x)` stored and summed).
//!
//! - **Vectors along the kept dim**: where the last dim is a multiple of the vector width, a
//!   thread takes `V` consecutive columns (16 bytes of the widest dtype) and reads every load
//!   laid out along the last dim 16 bytes at a time; `TX` threads side by side cover 128 bytes
//!   (`TX * V` columns: a tile), and the `TEAM` threads of a tile's column group split the
//!   reduced elements (thread `ty` takes `ty, ty + TEAM, ...`). Odd column counts (50,257)
//!   take one column a thread (`V = 1`), 64 bf16 or 32 f32 columns a tile.
//! - **One pass**: the full-level outputs are computed and stored (16 bytes at a time) in the
//!   same loop that accumulates, from the same registers: inputs are read once.
//! - **Split reduced dim**: with few tiles (768 bf16 columns: 12 tiles of 64) the reduced
//!   elements are shared by `splits` blocks per tile; each reduces its chunk, writes its
//!   partials to a scratch buffer, and the last block of the tile to finish (an atomic counter
//!   per tile) combines the partials in a fixed order (thread `ty` takes parts `ty, ty + TEAM,
//!   ...`, then the same team tree), so the bits do not depend on which block came last. Each
//!   full-level element is in exactly one block's chunk and is stored once. Launched as
//!   `Launch::SplitRows` over the tiles (`BlockPerRow` when not split).
//!
//! Everything else (multi-stage column kernels, full outputs that read a reduction, a reduced
//! last dim) keeps `reduce_layout`'s column tiles.

use crate::c_types::{convert, ctype, rounded, storage};
use crate::codegen::{
    coordinates, device_functions, header, raw_type, signature, store_outputs, Emitter, Generated,
    Launch, PRELUDE,
};
use crate::plan::{contiguous_strides, Fold, Kernel, Level, NodeId, NodeKind};
use crate::row_kernel::{outputs_at, reduction_depths, reduction_identity};
use std::collections::{HashMap, HashSet};

/// Threads a block has.
const BLOCK: u32 = 256;
/// Bytes a tile's threads read side by side along the kept dim (one cache line).
const LINE: u32 = 128;
/// Blocks a split kernel aims for over all tiles (four 256-thread blocks per SM of a
/// 132-SM H100/H200; the plan does not depend on the device).
const TARGET_UNITS: i64 = 528;
/// Reduced elements each thread of a split block walks at least.
const MIN_PER_THREAD: i64 = 8;
/// Blocks of one tile at most.
const MAX_SPLITS: i64 = 1024;

/// How a column kernel shares its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnPlan {
    /// Columns (kept elements) a thread takes at a time.
    pub vec: u32,
    /// Threads side by side along the kept dim.
    pub tx: u32,
    /// Threads per column splitting the reduced elements.
    pub team: u32,
    /// Tiles of `tx * vec` columns.
    pub tiles: i64,
    /// Blocks per tile, each over a chunk of the reduced elements.
    pub splits: u32,
}

/// The plan of `k` (a reduction that `reduce_layout` gave column tiles), if this kernel shape
/// applies.
pub fn plan(k: &Kernel) -> Option<ColumnPlan> {
    let nd = k.full_shape.len();
    let rows: i64 = k.row_shape().iter().map(|&d| d.max(0)).product();
    let cols: i64 = k.reduced.iter().map(|&d| k.full_shape[d].max(0)).product();
    if nd == 0 || rows <= 0 || cols <= 0 || k.reduced.contains(&(nd - 1)) {
        return None;
    }
    let depths = reduction_depths(k);
    if k.reductions.iter().any(|&r| depths[r] != 1) {
        return None;
    }
    if outputs_at(k, Level::Full)
        .iter()
        .any(|&(_, n)| depths[n] != 0)
    {
        return None;
    }
    // Inputs constant along the columns (a layer norm's per-row mean and rstd, f32) are read
    // once per row, not per vector: only the others bound the vector width, so a bf16 layer
    // norm backward reads 16 bytes per thread, not 8.
    let varies_along_columns = |input: usize| {
        k.nodes.iter().any(|n| match &n.kind {
            NodeKind::Load {
                input: i, strides, ..
            } => *i == input && strides.last().is_none_or(|&s| s != 0),
            _ => false,
        })
    };
    let widest = k
        .inputs
        .iter()
        .enumerate()
        .filter(|&(i, _)| varies_along_columns(i))
        .map(|(_, i)| i.dtype.size_bytes())
        .chain(
            outputs_at(k, Level::Full)
                .iter()
                .map(|&(_, n)| k.nodes[n].dtype.size_bytes()),
        )
        .max()
        .unwrap_or(4)
        .clamp(1, 16) as u32;
    let last = k.full_shape[nd - 1];
    let w = 16 / widest;
    let vec = if w > 1 && last % i64::from(w) == 0 {
        w
    } else {
        1
    };
    let mut tx = (LINE / (vec * widest)).max(1);
    while tx > 1 && i64::from(tx / 2 * vec) >= rows {
        tx /= 2;
    }
    let mut team = BLOCK / tx;
    while team > 1 && i64::from(team / 2) >= cols {
        team /= 2;
    }
    let per_tile = i64::from(tx * vec);
    let tiles = (rows + per_tile - 1) / per_tile;
    let splits = if tiles * 2 >= TARGET_UNITS {
        1
    } else {
        let wanted = (TARGET_UNITS + tiles - 1) / tiles;
        let most = cols / (i64::from(team) * MIN_PER_THREAD);
        wanted.min(most).clamp(1, MAX_SPLITS)
    };
    Some(ColumnPlan {
        vec,
        tx,
        team,
        tiles,
        splits: u32::try_from(splits).unwrap_or(1),
    })
}

/// Vector shared-memory combination of the `TEAM` partials of each of a block's `TX * V`
/// columns (thread `tx + TX * ty` holds columns `tx * V ..` of partial `ty`); every thread
/// gets its columns' totals. A fixed tree: the same inputs give the same bits.
pub const TEAM_REDUCE_V: &str = r#"template <typename T, int TX, int TEAM, int V, typename Op>
__device__ __forceinline__ void team_reduce_v(T (&v)[V], Op op) {
  __shared__ T scratch[TEAM][TX * V + 1];
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < V; ++j) scratch[ty][tx * V + j] = v[j];
  __syncthreads();
#pragma unroll
  for (int s = TEAM / 2; s > 0; s >>= 1) {
    if (ty < s) {
#pragma unroll
      for (int j = 0; j < V; ++j) scratch[ty][tx * V + j] = op(scratch[ty][tx * V + j], scratch[ty + s][tx * V + j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = scratch[0][tx * V + j];
}
"#;

/// Where the tile counters start in the scratch buffer: after an 8-byte slot per reduction,
/// split and column.
fn counters_at(reductions: usize, rows: i64, splits: u32) -> u64 {
    8 * reductions as u64 * rows.max(0) as u64 * u64::from(splits)
}

/// Full-level loads read as vectors along the last dim: (node, input, base, strides).
fn vector_loads(k: &Kernel, vec: u32) -> Vec<(NodeId, usize, i64, Vec<i64>)> {
    if vec <= 1 {
        return Vec::new();
    }
    let nd = k.full_shape.len();
    let v = i64::from(vec);
    k.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.level == Level::Full)
        .filter_map(|(i, n)| match &n.kind {
            NodeKind::Load {
                input,
                base,
                strides,
                guard: None,
            } if strides.len() == nd
                && strides[nd - 1] == 1
                && base % v == 0
                && strides[..nd - 1].iter().all(|s| s % v == 0) =>
            {
                Some((i, *input, *base, strides.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The offset of a full-level read at the thread's first column (`i<last>_0`).
pub(crate) fn first_offset(em: &Emitter, base: i64, strides: &[i64]) -> String {
    let nd = strides.len();
    let mut s = strides.to_vec();
    let unit = s[nd - 1];
    s[nd - 1] = 0;
    let rest = em.offset(Level::Full, base, &s);
    let lastv = format!("i{}_0", nd - 1);
    let last = if unit == 1 {
        lastv
    } else {
        format!("{lastv} * {unit}")
    };
    if rest == "0" {
        last
    } else {
        format!("{rest} + {last}")
    }
}

pub(crate) fn generate(k: &Kernel, name: &str, p: &ColumnPlan) -> Generated {
    let nd = k.full_shape.len();
    let last = nd - 1;
    let rows_n: i64 = k.row_shape().iter().product();
    let cols_n: i64 = k.reduced.iter().map(|&d| k.full_shape[d]).product();
    let (vec, tx, team) = (p.vec, p.tx, p.team);
    let block = tx * team;
    let split = p.splits > 1;
    let kept: Vec<usize> = (0..nd).filter(|d| !k.reduced.contains(d)).collect();
    let full_outputs = outputs_at(k, Level::Full);
    let row_outputs = outputs_at(k, Level::Row);
    let loads = vector_loads(k, vec);
    let mut em = Emitter {
        k,
        fast_math: false,
        out: String::new(),
        defined: HashSet::new(),
        row_defined: HashSet::new(),
        vector_inputs: false,
        vector_nodes: HashMap::new(),
        cache_loaded: HashSet::new(),
        indent: 0,
    };
    for (n, _, _, _) in &loads {
        em.vector_nodes.insert(*n, format!("e_n{n}[j]"));
    }
    em.out.push_str(&header(k));
    em.out.push_str(PRELUDE);
    let scratch = counters_at(k.reductions.len(), rows_n, p.splits) + 4 * p.tiles as u64;
    em.out.push_str(crate::codegen::index_typedef(k, scratch));
    em.out.push_str(TEAM_REDUCE_V);
    em.out.push_str(&device_functions(k));
    em.line(&format!("{} {{", signature(k, name, block, split)));
    em.indent = 1;
    em.line(&format!(
        "const ix_t rows = {rows_n}, cols = {cols_n}, tiles = {}, splits = {};",
        p.tiles, p.splits
    ));
    em.line(&format!(
        "const ix_t tx = threadIdx.x % {tx}, ty = threadIdx.x / {tx};"
    ));
    em.line("const ix_t chunk = (cols + splits - 1) / splits;");
    if split {
        em.line("__shared__ bool split_last;");
    }
    // Block `u` takes chunk `u % splits` of the reduced elements of tile `u / splits`.
    em.line("for (ix_t u = blockIdx.x; u < tiles * splits; u += gridDim.x) {");
    em.indent = 2;
    em.line("const ix_t t = u / splits, part = u % splits;");
    em.line(&format!("const ix_t rv = t * {} + tx * {vec};", tx * vec));
    em.line("const bool live = rv < rows;");
    // Kept coordinates at the thread's first column; the last is `i<last>_0 + j`.
    let mut kc = coordinates(k, &kept, "rv");
    if let Some(l) = kc.last_mut() {
        let prefix = format!("const ix_t i{last} = ");
        if let Some(rest) = l.strip_prefix(&prefix) {
            *l = format!("const ix_t i{last}_0 = {rest}");
        }
    }
    for l in kc {
        em.line(&l);
    }
    let accs: Vec<(NodeId, Fold, NodeId)> = k
        .reductions
        .iter()
        .filter_map(|&r| match &k.nodes[r].kind {
            NodeKind::Reduce { fold, input, .. } => Some((r, *fold, *input)),
            _ => None,
        })
        .collect();
    for &(r, fold, input) in &accs {
        let acc_ty = ctype(k.nodes[input].dtype);
        let (identity, _) = reduction_identity(fold, acc_ty == "double");
        em.line(&format!("{acc_ty} acc{r}[{vec}];"));
        em.line("#pragma unroll");
        em.line(&format!(
            "for (int j = 0; j < {vec}; ++j) acc{r}[j] = {identity};"
        ));
    }
    em.line("const ix_t c_end = (part + 1) * chunk < cols ? (part + 1) * chunk : cols;");
    em.line("if (live) {");
    em.indent = 3;
    // Several iterations' loads in flight per thread.
    em.line("#pragma unroll 4");
    em.line(&format!(
        "for (ix_t c = part * chunk + ty; c < c_end; c += {team}) {{"
    ));
    em.indent = 4;
    for l in coordinates(k, &k.reduced, "c") {
        em.line(&l);
    }
    let contiguous = contiguous_strides(&k.full_shape);
    let e0 = first_offset(&em, 0, &contiguous);
    em.line(&format!("const ix_t e0 = {e0};"));
    for (n, input, base, strides) in &loads {
        let d = k.inputs[*input].dtype;
        let raw = raw_type(d.size_bytes() * vec as usize);
        let off = first_offset(&em, *base, strides);
        em.line(&format!(
            "const {raw} r_n{n} = *reinterpret_cast<const {raw}*>(in{input} + ({off}));"
        ));
        em.line(&format!(
            "const {}* e_n{n} = reinterpret_cast<const {}*>(&r_n{n});",
            storage(d),
            storage(d)
        ));
    }
    let staged = vec > 1;
    if staged {
        for &(i, n) in &full_outputs {
            em.line(&format!(
                "__align__(16) {} s_out{i}[{vec}];",
                storage(k.nodes[n].dtype)
            ));
        }
    }
    em.line("#pragma unroll");
    em.line(&format!("for (int j = 0; j < {vec}; ++j) {{"));
    em.indent = 5;
    em.defined.clear();
    em.line(&format!("const ix_t i{last} = i{last}_0 + j;"));
    em.line("const ix_t e = e0 + j;");
    for &(r, fold, input) in &accs {
        em.define(input);
        let v = Emitter::name(input);
        match fold {
            Fold::Max => em.line(&format!("acc{r}[j] = nan_max(acc{r}[j], {v});")),
            Fold::Min => em.line(&format!("acc{r}[j] = nan_min(acc{r}[j], {v});")),
            Fold::Sum => em.line(&format!("acc{r}[j] += {v};")),
        }
    }
    if staged {
        store_outputs(&mut em, &full_outputs, |i| format!("s_out{i}[j]"));
    } else {
        store_outputs(&mut em, &full_outputs, |i| format!("out{i}[e]"));
    }
    em.indent = 4;
    em.line("}");
    if staged {
        for &(i, n) in &full_outputs {
            let raw = raw_type(k.nodes[n].dtype.size_bytes() * vec as usize);
            em.line(&format!(
                "*reinterpret_cast<{raw}*>(out{i} + e0) = *reinterpret_cast<const {raw}*>(s_out{i});"
            ));
        }
    }
    em.indent = 3;
    em.line("}");
    em.indent = 2;
    em.line("}");
    for &(r, fold, input) in &accs {
        let acc_ty = ctype(k.nodes[input].dtype);
        let (_, op) = reduction_identity(fold, acc_ty == "double");
        if team > 1 {
            em.line(&format!(
                "team_reduce_v<{acc_ty}, {tx}, {team}, {vec}>(acc{r}, {op});"
            ));
        }
    }
    if split {
        emit_combine(&mut em, &accs, p, rows_n);
    }
    if !row_outputs.is_empty() {
        em.line("if (ty == 0 && live) {");
        em.indent = 3;
        em.line("#pragma unroll");
        em.line(&format!("for (int j = 0; j < {vec}; ++j) {{"));
        em.indent = 4;
        em.defined.clear();
        em.line("const ix_t r = rv + j;");
        em.line(&format!("const ix_t i{last} = i{last}_0 + j;"));
        for &(r, _, input) in &accs {
            let dtype = k.nodes[r].dtype;
            em.line(&format!(
                "const {} {} = {};",
                ctype(dtype),
                Emitter::name(r),
                rounded(
                    dtype,
                    convert(k.nodes[input].dtype, dtype, &format!("acc{r}[j]"))
                )
            ));
            em.defined.insert(r);
        }
        store_outputs(&mut em, &row_outputs, |i| format!("out{i}[r]"));
        em.indent = 3;
        em.line("}");
        em.indent = 2;
        em.line("}");
    }
    em.indent = 1;
    em.line("}");
    em.indent = 0;
    em.line("}");
    let counters = counters_at(k.reductions.len(), rows_n, p.splits);
    Generated {
        name: name.to_string(),
        source: em.out,
        launch: if split {
            Launch::SplitRows {
                rows: p.tiles as u64,
                block,
                splits: p.splits,
                scratch: counters + 4 * p.tiles as u64,
                counters,
            }
        } else {
            Launch::BlockPerRow {
                rows: p.tiles as u64,
                block,
            }
        },
    }
}

/// After each block reduced its chunk (`acc<r>[j]` in the threads of `ty == 0`): the block
/// stores its partials (`[reduction][split][column]`, so a block's writes are contiguous),
/// and the last block of the tile combines every partial of its columns in split order.
fn emit_combine(em: &mut Emitter, accs: &[(NodeId, Fold, NodeId)], p: &ColumnPlan, rows: i64) {
    let k = em.k;
    let vec = p.vec;
    let slot = |q: usize, part: &str| format!("({q} * splits + {part}) * rows + rv + j");
    em.line("if (ty == 0 && live) {");
    for (q, &(r, _, input)) in accs.iter().enumerate() {
        let acc_ty = ctype(k.nodes[input].dtype);
        em.line("  #pragma unroll");
        em.line(&format!(
            "  for (int j = 0; j < {vec}; ++j) reinterpret_cast<{acc_ty}*>(split_scratch)[{}] = acc{r}[j];",
            slot(q, "part")
        ));
    }
    em.line("  __threadfence();");
    em.line("}");
    em.line("__syncthreads();");
    em.line("if (threadIdx.x == 0) {");
    em.line(&format!(
        "  split_last = atomicAdd(reinterpret_cast<unsigned*>(split_scratch + {}) + t, 1u) == (unsigned)(splits - 1);",
        counters_at(k.reductions.len(), rows, p.splits)
    ));
    em.line("}");
    em.line("__syncthreads();");
    em.line("if (!split_last) continue;");
    em.line("__threadfence();");
    for (q, &(r, fold, input)) in accs.iter().enumerate() {
        let acc_ty = ctype(k.nodes[input].dtype);
        let (identity, op) = reduction_identity(fold, acc_ty == "double");
        em.line("#pragma unroll");
        em.line(&format!(
            "for (int j = 0; j < {vec}; ++j) acc{r}[j] = {identity};"
        ));
        em.line("if (live) {");
        em.line(&format!(
            "  for (ix_t p = ty; p < splits; p += {}) {{",
            p.team
        ));
        em.line("    #pragma unroll");
        em.line(&format!(
            "    for (int j = 0; j < {vec}; ++j) acc{r}[j] = {op}(acc{r}[j], reinterpret_cast<volatile {acc_ty}*>(split_scratch)[{}]);",
            slot(q, "p")
        ));
        em.line("  }");
        em.line("}");
        if p.team > 1 {
            em.line(&format!(
                "team_reduce_v<{acc_ty}, {}, {}, {vec}>(acc{r}, {op});",
                p.tx, p.team
            ));
        }
    }
}
