//! Reduction kernels: one team per row (a block, a split block group, or a column of a 2-D
//! tile; see `reduce_layout`), a pass over the row per reduction stage, and one more to store
//! the full-level outputs.

use crate::c_types::{convert, ctype, float_literal, rounded};
use crate::codegen::{
    coordinates, device_functions, header, signature, store_outputs, Emitter, Generated, Launch,
    Target, PRELUDE,
};
use crate::plan::{contiguous_strides, Fold, Kernel, Level, NodeId, NodeKind, Operand};
use crate::reduce_layout::{self, Team};
use crate::row_vector::{RowTeam, RowVector};
use std::collections::{HashMap, HashSet};

/// Reductions of one loop: a reduction's depth is one more than the deepest reduction its
/// input reads, so independent reductions (a sum and a sum of squares) share a pass.
pub(crate) fn reduction_depths(k: &Kernel) -> Vec<usize> {
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
pub(crate) fn reduction_identity(fold: Fold, double: bool) -> (String, &'static str) {
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
pub(crate) fn outputs_at(k: &Kernel, level: Level) -> Vec<(usize, NodeId)> {
    k.outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| k.nodes[o.node].level == level)
        .map(|(i, o)| (i, o.node))
        .collect()
}

/// Opens the loop over a row's elements and defines its coordinates and flat index `e`.
fn open_column_loop(em: &mut Emitter, full_strides: &[i64], unroll: bool, range: (&str, &str)) {
    if unroll {
        // Several elements' loads in flight per thread.
        em.line("#pragma unroll 4");
    }
    em.line(&format!(
        "for (ix_t c = {}; c < {}; c += team) {{",
        range.0, range.1
    ));
    em.indent += 1;
    for l in coordinates(em.k, &em.k.reduced, "c") {
        em.line(&l);
    }
    let e = em.offset(Level::Full, 0, full_strides);
    em.line(&format!("const ix_t e = {e};"));
    em.defined.clear();
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
    let slot = |q: usize| format!("({q} * rows + r) * splits");
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
        "  split_last = atomicAdd(reinterpret_cast<unsigned*>(split_scratch + {}) + r, 1u) == (unsigned)(splits - 1);",
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
            "for (ix_t p = threadIdx.x; p < splits; p += blockDim.x) acc{r} = {op}(acc{r}, reinterpret_cast<volatile {acc_ty}*>(split_scratch)[{} + p]);",
            slot(q)
        ));
        em.line(&format!(
            "acc{r} = block_reduce<{acc_ty}>(acc{r}, {op}, ({acc_ty})({identity}));"
        ));
    }
}

/// In a row shared by a cluster, after each block reduced its share (`acc{r}`, in every
/// thread): thread 0 publishes the block's partial, and after a cluster barrier every thread
/// combines the blocks' partials in rank order, so that every block holds the same bits.
fn emit_cluster_combine(em: &mut Emitter, stage: &[NodeId], cluster: u32) {
    let k = em.k;
    em.line("if (threadIdx.x == 0) {");
    for &r in stage {
        em.line(&format!("  cpart{r} = acc{r};"));
    }
    em.line("}");
    em.line("cluster_sync();");
    for &r in stage {
        let NodeKind::Reduce { fold, input, .. } = &k.nodes[r].kind else {
            continue;
        };
        let acc_ty = ctype(k.nodes[*input].dtype);
        let (_, op) = reduction_identity(*fold, acc_ty == "double");
        let mut total = format!("cluster_ld(&cpart{r}, 0)");
        for q in 1..cluster {
            total = format!("{op}({total}, cluster_ld(&cpart{r}, {q}))");
        }
        em.line(&format!("acc{r} = {total};"));
    }
}

/// One pass over the row for the values `roots`, `body(em, vectorized)` emitting what each
/// element does: a vector loop (peeled: between scalar loops over the row's head and tail)
/// or a scalar one; `outputs` are staged and stored 16 bytes at a time in the vector loop.
/// Leaves the indent at `depth`.
#[allow(clippy::too_many_arguments)]
fn emit_pass(
    em: &mut Emitter,
    vector: Option<&RowVector>,
    full_strides: &[i64],
    unroll: bool,
    roots: &[NodeId],
    outputs: &[(usize, NodeId)],
    depth: usize,
    body: &dyn Fn(&mut Emitter, bool),
) {
    let scalar = |em: &mut Emitter, range: (&str, &str)| {
        open_column_loop(em, full_strides, unroll, range);
        body(em, false);
        em.indent = depth;
        em.line("}");
    };
    match vector {
        None => scalar(em, ("lane", "cols")),
        Some(v) => {
            // A row shared by a cluster: rank 0 takes the scalar head and tail.
            let (head, tail) = if v.cluster > 1 {
                ("head_mine", "tail_from + lane")
            } else {
                ("head", "body_end + lane")
            };
            if v.peel {
                scalar(em, ("lane", head));
            }
            let nest = crate::row_vector::open(em, v, roots, outputs);
            body(em, true);
            crate::row_vector::close(em, nest, depth, v.width, outputs);
            if v.peel {
                scalar(em, (tail, "cols"));
            }
        }
    }
}

pub(crate) fn rows(k: &Kernel, name: &str, target: Target) -> Generated {
    let rows_n: i64 = k.row_shape().iter().map(|&d| d.max(0)).product();
    let cols_n: i64 = k.reduced.iter().map(|&d| k.full_shape[d].max(0)).product();
    let layout = reduce_layout::choose(k);
    if let Team::Columns { .. } = layout {
        if let Some(p) = crate::col_kernel::plan(k) {
            return crate::col_kernel::generate(k, name, &p);
        }
    }
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
        fast_math: crate::codegen::fast_math_for(k),
        out: String::new(),
        defined: HashSet::new(),
        row_defined: HashSet::new(),
        vector_inputs: false,
        vector_nodes: HashMap::new(),
        cache_loaded: HashSet::new(),
        indent: 0,
    };
    // Rows read along their length get vector loads and stores, and a block no wider than a
    // row's vectors.
    let mut vector = if block_team {
        crate::row_vector::plan(k, cols_n)
    } else {
        None
    };
    // The values each pass over the row computes: a stage's reduction inputs, then the full
    // outputs.
    let mut passes: Vec<Vec<NodeId>> = (1..=max_depth)
        .map(|d| {
            k.reductions
                .iter()
                .filter(|&&r| depths[r] == d)
                .filter_map(|&r| match &k.nodes[r].kind {
                    NodeKind::Reduce { input, .. } => Some(*input),
                    _ => None,
                })
                .collect()
        })
        .collect();
    if !full_outputs.is_empty() {
        passes.push(full_outputs.iter().map(|&(_, n)| n).collect());
    }
    // The vector loads a cached row would keep (sizing the team and then the cache).
    let read_again = vector
        .as_ref()
        .map_or_else(Vec::new, |v| v.read_again(k, &passes));
    // A split row is one team however many rows there are (so never a warp per row). The
    // arrays kept in registers size the team; peeled rows keep none there.
    let team = vector.as_ref().map(|v| {
        crate::row_vector::team_for(
            block,
            if split { 1 } else { rows_n },
            cols_n,
            v.width,
            if v.peel { 0 } else { read_again.len() },
        )
    });
    let warp_rows = match team {
        Some(RowTeam::Warp {
            rows_per_block,
            lanes,
        }) => Some((rows_per_block, lanes)),
        _ => None,
    };
    // Teams smaller than a warp share it: a lane past the last row computes the last row again
    // (shuffles need the whole warp) and stores nothing.
    let shared_warp = matches!(warp_rows, Some((_, lanes)) if lanes < 32);
    let (mut block, team_threads) = match team {
        Some(RowTeam::Warp {
            rows_per_block,
            lanes,
        }) => (lanes * rows_per_block, lanes),
        Some(RowTeam::Block { block }) => (block, block),
        None => (block, block),
    };
    if let Some(v) = vector.as_mut().filter(|_| !split) {
        let per_row_block = matches!(team, Some(RowTeam::Block { .. }));
        let cap = crate::row_vector::tuning().stage_kib.saturating_mul(1024);
        let room = if cap > 0 {
            target.max_shared_bytes.min(cap)
        } else {
            target.max_shared_bytes
        };
        v.plan_cache(k, cols_n, team_threads, read_again.clone());
        if warp_rows.is_some() {
            v.plan_prefetch(k, &passes, team_threads);
            v.stream_loads = crate::row_vector::tuning().stream;
        }
        // A block per row: a row too long for registers may be staged in shared memory.
        if per_row_block {
            v.plan_stage(k, cols_n, read_again.clone(), room);
        }
        let narrower = crate::row_vector::stage_block(v.width);
        if v.stage_bytes > 0 && narrower < block {
            // A staged row runs on a narrower block: what registers hold is planned again for
            // it (a thread now holds more of the row), and the rest staged again.
            block = narrower;
            v.keep_nothing();
            v.plan_cache(k, cols_n, block, read_again.clone());
            v.plan_stage(k, cols_n, read_again.clone(), room);
        }
        // What one block cannot stage, a pair may: their partials combine through
        // distributed shared memory (float and double accumulators).
        let float_accumulators = k.reductions.iter().all(|&r| match &k.nodes[r].kind {
            NodeKind::Reduce { input, .. } => {
                matches!(
                    k.nodes[*input].dtype,
                    thunder_abi::DTypeCode::F32 | thunder_abi::DTypeCode::F64
                )
            }
            _ => false,
        });
        if per_row_block && target.clusters && float_accumulators {
            v.plan_cluster(k, cols_n, &read_again, room);
        }
        if per_row_block {
            v.plan_pipeline(k, block);
        }
    }
    let pipelined = vector.as_ref().is_some_and(|v| !v.pipelined.is_empty());
    let stage_bytes = vector.as_ref().map_or(0, |v| v.stage_bytes);
    let cluster = vector.as_ref().map_or(1, |v| v.cluster);
    em.out.push_str(&header(k));
    em.out.push_str(PRELUDE);
    let scratch = if split {
        split_counters_at(k.reductions.len(), rows_n, splits) + 4 * rows_n as u64
    } else {
        0
    };
    em.out.push_str(crate::codegen::index_typedef(k, scratch));
    if !block_team {
        em.out.push_str(reduce_layout::TEAM_REDUCE);
    }
    if stage_bytes > 0 {
        em.out.push_str(crate::row_vector::STAGE_COPY);
    }
    if cluster > 1 {
        em.out.push_str(crate::row_vector::CLUSTER);
    }
    if warp_rows.is_some() {
        em.out.push_str(crate::codegen::WARP_REDUCE);
    }
    em.out.push_str(&device_functions(k));
    let mut sig = signature(k, name, block, split);
    let min_blocks = if warp_rows.is_some() {
        crate::row_vector::tuning().warp_min_blocks
    } else {
        crate::row_vector::tuning().block_min_blocks
    };
    // A bound no multiprocessor can meet (2,048 threads) is left out, and so is one on a
    // pipelined row, which holds two rows' vectors and needs fewer blocks resident.
    if min_blocks > 0 && block * min_blocks <= 2048 && !pipelined {
        sig = sig.replacen(
            &format!("__launch_bounds__({block})"),
            &format!("__launch_bounds__({block}, {min_blocks})"),
            1,
        );
    }
    if cluster > 1 {
        sig = sig.replacen(
            "__launch_bounds__",
            &format!("__cluster_dims__({cluster}, 1, 1) __launch_bounds__"),
            1,
        );
    }
    em.line(&format!("{sig} {{"));
    em.indent = 1;
    em.line(&format!("const ix_t rows = {rows_n}, cols = {cols_n};"));
    if split {
        // Block `rb` takes share `rb % splits` of row `rb / splits`; the threads of a row's
        // blocks interleave over it as one team.
        em.line(&format!("const ix_t splits = {splits};"));
        em.line("__shared__ bool split_last;");
        em.line("for (ix_t rb = blockIdx.x; rb < rows * splits; rb += gridDim.x) {");
        em.line("  const ix_t r = rb / splits, part = rb % splits;");
        em.line("  const ix_t lane = part * blockDim.x + threadIdx.x, team = (ix_t)blockDim.x * splits;");
    } else if let Some((per_block, 32)) = warp_rows {
        // Warps run their rows independently: nothing below synchronizes the block.
        em.line("const ix_t lane = threadIdx.x & 31, team = 32;");
        em.line(&format!(
            "for (ix_t r = (ix_t)blockIdx.x * {per_block} + (threadIdx.x >> 5); r < rows; r += (ix_t)gridDim.x * {per_block}) {{"
        ));
    } else if let Some((per_block, lanes)) = warp_rows {
        // A warp holds 32 / lanes rows and runs its loop while its first row exists.
        let per_warp = 32 / lanes;
        em.line(&format!(
            "const ix_t lane = threadIdx.x & {}, team = {lanes};",
            lanes - 1
        ));
        em.line(&format!(
            "for (ix_t r0 = (ix_t)blockIdx.x * {per_block} + (threadIdx.x >> 5) * {per_warp}; r0 < rows; r0 += (ix_t)gridDim.x * {per_block}) {{"
        ));
        em.indent = 2;
        em.line(&format!(
            "const bool live = r0 + (threadIdx.x & 31) / {lanes} < rows;"
        ));
        em.line(&format!(
            "const ix_t r = live ? r0 + (threadIdx.x & 31) / {lanes} : rows - 1;"
        ));
    } else if block_team {
        em.line("const ix_t lane = threadIdx.x, team = blockDim.x;");
        if cluster > 1 {
            // Each reduction's partial, where the other blocks of the cluster read it.
            em.line("const ix_t rank = cluster_rank();");
            for &r in &k.reductions {
                if let NodeKind::Reduce { input, .. } = &k.nodes[r].kind {
                    em.line(&format!(
                        "__shared__ {} cpart{r};",
                        ctype(k.nodes[*input].dtype)
                    ));
                }
            }
            em.line(&format!(
                "for (ix_t r = blockIdx.x / {cluster}; r < rows; r += gridDim.x / {cluster}) {{"
            ));
        } else {
            if let Some(v) = vector.as_ref() {
                v.declare_pipeline(&mut em);
            }
            em.line("for (ix_t r = blockIdx.x; r < rows; r += gridDim.x) {");
        }
    } else if let Team::Columns { tile, team } = layout {
        // Every thread of the block runs every tile (team_reduce synchronizes the block): a
        // thread past the last row computes the last row again and stores nothing.
        em.line(&format!(
            "const ix_t lane = threadIdx.x / {tile}, team = {team};"
        ));
        em.line(&format!(
            "for (ix_t r0 = (ix_t)blockIdx.x * {tile}; r0 < rows; r0 += (ix_t)gridDim.x * {tile}) {{"
        ));
        em.indent = 2;
        em.line(&format!(
            "const bool live = r0 + threadIdx.x % {tile} < rows;"
        ));
        em.line(&format!(
            "const ix_t r = live ? r0 + threadIdx.x % {tile} : rows - 1;"
        ));
    }
    em.indent = 2;
    for l in coordinates(k, &kept, "r") {
        em.line(&l);
    }
    if let Some(v) = vector.as_ref().filter(|v| v.peel) {
        crate::row_vector::peel_bounds(&mut em, v);
    }
    if let Some(v) = vector.as_ref().filter(|v| v.cluster > 1) {
        crate::row_vector::cluster_bounds(&mut em, v);
    }
    if let Some(v) = vector
        .as_ref()
        .filter(|v| v.cache > 0 || !v.staged.is_empty())
    {
        v.declare_cache(&mut em);
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
        let accumulate = |em: &mut Emitter, _vectorized: bool| {
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
        };
        emit_pass(
            &mut em,
            vector.as_ref(),
            &full_strides,
            !block_team || split,
            &inputs,
            &[],
            2,
            &accumulate,
        );
        for &r in &stage {
            let NodeKind::Reduce { fold, input, .. } = &k.nodes[r].kind else {
                continue;
            };
            let acc_ty = ctype(k.nodes[*input].dtype);
            let (identity, op) = reduction_identity(*fold, acc_ty == "double");
            match (layout, warp_rows) {
                (Team::Block { .. }, Some((_, lanes))) => em.line(&format!(
                    "acc{r} = warp_reduce<{lanes}, {acc_ty}>(acc{r}, {op});"
                )),
                (Team::Block { .. }, None) => em.line(&format!(
                    "acc{r} = block_reduce<{acc_ty}>(acc{r}, {op}, ({acc_ty})({identity}));"
                )),
                (Team::Columns { tile, team }, _) if team > 1 => em.line(&format!(
                    "acc{r} = team_reduce<{acc_ty}, {tile}, {team}>(acc{r}, {op});"
                )),
                (Team::Columns { .. }, _) => {}
            }
        }
        if split {
            emit_split_combine(&mut em, &stage, rows_n, splits);
        }
        if cluster > 1 {
            emit_cluster_combine(&mut em, &stage, cluster);
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
        if !block_team || shared_warp {
            em.line("if (live) {");
            em.indent = 3;
        }
        let depth = em.indent;
        let roots: Vec<NodeId> = full_outputs.iter().map(|&(_, n)| n).collect();
        let store = |em: &mut Emitter, vectorized: bool| {
            if vectorized {
                store_outputs(em, &full_outputs, |i| format!("s_out{i}[j]"));
            } else {
                store_outputs(em, &full_outputs, |i| format!("out{i}[e]"));
            }
        };
        emit_pass(
            &mut em,
            vector.as_ref(),
            &full_strides,
            false,
            &roots,
            &full_outputs,
            depth,
            &store,
        );
        if !block_team || shared_warp {
            em.indent = 2;
            em.line("}");
        }
    }
    let row_outputs = outputs_at(k, Level::Row);
    if !row_outputs.is_empty() {
        em.line(if split {
            "if (threadIdx.x == 0) {"
        } else if cluster > 1 {
            "if (lane == 0 && rank == 0) {"
        } else if block_team && !shared_warp {
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
    if cluster > 1 {
        // No block may write its next row's partials (or leave the kernel) while another
        // block of the cluster may still read this row's.
        em.line("cluster_sync();");
    }
    em.indent = 1;
    em.line("}");
    em.indent = 0;
    em.line("}");
    Generated {
        name: name.to_string(),
        source: em.out,
        launch: match (layout, warp_rows) {
            (Team::Block { .. }, _) if split => Launch::SplitRows {
                rows: rows_n as u64,
                block,
                splits,
                scratch: split_counters_at(k.reductions.len(), rows_n, splits) + 4 * rows_n as u64,
                counters: split_counters_at(k.reductions.len(), rows_n, splits),
            },
            (Team::Block { .. }, Some((rows_per_block, lanes))) => Launch::WarpRows {
                rows: rows_n as u64,
                rows_per_block,
                lanes,
            },
            (Team::Block { .. }, None) if cluster > 1 => Launch::ClusterRows {
                rows: rows_n as u64,
                block,
                shared_bytes: stage_bytes,
                cluster,
            },
            (Team::Block { .. }, None) if pipelined => Launch::PipelinedRows {
                rows: rows_n as u64,
                block,
                per_sm: crate::row_vector::tuning().pipeline_per_sm,
            },
            (Team::Block { .. }, None) if stage_bytes > 0 => Launch::StagedRows {
                rows: rows_n as u64,
                block,
                shared_bytes: stage_bytes,
            },
            (Team::Block { .. }, None) => Launch::BlockPerRow {
                rows: rows_n as u64,
                block,
            },
            (Team::Columns { tile, .. }, _) => Launch::ColumnTiles {
                rows: rows_n as u64,
                tile,
                block,
            },
        },
    }
}
