//! Kernel outputs written where their reader wants them. An attention kernel writes whole rows
//! of its output wherever they lie, so when the only reader of that output is
//!
//! - a transpose keeping the rows (the heads' merge `[B, H, T, D] -> [B, T, H, D]`) whose only
//!   reader is a reshape (to `[B, T, C]`, which the transposed view cannot give without a
//!   copy), or
//! - a concatenation, directly or through such a transpose (a backward's `cat(dq, dk, dv)`
//!   after their head transposes, the gradient of the split into q, k and v),
//!
//! the kernel writes into the merged or concatenated buffer, through strides, and the copy
//! after it is never made. In a GPT-2 block's forward and backward those copies were five
//! stages of `[2, 4, 128, 64]` (0.3-0.4 ms of 8.6-14 ms a call).

use crate::decode::{Decoded, Op};
use crate::fusion::Uses;
use crate::layout::Layout;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Placement {
    /// The value whose buffer the output is written into.
    pub(crate) anchor: u32,
    pub(crate) anchor_shape: Vec<usize>,
    /// Where the output lies in the anchor's contiguous buffer.
    pub(crate) layout: Layout,
}

/// Where each of `candidates` (kernel outputs that can be written through a row stride) is
/// written instead of a buffer of its own. `outside` holds the values read outside the decoded
/// ops (region outputs, the composites' arguments); `shapes` the shape of every value.
pub(crate) fn find(
    ops: &[Decoded],
    uses: &Uses,
    candidates: &[u32],
    outside: &[u32],
    taken: &HashSet<usize>,
    shapes: &HashMap<u32, Vec<usize>>,
) -> HashMap<u32, Placement> {
    let sole = |v: u32| uses.sole(v, outside, taken).map(|j| &ops[j]);
    let mut found = HashMap::new();
    for &x in candidates {
        let Some(reader) = sole(x) else {
            continue;
        };
        let placed = match &reader.op {
            Op::Cat { dim, .. } => cat_slot(reader, x, *dim, shapes).map(|layout| Placement {
                anchor: reader.out,
                anchor_shape: reader.shape.clone(),
                layout,
            }),
            Op::Transpose { perm, .. } if perm.last() == Some(&(perm.len() - 1)) => {
                let y = reader;
                match sole(y.out).map(|r| (r, &r.op)) {
                    Some((cat, Op::Cat { dim, .. })) => {
                        cat_slot(cat, y.out, *dim, shapes).map(|slot| Placement {
                            anchor: cat.out,
                            anchor_shape: cat.shape.clone(),
                            layout: slot.untranspose(perm),
                        })
                    }
                    Some((_, Op::Reshape { .. })) => Some(Placement {
                        anchor: y.out,
                        anchor_shape: y.shape.clone(),
                        layout: Layout::contiguous(&y.shape).untranspose(perm),
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(p) = placed.filter(|p| p.layout.strides.last() == Some(&1)) {
            found.insert(x, p);
        }
    }
    found
}

/// The view of part `part` in the contiguous output of `cat` (along `dim`), when every part
/// before it has a known shape.
fn cat_slot(
    cat: &Decoded,
    part: u32,
    dim: usize,
    shapes: &HashMap<u32, Vec<usize>>,
) -> Option<Layout> {
    let Op::Cat { parts, .. } = &cat.op else {
        return None;
    };
    let full = Layout::contiguous(&cat.shape);
    let mut start = 0usize;
    for &p in parts {
        if p == part {
            return Some(Layout {
                offset: start as i64 * full.strides[dim],
                strides: full.strides,
            });
        }
        start += shapes.get(&p)?.get(dim)?;
    }
    None
}
