//! Pointwise kernels that read an input transposed (a backward's `P^T` before a matmul, a
//! permute that must be materialized): the element order of the output runs along the last
//! dim, the transposed input's along another dim `a`. Read per element in output order, every
//! load of a warp lands in a different 32-byte sector (an H100 moved 0.4 GB that way at
//! 0.6 TB/s). Here a block stages 32 x 32 tiles of each such input in shared memory: it reads
//! a tile along `a` (coalesced), then computes and writes along the last dim (coalesced),
//! taking the staged element from the tile. Other loads are read per element as before.

use crate::c_types::storage;
use crate::codegen::{
    coordinates, device_functions, header, signature, store_outputs, Emitter, Generated, Launch,
    PRELUDE,
};
use crate::plan::{contiguous_strides, Kernel, Level, NodeId, NodeKind};
use std::collections::{HashMap, HashSet};

const TILE: i64 = 32;
/// Threads of a block: 32 x 8, each taking 4 elements of a tile.
const BLOCK: u32 = 256;
/// Below this many elements a plain pointwise kernel is as good.
const MIN_ELEMENTS: i64 = 1 << 14;

/// The tiling of a transposing pointwise kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Tiling {
    /// The dim the transposed loads are contiguous along (not the last).
    pub a: usize,
    /// The loads staged through shared memory: (node, input).
    pub staged: Vec<(NodeId, usize)>,
}

/// The tiling of pointwise kernel `k`, when it reads an input transposed.
pub fn plan(k: &Kernel) -> Option<Tiling> {
    let nd = k.full_shape.len();
    if nd < 2 || !k.reduced.is_empty() {
        return None;
    }
    let numel: i64 = k.full_shape.iter().map(|&d| d.max(0)).product();
    if numel < MIN_ELEMENTS || k.full_shape[nd - 1] < TILE {
        return None;
    }
    let mut a = None;
    let mut staged = Vec::new();
    for (i, n) in k.nodes.iter().enumerate() {
        let NodeKind::Load {
            input,
            strides,
            guard: None,
            ..
        } = &n.kind
        else {
            continue;
        };
        if n.level != Level::Full || strides.len() != nd || strides[nd - 1] == 1 {
            continue;
        }
        let Some(d) = (0..nd - 1).find(|&d| strides[d] == 1 && k.full_shape[d] >= TILE) else {
            continue;
        };
        if *a.get_or_insert(d) == d {
            staged.push((i, *input));
        }
    }
    a.map(|a| Tiling { a, staged })
}

/// The kernel: a grid-stride loop over `batch x tiles(a) x tiles(last)` tiles.
pub fn generate(k: &Kernel, name: &str, t: &Tiling) -> Generated {
    let nd = k.full_shape.len();
    let (a, b) = (t.a, nd - 1);
    let (na, nb) = (k.full_shape[a], k.full_shape[b]);
    let batch: Vec<usize> = (0..nd).filter(|&d| d != a && d != b).collect();
    let batch_n: i64 = batch.iter().map(|&d| k.full_shape[d].max(0)).product();
    let (ta, tb) = ((na + TILE - 1) / TILE, (nb + TILE - 1) / TILE);
    let tiles = batch_n * ta * tb;
    let all_outputs: Vec<(usize, NodeId)> = k.outputs.iter().map(|o| o.node).enumerate().collect();
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
    em.out.push_str(&header(k));
    em.out.push_str(PRELUDE);
    em.out.push_str(crate::codegen::index_typedef(k, 0));
    em.out.push_str(&device_functions(k));
    em.line(&format!("{} {{", signature(k, name, BLOCK, false)));
    em.indent = 1;
    for &(n, input) in &t.staged {
        let st = storage(k.inputs[input].dtype);
        em.line(&format!("__shared__ {st} tile{n}[{TILE}][{}];", TILE + 1));
    }
    em.line(&format!(
        "const ix_t tiles = {tiles}, ta = {ta}, tb = {tb};"
    ));
    em.line("const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;");
    em.line("for (ix_t t = blockIdx.x; t < tiles; t += gridDim.x) {");
    em.indent = 2;
    em.line("const ix_t bt = t / (ta * tb);");
    em.line(&format!(
        "const ix_t a0 = (t / tb) % ta * {TILE}, b0 = t % tb * {TILE};"
    ));
    for l in coordinates(k, &batch, "bt") {
        em.line(&l);
    }
    // Stage: consecutive threads read consecutive elements along `a`.
    em.line("__syncthreads();");
    em.line("#pragma unroll");
    em.line(&format!("for (int q = 0; q < {TILE}; q += 8) {{"));
    em.indent = 3;
    em.line(&format!("const ix_t i{a} = a0 + tx, i{b} = b0 + ty + q;"));
    em.line(&format!("if (i{a} < {na} && i{b} < {nb}) {{"));
    em.indent = 4;
    for &(n, input) in &t.staged {
        let NodeKind::Load { base, strides, .. } = &k.nodes[n].kind else {
            continue;
        };
        let off = em.offset(Level::Full, *base, strides);
        em.line(&format!("tile{n}[ty + q][tx] = in{input}[{off}];"));
    }
    em.indent = 3;
    em.line("}");
    em.indent = 2;
    em.line("}");
    em.line("__syncthreads();");
    // Compute and store: consecutive threads take consecutive elements along the last dim.
    em.line("#pragma unroll");
    em.line(&format!("for (int q = 0; q < {TILE}; q += 8) {{"));
    em.indent = 3;
    em.line(&format!("const ix_t i{b} = b0 + tx, i{a} = a0 + ty + q;"));
    em.line(&format!("if (i{a} < {na} && i{b} < {nb}) {{"));
    em.indent = 4;
    let e = em.offset(Level::Full, 0, &contiguous_strides(&k.full_shape));
    em.line(&format!("const ix_t e = {e};"));
    em.defined.clear();
    for &(n, _) in &t.staged {
        em.vector_nodes.insert(n, format!("tile{n}[tx][ty + q]"));
    }
    store_outputs(&mut em, &all_outputs, |i| format!("out{i}[e]"));
    em.indent = 3;
    em.line("}");
    em.indent = 2;
    em.line("}");
    em.indent = 1;
    em.line("}");
    em.indent = 0;
    em.line("}");
    Generated {
        name: name.to_string(),
        source: em.out,
        launch: Launch::Tiles {
            tiles: tiles.max(0) as u64,
            block: BLOCK,
        },
    }
}
