//! How a reduction kernel's threads share the work: which threads reduce one row (one value
//! of the kept dims) and in which order they walk memory.
//!
//! - **Block per row**: the reduced dims are trailing and long, and the inputs are laid out
//!   along them (layer_norm, softmax): a block walks one row, consecutive threads reading
//!   consecutive elements, and `block_reduce` combines the threads' partials.
//! - **Split rows**: a block-per-row reduction with few rows and long ones (a loss's `mean`
//!   over all 6.3M elements of a GPT-2 activation: one row) would leave all but a few SMs
//!   idle (one block of 1024 threads took 3.7 ms on an H100). Such a row is shared by
//!   [`splits`] blocks: each reduces its share and writes a partial to a scratch buffer, and
//!   the last block of the row to finish (an atomic counter per row) combines the partials in
//!   a fixed order and finishes the row, so results stay deterministic. Only single-stage
//!   kernels with no full-level outputs are split (a multi-stage row such as softmax would
//!   need a grid-wide barrier between its stages).
//! - **Column kernels** (`col_kernel`): single-stage reductions over leading dims with the
//!   last dim kept take precedence over the column tiles below (vectors along the kept dim,
//!   one pass, the reduced dim split between blocks when tiles are few).
//! - **Column tiles**: everything else, above all reductions over a *leading* dim such as a
//!   bias gradient (sum over the 8192 rows of `[8192, 3072]`) and sums over a transposed
//!   input. A block of `tile x team` threads owns `tile` consecutive rows (so a warp reads
//!   `tile` consecutive addresses of each reduced element: coalesced), and the `team` threads
//!   of one row split the reduced elements between them (thread `t` takes elements
//!   `t, t + team, ...`), which gives the GPU enough loads in flight; `team_reduce` then
//!   combines them in shared memory in a fixed tree order, so results are deterministic.
//!   One thread per row (the old layout) starved the GPU: 3072 threads each walking 8192
//!   elements ran at ~5 GB/s on an H100.

use crate::plan::{contiguous_strides, Kernel, Level, NodeKind};

/// The layout of a reduction kernel's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Team {
    /// One block of `block` threads per row.
    Block { block: u32 },
    /// Blocks of `tile * team` threads over `tile` consecutive rows; `team` threads per row
    /// (both powers of two).
    Columns { tile: u32, team: u32 },
}

/// Threads a column-tile block has at most.
const MAX_BLOCK: u32 = 1024;
/// Column-tile blocks the planner aims for before it narrows the tile (about one per SM of
/// a large GPU; the grid is capped at run time).
const TARGET_BLOCKS: i64 = 128;

/// Blocks a split reduction runs at most, over all its rows.
const MAX_SPLIT_BLOCKS: i64 = 1024;
/// Rows above which a reduction is never split (there are blocks enough already).
const MAX_SPLIT_ROWS: i64 = 64;
/// Elements a block of a split row reduces at least, per thread.
const SPLIT_ELEMENTS_PER_THREAD: i64 = 16;

/// How many blocks share each row of a block-per-row reduction of `rows` rows of `cols`
/// elements with `block` threads a block (1: not split).
pub fn splits(rows: i64, cols: i64, block: u32) -> u32 {
    if rows <= 0 || rows > MAX_SPLIT_ROWS {
        return 1;
    }
    let per_block = i64::from(block) * SPLIT_ELEMENTS_PER_THREAD;
    let s = (cols / per_block).min(MAX_SPLIT_BLOCKS / rows).max(1);
    u32::try_from(s).unwrap_or(1)
}

fn block_size(cols: i64) -> u32 {
    match cols {
        c if c < 2048 => 256,
        c if c < 8192 => 512,
        _ => 1024,
    }
}

/// Which layout reads memory better: each full-level load (and each full output, which is
/// written contiguously) votes for the layout that makes it coalesced.
fn rows_read_along_reduced(k: &Kernel) -> bool {
    let nd = k.full_shape.len();
    let (Some(&last_reduced), Some(last_kept)) = (
        k.reduced.last(),
        (0..nd).rev().find(|d| !k.reduced.contains(d)),
    ) else {
        return true;
    };
    let (mut along_row, mut along_kept) = (0usize, 0usize);
    for n in &k.nodes {
        if let NodeKind::Load { strides, .. } = &n.kind {
            if n.level != Level::Full {
                continue;
            }
            if strides.get(last_reduced) == Some(&1) {
                along_row += 1;
            } else if strides.get(last_kept) == Some(&1) {
                along_kept += 1;
            }
        }
    }
    let full_outputs = k
        .outputs
        .iter()
        .filter(|o| k.nodes[o.node].level == Level::Full)
        .count();
    let contiguous = contiguous_strides(&k.full_shape);
    if contiguous.get(last_reduced) == Some(&1) {
        along_row += full_outputs;
    } else {
        along_kept += full_outputs;
    }
    along_row >= along_kept
}

/// The layout of `k`'s threads (a reduction kernel).
pub fn choose(k: &Kernel) -> Team {
    let rows: i64 = k.row_shape().iter().map(|&d| d.max(0)).product();
    let cols: i64 = k.reduced.iter().map(|&d| k.full_shape[d].max(0)).product();
    if k.reduces_trailing() && cols >= 64 && (rows <= 1 || rows_read_along_reduced(k)) {
        return Team::Block {
            block: block_size(cols),
        };
    }
    // Rows per block: a warp's width where there are rows enough for the GPU, narrower
    // (still 8 x 2 bytes or more per reduced element) where there are few, and no wider
    // than the rows there are.
    let mut tile: u32 = 32;
    while tile > 8 && rows < i64::from(tile) * TARGET_BLOCKS {
        tile /= 2;
    }
    while tile > 1 && i64::from(tile / 2) >= rows {
        tile /= 2;
    }
    // Threads per row: enough that each walks a few dozen elements at most.
    let mut team: u32 = 1;
    while team * tile < MAX_BLOCK && i64::from(team) * 8 < cols {
        team *= 2;
    }
    Team::Columns { tile, team }
}

/// Shared-memory combination of the `team` partials of each of a block's `tile` rows (thread
/// `tx + tile * ty` holds row `tx`'s partial `ty`); every thread gets its row's total. A fixed
/// tree: the same inputs give the same bits.
pub const TEAM_REDUCE: &str = r#"template <typename T, int TILE, int TEAM, typename Op>
__device__ __forceinline__ T team_reduce(T v, Op op) {
  __shared__ T scratch[TEAM][TILE + 1];
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  __syncthreads();
  scratch[ty][tx] = v;
  __syncthreads();
#pragma unroll
  for (int s = TEAM / 2; s > 0; s >>= 1) {
    if (ty < s) scratch[ty][tx] = op(scratch[ty][tx], scratch[ty + s][tx]);
    __syncthreads();
  }
  return scratch[0][tx];
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{KernelInput, KernelOutput, Node};
    use thunder_abi::DTypeCode;

    /// A sum of input 0 read at `strides` over `shape`, reducing `reduced`.
    fn sum_kernel(shape: &[i64], reduced: &[usize], strides: &[i64]) -> Kernel {
        let load = Node {
            kind: NodeKind::Load {
                input: 0,
                base: 0,
                strides: strides.to_vec(),
                guard: None,
            },
            dtype: DTypeCode::F32,
            level: Level::Full,
        };
        let reduce = Node {
            kind: NodeKind::Reduce {
                fold: crate::plan::Fold::Sum,
                input: 0,
                k: 0,
            },
            dtype: DTypeCode::F32,
            level: Level::Row,
        };
        Kernel {
            full_shape: shape.to_vec(),
            reduced: reduced.to_vec(),
            inputs: vec![KernelInput {
                value: 0,
                dtype: DTypeCode::F32,
                read_later: false,
            }],
            nodes: vec![load, reduce],
            outputs: vec![KernelOutput { value: 1, node: 1 }],
            reductions: vec![1],
        }
    }

    #[test]
    fn column_sums_get_column_tiles_of_a_full_block() {
        let k = sum_kernel(&[8192, 3072], &[0], &[3072, 1]);
        assert_eq!(choose(&k), Team::Columns { tile: 16, team: 64 });
        let k = sum_kernel(&[8192, 8192], &[0], &[8192, 1]);
        assert_eq!(choose(&k), Team::Columns { tile: 32, team: 32 });
        // 768 columns: narrower tiles, so that ~100 blocks share the work.
        let k = sum_kernel(&[8192, 768], &[0], &[768, 1]);
        assert_eq!(choose(&k), Team::Columns { tile: 8, team: 128 });
    }

    #[test]
    fn trailing_rows_read_along_the_row_get_a_block() {
        let k = sum_kernel(&[8192, 768], &[1], &[768, 1]);
        assert_eq!(choose(&k), Team::Block { block: 256 });
        // A full reduction to a scalar.
        let k = sum_kernel(&[1 << 20], &[0], &[1]);
        assert_eq!(choose(&k), Team::Block { block: 1024 });
    }

    #[test]
    fn a_sum_over_a_transposed_input_reads_along_the_kept_dim() {
        // sum(x.T, 1) for x of [8192, 3072]: F = [3072, 8192], read with strides [1, 3072].
        let k = sum_kernel(&[3072, 8192], &[1], &[1, 3072]);
        assert_eq!(choose(&k), Team::Columns { tile: 16, team: 64 });
    }

    #[test]
    fn few_long_rows_are_split_between_blocks() {
        // mean over a [8, 1024, 768] activation: one row of 6.3M elements.
        assert_eq!(splits(1, 8 * 1024 * 768, 1024), 384);
        // Capped at MAX_SPLIT_BLOCKS blocks in all.
        assert_eq!(splits(1, 1 << 30, 1024), 1024);
        assert_eq!(splits(64, 1 << 24, 1024), 16);
        // Many rows, short rows, empty shapes: one block per row.
        assert_eq!(splits(8192, 768, 256), 1);
        assert_eq!(splits(1, 768, 256), 1);
        assert_eq!(splits(1, 0, 256), 1);
        assert_eq!(splits(0, 1 << 24, 1024), 1);
    }

    #[test]
    fn short_and_empty_shapes_stay_small() {
        let k = sum_kernel(&[1000, 4], &[1], &[4, 1]);
        assert_eq!(choose(&k), Team::Columns { tile: 8, team: 1 });
        let k = sum_kernel(&[3, 0], &[1], &[0, 1]);
        assert_eq!(choose(&k), Team::Columns { tile: 4, team: 1 });
        let k = sum_kernel(&[0, 5], &[0], &[5, 1]);
        assert_eq!(choose(&k), Team::Columns { tile: 8, team: 1 });
    }
}
