//! Groups that only copy one access to another along a contiguous last dim (a head transpose
//! `[B, T, H, D] -> [B, H, T, D]`, a slice, a cat's piece): each row is one `memcpy` of the
//! whole last dim, the rows walked by an odometer. The tile path spent about 50 ns per
//! 64-element row on its per-item bookkeeping (a GPT-2 block's five head transposes took
//! 0.27 ms of its 8.5 ms on 2 cores).

use crate::decode::Ty;
use crate::exec::Bufs;
use crate::group::{GroupPlan, Ins};
use rayon::prelude::*;

/// Rows below this many elements in all run on the calling thread.
const PAR_MIN: usize = 1 << 17;

/// (source access, destination access, element size) when `plan` is such a copy.
pub(crate) fn row_copy_of(plan: &GroupPlan) -> Option<(usize, usize, usize)> {
    let r = plan.shape.len();
    if r < 2 || !plan.reductions.is_empty() {
        return None;
    }
    let [Ins::Load { ty, dst, acc: a }, Ins::Store { src, acc: b, .. }] = plan.ins[..] else {
        return None;
    };
    let contiguous_rows = plan.access_strides[a][r - 1] == 1 && plan.access_strides[b][r - 1] == 1;
    if src != dst || a == b || plan.bufs[a] == plan.bufs[b] || !contiguous_rows {
        return None;
    }
    let size = match ty {
        Ty::B8 => 1,
        Ty::F32 => 4,
        Ty::F64 | Ty::I64 => 8,
    };
    Some((a, b, size))
}

/// Runs the copy `row_copy_of` found.
pub(crate) fn run(plan: &GroupPlan, bufs: &Bufs, (a, b, size): (usize, usize, usize)) {
    let r = plan.shape.len();
    let last = plan.shape[r - 1];
    let rows = plan.numel / last.max(1);
    let (pa, pb) = (
        bufs.ptr(plan.bufs[a]) as usize,
        bufs.ptr(plan.bufs[b]) as usize,
    );
    let copy_rows = |range: std::ops::Range<usize>| {
        // Odometer over the leading dims from the first row's index.
        let lead = &plan.shape[..r - 1];
        let mut idx = vec![0usize; r - 1];
        let mut rem = range.start;
        for d in (0..r - 1).rev() {
            idx[d] = rem % lead[d];
            rem /= lead[d];
        }
        let offset = |s: &[i64], idx: &[usize]| -> i64 {
            idx.iter().zip(s).map(|(&i, &st)| i as i64 * st).sum()
        };
        let (sa, sb) = (&plan.access_strides[a], &plan.access_strides[b]);
        let (mut oa, mut ob) = (
            plan.offsets[a] + offset(sa, &idx),
            plan.offsets[b] + offset(sb, &idx),
        );
        for _ in range {
            // SAFETY: the offsets address whole rows of the group's buffers (the plan's
            // layouts, checked when the region was compiled); source and destination are
            // different buffers.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (pa as *const u8).offset(oa as isize * size as isize),
                    (pb as *mut u8).offset(ob as isize * size as isize),
                    last * size,
                );
            }
            for d in (0..r - 1).rev() {
                idx[d] += 1;
                oa += sa[d];
                ob += sb[d];
                if idx[d] < lead[d] {
                    break;
                }
                oa -= sa[d] * lead[d] as i64;
                ob -= sb[d] * lead[d] as i64;
                idx[d] = 0;
            }
        }
    };
    let threads = rayon::current_num_threads();
    if plan.numel < PAR_MIN || threads < 2 || rows < 2 {
        copy_rows(0..rows);
    } else {
        let chunks = threads.min(rows);
        (0..chunks)
            .into_par_iter()
            .for_each(|c| copy_rows(c * rows / chunks..(c + 1) * rows / chunks));
    }
}
