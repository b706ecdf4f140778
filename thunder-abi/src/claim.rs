//! Helpers for claiming. A contiguous run of ops in trace order is always convex (any path
//! leaving it and coming back would pass through an op inside the run), so claiming maximal
//! runs of supported, unclaimed ops is the simplest correct strategy.

use crate::view::{OpView, TraceView};

/// Maximal contiguous runs of unclaimed ops for which `supported` holds.
pub fn contiguous_runs(
    view: &TraceView,
    mut supported: impl FnMut(&OpView) -> bool,
) -> Vec<Vec<u32>> {
    let mut runs = Vec::new();
    let mut current: Vec<u32> = Vec::new();
    for (i, op) in view.ops.iter().enumerate() {
        if !op.claimed && supported(op) {
            current.push(i as u32);
        } else if !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}
